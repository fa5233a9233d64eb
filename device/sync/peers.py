"""Envelopes to and from siblings, over one relay connection.

Sending reserves the next per-sibling counter durably before the envelope
leaves. Receiving first looks at the sender the relay attests (the key its
connection proved): unless strangers are admitted (an invite or a pairing is
open), an envelope from a key that is not a sibling is dropped at the cost of a
set lookup, before any cryptography, so junk from minted keys costs a receiver
next to nothing. Then it opens the envelope, checks that the key that signed it
is the one the relay attests (a sibling's envelope replayed by another key is
refused), decodes the body strictly and checks the counter against the
persisted replay window.
Anything that fails is logged with its reason (fingerprints and sizes only),
counted, and dropped without changing any state; whatever one envelope makes
the decoders raise, the link goes on with the next. The log is summarised per
reason (the first few in full, then a count per minute), so a flood of junk
grows it by a bounded amount.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio
from nacl.signing import SigningKey

from pixie.device.logs import Summarised
from pixie.device.store.db import at_once
from pixie.device.store.siblings import SiblingBook, Still
from pixie.device.sync.relayclient import RelayClient
from pixie.protocol.envelope import EnvelopeError, open_envelope, seal
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.peerwire import (
    Body,
    PairAccept,
    PairReject,
    PairRequest,
    PeerMessage,
    decode_body,
    encode_body,
)
from pixie.protocol.replay import ReplayWindow, Verdict

log = logging.getLogger("pixie.peers")
# All that an unpaired key may send, and only while an invite or pairing is open.
PAIRING_MESSAGES = (PairRequest, PairAccept, PairReject)
T = TypeVar("T")

# Envelopes up to this size (a fetch part of 256 KiB among them) are sealed and
# opened on the event loop itself: tens of microseconds for a small one, less
# than a hop to a worker thread, and about a quarter of a millisecond for a
# part (inline, a 1 MB fetch ran at 125 MB/s instead of 83). Larger ones go to
# the thread lane.
AT_ONCE_BYTES = 320 * 1024
# Unpaired senders whose counters are remembered (in memory) while an invite or
# a pairing runs; beyond this many, the one heard from least recently is forgotten.
MAX_STRANGERS = 4096
# A sender the relay attests that is not in the link's set of siblings makes the
# link reread its siblings at most this often (a sibling paired by another
# process is heard within this long), or at once after strangers were admitted.
SIBLING_REFRESH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Incoming:
    sender: bytes
    body: Body


class PeerLink:
    def __init__(
        self,
        identity: SigningKey,
        siblings: SiblingBook,
        client: RelayClient,
        *,
        lane: trio.CapacityLimiter | None = None,
    ) -> None:
        self.identity = identity
        self.siblings = siblings
        self.client = client
        # The thread lane for crypto and database work; a driver that has one
        # per database passes it, so that this work never runs beside its own
        # (two Python threads contending for the GIL, one of them in SQLite,
        # made a bulk sync three times slower).
        self.lane = lane
        self.rejected: Counter[str] = Counter()
        self.rejections = Summarised(log, "envelopes rejected")
        # The siblings' keys, reread from the book now and then (see `_is_sibling`).
        self._siblings_seen: set[bytes] = set()
        self._siblings_read_at = -math.inf
        self._siblings_stale = True  # reread at the next unknown sender, whenever it comes
        self._admit_strangers = False
        self._strangers: dict[bytes, ReplayWindow] = {}

    @property
    def admit_strangers(self) -> bool:
        """While set, unpaired senders are admitted as with ``receive(strangers=True)``
        (a daemon whose own connection carries an invite or a pairing)."""
        return self._admit_strangers

    @admit_strangers.setter
    def admit_strangers(self, value: bool) -> None:
        self._admit_strangers = value
        self._siblings_stale = True  # a pairing may have added a sibling meanwhile

    async def send(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> int:
        """Seal and send; returns the envelope's size (what the relay carries).
        With ``still``, raises `Withdrawn` instead if it answers False when the
        envelope's counter is reserved (see `SiblingBook.next_send_counter`)."""
        counter = await at_once(
            self.siblings.next_send_counter, recipient, still, otherwise=self._in_lane
        )
        body = encode_body(message, counter)
        if len(body) <= AT_ONCE_BYTES:
            envelope = seal(self.identity, recipient, body)
        else:
            envelope = await self._in_lane(seal, self.identity, recipient, body)
        await self.client.send(recipient, envelope)
        return len(envelope)

    async def receive(self, *, strangers: bool = False) -> Incoming:
        """The next acceptable message. ``strangers`` admits unpaired senders
        (only while an invite is open); their replay state is kept in memory."""
        while True:
            delivered = await self.client.receive()
            sender, envelope = delivered.sender, delivered.envelope
            if strangers or self._admit_strangers:
                self._siblings_stale = True
            elif sender not in self._siblings_seen and not self._is_sibling(sender):
                # Before any cryptography: a set lookup is all a stranger's junk costs.
                self.rejected["unpaired"] += 1
                self.rejections.log(
                    "unpaired",
                    "rejected envelope: from unpaired key %s (%d bytes)",
                    _Fingerprint(sender),
                    len(envelope),
                )
                continue
            if len(envelope) <= AT_ONCE_BYTES:
                incoming = await at_once(
                    self._admit, sender, envelope, strangers, otherwise=self._in_lane
                )
            else:
                incoming = await self._in_lane(self._admit, sender, envelope, strangers)
            if incoming is not None:
                self.rejections.flush()
                return incoming

    def _is_sibling(self, key: bytes) -> bool:
        """Is ``key``, not in the set of siblings' keys, a sibling after all? The
        set is reread from the book at most once a `SIBLING_REFRESH_SECONDS`
        (sooner once strangers were admitted), however many strangers write."""
        now = time.monotonic()
        if not self._siblings_stale and now - self._siblings_read_at < SIBLING_REFRESH_SECONDS:
            return False
        self._siblings_stale = False
        self._siblings_read_at = now
        self._siblings_seen.update(info.key for info in self.siblings.all())
        return key in self._siblings_seen

    async def _in_lane(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    def _admit(self, sender: bytes, envelope: bytes, strangers: bool) -> Incoming | None:
        """Open ``envelope``, which the relay says ``sender`` sent, and check it."""
        try:
            opened = open_envelope(self.identity, envelope)
        except EnvelopeError as exc:
            self._reject("tampered", f"{exc} ({len(envelope)} bytes)")
            return None
        except Exception as exc:  # a decoder bug must not let one envelope stop the link
            self._reject("undecodable", f"{_bug(exc)} opening {len(envelope)} bytes")
            return None
        who = fingerprint(opened.sender)
        if opened.sender != sender:  # signed by one key, sent by another: a replay or a forgery
            self._reject(
                "misattributed", f"envelope signed by {who} came from {fingerprint(sender)}"
            )
            return None
        known = self._known(opened.sender)
        if not known and not (strangers or self.admit_strangers):
            self._reject("unpaired", f"envelope from unpaired key {who}")
            return None
        try:
            body = decode_body(opened.body)
        except ProtocolError as exc:
            self._reject("malformed", f"from {who}: {exc}")
            return None
        except Exception as exc:  # as above: drop it, count it, go on
            self._reject("undecodable", f"from {who}: {_bug(exc)} decoding the body")
            return None
        if not known and not isinstance(body.message, PAIRING_MESSAGES):
            # A stranger may only ever pair. Checked here, where the envelope is
            # admitted, not by the driver when it dispatches: a pairing that
            # ends in between must not let a stranger's Hello or request through
            # as though it came from a sibling.
            self._reject("unpaired", f"{type(body.message).__name__} from unpaired key {who}")
            return None
        if known:
            verdict = self.siblings.accept_counter(opened.sender, body.counter)
        else:  # a stranger mid-pairing: recorded in memory (pairing seeds its window with it)
            window = self._strangers.pop(opened.sender, None)
            if window is None:
                window = self.siblings.replay_window(opened.sender)
            verdict = window.check(body.counter)
            if verdict is Verdict.NEW:
                window = window.accept(body.counter)
            self._strangers[opened.sender] = window  # the most recently heard last
            if len(self._strangers) > MAX_STRANGERS:  # the longest quiet one goes
                del self._strangers[next(iter(self._strangers))]
        if verdict is not Verdict.NEW:
            self._reject(verdict.value, f"from {who}: counter {body.counter} {verdict}")
            return None
        return Incoming(opened.sender, body)

    def seen_from_stranger(self, key: bytes) -> ReplayWindow | None:
        """The counters accepted from ``key`` while it was a stranger, if any."""
        return self._strangers.get(key)

    def _known(self, key: bytes) -> bool:
        """Is ``key`` a sibling? Remembered once seen (pairing only ever adds)."""
        if key in self._siblings_seen:
            return True
        if self.siblings.get(key) is None:
            return False
        self._siblings_seen.add(key)
        return True

    def _reject(self, reason: str, detail: str) -> None:
        self.rejected[reason] += 1
        self.rejections.log(reason, "rejected envelope: %s", detail)


class _Fingerprint:
    """A key's fingerprint, worked out only if a log line is written."""

    __slots__ = ("key",)

    def __init__(self, key: bytes) -> None:
        self.key = key

    def __str__(self) -> str:
        return fingerprint(self.key)


def _bug(exc: Exception) -> str:
    """An unexpected exception, named by its type alone (its text may quote the
    bytes that caused it)."""
    return f"{type(exc).__name__} (a decoder bug)"
