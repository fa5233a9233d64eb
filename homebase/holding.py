"""The holder's decisions: store, serve and release a sibling's bodies, without I/O.

Sans-IO (plain calls over the Homebase's store, no trio, no socket) so that the
trio holder (`pixie.homebase.holder.Holder`) and the simulator, which drives it
step by step, answer every request with the same code:

- `HolderCore.hold`: the body must re-hash to the hash it came with and must
  not name a note this replica knows as sealed; it is committed (WAL,
  synchronous=FULL) before the ack is built, so an ack always means "durably
  held".
- `HolderCore.serve`: a body is served only for a request naming a clear note
  held here, and only if the resident body still re-hashes to the requested
  hash.
- `HolderCore.let_go`: only the device that parked a holding can release it; a
  release sent before the offload that last stored or re-acked the holding
  (its envelope counter is lower) is answered but changes nothing.

Each returns the reason to refuse (or None); `HolderCore.refuse` counts and
logs a refusal and builds the message that says it. Which of them a request
runs, and what is sent back, is `pixie.homebase.holdsteps`' to say; faults are
struck into those steps, not into the decisions here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pixie.device.logs import Summarised
from pixie.device.node.keyed import Node
from pixie.device.store import holdings
from pixie.device.store.holdings import Held, LetGo
from pixie.device.store.notes import Zone
from pixie.homebase import holdsteps
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.identity import fingerprint
from pixie.protocol.offload import body_hash, check_offload, holder_parts
from pixie.protocol.peerwire import (
    FetchRequest,
    HolderRefusal,
    OffloadRequest,
    PeerMessage,
    Release,
)

log = logging.getLogger("pixie.holder")


@dataclass
class Answered:
    """What `HolderCore.run` did: the messages to send back, in order, the
    faults that struck, and the crash that ended it, if one did."""

    replies: list[PeerMessage] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    crash: str | None = None


class HolderCore:
    """The holder's decisions for one Homebase data dir.

    ``clock`` dates each holding; ``entropy`` is what a driver draws from for
    this holder (the ids a faulty ack names).
    """

    def __init__(
        self,
        node: Node,
        *,
        refusals: Summarised | None = None,
        clock: Clock = SYSTEM_CLOCK,
        entropy: Entropy = SYSTEM_ENTROPY,
    ) -> None:
        self.node = node
        self.clock = clock
        self.entropy = entropy
        self.refused: dict[str, int] = {}
        self.refusals = refusals or Summarised(log, "requests refused")

    def refuse(
        self, sender: bytes, request: OffloadRequest | FetchRequest | Release, reason: str
    ) -> HolderRefusal:
        """Count and log the refusal of ``request``; the message that says it."""
        what = {OffloadRequest: "offload", FetchRequest: "fetch", Release: "release"}[type(request)]
        self.refused[reason] = self.refused.get(reason, 0) + 1
        self.refusals.log(
            reason,
            "refused %s of %s from %s: %s",
            what,
            request.note_id,
            fingerprint(sender),
            reason,
        )
        return HolderRefusal(request.request, reason)

    def run(self, steps: holdsteps.Steps) -> Answered:
        """Do what ``steps`` name against this data dir at once, in this
        thread (the simulator's and a test's way; `Holder` runs the same
        steps under trio): what to send back, in order, and how it ended."""
        out = Answered()
        result: object = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration:
                return out
            result = None
            if isinstance(step, holdsteps.Hold):
                result = self.hold(step.sender, step.request, step.counter)
            elif isinstance(step, holdsteps.Read):
                result = self.serve(step.request)
            elif isinstance(step, holdsteps.LetGo):
                result = self.let_go(step.sender, step.request, step.counter)
            elif isinstance(step, holdsteps.Reply):
                out.replies.append(step.message)
            elif isinstance(step, holdsteps.Refuse):
                out.replies.append(self.refuse(step.sender, step.request, step.reason))
            elif isinstance(step, holdsteps.Serve):
                out.replies.extend(holder_parts(step.request, step.body))
            elif isinstance(step, holdsteps.Faulted):
                out.faults.append(step.name)
            elif isinstance(step, holdsteps.Crash):
                out.crash = step.why
                return out
            # A Delay is a wait, which a run at once has no use for.

    # -- offload -------------------------------------------------------------------------

    def hold(self, sender: bytes, req: OffloadRequest, counter: int) -> str | None:
        """Check ``req``'s body against its hash and commit the holding durably;
        the reason to refuse, or None (it is held: the ack may go)."""
        return check_offload(req) or self.store(sender, req, counter)

    def store(self, sender: bytes, req: OffloadRequest, counter: int) -> str | None:
        """Commit the holding durably (synchronous=FULL), stamped with the
        request's envelope counter (see `let_go`); the reason to refuse, or
        None."""
        held = holdings.hold(
            self.node.db,
            req.note_id,
            req.content_hash.hex(),
            sender.hex(),
            req.body,
            held_at=self.clock.now_us(),
            counter=counter,
        )
        if held is Held.SEALED:
            return "that id names a sealed note; sealed notes are never offloaded"
        # NEW (the body, or this device as one more of its owners), or AGAIN:
        # held for it already, the ack is idempotent, and this offload now
        # backs the holding too.
        return None

    # -- fetch ---------------------------------------------------------------------------

    def serve(self, req: FetchRequest) -> tuple[bytes | None, str]:
        """The held body that answers ``req``, or None and the reason to refuse."""
        zone, body = holdings.held_body(self.node.db, req.note_id, req.content_hash.hex())
        if zone == Zone.SEALED.value:
            # A sealed note by that id gets its own answer, held body or not.
            return None, "that id names a sealed note"
        if body is None:
            return None, "no holding for that note and hash"
        if body_hash(body) != req.content_hash:
            log.error("holding %s no longer matches its hash: not served", req.note_id)
            return None, "the held body no longer matches its hash"
        return body, ""

    # -- release -------------------------------------------------------------------------

    def let_go(self, sender: bytes, req: Release, counter: int) -> str | None:
        """Let go of a holding; the reason to refuse, or None (also when there
        is nothing to drop, or when the release predates the holding's latest
        offload, whose copy the device may point at: both are answered as
        done, since the copy the release spoke of is no longer the device's
        concern)."""
        done = holdings.let_go(
            self.node.db, req.note_id, req.content_hash.hex(), sender.hex(), counter
        )
        if done is LetGo.NOT_OWNER:
            return "only a device that parked a holding can release it"
        if done is LetGo.PARKED_AGAIN:
            log.info(
                "kept %s: %s parked it again after asking to release it",
                req.note_id,
                fingerprint(sender),
            )
        elif done is LetGo.DROPPED:
            log.info("released %s for %s", req.note_id, fingerprint(sender))
        return None  # ABSENT: nothing to drop; releasing twice is fine


__all__ = ["Answered", "HolderCore"]
