"""Sync through a real relay, in one process: the trio driver end to end.

The relay sits behind the recording proxy of `test_wire_e2e`; afterwards the
recorded bytes are scanned for canaries planted in every kind of record.
"""

from __future__ import annotations

from pathlib import Path

import trio

from pixie.device.daemon import run_peer, sync_once
from pixie.device.memlog import EventKind, NewEvent
from pixie.device.notebook import Distilled
from pixie.device.notes import NoteKind, SealedKind
from pixie.device.relayclient import RelayAddress
from pixie.device.syncdriver import last_syncs

from .synchelp import dump
from .test_wire_e2e import Recorder, make_node, pair_up, wire  # noqa: F401 - the fixture


async def test_sync_through_the_relay_carries_only_ciphertext(
    tmp_path: Path,
    wire: tuple[RelayAddress, Recorder],
    nursery: trio.Nursery,  # noqa: F811
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
