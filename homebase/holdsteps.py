"""What the holder does with one sibling's request, as a stream of steps (sans-IO).

`answer` is the holder's dispatch, written once: a generator that yields the
steps one request takes and is sent each step's result. Whoever runs it does
the I/O the steps name, and nothing else decides anything:

- `Hold` (check the body, commit the holding durably) and `LetGo` (drop a
  holding) are sent back the reason to refuse, or None; `Read` is sent back
  the held body and the reason (`HolderCore.serve`'s answer);
- `Reply` sends a message to the requester, `Refuse` counts a refusal and
  sends the message that says it, `Serve` sends a body's parts;
- `Crash`, `Delay` and `Faulted` come only from faults (below).

Two drivers run it: `pixie.homebase.holder.Holder`, under trio (commits in a
worker thread, replies through the relay, each within its deadline), and the
simulator, one step at a time. Both hand the writes and reads to the same
`HolderCore`.

Faults do not live in the core: `faulted` wraps the stream and rewrites it
where a fault strikes. A fault is picked at two points, an offload's `Hold`
(`OFFLOAD`: no answer, a refusal, a crash before or after the commit, a late
ack, an ack naming the wrong hash or id, or, in the simulator only, an ack for
a body never stored) and a fetch's `Serve` (`SERVE`: one bit of the body
flipped). The trio holder picks from its `FaultPlan` (``--faults``), the
simulator from its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

from pixie.protocol.clock import SYSTEM_ENTROPY, Entropy
from pixie.protocol.ids import id_text
from pixie.protocol.offload import body_hash, new_request_id
from pixie.protocol.peerwire import (
    FetchRequest,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    PeerMessage,
    Release,
    Released,
)

HolderRequest = OffloadRequest | FetchRequest | Release


@dataclass(frozen=True, slots=True)
class Hold:
    """Check the body against its hash and commit the holding durably."""

    sender: bytes
    request: OffloadRequest
    counter: int


@dataclass(frozen=True, slots=True)
class Read:
    """Find the held body a fetch asks for."""

    request: FetchRequest


@dataclass(frozen=True, slots=True)
class LetGo:
    """Drop a holding its owner releases."""

    sender: bytes
    request: Release
    counter: int


@dataclass(frozen=True, slots=True)
class Reply:
    """Send ``message`` to the requester."""

    message: PeerMessage


@dataclass(frozen=True, slots=True)
class Refuse:
    """Count and log the refusal, and send the message that says it."""

    sender: bytes
    request: HolderRequest
    reason: str


@dataclass(frozen=True, slots=True)
class Serve:
    """Send ``body`` to the requester, in parts."""

    request: FetchRequest
    body: bytes


@dataclass(frozen=True, slots=True)
class Crash:
    """Stop the holder now (a fault)."""

    why: str


@dataclass(frozen=True, slots=True)
class Delay:
    """Wait before the next step (a fault)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Faulted:
    """A fault struck this request: say so."""

    name: str
    note_id: str


Step = Hold | Read | LetGo | Reply | Refuse | Serve | Crash | Delay | Faulted
Steps = Generator[Step, object, None]


def answer(sender: bytes, message: HolderRequest, counter: int) -> Steps:
    """The steps that answer ``message`` from ``sender`` (its envelope's
    ``counter`` stamps a holding and dates a release)."""
    if isinstance(message, OffloadRequest):
        why = yield Hold(sender, message, counter)
        if why:
            yield Refuse(sender, message, str(why))
            return
        # The ack is built only now: the holding is committed.
        yield Reply(ack(message))
    elif isinstance(message, FetchRequest):
        found = yield Read(message)
        assert isinstance(found, tuple)
        body, reason = found
        if body is None:
            yield Refuse(sender, message, reason)
            return
        yield Serve(message, body)
    else:
        why = yield LetGo(sender, message, counter)
        if why:
            yield Refuse(sender, message, str(why))
            return
        yield Reply(Released(message.request, message.note_id, message.content_hash))


def ack(req: OffloadRequest) -> OffloadAck:
    """The ack of a held body."""
    return OffloadAck(req.request, req.note_id, req.content_hash)


# -- faults -------------------------------------------------------------------------

OFFLOAD = "offload"  # picked at an offload's Hold
SERVE = "serve"  # picked at a fetch's Serve
# An ack for a body never stored: a lying holder, which only the simulator
# plays (no ``--faults`` name reaches it: a real device would clear its body).
ACK_UNSTORED = "ack-unstored"

# (a fault's name, its seconds) for a stage, or None: the fault that strikes.
Pick = Callable[[str], tuple[str, float] | None]


def faulted(steps: Steps, pick: Pick, entropy: Entropy = SYSTEM_ENTROPY) -> Steps:
    """``steps`` with the faults ``pick`` chooses struck in (``entropy``
    draws the other id a wrong-id ack names)."""
    sent: object = None
    fault: tuple[str, float] | None = None
    held: OffloadRequest | None = None
    while True:
        try:
            step = steps.send(sent)
        except StopIteration:
            return
        sent = None
        if isinstance(step, Hold):
            held, fault = step.request, pick(OFFLOAD)
            name = fault[0] if fault is not None else None
            if name == "crash-before-commit":
                yield Crash("crash before commit")
                return
            if name in ("ack-timeout", "refuse", ACK_UNSTORED):
                yield Faulted(name, held.note_id)
                if name == "refuse":
                    yield Reply(HolderRefusal(held.request, "refused (injected fault)"))
                elif name == ACK_UNSTORED:
                    yield Reply(ack(held))
                return
            sent = yield step
            if not sent and name == "crash-after-commit":
                yield Faulted(name, held.note_id)
                yield Crash("crash after commit, before the ack")
                return
            continue
        if isinstance(step, Reply) and isinstance(step.message, OffloadAck) and fault:
            assert held is not None
            name, seconds = fault
            if name == "ack-delay":
                yield Faulted(name, held.note_id)
                yield Delay(seconds)
            elif name in ("ack-wrong-hash", "ack-wrong-id"):
                yield Faulted(name, held.note_id)
                step = Reply(_wrong_ack(held, name, entropy))
        elif isinstance(step, Serve):
            struck = pick(SERVE)
            if struck is not None and struck[0] == "corrupt-serve":
                yield Faulted(struck[0], step.request.note_id)
                body = step.body
                flipped = bytes([body[0] ^ 0x01]) + body[1:] if body else b"\x00"
                step = Serve(step.request, flipped)
        sent = yield step


def _wrong_ack(req: OffloadRequest, name: str, entropy: Entropy) -> OffloadAck:
    if name == "ack-wrong-hash":
        return OffloadAck(req.request, req.note_id, body_hash(req.body + b"\x00"))
    return OffloadAck(req.request, other_id(req.note_id, entropy), req.content_hash)


def other_id(note_id: str, entropy: Entropy = SYSTEM_ENTROPY) -> str:
    """A well-formed note id that is not ``note_id`` (for the wrong-id fault),
    drawn from ``entropy``."""
    other = id_text(new_request_id(entropy))
    return other if other != note_id else other_id(note_id, entropy)


__all__ = [
    "ACK_UNSTORED",
    "OFFLOAD",
    "SERVE",
    "Crash",
    "Delay",
    "Faulted",
    "Hold",
    "LetGo",
    "Pick",
    "Read",
    "Refuse",
    "Reply",
    "Serve",
    "Step",
    "Steps",
    "ack",
    "answer",
    "faulted",
    "other_id",
]
