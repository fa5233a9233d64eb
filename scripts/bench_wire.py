"""Envelope cost: seal + open per message and per KB, against raw PyNaCl.

The baseline is the bare primitive on the same bytes: a precomputed
``nacl.public.Box`` between two static keys, ``encrypt`` then ``decrypt``. An
envelope adds a fresh ephemeral key, an Ed25519 signature and its check, key
conversion and padding; the ratio says what that costs.

Beside it, the floor those guarantees set, measured on the same machine in
the same run: the raw Box, plus what an envelope cannot do without while it
authenticates its sender (the ephemeral Box proves nothing about who wrote
it): one Ed25519 signature and one check over a short message (the
addressing and a digest of the body, as an envelope signs) and the BLAKE2b
digest of the body on each side. What an envelope costs above the floor is
the glue: framing, padding, msgpack, the key cache.

    .venv/bin/python scripts/bench_wire.py [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

from nacl.public import Box, PrivateKey

from pixie.protocol.envelope import open_envelope, seal
from pixie.protocol.identity import new_identity

SIZES = (1024, 16 * 1024, 64 * 1024, 512 * 1024)


def per_call(fn: Callable[[], object], budget_s: float = 0.6) -> float:
    """Median seconds per call over several timed batches."""
    fn()
    batch, samples = 1, []
    while True:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed > budget_s / 10 or batch > 100_000:
            break
        batch *= 2
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    alice, bob = new_identity(), new_identity()
    bob_pub = bytes(bob.verify_key)
    raw_box = Box(PrivateKey.generate(), PrivateKey.generate().public_key)
    results = []
    for size in SIZES:
        body = os.urandom(size)

        def envelope(body: bytes = body) -> None:
            open_envelope(bob, seal(alice, bob_pub, body, now=time.monotonic()))

        def raw(body: bytes = body) -> None:
            raw_box.decrypt(raw_box.encrypt(body))

        def floor(body: bytes = body) -> None:
            raw_box.decrypt(raw_box.encrypt(body))
            signed = bytes(96) + hashlib.blake2b(body, digest_size=32).digest()
            signature = alice.sign(signed).signature
            hashlib.blake2b(body, digest_size=32).digest()
            alice.verify_key.verify(signed, signature)

        ours, base, least = per_call(envelope), per_call(raw), per_call(floor)
        results.append(
            {
                "bytes": size,
                "envelope_us": ours * 1e6,
                "raw_box_us": base * 1e6,
                "envelope_us_per_kb": ours * 1e6 / (size / 1024),
                "raw_us_per_kb": base * 1e6 / (size / 1024),
                "cost_ratio": ours / base,
                "floor_us": least * 1e6,
                "floor_ratio": least / base,
                "over_floor": ours / least,
            }
        )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("envelope seal+open vs raw PyNaCl Box encrypt+decrypt on the same bytes:")
    for r in results:
        print(
            f"  {r['bytes'] // 1024:>4} KiB: {r['envelope_us']:9.1f} us "
            f"({r['envelope_us_per_kb']:.2f} us/KB) vs raw {r['raw_box_us']:9.1f} us "
            f"({r['raw_us_per_kb']:.2f} us/KB) -> {r['cost_ratio']:.2f}x the cost"
        )
    print("the floor an authenticated sender sets (raw Box + Ed25519 sign and check + digests):")
    for r in results:
        print(
            f"  {r['bytes'] // 1024:>4} KiB: floor {r['floor_us']:9.1f} us = "
            f"{r['floor_ratio']:.2f}x raw; the envelope is {r['over_floor']:.2f}x the floor"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
