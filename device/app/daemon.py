"""Keeping a peer connected: `pixie sync` (one session) and `pixie run` (for good).

`run_peer` holds a relay connection for a node, answers its siblings' sync
sessions, and opens sessions itself when its state digest changes and on a
timer. When the relay goes away it reconnects with capped exponential backoff
(with jitter, so a relay restart is not met by every peer at once). SIGINT and
SIGTERM stop it cleanly: the running batch commits or rolls back, and the
connection closes.

On a device it also distils, opportunistically: a pass whenever the log has
new material, looked for every DISTILL_EVERY seconds, relay or no relay.
"""

from __future__ import annotations

import logging
import random
import signal
import time
from collections.abc import Callable, Sequence
from functools import partial

import trio

from pixie.device.app.control import HolderReplies, Live, serve_control
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import DeviceError
from pixie.device.node.keyed import Node
from pixie.device.notebook import meaning
from pixie.device.store.db import checkpoint_in_background
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import PeerService, SyncEndpoint, SyncOutcome, SyncReport
from pixie.device.sync.peers import PeerLink
from pixie.device.sync.relayclient import RelayAddress, RelayClient, RelayUnavailable
from pixie.protocol.identity import fingerprint
from pixie.protocol.sync import SyncStats

log = logging.getLogger("pixie.run")

SYNC_INTERVAL = 60.0  # seconds between sessions when nothing changes
CHANGE_POLL = 1.0  # how often the digest is looked at for local changes
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
DISTILL_EVERY = 60.0  # seconds between looks for new material to distil (device only)
MODEL_IDLE_SECONDS = 300.0  # the embedding model is let go after this long unused


async def sync_once(
    node: Node,
    relay: RelayAddress,
    siblings: Sequence[SiblingInfo],
    *,
    idle_timeout: float,
    progress: Callable[[str, SyncStats], None] | None = None,
    absent: Callable[[str, float], None] | None = None,
) -> list[SyncReport]:
    """Connect, run one session with each sibling in turn, disconnect.
    ``progress`` hears each session's stats as its messages arrive, and
    ``absent`` each sibling that has not answered the presence check."""
    identity = await trio.to_thread.run_sync(node.identity)
    client = await RelayClient.connect(relay, identity)
    reports: list[SyncReport] = []
    try:
        link = PeerLink(identity, node.siblings, client, entropy=node.entropy)
        endpoint = SyncEndpoint(node, link)
        endpoint.idle_timeout = idle_timeout
        endpoint.on_progress = progress
        endpoint.on_absent = absent
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve, endpoint, None)
            reports.extend(await sync_round(node, endpoint, siblings))
            nursery.cancel_scope.cancel()
    finally:
        await client.aclose()
    return reports


async def sync_round(
    node: Node, endpoint: SyncEndpoint, siblings: Sequence[SiblingInfo]
) -> list[SyncReport]:
    """One session with each sibling, all at once (one that is away costs
    the others nothing), then one with each sibling the sessions brought
    news of (a peer that joined the account meanwhile). Reports in the
    order of the siblings."""
    found: dict[bytes, SyncReport] = {}

    async def one(key: bytes) -> None:
        found[key] = await endpoint.sync_with(key)

    order: list[bytes] = []
    todo = list(siblings)
    while todo:
        async with trio.open_nursery() as nursery:
            for sibling in todo:
                if sibling.key not in order:
                    order.append(sibling.key)
                    nursery.start_soon(one, sibling.key)
        todo = [s for s in await trio.to_thread.run_sync(node.siblings.all) if s.key not in order]
    return [found[key] for key in order]


async def run_peer(
    node: Node,
    relay: RelayAddress,
    *,
    interval: float = SYNC_INTERVAL,
    change_poll: float = CHANGE_POLL,
    idle_timeout: float | None = None,
    services: Sequence[PeerService] = (),
    distill: NotetakingService | None = None,
    distill_every: float = DISTILL_EVERY,
    live: Live | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Stay connected and in sync until cancelled; on a device given a
    ``distill`` service, distil new material meanwhile; given ``live``, serve
    the data dir's control socket with the current connection."""
    if live is not None:
        live.relay = relay
        if node.role == "device":
            services = [*services, HolderReplies(live)]
    stay = partial(
        _stay_connected,
        node,
        relay,
        interval=interval,
        change_poll=change_poll,
        idle_timeout=idle_timeout,
        services=services,
        live=live,
        task_status=task_status,
    )
    async with trio.open_nursery() as nursery:
        if live is not None:
            await nursery.start(serve_control, live)
        if distill is not None and node.role == "device":
            nursery.start_soon(_distill_loop, distill, distill_every)
        await stay()
        nursery.cancel_scope.cancel()


async def _distill_loop(service: NotetakingService, every: float) -> None:
    """A pass now, then whenever the log has gained material. A failed pass is
    logged and tried again later; it never stops the daemon."""
    while True:
        try:
            if await trio.to_thread.run_sync(service.has_new_material, limiter=service.lane):
                report = await service.run_pass()
                if report.sources or report.failed:
                    log.info("distillation: %s", report.render())
        except DeviceError as exc:
            log.warning("distillation pass failed: %s", exc)
        # Between the rare passes and searches that embed, a daemon at rest
        # need not hold the embedding model.
        if meaning.release_if_idle(time.monotonic(), MODEL_IDLE_SECONDS):
            log.info("embedding model released after %.0f s unused", MODEL_IDLE_SECONDS)
        await trio.sleep(every)


async def _stay_connected(
    node: Node,
    relay: RelayAddress,
    *,
    interval: float,
    change_poll: float,
    idle_timeout: float | None,
    services: Sequence[PeerService],
    live: Live | None,
    task_status: trio.TaskStatus[None],
) -> None:
    identity = await trio.to_thread.run_sync(node.identity)
    backoff = BACKOFF_FIRST
    started = False
    while True:
        try:
            client = await RelayClient.connect(relay, identity)
        except RelayUnavailable as exc:
            delay = backoff * random.uniform(0.5, 1.0)  # jitter, not secrecy
            log.warning("relay unavailable (%s); retrying in %.1f s", exc, delay)
            if not started:
                task_status.started()
                started = True
            await trio.sleep(delay)
            backoff = min(backoff * 2, BACKOFF_MAX)
            continue
        backoff = BACKOFF_FIRST
        log.info("connected to relay %s as %s", relay, fingerprint(bytes(identity.verify_key)))
        try:
            link = PeerLink(identity, node.siblings, client, entropy=node.entropy)
            endpoint = SyncEndpoint(node, link, services=services)
            if idle_timeout is not None:
                endpoint.idle_timeout = idle_timeout
            if live is not None:
                live.endpoint = endpoint
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_serve, endpoint, nursery.cancel_scope)
                nursery.start_soon(_sync_loop, node, endpoint, interval, change_poll)
                if not started:
                    task_status.started()
                    started = True
        finally:
            if live is not None:
                live.endpoint = None
            await client.aclose()
        log.warning("lost the relay; reconnecting")


async def _serve(endpoint: SyncEndpoint, stop: trio.CancelScope | None) -> None:
    """Serve until the connection ends; then cancel ``stop`` (the daemon
    reconnects). A one-shot sync sees a lost connection in its session report."""
    try:
        await endpoint.serve()
    except RelayUnavailable as exc:
        log.log(logging.WARNING if stop else logging.INFO, "relay connection ended: %s", exc)
    if stop is not None:
        stop.cancel()


async def _sync_loop(
    node: Node, endpoint: SyncEndpoint, interval: float, change_poll: float
) -> None:
    """Open a session when the digest moved since the last good one, or on the timer."""
    synced_at: bytes | None = None
    next_timer = trio.current_time()
    while True:
        digest = (await trio.to_thread.run_sync(node.digest)).digest()
        now = trio.current_time()
        if digest != synced_at or now >= next_timer:
            siblings = await trio.to_thread.run_sync(node.siblings.all)
            # A sibling that does not answer is away: it syncs when it is
            # back, and asking again at once would only fill its mailbox with
            # Hellos (the timer, or a change here, tries again). The others
            # go on meanwhile: a round runs every sibling's session at once.
            reports = await sync_round(node, endpoint, siblings)
            ok = all(report.outcome is not SyncOutcome.FAILED for report in reports)
            if ok:
                # The digest the sessions started from, not the one after them:
                # a change committed meanwhile (by another process, say) may
                # have missed them, and gets a session of its own. Records
                # they brought in move the digest too, costing one more
                # session that ends at its Hello.
                synced_at = digest
            next_timer = trio.current_time() + interval
        await trio.sleep(change_poll)


async def run_until_signal(
    node: Node, relay: RelayAddress, *, interval: float, services: Sequence[PeerService] = ()
) -> None:
    """`run_peer` until SIGINT or SIGTERM, checkpointing the database from a
    task of its own (`checkpoint_in_background`)."""
    # Built first, so that bad [llm] settings stop `pixie run` with one clear
    # line before anything starts.
    distill = NotetakingService.for_node(node) if node.role == "device" else None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            # The WAL is checkpointed beside the work, never inside the commit
            # of a request waiting for its ack; deferred before any work starts.
            await nursery.start(checkpoint_in_background, node.db)
            nursery.start_soon(
                lambda: run_peer(
                    node,
                    relay,
                    interval=interval,
                    services=services,
                    distill=distill,
                    live=Live(node),
                )
            )
            async for signum in signals:
                log.info("stopping on %s", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


__all__ = ["run_peer", "run_until_signal", "sync_once"]
