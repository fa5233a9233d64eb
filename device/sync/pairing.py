"""Pairing: making two peers of one account siblings, through the relay.

The inviter prints a one-time code: its public key, the relay's address, a
random secret and an expiry. The joiner sends a `PairRequest` carrying an HMAC
of both keys under that secret; the inviter checks it, stores the joiner and
answers with its own HMAC, which the joiner checks before storing the inviter.
Neither side stores anything until the other has proved it knows the secret.

The secret lives only in the inviter's memory while it waits, so a code is
good once, and never after the inviter stops waiting: a reused or expired code
gets no answer, and the joiner says so. A wrong code never closes an invite:
it costs only the key that sent it (a few get a `PairReject`, then silence),
and the invite waits for the real code until it expires. The envelopes each
side took from the other while it was still a stranger seed its replay window
when it is stored, so none of them is accepted a second time.

`invite` and `pair` open a relay connection of their own; with `pixie run`
serving the data dir, the daemon runs `await_joiner` and `join` over its own
connection instead (see `control.py`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import msgpack
import trio
from nacl.exceptions import CryptoError

from pixie.device.errors import BadInput, DeviceError
from pixie.device.node.keyed import Node
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync import membership
from pixie.device.sync.peers import Incoming, PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint, verify_key
from pixie.protocol.peerwire import PairAccept, PairReject, PairRequest, PeerMessage
from pixie.protocol.replay import ReplayWindow

log = logging.getLogger("pixie.pairing")

CODE_PREFIX = "pixie-invite-"
SECRET_BYTES = 16
DEFAULT_TIMEOUT = 300.0
# How often a joiner sends its request again while no answer has come.
ASK_AGAIN_SECONDS = 5.0
# Wrong codes from one joiner key that get a `PairReject` (a mistyped code
# deserves an answer); later ones from that key get none. The invite stays
# open for the real code whatever anyone sends: a wrong guess costs only the
# key that made it (the secret is 128 bits: guessing is hopeless anyway).
MAX_BAD_ATTEMPTS = 5
# Joiner keys whose wrong codes are answered at all, per invite: each answer
# reserves a send counter (a row) for that key, so their number is bounded.
MAX_ANSWERED_JOINERS = 64


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
        """A code as `encode` wrote it, unexpired at ``now`` (unix seconds; the
        system's clock unless given)."""
        text = text.strip()
        if not text.startswith(CODE_PREFIX) or len(text) > 400:
            raise BadInput("that is not a Pixie invite code")
        raw = text.removeprefix(CODE_PREFIX)
        try:
            packed = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
            version, inviter, relay, secret, expires = msgpack.unpackb(
                packed, raw=False, max_array_len=5, max_map_len=0
            )
            # An envelope to the inviter needs its key as a Curve25519 point
            # too: a key that is none (a typo can make one) is refused here.
            verify_key(inviter).to_curve25519_public_key()
            address = RelayAddress.parse(relay)
        except (
            ValueError,
            TypeError,
            ProtocolError,
            DeviceError,
            CryptoError,
            msgpack.UnpackException,
        ):
            raise BadInput("that invite code is damaged (check it was copied whole)") from None
        if version != 1 or not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
            raise BadInput("that invite code is damaged (check it was copied whole)")
        if not isinstance(expires, int) or expires < (time.time() if now is None else now):
            raise BadInput("that invite code has expired; ask for a new one")
        return cls(inviter, address, secret, expires)


def _proof(secret: bytes, label: bytes, inviter: bytes, joiner: bytes) -> bytes:
    return hmac.new(secret, b"pixie-pair\x00" + label + inviter + joiner, hashlib.sha256).digest()


class PairingLine(Protocol):
    """What pairing needs of a relay connection: sending to any key, and the
    next message from anyone (unpaired senders admitted), with the counters
    seen from each unpaired sender so far."""

    async def send(self, recipient: bytes, message: PeerMessage) -> int: ...

    async def receive(self) -> Incoming: ...

    def seen_from(self, key: bytes) -> ReplayWindow | None: ...


class _OwnLine:
    """A connection of pairing's own (no daemon runs for this data dir)."""

    def __init__(self, link: PeerLink) -> None:
        self.link = link

    async def send(self, recipient: bytes, message: PeerMessage) -> int:
        return await self.link.send(recipient, message)

    async def receive(self) -> Incoming:
        return await self.link.receive(strangers=True)

    def seen_from(self, key: bytes) -> ReplayWindow | None:
        return self.link.seen_from_stranger(key)


def new_code(
    inviter: bytes,
    relay: RelayAddress,
    timeout: float,
    clock: Clock = SYSTEM_CLOCK,
    entropy: Entropy = SYSTEM_ENTROPY,
) -> InviteCode:
    """A fresh code: its secret drawn from ``entropy``, good for ``timeout``
    seconds from ``clock``'s now (a driver passes its node's)."""
    expires = int(clock.now_us() / 1_000_000 + timeout)
    return InviteCode(inviter, relay, entropy.token_bytes(SECRET_BYTES), expires)


async def invite(
    node: Node,
    relay: RelayAddress,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    show_code: Callable[[str], None],
) -> SiblingInfo:
    """Print a code, wait for one joiner, pair with it; or fail after ``timeout``."""
    identity = node.identity()
    code = new_code(bytes(identity.verify_key), relay, timeout, node.clock, node.entropy)
    client = await RelayClient.connect(relay, identity)
    try:
        line = _OwnLine(PeerLink(identity, node.siblings, client, entropy=node.entropy))
        show_code(code.encode())
        return await await_joiner(node, code, line, timeout=timeout)
    finally:
        await client.aclose()


async def await_joiner(
    node: Node, code: InviteCode, line: PairingLine, *, timeout: float
) -> SiblingInfo:
    """The inviter's side over ``line``: wait for a joiner that proves ``code``."""
    me, secret = code.inviter, code.secret
    wrong: dict[bytes, int] = {}  # wrong codes answered, per joiner key
    with trio.move_on_after(timeout):
        while True:
            incoming = await line.receive()
            request = incoming.body.message
            joiner = incoming.sender
            if not isinstance(request, PairRequest) or joiner == me:
                continue
            expected = _proof(secret, b"request", me, joiner)
            if not hmac.compare_digest(request.proof, expected):
                answered = wrong.get(joiner, 0)
                fresh = joiner in wrong or len(wrong) < MAX_ANSWERED_JOINERS
                if answered < MAX_BAD_ATTEMPTS and fresh:  # logged as often as answered
                    log.info("wrong invite code from %s", fingerprint(joiner))
                    wrong[joiner] = answered + 1
                    # The answer is a courtesy: one that cannot be sealed to
                    # that key changes nothing here.
                    with contextlib.suppress(CryptoError, ProtocolError):
                        await line.send(joiner, PairReject("wrong invite code"))
                continue
            info = SiblingInfo(
                joiner, request.name, request.role, str(code.relay), node.clock.now_us()
            )
            await trio.to_thread.run_sync(node.siblings.add, info, _seen(line, incoming))
            await line.send(
                joiner, PairAccept(node.name, node.role, _proof(secret, b"accept", me, joiner))
            )
            # Every other sibling learns of the joiner from this record at its
            # next sync (see `membership`).
            await trio.to_thread.run_sync(membership.welcome, node, info)
            return info
    raise PairingFailed(f"nobody used the code within {timeout:g} s; it has expired")


async def pair(
    node: Node, code_text: str, *, timeout: float = 60.0, relay: RelayAddress | None = None
) -> SiblingInfo:
    """Use an invite code: prove it to the inviter and store it as a sibling.

    ``relay``: reach the inviter through these relays instead of the code's
    (another relay of the same fleet, say); the sibling keeps the code's."""
    code = InviteCode.parse(code_text, now=_now(node))
    identity = node.identity()
    if bytes(identity.verify_key) == code.inviter:
        raise BadInput("that invite code is this peer's own")
    client = await RelayClient.connect(relay if relay is not None else code.relay, identity)
    try:
        line = _OwnLine(PeerLink(identity, node.siblings, client, entropy=node.entropy))
        return await join(node, code, line, timeout=timeout)
    finally:
        await client.aclose()


async def join(node: Node, code: InviteCode, line: PairingLine, *, timeout: float) -> SiblingInfo:
    """The joiner's side over ``line``: prove ``code`` to its inviter and store it."""
    me = node.public_key()
    if me == code.inviter:
        raise BadInput("that invite code is this peer's own")
    request = PairRequest(node.name, node.role, _proof(code.secret, b"request", code.inviter, me))
    await line.send(code.inviter, request)
    with trio.move_on_after(timeout):
        while True:
            # The request again now and then until answered: one lost on the
            # way, or dropped by an inviter busy with a flood of wrong codes,
            # must not cost the pairing (each copy has a counter of its own;
            # the inviter takes the first that proves the code).
            with trio.move_on_after(ASK_AGAIN_SECONDS):
                return await _answer(node, code, line)
            await line.send(code.inviter, request)
    raise PairingFailed(
        f"no answer from {fingerprint(code.inviter)} within {timeout:g} s: the code may "
        "have expired or been used already"
    )


async def _answer(node: Node, code: InviteCode, line: PairingLine) -> SiblingInfo:
    """The inviter's answer to a joiner's request: stored as a sibling if it proves the code."""
    me = node.public_key()
    while True:
        incoming = await line.receive()
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
            code.inviter, answer.name, answer.role, str(code.relay), node.clock.now_us()
        )
        await trio.to_thread.run_sync(node.siblings.add, info, _seen(line, incoming))
        return info


def _seen(line: PairingLine, incoming: Incoming) -> ReplayWindow:
    """The counters taken from the new sibling so far, to seed its replay window
    (at least the envelope in hand, should the line have forgotten them)."""
    seen = line.seen_from(incoming.sender)
    return seen if seen is not None else ReplayWindow().accept(incoming.body.counter)


def _now(node: Node) -> float:
    """The node's clock in unix seconds (what a code's expiry is compared with)."""
    return node.clock.now_us() / 1_000_000
