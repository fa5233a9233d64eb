"""What a peer does with a sibling's sync message, as a list of steps (sans-IO).

`receive` is the peer's dispatch of a decoded sync message, written once: it
sorts the message through the `SessionTable` (`route`, `settle`) and returns
the steps that follow, in the order they are to be taken. Whoever runs them
does the I/O they name and decides nothing:

- `SayAgain`: send an opening session's own Hello again (and count the
  sibling as heard: its idle deadline starts over);
- `Send`: send a sync message (the refusal of a Hello that collided with ours);
- `Supersede`: a session of ours the sibling has moved on from ends;
- `Answer`: start a responder session for the sibling's Hello;
- `Deliver`: hand the message to the open session it names;
- `Drop`: nothing to do (misaddressed, for no open session, a repeat of the
  Hello a session opened with, or a Hello held back or refused).

`open_ours` tracks a session this peer opens, and `after_ours` says what
follows the end of a session this peer opened: a Hello
of the sibling's held back while ours was opening is answered if ours was
refused for it.

Two drivers take these steps: `pixie.device.sync.driver.SyncEndpoint`, under
trio (a task per session, deadlines, the relay), and the simulator, at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from pixie.device.sync.sessions import E, Route, SessionTable
from pixie.protocol import syncwire
from pixie.protocol.sync import refusal


@dataclass(frozen=True, slots=True)
class SayAgain(Generic[E]):
    entry: E


@dataclass(frozen=True, slots=True)
class Send:
    message: syncwire.SyncMessage


@dataclass(frozen=True, slots=True)
class Supersede(Generic[E]):
    entry: E


@dataclass(frozen=True, slots=True)
class Answer:
    hello: syncwire.Hello
    size: int


@dataclass(frozen=True, slots=True)
class Deliver(Generic[E]):
    entry: E
    message: syncwire.SyncMessage
    size: int


@dataclass(frozen=True, slots=True)
class Drop:
    route: Route  # why (NEW_HELLO: held back or refused)
    kind: str  # the message's type, for the log


SyncStep = SayAgain[E] | Send | Supersede[E] | Answer | Deliver[E] | Drop


def receive(
    table: SessionTable[E], sender: bytes, message: syncwire.SyncMessage, size: int
) -> list[SyncStep[E]]:
    """The steps that follow ``message`` (``size`` bytes) from ``sender``."""
    kind = type(message).__name__
    route, entry = table.route(sender, message)
    if route is Route.DELIVER and entry is not None:
        return [Deliver(entry, message, size)]
    if route is not Route.NEW_HELLO:
        return [Drop(route, kind)]
    assert isinstance(message, syncwire.Hello)
    settlement = table.settle(sender, message, size)
    steps: list[SyncStep[E]] = [SayAgain(e) for e in settlement.say_again]
    if settlement.refuse:
        steps.append(Send(refusal(message.session)))
    steps.extend(Supersede(e) for e in settlement.superseded)
    steps.append(Answer(message, size) if settlement.answer else Drop(route, kind))
    return steps


def open_ours(table: SessionTable[E], entry: E) -> None:
    """Track a session this peer opens with ``entry.peer``: a Hello of the
    sibling's held back before is older than it, and goes."""
    table.take_held(entry.peer)
    table.open(entry)


def after_ours(table: SessionTable[E], peer: bytes, *, refused: bool) -> Answer | None:
    """A session this peer opened with ``peer`` has ended (``refused``: the
    sibling refused it for one of its own). The sibling's Hello held back
    meanwhile is answered now if ours was refused and no other session runs
    with it; otherwise it is forgotten (the sibling says it again if it still
    wants it)."""
    held = table.take_held(peer)
    if refused and held is not None and not table.with_peer(peer):
        return Answer(*held)
    return None


__all__ = [
    "Answer",
    "Deliver",
    "Drop",
    "SayAgain",
    "Send",
    "Supersede",
    "SyncStep",
    "after_ours",
    "open_ours",
    "receive",
]
