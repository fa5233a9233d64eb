"""Admission: which envelopes a peer takes in, decided without I/O.

Sans-IO (plain calls over the sibling book, no trio, no socket) so that the
trio link (`pixie.device.sync.peers.PeerLink`) and the simulator, which drives
it step by step, run the same rules on every envelope:

1. Before any cryptography, a sender the relay attests that is not a sibling is
   dropped at the cost of a set lookup (`Admission.screen`), unless strangers
   are admitted (an invite or a pairing is open). The set is reread from the
   book at most once a `SIBLING_REFRESH_SECONDS`, however many strangers write.
2. Then `Admission.admit` opens the envelope, checks that the key that signed
   it is the one the relay attests, decodes the body strictly, lets a stranger
   send pairing messages only, and checks the counter against the persisted
   replay window (a stranger's, mid-pairing, in memory).

Anything that fails is counted per `Rejection` and logged in summary, and
changes no state.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from nacl.signing import SigningKey

from pixie.device.logs import Summarised
from pixie.device.store.siblings import SiblingBook
from pixie.protocol.envelope import PROCESS_KEYS, EnvelopeError, EnvelopeKeys, open_envelope
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.peerwire import Body, PairAccept, PairReject, PairRequest, decode_body
from pixie.protocol.replay import ReplayWindow, Verdict

log = logging.getLogger("pixie.peers")
# All that an unpaired key may send, and only while an invite or pairing is open.
PAIRING_MESSAGES = (PairRequest, PairAccept, PairReject)
# Unpaired senders whose counters are remembered (in memory) while an invite or
# a pairing runs; beyond this many, the one heard from least recently is forgotten.
MAX_STRANGERS = 4096
# A sender the relay attests that is not in the set of siblings makes admission
# reread its siblings at most this often (a sibling paired by another process
# is heard within this long), or at once after strangers were admitted.
SIBLING_REFRESH_SECONDS = 1.0
# How often a removed peer's envelopes get an answer saying so (the rest are
# dropped unopened): enough for its next sync to end with the reason.
TELL_REMOVED_SECONDS = 10.0


class Rejection(enum.StrEnum):
    """Why an envelope was dropped."""

    UNPAIRED = "unpaired"  # from a key that is not a sibling (or, mid-pairing, not pairing)
    TAMPERED = "tampered"  # the envelope does not open
    UNDECODABLE = "undecodable"  # a decoder raised something it should not have
    MISATTRIBUTED = "misattributed"  # signed by one key, sent by another
    MALFORMED = "malformed"  # the body does not decode
    REMOVED = "removed"  # from a peer removed from the account (answered with a notice)
    REPLAY = Verdict.REPLAY.value  # a counter seen before
    TOO_OLD = Verdict.TOO_OLD.value  # a counter below the replay window


@dataclass(frozen=True, slots=True)
class Incoming:
    sender: bytes
    body: Body


@dataclass(frozen=True, slots=True)
class Rejected:
    """An envelope admission dropped: why, and a line saying so (no body bytes)."""

    reason: Rejection
    detail: str


class Admission:
    """The envelope gate of one peer: its identity, its siblings, the strangers
    heard while a pairing runs."""

    def __init__(
        self,
        identity: SigningKey,
        siblings: SiblingBook,
        *,
        rejections: Summarised | None = None,
        clock: Callable[[], float] = time.monotonic,
        keys: EnvelopeKeys = PROCESS_KEYS,
    ) -> None:
        """``keys``: where the ephemeral keys verified are remembered (the
        process's, unless a simulated world keeps its own)."""
        self.identity = identity
        self.keys = keys
        self.siblings = siblings
        self.clock = clock
        self.rejected: Counter[str] = Counter()
        self.rejections = rejections or Summarised(log, "envelopes rejected")
        # The siblings' keys, reread from the book now and then (see `screen`).
        self._siblings_seen: set[bytes] = set()
        # Peers removed from the account, reread at most once a
        # SIBLING_REFRESH_SECONDS while envelopes come (a removal another
        # process wrote is heard within that), and when each was last told.
        self._removed: set[bytes] = set()
        self._removed_read_at = -math.inf
        self._told: dict[bytes, float] = {}
        self._siblings_read_at = -math.inf
        self._siblings_stale = True  # reread at the next unknown sender, whenever it comes
        self._admit_strangers = False
        self._strangers: dict[bytes, ReplayWindow] = {}

    @property
    def admit_strangers(self) -> bool:
        """While set, unpaired senders are admitted as with ``strangers=True``
        (a daemon whose own connection carries an invite or a pairing)."""
        return self._admit_strangers

    @admit_strangers.setter
    def admit_strangers(self, value: bool) -> None:
        self._admit_strangers = value
        self._siblings_stale = True  # a pairing may have added a sibling meanwhile

    def screen(self, sender: bytes, size: int, *, strangers: bool = False) -> bool:
        """Before any cryptography: may an envelope of ``size`` bytes that the
        relay says ``sender`` sent go on to `admit`? A stranger's junk costs a
        set lookup (and is counted and logged in summary). A peer removed from
        the account goes on at most once a `TELL_REMOVED_SECONDS`, to be told
        so (see `admit`); its other envelopes are dropped here."""
        self._reread_removed()
        if sender in self._removed:
            now = self.clock()
            if now - self._told.get(sender, -math.inf) >= TELL_REMOVED_SECONDS:
                return True
            self.rejected[Rejection.REMOVED.value] += 1
            return False
        if strangers or self._admit_strangers:
            self._siblings_stale = True
            return True
        if sender in self._siblings_seen or self._reread_finds(sender):
            return True
        self.rejected[Rejection.UNPAIRED.value] += 1
        self.rejections.log(
            Rejection.UNPAIRED.value,
            "rejected envelope: from unpaired key %s (%d bytes)",
            _Fingerprint(sender),
            size,
        )
        return False

    def learn(self, key: bytes) -> None:
        """``key`` joined the account here (a membership record): take it in
        from now on, without waiting for the next reread of the book."""
        if key not in self._removed:
            self._siblings_seen.add(key)

    def forget(self, key: bytes) -> None:
        """``key`` was removed from the account here: refuse it from now on."""
        self._siblings_seen.discard(key)
        self._removed.add(key)

    def _reread_removed(self) -> None:
        now = self.clock()
        if now - self._removed_read_at < SIBLING_REFRESH_SECONDS:
            return
        self._removed_read_at = now
        removed = set(self.siblings.removed())
        self._removed |= removed
        self._siblings_seen -= removed

    def admit(self, sender: bytes, envelope: bytes, strangers: bool = False) -> Incoming | Rejected:
        """Open ``envelope``, which the relay says ``sender`` sent, and check it:
        the message to act on, or why it was dropped (counted and logged)."""
        try:
            opened = open_envelope(self.identity, envelope, keys=self.keys)
        except EnvelopeError as exc:
            return self._reject(Rejection.TAMPERED, f"{exc} ({len(envelope)} bytes)")
        except Exception as exc:  # a decoder bug must not let one envelope stop the link
            return self._reject(Rejection.UNDECODABLE, f"{_bug(exc)} opening {len(envelope)} bytes")
        who = fingerprint(opened.sender)
        if opened.sender != sender:  # signed by one key, sent by another: a replay or a forgery
            return self._reject(
                Rejection.MISATTRIBUTED,
                f"envelope signed by {who} came from {fingerprint(sender)}",
            )
        if opened.sender in self._removed:
            # Signed by the removed peer itself: its driver tells it so, once
            # in a while (the body is neither decoded nor counted).
            self._told[opened.sender] = self.clock()
            return self._reject(Rejection.REMOVED, f"envelope from removed peer {who}")
        known = self._known(opened.sender)
        if not known and not (strangers or self._admit_strangers):
            return self._reject(Rejection.UNPAIRED, f"envelope from unpaired key {who}")
        try:
            body = decode_body(opened.body)
        except ProtocolError as exc:
            return self._reject(Rejection.MALFORMED, f"from {who}: {exc}")
        except Exception as exc:  # as above: drop it, count it, go on
            return self._reject(Rejection.UNDECODABLE, f"from {who}: {_bug(exc)} decoding the body")
        if not known and not isinstance(body.message, PAIRING_MESSAGES):
            # A stranger may only ever pair. Checked here, where the envelope is
            # admitted, not by the driver when it dispatches: a pairing that
            # ends in between must not let a stranger's Hello or request through
            # as though it came from a sibling.
            return self._reject(
                Rejection.UNPAIRED, f"{type(body.message).__name__} from unpaired key {who}"
            )
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
            return self._reject(
                Rejection(verdict.value), f"from {who}: counter {body.counter} {verdict}"
            )
        return Incoming(opened.sender, body)

    def seen_from_stranger(self, key: bytes) -> ReplayWindow | None:
        """The counters accepted from ``key`` while it was a stranger, if any."""
        return self._strangers.get(key)

    def _reread_finds(self, key: bytes) -> bool:
        """Is ``key``, not in the set of siblings' keys, a sibling after all? The
        set is reread from the book at most once a `SIBLING_REFRESH_SECONDS`
        (sooner once strangers were admitted), however many strangers write."""
        now = self.clock()
        if not self._siblings_stale and now - self._siblings_read_at < SIBLING_REFRESH_SECONDS:
            return False
        self._siblings_stale = False
        self._siblings_read_at = now
        self._siblings_seen.update(info.key for info in self.siblings.all())
        return key in self._siblings_seen

    def _known(self, key: bytes) -> bool:
        """Is ``key`` a sibling? Remembered once seen, until it is removed."""
        if key in self._removed:
            return False
        if key in self._siblings_seen:
            return True
        if self.siblings.get(key) is None:
            return False
        self._siblings_seen.add(key)
        return True

    def _reject(self, reason: Rejection, detail: str) -> Rejected:
        self.rejected[reason.value] += 1
        self.rejections.log(reason.value, "rejected envelope: %s", detail)
        return Rejected(reason, detail)


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


__all__ = [
    "MAX_STRANGERS",
    "PAIRING_MESSAGES",
    "SIBLING_REFRESH_SECONDS",
    "Admission",
    "Incoming",
    "Rejected",
    "Rejection",
]
