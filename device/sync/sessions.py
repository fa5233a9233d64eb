"""Which sync session a sibling's message belongs to, and what to do when two collide.

Sans-IO (plain calls, no trio, no socket) so that the trio endpoint
(`pixie.device.sync.driver.SyncEndpoint`) and the simulator, which drives it
step by step, keep the same rules (they are set out in the driver's module
docstring):

- `SessionTable.route` sorts a decoded sync message: for a session open here,
  a repeat of the Hello that opened it, misaddressed (another sibling's
  session), for no open session, or a sibling's Hello of a session not open
  here.
- `SessionTable.settle` decides what such a Hello does: while a session of
  ours with that sibling is still opening, the peer with the lower key refuses
  it and the higher one holds it back, and either says its own Hello again
  (once per Hello of the sibling's); otherwise the sessions still running with
  that sibling are superseded and the Hello is answered.
- A session that ends is remembered (`SessionTable.close`), so a later copy of
  its Hello opens nothing; so is one refused here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pixie.protocol import syncwire
from pixie.protocol.sync import Phase, SyncSession

ENDED_KEPT = 4_096  # ids of sessions over (run or refused here) remembered
_OPENING = (Phase.IDLE, Phase.HELLO_SENT)  # an opener's, until the sibling answers


class Tracked(Protocol):
    """What the table needs of an open session's record (the driver's holds more)."""

    session: SyncSession
    peer: bytes
    # A responder's: the sibling's Hello that opened it.
    opened_by: syncwire.Hello | None
    # An opener's: the ids of the sibling's Hellos it has said its own Hello again for.
    shown: set[bytes]


E = TypeVar("E", bound=Tracked)


class Route(enum.Enum):
    """Where a sibling's sync message goes."""

    DELIVER = "deliver"  # to the session it names, open here with that sibling
    REPEAT = "repeat"  # the Hello that opened a session open here: it has it already
    MISADDRESSED = "misaddressed"  # names a session open here with another sibling
    NO_SESSION = "no_session"  # for no open session (a leftover): dropped
    NEW_HELLO = "new_hello"  # a Hello of a session not open here: see `settle`


@dataclass
class Settlement(Generic[E]):
    """What to do about a sibling's Hello of a session not open here."""

    answer: bool  # start a responder session for it now
    refuse: bool = False  # send the sibling `protocol.sync.refusal` of it
    say_again: list[E] = field(default_factory=list)  # our openers to send their Hello again
    superseded: list[E] = field(default_factory=list)  # our sessions the sibling moved on from


class SessionTable(Generic[E]):
    """The sync sessions of one peer, keyed by session id."""

    def __init__(self, own_key: bytes, *, ended_kept: int = ENDED_KEPT) -> None:
        self.own_key = own_key
        self.ended_kept = ended_kept
        self.sessions: dict[bytes, E] = {}
        # Per sibling, its newest Hello held back while a session of ours with it
        # opens, with its size.
        self.held: dict[bytes, tuple[syncwire.Hello, int]] = {}
        # Ids of sessions that have ended here or that we refused (oldest
        # first): a later copy of their Hello opens nothing.
        self.ended: dict[bytes, None] = {}

    def with_peer(self, peer: bytes) -> list[E]:
        """The sessions open here with ``peer``."""
        return [e for e in self.sessions.values() if e.peer == peer]

    def open(self, entry: E) -> None:
        """Track a session that starts here: an opener, or a responder that
        answers ``entry.opened_by`` (anything held back from that sibling is
        older, and goes)."""
        if entry.opened_by is not None:
            self.held.pop(entry.peer, None)
        self.sessions[entry.session.session_id] = entry

    def close(self, session_id: bytes) -> None:
        """A session is over here: a later copy of its Hello opens nothing."""
        self.sessions.pop(session_id, None)
        self.remember(session_id)

    def remember(self, session_id: bytes) -> None:
        """Note a session as over here, forgetting the oldest beyond ``ended_kept``."""
        self.ended[session_id] = None
        if len(self.ended) > self.ended_kept:
            del self.ended[next(iter(self.ended))]

    def take_held(self, peer: bytes) -> tuple[syncwire.Hello, int] | None:
        """The sibling's newest Hello held back, if any (it is no longer held)."""
        return self.held.pop(peer, None)

    def route(self, sender: bytes, message: syncwire.SyncMessage) -> tuple[Route, E | None]:
        """Where ``message`` from ``sender`` goes, and the session it names, if open."""
        entry = self.sessions.get(message.session)
        if entry is not None and entry.peer != sender:
            return Route.MISADDRESSED, None
        if entry is None:
            if (
                not isinstance(message, syncwire.Hello)
                or message.reply
                or message.session in self.ended
            ):
                return Route.NO_SESSION, None
            return Route.NEW_HELLO, None
        if message == entry.opened_by:
            return Route.REPEAT, entry
        return Route.DELIVER, entry

    def settle(self, peer: bytes, hello: syncwire.Hello, size: int) -> Settlement[E]:
        """What ``hello`` (`Route.NEW_HELLO`, ``size`` bytes) from ``peer`` does."""
        mine = self.with_peer(peer)
        opening = [e for e in mine if e.session.opener and e.session.phase in _OPENING]
        if not opening:
            # The sibling has ended these: it opens one session at a time.
            return Settlement(answer=True, superseded=mine)
        lower = self.own_key < peer
        if lower:
            self.remember(hello.session)  # refused: a copy of it opens nothing
        else:
            self.held[peer] = (hello, size)  # the newest wins: only it can be open
        again = []
        for entry in opening:
            if entry.session.hello is None or hello.session in entry.shown:
                continue  # not sent yet, or already said again for this Hello
            entry.shown.add(hello.session)
            again.append(entry)
        return Settlement(answer=False, refuse=lower, say_again=again)


__all__ = ["ENDED_KEPT", "Route", "SessionTable", "Settlement", "Tracked"]
