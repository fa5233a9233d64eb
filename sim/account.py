"""The account's membership in a simulated world of three or more peers:
the phone or the Homebase removes a further device (a lost laptop), the
"remove" record travels in the log like any other event, and each peer that
takes it in drops the device from its book and refuses its envelopes.

What the real daemon does, done here at once with the same functions:
`membership.remove` (as `pixie devices remove` does), `membership.reconcile`
after every session that applied anything, with the gate told to `learn` or
`forget` (as the driver's `_pump`), a removed peer's envelope answered with
`PairReject(REMOVED_NOTICE)` (as `PeerLink._tell_removed`), and that notice
taken in by the removed peer (`membership.note_removed`, its sessions with
the sibling ended, as the driver's `_refused`). A removed peer that knows it
was removed opens no more sessions, as its `pixie sync` refuses to.

`Account` is mixed into `pixie.sim.world.World`, which supplies the peers,
the seed's random stream, the trace and the way to send.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pixie.device.sync import membership
from pixie.device.sync.admission import TELL_REMOVED_SECONDS
from pixie.device.sync.peers import REMOVED_NOTICE
from pixie.protocol.clock import ManualClock
from pixie.protocol.peerwire import PairReject, PeerMessage
from pixie.sim.invariants import InvariantViolated
from pixie.sim.peer import Peer, Stats

# Peers that may be removed: the further devices, never the device that
# offloads nor the Homebase that holds.
REMOVABLE_FROM = 2
REMOVERS = ("device", "homebase")  # a peer the records always count as a member


class Account:
    """Membership operations and the gate's bookkeeping (see `World._operations`)."""

    rng: random.Random
    clock: ManualClock
    peers: dict[str, Peer]
    names: tuple[str, ...]
    stats: Stats
    by_key: dict[bytes, Peer]
    revoked: set[str]  # the peers the simulated user removed from the account

    if TYPE_CHECKING:

        def note(self, what: str) -> None: ...

        def send(self, sender: Peer, recipient: Peer, message: PeerMessage) -> None: ...

    def members_left(self) -> list[Peer]:
        """The peers still in the account, in the world's order."""
        return [p for n, p in self.peers.items() if n not in self.revoked]

    def can_revoke(self) -> bool:
        return any(n not in self.revoked for n in self.names[REMOVABLE_FROM:])

    def _revoke(self) -> None:
        """The user removes a further device from the account on the phone
        or the Homebase."""
        left = [n for n in self.names[REMOVABLE_FROM:] if n not in self.revoked]
        if not left:
            return
        target = self.peers[self.rng.choice(left)]
        remover = self.peers[self.rng.choice(REMOVERS)]
        membership.remove(remover.node, target.name)
        remover.admission.forget(target.key)
        self.revoked.add(target.name)
        self.stats.count("revoked")
        self.note(f"{remover.name} removes {target.name} from the account")

    def reconcile(self, peer: Peer) -> None:
        """After a session of ``peer``'s that applied something: its book in
        step with the records, its gate told who joined and who was removed."""
        done = membership.reconcile(peer.node)
        for info in done.added:
            peer.admission.learn(info.key)
        for key in done.removed:
            peer.admission.forget(key)
            self.note(f"{peer.name} learns that {self.by_key[key].name} was removed")
        if done.out is not None:
            self.note(f"{peer.name} learns from the records that it was removed")

    def tell_removed(self, peer: Peer, src: Peer) -> None:
        """``peer``'s gate turned away an envelope of the removed ``src``: say so."""
        self.stats.count("told removed")
        self.send(peer, src, PairReject(REMOVED_NOTICE))

    def refused(self, peer: Peer, sender: bytes, reason: str) -> None:
        """A sibling refuses ``peer``: every session with it ends with the reason."""
        self.note(f"{peer.name} is refused by {self.by_key[sender].name}: {reason}")
        if reason == REMOVED_NOTICE:
            membership.note_removed(peer.node, sender)
        for entry in peer.table.with_peer(sender):
            entry.session.fail(f"refused: {reason}", tell_peer=False)
            peer.table.close(entry.session.session_id)
            if entry.session.stats.applied:
                self.reconcile(peer)

    def knows_removed(self, peer: Peer) -> bool:
        return membership.removed_from(peer.node) is not None

    def last_attempts(self) -> list[Peer]:
        """Each removed peer not yet told so, for one more sync at the end
        (after the gates' notice interval, so that each is answered)."""
        late = [p for n, p in self.peers.items() if n in self.revoked and not self.knows_removed(p)]
        if late:
            self.clock.advance(int((TELL_REMOVED_SECONDS + 1) * 1_000_000))
        return late


def check_removed(world: Account) -> None:
    """Invariant 8 at the end: every member holds each removal (the peer out
    of its book and in its removed list) and each removed peer was told at
    its next sync. (That no member takes in an envelope of a peer its book
    says is removed is checked as each envelope is admitted.)"""
    for peer in world.members_left():
        gone = set(peer.node.siblings.removed())
        book = {s.key for s in peer.node.siblings.all()}
        for name in world.revoked:
            out = world.peers[name]
            if out.key not in gone or out.key in book:
                raise InvariantViolated(8, f"{peer.name} still counts {name} as a sibling")
    for name in world.revoked:
        if not world.knows_removed(world.peers[name]):
            raise InvariantViolated(8, f"{name} was not told at its next sync that it was removed")


__all__ = ["REMOVERS", "Account", "check_removed"]
