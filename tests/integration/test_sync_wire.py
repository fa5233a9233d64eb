"""Sync through a real relay, in one process: the trio driver end to end.

The relay sits behind the recording proxy of `test_wire_e2e`; afterwards the
recorded bytes are scanned for canaries planted in every kind of record.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import trio

from pixie.device.app.daemon import run_peer, sync_once
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.driver import last_syncs
from pixie.device.sync.relayclient import RelayAddress
from pixie.relay.server import RelayConfig, serve_relay
from tests.support.synchelp import dump
from tests.support.wire import Recorder, make_node, pair_up


async def test_sync_through_the_relay_carries_only_ciphertext(
    tmp_path: Path,
    wire: tuple[RelayAddress, Recorder],
    nursery: trio.Nursery,
) -> None:
    relay, rec = wire
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    await pair_up(phone, mac, relay)
    start = len(rec.seen)
    events = [
        NewEvent(EventKind.MESSAGE, 10 + i, f"CANARYtext {i} about Lyon", contact="CANARYada")
        for i in range(500)
    ]
    phone.log.append(events, now=0)
    mac.log.append([NewEvent(EventKind.JOURNAL, 5, "CANARYjournal on the mac")], now=0)
    cid = phone.contacts.add("CANARYgrace", ["CANARYalias"], now=0)[0]
    phone.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, cid, "CANARYtitle", "CANARYbody " * 50, cid, ("canarytag",))
    )
    mac.notebook.add_user_note(NoteKind.GUIDANCE, "CANARYguide", "CANARYbrief answers")
    phone.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="CANARYsealed", body="CANARYsb")

    await nursery.start(lambda task_status: run_peer(mac, relay, task_status=task_status))
    with trio.fail_after(30):
        (report,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=10)
    assert report.outcome == "synced", report.error
    assert report.repair_rounds == 0
    assert phone.digest() == mac.digest() == mac.recompute_digest()
    assert dump(phone) == dump(mac)

    with trio.fail_after(30):
        (again,) = await sync_once(phone, relay, phone.siblings.all(), idle_timeout=10)
    assert again.outcome == "in_sync" and again.round_trips == 1
    assert again.bytes_sent <= 512 and again.bytes_received <= 512
    assert last_syncs(phone)[again.sibling]["outcome"] == "in_sync"  # type: ignore[index]

    wire_bytes = bytes(rec.seen[start:])
    assert len(wire_bytes) > 50_000  # the recorder saw the sync traffic
    for canary in [b"CANARY", b"canarytag", b"Lyon", phone.origin.encode(), mac.origin.encode()]:
        assert canary not in wire_bytes, canary


async def _until_equal(a: Node, b: Node, seconds: float) -> None:
    with trio.fail_after(seconds):  # a deadline on an observable condition
        while a.digest() != b.digest():
            await trio.sleep(0.05)


async def test_run_syncs_on_change_and_reconnects_after_the_relay_restarts(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    # a port nobody listens on yet: both daemons start while the relay is down
    probe = trio.socket.socket()
    await probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    relay = RelayAddress("127.0.0.1", port)
    phone = make_node(tmp_path, "phone", "device")
    mac = make_node(tmp_path, "mac", "homebase")
    phone.siblings.add(SiblingInfo(mac.public_key(), "mac", "homebase", str(relay), 0))
    mac.siblings.add(SiblingInfo(phone.public_key(), "phone", "device", str(relay), 0))
    for node in (phone, mac):
        nursery.start_soon(partial(run_peer, node, relay, interval=3600, change_poll=0.05))
    relay_scope = trio.CancelScope()

    async def serve_relay_until_cancelled() -> None:
        with relay_scope:
            await serve_relay(RelayConfig(port=port))

    nursery.start_soon(serve_relay_until_cancelled)
    phone.log.append([NewEvent(EventKind.MESSAGE, 1, "written while apart", contact="Ada")], now=0)
    await _until_equal(phone, mac, 30)  # connected after backoff, synced on the change
    assert mac.log.count() == 1

    relay_scope.cancel()  # the relay goes away ...
    mac.notebook.add_user_note(NoteKind.GUIDANCE, "Be brief", "Short answers.")
    nursery.start_soon(serve_relay, RelayConfig(port=port))  # ... and comes back
    await _until_equal(phone, mac, 30)
    assert dump(phone) == dump(mac)
