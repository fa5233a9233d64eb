"""Pairing: making two peers of one account siblings, through the relay.

The inviter prints a one-time code: its public key, the relay's address, a
random secret and an expiry. The joiner sends a `PairRequest` carrying an HMAC
of both keys under that secret; the inviter checks it, stores the joiner and
answers with its own HMAC, which the joiner checks before storing the inviter.
Neither side stores anything until the other has proved it knows the secret.

The secret lives only in the inviter's memory while it waits, so a code is
good once, and never after the inviter stops waiting: a reused or expired code
gets no answer, and the joiner says so.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgpack
import trio

from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint, verify_key
from pixie.protocol.peerwire import PairAccept, PairReject, PairRequest

from .errors import BadInput, DeviceError
from .node import Node
from .peers import PeerLink
from .relayclient import RelayAddress, RelayClient
from .siblings import SiblingInfo

CODE_PREFIX = "pixie-invite-"
SECRET_BYTES = 16
DEFAULT_TIMEOUT = 300.0
MAX_BAD_ATTEMPTS = 5


class PairingFailed(DeviceError):
    """Pairing did not complete; nothing was stored."""


@dataclass(frozen=True, slots=True)
class InviteCode:
    inviter: bytes
    relay: RelayAddress
    secret: bytes
    expires_at: int  # unix seconds

    def encode(self) -> str:
        packed = msgpack.packb(
            [1, self.inviter, str(self.relay), self.secret, self.expires_at], use_bin_type=True
        )
        return CODE_PREFIX + base64.urlsafe_b64encode(packed).decode().rstrip("=")

    @classmethod
    def parse(cls, text: str, now: float | None = None) -> InviteCode:
        text = text.strip()
        if not text.startswith(CODE_PREFIX) or len(text) > 400:
            raise BadInput("that is not a Pixie invite code")
        raw = text.removeprefix(CODE_PREFIX)
        try:
            packed = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
            version, inviter, relay, secret, expires = msgpack.unpackb(
                packed, raw=False, max_array_len=5, max_map_len=0
            )
            verify_key(inviter)
            address = RelayAddress.parse(relay)
        except (ValueError, TypeError, ProtocolError, DeviceError, msgpack.UnpackException):
            raise BadInput("that invite code is damaged (check it was copied whole)") from None
        if version != 1 or not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
            raise BadInput("that invite code is damaged (check it was copied whole)")
        if not isinstance(expires, int) or expires < (now or time.time()):
            raise BadInput("that invite code has expired; ask for a new one")
        return cls(inviter, address, secret, expires)


def _proof(secret: bytes, label: bytes, inviter: bytes, joiner: bytes) -> bytes:
    return hmac.new(secret, b"pixie-pair\x00" + label + inviter + joiner, hashlib.sha256).digest()


async def invite(
    node: Node,
    relay: RelayAddress,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    show_code: Callable[[str], None],
) -> SiblingInfo:
    """Print a code, wait for one joiner, pair with it; or fail after ``timeout``."""
    identity = node.identity()
    me = bytes(identity.verify_key)
    secret = os.urandom(SECRET_BYTES)
    code = InviteCode(me, relay, secret, int(time.time() + timeout))
    client = await RelayClient.connect(relay, identity)
    try:
        link = PeerLink(identity, node.siblings, client)
        show_code(code.encode())
        bad = 0
        with trio.move_on_after(timeout) as scope:
            while True:
                incoming = await link.receive(strangers=True)
                request = incoming.body.message
                if not isinstance(request, PairRequest):
                    continue
                joiner = incoming.sender
                expected = _proof(secret, b"request", me, joiner)
                if not hmac.compare_digest(request.proof, expected):
                    bad += 1
                    await link.send(joiner, PairReject("wrong invite code"))
                    if bad >= MAX_BAD_ATTEMPTS:
                        raise PairingFailed("too many wrong codes; the invite is closed")
                    continue
                info = SiblingInfo(joiner, request.name, request.role, str(relay), _now_us())
                await trio.to_thread.run_sync(node.siblings.add, info)
                await link.send(
                    joiner, PairAccept(node.name, node.role, _proof(secret, b"accept", me, joiner))
                )
                return info
        if scope.cancelled_caught:
            raise PairingFailed(f"nobody used the code within {timeout:g} s; it has expired")
        raise AssertionError("unreachable")
    finally:
        await client.aclose()


async def pair(node: Node, code_text: str, *, timeout: float = 60.0) -> SiblingInfo:
    """Use an invite code: prove it to the inviter and store it as a sibling."""
    code = InviteCode.parse(code_text)
    identity = node.identity()
    me = bytes(identity.verify_key)
    if me == code.inviter:
        raise BadInput("that invite code is this peer's own")
    client = await RelayClient.connect(code.relay, identity)
    try:
        link = PeerLink(identity, node.siblings, client)
        await link.send(
            code.inviter,
            PairRequest(node.name, node.role, _proof(code.secret, b"request", code.inviter, me)),
        )
        with trio.move_on_after(timeout):
            while True:
                incoming = await link.receive(strangers=True)
                if incoming.sender != code.inviter:
                    continue
                answer = incoming.body.message
                if isinstance(answer, PairReject):
                    raise PairingFailed(f"the inviter refused: {answer.reason}")
                if not isinstance(answer, PairAccept):
                    continue
                expected = _proof(code.secret, b"accept", code.inviter, me)
                if not hmac.compare_digest(answer.proof, expected):
                    raise PairingFailed("the inviter's answer did not prove the code; not paired")
                info = SiblingInfo(
                    code.inviter, answer.name, answer.role, str(code.relay), _now_us()
                )
                await trio.to_thread.run_sync(node.siblings.add, info)
                return info
        raise PairingFailed(
            f"no answer from {fingerprint(code.inviter)} within {timeout:g} s: the code may "
            "have expired or been used already"
        )
    finally:
        await client.aclose()


def _now_us() -> int:
    return time.time_ns() // 1000
