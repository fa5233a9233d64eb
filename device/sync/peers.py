"""Envelopes to and from siblings, over one relay connection.

Sending reserves the next per-sibling counter durably before the envelope
leaves. Receiving hands each envelope to the peer's `Admission`
(`pixie.device.sync.admission`, sans-IO: the simulator drives the same gate),
which drops a stranger's junk at the cost of a set lookup before any
cryptography, then opens the envelope, checks that the key that signed it is
the one the relay attests, decodes the body strictly and checks the counter
against the persisted replay window. Anything that fails is logged with its
reason (fingerprints and sizes only), counted, and dropped without changing any
state; whatever one envelope makes the decoders raise, the link goes on with
the next. The log is summarised per reason (the first few in full, then a count
per minute), so a flood of junk grows it by a bounded amount.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import trio
from nacl.exceptions import CryptoError
from nacl.signing import SigningKey

from pixie.device.logs import Summarised
from pixie.device.store.db import at_once
from pixie.device.store.siblings import SiblingBook, Still
from pixie.device.sync.admission import (
    MAX_STRANGERS,
    PAIRING_MESSAGES,
    SIBLING_REFRESH_SECONDS,
    Admission,
    Incoming,
    Rejected,
    Rejection,
)
from pixie.device.sync.admitsteps import Screen, admitting
from pixie.device.sync.relayclient import RelayClient, RelayUnavailable
from pixie.protocol.clock import SYSTEM_ENTROPY, Entropy
from pixie.protocol.envelope import seal
from pixie.protocol.errors import ProtocolError
from pixie.protocol.peerwire import PairReject, PeerMessage, encode_body
from pixie.protocol.replay import ReplayWindow

T = TypeVar("T")

# Envelopes up to this size (a fetch part of 256 KiB among them) are sealed and
# opened on the event loop itself: tens of microseconds for a small one, less
# than a hop to a worker thread, and about a quarter of a millisecond for a
# part (inline, a 1 MB fetch ran at 125 MB/s instead of 83). Larger ones go to
# the thread lane.
AT_ONCE_BYTES = 320 * 1024
# What a peer removed from the account is told when it writes (see
# `Admission.screen`), and how long sending that may take.
REMOVED_NOTICE = "this device was removed from the account"
REMOVED_NOTICE_SECONDS = 5.0


class PeerLink:
    def __init__(
        self,
        identity: SigningKey,
        siblings: SiblingBook,
        client: RelayClient,
        *,
        lane: trio.CapacityLimiter | None = None,
        entropy: Entropy = SYSTEM_ENTROPY,
    ) -> None:
        self.identity = identity
        self.siblings = siblings
        self.client = client
        # The thread lane for crypto and database work; a driver that has one
        # per database passes it, so that this work never runs beside its own
        # (two Python threads contending for the GIL, one of them in SQLite,
        # made a bulk sync three times slower).
        self.lane = lane
        # Where message ids come from: a driver passes its node's.
        self.entropy = entropy
        self.admission = Admission(identity, siblings)

    @property
    def rejected(self) -> Counter[str]:
        """Envelopes dropped, per `Rejection`."""
        return self.admission.rejected

    @property
    def rejections(self) -> Summarised:
        return self.admission.rejections

    @property
    def admit_strangers(self) -> bool:
        """While set, unpaired senders are admitted as with ``receive(strangers=True)``
        (a daemon whose own connection carries an invite or a pairing)."""
        return self.admission.admit_strangers

    @admit_strangers.setter
    def admit_strangers(self, value: bool) -> None:
        self.admission.admit_strangers = value

    async def send(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> int:
        """Seal and send; returns the envelope's size (what the relay carries).
        With ``still``, raises `Withdrawn` instead if it answers False when the
        envelope's counter is reserved (see `SiblingBook.next_send_counter`)."""
        counter = await at_once(
            self.siblings.next_send_counter, recipient, still, otherwise=self._in_lane
        )
        body = encode_body(message, counter, entropy=self.entropy)
        # The process's ephemeral keys, aged on its monotonic clock.
        sealing = partial(seal, self.identity, recipient, body, now=time.monotonic())
        if len(body) <= AT_ONCE_BYTES:
            envelope = sealing()
        else:
            envelope = await self._in_lane(sealing)
        await self.client.send(recipient, envelope)
        return len(envelope)

    async def receive(self, *, strangers: bool = False) -> Incoming:
        """The next acceptable message. ``strangers`` admits unpaired senders
        (only while an invite is open); their replay state is kept in memory."""
        admission = self.admission
        while True:
            delivered = await self.client.receive()
            # The order of the checks is admitsteps' (the simulator takes the
            # same steps); this loop only picks where each runs.
            steps = admitting(delivered.sender, delivered.envelope, strangers=strangers)
            answer: object = None
            try:
                while True:
                    step = steps.send(answer)
                    if isinstance(step, Screen):
                        # Before any cryptography: a set lookup is all a stranger's junk costs.
                        answer = admission.screen(step.sender, step.size, strangers=step.strangers)
                    elif len(step.envelope) <= AT_ONCE_BYTES:
                        answer = await at_once(
                            admission.admit,
                            step.sender,
                            step.envelope,
                            step.strangers,
                            otherwise=self._in_lane,
                        )
                    else:
                        answer = await self._in_lane(
                            admission.admit, step.sender, step.envelope, step.strangers
                        )
            except StopIteration as end:
                admitted = end.value
            if isinstance(admitted, Incoming):
                admission.rejections.flush()
                return admitted
            if isinstance(admitted, Rejected) and admitted.reason is Rejection.REMOVED:
                await self._tell_removed(delivered.sender)

    async def _tell_removed(self, key: bytes) -> None:
        """Answer a peer removed from the account, so that its sync ends with
        the reason rather than a silence (a courtesy: a failure changes nothing)."""
        with contextlib.suppress(RelayUnavailable, ProtocolError, CryptoError, trio.TooSlowError):
            with trio.fail_after(REMOVED_NOTICE_SECONDS):
                await self.send(key, PairReject(REMOVED_NOTICE))

    async def _in_lane(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    def seen_from_stranger(self, key: bytes) -> ReplayWindow | None:
        """The counters accepted from ``key`` while it was a stranger, if any."""
        return self.admission.seen_from_stranger(key)


__all__ = [
    "AT_ONCE_BYTES",
    "MAX_STRANGERS",
    "PAIRING_MESSAGES",
    "REMOVED_NOTICE",
    "SIBLING_REFRESH_SECONDS",
    "Incoming",
    "PeerLink",
]
