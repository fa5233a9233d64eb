"""Benchmarks for sync: round trips and bytes on the wire, envelopes included.

Every sync message the two sessions exchange is carried the way the relay
carries it: ``syncwire.encode``, wrapped as ``peerwire.SyncData`` in a peer body
(``encode_body``) and sealed for the sibling with ``envelope.seal`` (padding
bucket included), then opened and decoded on the other side. "Bytes" below are
the sizes of those envelopes, summed per direction; round trips come from the
opener's ``SyncStats``. Figures and their targets:

* In sync, at 1k and 1M events: 1 round trip, <= 512 bytes each way. Measured
  twice per size: right after the pair is built (one origin in the marks) and
  again after both sides have written (two origins).
* 100 new events among 1M (on the opener, then on the responder): all bytes,
  both ways, <= 1.1 x the new events' encoded size + 4 KiB. "Encoded size" is
  what those events add to a syncwire ``Batch``:
  ``len(encode(Batch(.., Records(events=new)))) - len(encode(Batch(.., Records())))``,
  i.e. the msgpack of their fields with no message header and no envelope.
* One changed note among 10k clear notes (a distillation update on the
  opener, then a user edit on the responder): all bytes, both ways, <= that
  note's encoded size (measured the same way) + 2 KiB.
* Repair, twice. First between the two real 1M-event replicas: 1 or 100 new
  events (half on each side) written after each side's marks were frozen, so
  the stream sends nothing and only range reconciliation can find them; cells
  and items come from each data dir's item index, kept on every write
  (``itemindex.StoredItems``). Target: <= 0.5 s of wall time each. Then, as the
  baseline, two in-memory replicas of 1M items (random 17-byte event keys; each
  record a tiny event) with empty marks, whose index is sorted afresh from
  every item each round (``reconcile.SortedItems``), as every repair was before
  the stored index. Reported for both: round trips (all, and those spent in
  repair turns), repair rounds, bytes and time. Targets: 1 difference in <= 3
  round trips and <= 2 KB in all, 100 differences in <= 4 round trips and
  <= 40 KB (Negentropy reports about 3 round trips for 1 difference in 1M,
  ~300 B a message).
* In-sync time: p50 and p90 of ``--runs`` in-sync sessions (sealing and
  opening included); target p50 <= 10 ms at 1M events. Each new-events sync
  is timed too (target <= 50 ms at 1M).

How the replicas are built. The device replica (A) gets the sample life
(``samplelife.generate``) through ``MemoryLog.append`` in chunks. The Homebase
replica (B) starts empty and receives A's data once: through a real Loopback
sync up to 100k events (or with ``--seed-by-sync``), and above that through
``NodeReplica.apply``, the merge a sync runs, fed A's rows directly (skipping
only the codec and the session; a 1M-event initial sync takes minutes). Either
way B then holds A's events under A's origin and sequence, and the script
checks that the two digests and marks agree before measuring. The 10k notes
are written on A with ``upsert_many`` (in batches: one transaction each) and
reach B through a real Loopback sync. The 1M-event replicas are reused by all
the figures at that size. The repair figures need no database: they run in a
second process meanwhile (``--jobs 1`` runs everything in turn).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import repo_root  # noqa: F401 (tests.testkit is not installed)
from nacl.signing import SigningKey

from pixie.device.ingest.jsonl import event_from_object
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from pixie.device.store.plaindb import sqlite_uri
from pixie.device.store.provision import create_data_dir
from pixie.device.store.replica import NodeReplica
from pixie.protocol.digest import MODULUS, Fingerprint, event_item, item_hash
from pixie.protocol.envelope import open_envelope, seal
from pixie.protocol.identity import new_identity
from pixie.protocol.peerwire import SyncData, decode_body, encode_body
from pixie.protocol.reconcile import SortedItems
from pixie.protocol.sync import SyncSession
from pixie.protocol.syncmessages import Batch, ContactEntry, LogEvent, Marks, NoteVersion, Records
from pixie.protocol.syncwire import decode, encode
from tests.testkit.samplelife import generate

# Targets, from the issue.
IN_SYNC_ROUND_TRIPS = 1
IN_SYNC_BYTES = 512
NEW_EVENTS = 100
NEW_EVENTS_FACTOR = 1.1
NEW_EVENTS_SLACK = 4 * 1024
NOTE_SLACK = 2 * 1024
NEGENTROPY_ROUND_TRIPS = 3  # reported for 1 difference in 1M items
IN_SYNC_P50_MS = 10.0  # at 1M events
# Repair: differences -> (round trips, bytes in all), at most.
REPAIR_TARGETS = {1: (3, 2_048), 100: (4, 40_960)}
# Wall time of a repair through the stored index at 1M events, 1 or 100 differences.
REPAIR_SECONDS = 0.5
NEW_EVENTS_MS = 50.0  # 100 new events at 1M events

SEED_BY_SYNC_UP_TO = 100_000  # events; above this B is seeded through apply
APPEND_CHUNK = 50_000
APPLY_CHUNK = 5_000
NOTE_BATCH = 500
DAY_US = 86_400_000_000


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- the wire: two sessions back to back, every message sealed ------------------------


@dataclass
class Side:
    key: SigningKey = field(default_factory=new_identity)
    counter: int = 0
    messages: int = 0
    bytes: int = 0  # envelopes, as the relay carries them
    payload: int = 0  # the syncwire messages alone
    largest: int = 0

    @property
    def public(self) -> bytes:
        return bytes(self.key.verify_key)


@dataclass
class Exchange:
    """One sync session between two replicas, as the relay would have carried it."""

    opener: SyncSession
    responder: SyncSession
    a: Side = field(default_factory=Side)
    b: Side = field(default_factory=Side)
    trace: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def run(self, max_steps: int = 1_000_000) -> Exchange:
        t0 = time.perf_counter()
        self.opener.start()
        for _ in range(max_steps):
            moved = False
            for src, dst, me, peer, arrow in (
                (self.opener, self.responder, self.a, self.b, "->"),
                (self.responder, self.opener, self.b, self.a, "<-"),
            ):
                message = src.next_message()
                if message is None:
                    continue
                payload = encode(message)
                me.counter += 1
                envelope = seal(
                    me.key,
                    peer.public,
                    encode_body(SyncData(payload), me.counter),
                    now=time.monotonic(),
                )
                me.messages += 1
                me.bytes += len(envelope)
                me.payload += len(payload)
                me.largest = max(me.largest, len(envelope))
                self.trace.append(f"{arrow}{type(message).__name__}")
                body = decode_body(open_envelope(peer.key, envelope).body)
                assert isinstance(body.message, SyncData)
                dst.receive(decode(body.message.payload))
                moved = True
            if not moved:
                break
        else:
            raise RuntimeError("the sessions did not settle")
        self.seconds = time.perf_counter() - t0
        return self

    @property
    def ok(self) -> bool:
        return self.opener.phase.value == "done" and self.responder.phase.value == "done"

    def figures(self) -> dict[str, Any]:
        o, r = self.opener.stats, self.responder.stats
        # The opener counts a round trip for each answer it gets: the Hello
        # reply, the Check, then in repair every Repair turn and each round's
        # closing Check. All but the first two belong to repair; when the Hello
        # reply opened the repair (equal marks), all but the first.
        return {
            "ok": self.ok,
            "error": self.opener.error or self.responder.error,
            "round_trips": o.round_trips,
            "repair_round_trips": (
                max(0, o.round_trips - (1 if o.repair_at_hello else 2)) if o.repair_rounds else 0
            ),
            "repair_at_hello": o.repair_at_hello,
            "repair_rounds": o.repair_rounds,
            "in_sync_at_hello": o.in_sync_at_hello,
            "bytes_a_to_b": self.a.bytes,
            "bytes_b_to_a": self.b.bytes,
            "bytes_total": self.a.bytes + self.b.bytes,
            "payload_a_to_b": self.a.payload,
            "payload_b_to_a": self.b.payload,
            "messages_a_to_b": self.a.messages,
            "messages_b_to_a": self.b.messages,
            "largest_envelope": max(self.a.largest, self.b.largest),
            "records_a_to_b": o.records_sent,
            "records_b_to_a": r.records_sent,
            "seconds": self.seconds,
            "trace": compress(self.trace),
        }


def compress(trace: Sequence[str]) -> str:
    """``->Hello <-Hello ->Batch x3 ...``: the message order, runs folded."""
    out = []
    for name, run in itertools.groupby(trace):
        n = len(list(run))
        out.append(name if n == 1 else f"{name} x{n}")
    return " ".join(out)


def encoded_size(records: Records) -> int:
    """What ``records`` add to a syncwire Batch: their msgpack, no header, no envelope."""
    session = bytes(8)
    return len(encode(Batch(session, 0, True, records))) - len(
        encode(Batch(session, 0, True, Records()))
    )


# -- SQLite replicas ----------------------------------------------------------------------


def open_node(path: Path, name: str, role: str) -> Node:
    create_data_dir(path, name=name, role=role)
    return Node.open(path)


def replica(node: Node) -> NodeReplica:
    return NodeReplica(node.db, node.log, node.origin)


def sync(a: Node, b: Node) -> Exchange:
    return Exchange(
        SyncSession(replica(a), opener=True), SyncSession(replica(b), opener=False)
    ).run()


def append_all(node: Node, events: Iterable[NewEvent]) -> int:
    count = 0
    stream = iter(events)
    while chunk := list(itertools.islice(stream, APPEND_CHUNK)):
        node.log.append(chunk, now=chunk[-1].at)
        count += len(chunk)
    return count


def seed_by_apply(a: Node, b: Node) -> None:
    """Give B everything A holds through ``NodeReplica.apply``, A's rows read raw."""
    target = replica(b)
    con = sqlite3.connect(sqlite_uri(Path(a.db.path), "ro"), uri=True)
    try:
        aliases: dict[str, list[str]] = {}
        for cid, alias in con.execute(
            "SELECT contact_id, alias FROM contact_alias ORDER BY alias_key"
        ):
            aliases.setdefault(cid, []).append(alias)
        contacts = tuple(
            ContactEntry(cid, name, tuple(aliases.get(cid, ())))
            for cid, name in con.execute("SELECT id, name FROM contact ORDER BY id")
        )
        target.apply(Records(contacts=contacts), in_order=True)
        rows = con.execute(
            "SELECT id, origin, seq, kind, at, contact_id, thread, source, from_me, text "
            "FROM memory_event ORDER BY origin, seq"
        )
        while chunk := rows.fetchmany(APPLY_CHUNK):
            events = tuple(
                LogEvent(i, o, s, k, at, c, th, src, None if fm is None else bool(fm), text)
                for i, o, s, k, at, c, th, src, fm, text in chunk
            )
            target.apply(Records(events=events), in_order=True)
    finally:
        con.close()


def same_state(a: Node, b: Node) -> bool:
    ra, rb = replica(a), replica(b)
    return bool(ra.state() == rb.state() and ra.marks() == rb.marks())


def pending(source: Node, sink: Node) -> Records:
    """Exactly the records ``source`` will stream to ``sink`` (by the sink's marks)."""
    contacts: list[ContactEntry] = []
    events: list[LogEvent] = []
    notes: list[NoteVersion] = []
    for chunk in replica(source).missing(replica(sink).marks()):
        contacts += chunk.contacts
        events += chunk.events
        notes += chunk.notes
    return Records(tuple(contacts), tuple(events), tuple(notes))


# -- figures at one size of the memory log ------------------------------------------------


def in_sync_figure(x: Exchange) -> dict[str, Any]:
    f = x.figures()
    f["target_round_trips"] = IN_SYNC_ROUND_TRIPS
    f["target_bytes_each_way"] = IN_SYNC_BYTES
    f["met"] = (
        f["ok"]
        and f["round_trips"] == IN_SYNC_ROUND_TRIPS
        and max(f["bytes_a_to_b"], f["bytes_b_to_a"]) <= IN_SYNC_BYTES
    )
    return f


def delta_figure(x: Exchange, records: Records, factor: float, slack: int) -> dict[str, Any]:
    f = x.figures()
    size = encoded_size(records)
    f["records"] = len(records)
    f["encoded_size"] = size
    f["target_bytes_total"] = factor * size + slack
    f["met"] = f["ok"] and f["bytes_total"] <= f["target_bytes_total"]
    f["bytes_vs_encoded"] = f["bytes_total"] / size if size else None
    return f


# The two replicas, the new events (sample-life objects) each will write, how they were built.
Pair = tuple[Node, Node, list[Any], list[Any], dict[str, Any]]


def build_pair(where: Path, tag: str, events: int, seed: int, seed_by_sync: bool) -> Pair:
    """A device replica of ``events`` sample-life events, a Homebase replica
    seeded from it, and the new events each side will write."""
    # One life, long enough for the replica and both sides' new events.
    stream = generate(seed=seed, events=events + 2 * NEW_EVENTS)
    log(f"[{events:,} events] building the device replica ...")
    t0 = time.perf_counter()
    a = open_node(where / f"{tag}-device", "phone", "device")
    b = open_node(where / f"{tag}-homebase", "mac", "homebase")
    # As validated `NewEvent`s, the way ``pixie log import`` reads the sample life.
    append_all(a, map(event_from_object, itertools.islice(stream, events)))
    new_on_a = list(itertools.islice(stream, NEW_EVENTS))
    new_on_b = list(itertools.islice(stream, NEW_EVENTS))
    t_build = time.perf_counter() - t0
    by_sync = seed_by_sync or events <= SEED_BY_SYNC_UP_TO
    log(f"  built in {t_build:.0f} s; seeding the Homebase replica ...")
    t0 = time.perf_counter()
    initial: dict[str, Any] | None = None
    if by_sync:
        initial = sync(a, b).figures()
        initial.pop("trace")
    else:
        seed_by_apply(a, b)
    t_seed = time.perf_counter() - t0
    if not same_state(a, b):
        raise AssertionError("the seeded replica does not match the device replica")
    built = {
        "build_s": t_build,
        "seeded_by": "sync" if by_sync else "apply",
        "seed_s": t_seed,
        "initial_sync": initial,
    }
    log(f"  seeded in {t_seed:.0f} s")
    return a, b, new_on_a, new_on_b, built


def cached_pair(
    where: Path, cache: Path | None, events: int, seed: int, seed_by_sync: bool
) -> Pair:
    """`build_pair`, or, with a cache, a copy of the pair an earlier run built there."""
    tag = f"log-{events}"
    if cache is None:
        return build_pair(where, tag, events, seed, seed_by_sync)
    kept = cache / f"{tag}-seed{seed}"
    if not (kept / "built.json").exists():
        if kept.exists():
            shutil.rmtree(kept)
        kept.mkdir(parents=True)
        a, b, new_on_a, new_on_b, built = build_pair(kept, tag, events, seed, seed_by_sync)
        a.close()
        b.close()
        (kept / "built.json").write_text(json.dumps([new_on_a, new_on_b, built]))
    log(f"[{events:,} events] copying the replicas kept in {kept} ...")
    for side in ("device", "homebase"):
        shutil.copytree(kept / f"{tag}-{side}", where / f"{tag}-{side}")
    new_on_a, new_on_b, built = json.loads((kept / "built.json").read_text())
    a, b = Node.open(where / f"{tag}-device"), Node.open(where / f"{tag}-homebase")
    return a, b, new_on_a, new_on_b, built


def timed_in_sync(a: Node, b: Node, runs: int) -> dict[str, Any]:
    """The in-sync session, ``runs`` times: wall time per session (sealing included)."""
    seconds = []
    for _ in range(runs):
        x = sync(a, b)
        assert x.ok and x.opener.stats.in_sync_at_hello, x.figures()
        seconds.append(x.seconds)
    seconds.sort()
    return {
        "runs": runs,
        "p50_ms": 1e3 * seconds[len(seconds) // 2],
        "p90_ms": 1e3 * seconds[min(len(seconds) - 1, (len(seconds) * 9) // 10)],
    }


def bench_log(
    where: Path,
    events: int,
    seed: int,
    seed_by_sync: bool,
    cache: Path | None,
    runs: int,
    differences: Sequence[int] = (),
    repair_trials: int = 3,
) -> dict[str, Any]:
    a, b, objects_a, objects_b, built = cached_pair(where, cache, events, seed, seed_by_sync)
    new_on_a = [event_from_object(o) for o in objects_a]
    new_on_b = [event_from_object(o) for o in objects_b]
    out: dict[str, Any] = {"events": events, **built, "db_mb": a.db.path.stat().st_size / 1e6}
    log(f"[{events:,} events] measuring ...")
    out["in_sync_one_origin"] = in_sync_figure(sync(a, b))
    out["in_sync_time"] = timed_in_sync(a, b, runs)

    a.log.append(new_on_a, now=new_on_a[-1].at)
    records = pending(a, b)
    assert len(records.events) == NEW_EVENTS and not records.notes, len(records)
    out["new_on_opener"] = delta_figure(sync(a, b), records, NEW_EVENTS_FACTOR, NEW_EVENTS_SLACK)

    b.log.append(new_on_b, now=new_on_b[-1].at)
    records = pending(b, a)
    assert len(records.events) == NEW_EVENTS and not records.notes, len(records)
    out["new_on_responder"] = delta_figure(sync(a, b), records, NEW_EVENTS_FACTOR, NEW_EVENTS_SLACK)
    out["converged"] = same_state(a, b)
    out["in_sync_two_origins"] = in_sync_figure(sync(a, b))
    out["in_sync_time_two_origins"] = timed_in_sync(a, b, runs)
    out["repair"] = {
        str(d): [stored_repair(a, b, d, trial) for trial in range(repair_trials)]
        for d in differences
    }
    a.close()
    b.close()
    return out


class FrozenMarks(NodeReplica):
    """A replica whose marks stay as they were before its latest writes: the
    stream sends nothing, so only reconciliation can find those writes."""

    def __init__(self, node: Node, marks: Marks) -> None:
        super().__init__(node.db, node.log, node.origin)
        self.frozen = marks

    def marks(self) -> Marks:
        return self.frozen


def stored_repair(a: Node, b: Node, differences: int, trial: int = 0) -> dict[str, Any]:
    """Repair of ``differences`` new events (half on each side, the odd one on
    the opener) hidden from the marks, between the two real replicas: the
    cells and items come from each data dir's item index, kept on write."""
    log(f"  repair of {differences} difference(s) through the stored index ...")
    frozen_a, frozen_b = replica(a).marks(), replica(b).marks()
    at = 1_900_000_000_000_000 + 1_000_000 * (1_000 * trial + differences)
    for node, count, side in ((a, (differences + 1) // 2, "a"), (b, differences // 2, "b")):
        if count:
            node.log.append(
                [
                    NewEvent(EventKind.JOURNAL, at + i, f"repair {differences}/{trial} {side} {i}")
                    for i in range(count)
                ],
                now=at + count,
            )
    x = Exchange(
        SyncSession(FrozenMarks(a, frozen_a), opener=True),
        SyncSession(FrozenMarks(b, frozen_b), opener=False),
    ).run()
    f = x.figures()
    f["differences"] = differences
    f["converged"] = same_state(a, b)
    return f


# -- one changed note among many ----------------------------------------------------------


def note_bodies(seed: int) -> Iterator[tuple[str, str | None]]:
    """Note bodies of 200-800 characters made of sample-life texts, with the contact."""
    rng = Random(seed)
    texts = generate(seed=seed, events=1_000_000)  # lazily: only what is used is made
    while True:
        target = rng.randint(200, 800)
        parts: list[str] = []
        contact = None
        for event in texts:
            parts.append(event["text"])
            contact = contact or event.get("contact")
            if sum(len(p) + 1 for p in parts) >= target:
                break
        body = " ".join(parts)
        yield body[: body.rfind(" ", 0, 800)] if len(body) > 800 else body, contact


def body_bytes(records: Records) -> int:
    return sum(len(n.clear.body.encode()) for n in records.notes if n.clear is not None)


def bench_notes(where: Path, notes: int, seed: int) -> dict[str, Any]:
    log(f"[{notes:,} notes] building the device replica through upsert_many ...")
    a = open_node(where / "notes-device", "phone", "device")
    b = open_node(where / "notes-homebase", "mac", "homebase")
    rng = Random(seed)
    bodies = note_bodies(seed)
    t0 = time.perf_counter()
    contact_ids: dict[str, str] = {}
    kinds = (NoteKind.CONVERSATION_DIGEST, NoteKind.POST_DIGEST, NoteKind.CALL_DIGEST)
    for start in range(0, notes, NOTE_BATCH):
        batch = []
        for i in range(start, min(notes, start + NOTE_BATCH)):
            body, contact = next(bodies)
            cid = None
            if contact is not None:
                if contact not in contact_ids:
                    contact_ids[contact], _ = a.contacts.add(contact, [], now=0)
                cid = contact_ids[contact]
            kind = kinds[i % 3]
            key = f"{kind.value}:{i}"
            title = f"{(contact or 'Me').split()[0]}: {' '.join(body.split()[:6])}"
            batch.append(
                Distilled(
                    kind,
                    key,
                    title[:120],
                    body,
                    cid,
                    tuple(rng.sample(("family", "work", "travel", "health", "music"), 2)),
                    source_ref=key,
                    about_date=1_700_000_000_000_000 + i * DAY_US // 10,
                )
            )
        a.notebook.upsert_many(batch)
    t_build = time.perf_counter() - t0
    assert a.notebook.counts()["clear"] == notes, a.notebook.counts()
    log(f"  built in {t_build:.0f} s; seeding the Homebase replica through a sync ...")
    initial = sync(a, b).figures()
    initial.pop("trace")
    if not same_state(a, b):
        raise AssertionError("the first sync did not converge")
    out: dict[str, Any] = {
        "notes": notes,
        "build_s": t_build,
        "initial_sync": initial,
        "db_mb": a.db.path.stat().st_size / 1e6,
    }
    out["in_sync"] = in_sync_figure(sync(a, b))

    # A distillation rewrites one note on the device (the opener).
    body, contact = next(bodies)
    changed = a.notebook.upsert_clear(
        Distilled(
            kinds[1],
            f"{kinds[1].value}:1",
            "Rewritten by a later distillation",
            body,
            contact_ids.get(contact or ""),
            ("work",),
            source_ref=f"{kinds[1].value}:1",
        )
    )
    assert changed.outcome.value == "updated", changed
    records = pending(a, b)
    assert len(records.notes) == 1 and not records.events, len(records)
    out["changed_on_opener"] = delta_figure(sync(a, b), records, 1.0, NOTE_SLACK)
    out["changed_on_opener"]["body_bytes"] = body_bytes(records)

    # The user edits another note on the Homebase (the responder).
    target = a.notebook.clear_notes(kinds[2])[0].id
    assert b.notebook.edit(target, body=next(bodies)[0], tags=("family",))
    records = pending(b, a)
    assert len(records.notes) == 1 and not records.events, len(records)
    out["changed_on_responder"] = delta_figure(sync(a, b), records, 1.0, NOTE_SLACK)
    out["changed_on_responder"]["body_bytes"] = body_bytes(records)
    out["converged"] = same_state(a, b)
    a.close()
    b.close()
    return out


# -- repair: range reconciliation over 1M items -------------------------------------------

_ORIGIN = "0" * 32


def _event_for(key: bytes) -> LogEvent:
    return LogEvent(
        str(uuid.UUID(bytes=key[1:])), _ORIGIN, 1, "message", 0, None, None, None, None, "x"
    )


class MemoryReplica:
    """A `Replica` in memory: events named by random ids, tiny records, no marks.

    Marks are empty on both sides, so the ordinary stream sends nothing and the
    digests can only be brought together by repair.
    """

    def __init__(self, base: Mapping[bytes, int], base_total: int, extra: Iterable[bytes]) -> None:
        self.held = dict(base)
        self.total = base_total
        for key in extra:
            self._add(key)

    def _add(self, key: bytes) -> bool:
        if key in self.held:
            return False
        h = item_hash(key)  # an event's item is its key: b"E" + the id
        self.held[key] = h
        self.total += h
        return True

    def state(self) -> tuple[bytes, int]:
        fp = Fingerprint(self.total % MODULUS, len(self.held))
        return fp.digest(), fp.count

    def marks(self) -> Marks:
        return Marks()

    def missing(self, peer: Marks) -> Iterator[Records]:
        return iter(())

    def apply(self, records: Records, *, in_order: bool) -> int:
        return sum(self._add(event_item(e.id)[:17]) for e in records.events)

    def item_index(self) -> SortedItems:
        # Sorted afresh each round, from every item: what a store without a
        # kept index pays (the baseline of the stored repair figures).
        return SortedItems(self.held.items())

    def records_for(self, keys: Sequence[bytes]) -> Iterator[Records]:
        held = [k for k in keys if k in self.held]
        for i in range(0, len(held), APPLY_CHUNK):
            yield Records(events=tuple(_event_for(k) for k in held[i : i + APPLY_CHUNK]))


def random_keys(rng: Random, count: int) -> list[bytes]:
    return [b"E" + rng.randbytes(16) for _ in range(count)]


def bench_repair(items: int, differences: Sequence[int], seed: int) -> dict[str, Any]:
    log(f"[repair] {items:,} items in memory ...")
    rng = Random(seed)
    base = {key: item_hash(key) for key in random_keys(rng, items)}
    total = sum(base.values())
    out: dict[str, Any] = {"items": items}
    for d in differences:
        # Half the differences on each side (the odd one on the opener).
        only_a = random_keys(rng, (d + 1) // 2)
        only_b = random_keys(rng, d // 2)
        a, b = MemoryReplica(base, total, only_a), MemoryReplica(base, total, only_b)
        log(f"  {d} difference(s) ...")
        x = Exchange(SyncSession(a, opener=True), SyncSession(b, opener=False)).run()
        f = x.figures()
        f["differences"] = d
        f["converged"] = a.state() == b.state()
        out[str(d)] = f
    return out


# -- the report ----------------------------------------------------------------------------


def verdict(met: bool) -> str:
    return "ok" if met else "MISSED"


def _failed(f: Mapping[str, Any]) -> str:
    return "" if f["ok"] else f"  [session FAILED: {f['error']}]"


def report_in_sync(what: str, f: Mapping[str, Any]) -> str:
    each = max(f["bytes_a_to_b"], f["bytes_b_to_a"])
    return (
        f"  in sync ({what}): {f['round_trips']} round trip(s) "
        f"(target {IN_SYNC_ROUND_TRIPS}), {f['bytes_a_to_b']} B -> / {f['bytes_b_to_a']} B <- "
        f"(target <= {IN_SYNC_BYTES} B each way; max {each} B): {verdict(f['met'])}" + _failed(f)
    )


def report_time(what: str, t: Mapping[str, Any]) -> str:
    return (
        f"  in sync ({what}), {t['runs']} sessions: p50 {t['p50_ms']:.2f} ms, "
        f"p90 {t['p90_ms']:.2f} ms (target p50 <= {IN_SYNC_P50_MS:g} ms at 1M: "
        f"{verdict(t['p50_ms'] <= IN_SYNC_P50_MS)})"
    )


def report_delta(what: str, f: Mapping[str, Any], formula: str) -> str:
    body = f" (body {f['body_bytes']:,} B)" if "body_bytes" in f else ""
    return (
        f"  {what}: {f['round_trips']} round trips, {f['bytes_a_to_b']:,} B -> / "
        f"{f['bytes_b_to_a']:,} B <-, total {f['bytes_total']:,} B "
        f"({f['messages_a_to_b']}+{f['messages_b_to_a']} envelopes); encoded size "
        f"{f['encoded_size']:,} B{body} -> {f['bytes_vs_encoded']:.2f}x; target <= {formula} = "
        f"{f['target_bytes_total']:,.0f} B: {verdict(f['met'])}; {1e3 * f['seconds']:.1f} ms"
        + _failed(f)
    )


def report_log(r: Mapping[str, Any]) -> Iterator[str]:
    seeded = f"seeded through {r['seeded_by']} in {r['seed_s']:.0f} s"
    if r["initial_sync"] is not None:
        i = r["initial_sync"]
        seeded += (
            f": {i['round_trips']} round trips, {i['bytes_a_to_b'] / 1e6:.1f} MB in "
            f"{i['messages_a_to_b']} envelopes"
        )
    yield (
        f"sync at {r['events']:,} events ({r['db_mb']:.0f} MB database, built in "
        f"{r['build_s']:.0f} s; Homebase replica {seeded}):"
    )
    yield report_in_sync("one origin", r["in_sync_one_origin"])
    yield report_time("one origin", r["in_sync_time"])
    slack = f"{NEW_EVENTS_FACTOR} x encoded + {NEW_EVENTS_SLACK:,}"
    for side in ("opener", "responder"):
        f = r[f"new_on_{side}"]
        yield report_delta(f"{NEW_EVENTS} new events on the {side}", f, slack)
        yield (
            f"    took {1e3 * f['seconds']:.1f} ms (target <= {NEW_EVENTS_MS:g} ms at 1M: "
            f"{verdict(1e3 * f['seconds'] <= NEW_EVENTS_MS)})"
        )
    yield report_in_sync("two origins", r["in_sync_two_origins"])
    yield report_time("two origins", r["in_sync_time_two_origins"])
    if not r["converged"]:
        yield "  the replicas did NOT converge"
    if r.get("repair"):
        yield (
            "  repair through the stored item index (new events hidden from the marks, "
            f"half on each side; target <= {REPAIR_SECONDS:g} s at 1M):"
        )
        for trials in r["repair"].values():
            for f in trials:
                yield from _repair_lines(f)
                yield (
                    f"       took {f['seconds']:.3f} s: "
                    f"{verdict(f['seconds'] <= REPAIR_SECONDS and f['converged'])}"
                )


def report_notes(r: Mapping[str, Any]) -> Iterator[str]:
    i = r["initial_sync"]
    yield (
        f"sync at {r['notes']:,} clear notes ({r['db_mb']:.0f} MB database, built through "
        f"upsert_many in {r['build_s']:.0f} s; first sync {i['bytes_a_to_b'] / 1e6:.1f} MB in "
        f"{i['messages_a_to_b']} envelopes, {i['seconds']:.1f} s):"
    )
    yield report_in_sync("notes", r["in_sync"])
    slack = f"note + {NOTE_SLACK:,}"
    yield report_delta("1 note rewritten on the opener", r["changed_on_opener"], slack)
    yield report_delta("1 note user-edited on the responder", r["changed_on_responder"], slack)
    if not r["converged"]:
        yield "  the replicas did NOT converge"


def report_repair(r: Mapping[str, Any]) -> Iterator[str]:
    yield (
        f"repair baseline (range reconciliation, in-memory replicas of {r['items']:,} items "
        "sorted afresh each round, empty marks; Negentropy: about "
        f"{NEGENTROPY_ROUND_TRIPS} round trips for 1 difference):"
    )
    for key, f in r.items():
        if key != "items":
            yield from _repair_lines(f)


def _repair_lines(f: Mapping[str, Any]) -> Iterator[str]:
    yield (
        f"  {f['differences']:>4} difference(s): {f['round_trips']} round trips, "
        f"{f['repair_round_trips']} of them in repair ({f['repair_rounds']} repair "
        f"round(s)); {f['bytes_a_to_b']:,} B -> / {f['bytes_b_to_a']:,} B <- "
        f"({f['messages_a_to_b']}+{f['messages_b_to_a']} envelopes, largest "
        f"{f['largest_envelope']:,} B); {f['seconds']:.3f} s; "
        f"{'converged' if f['converged'] and f['ok'] else 'did NOT converge'}" + _failed(f)
    )
    target = REPAIR_TARGETS.get(f["differences"])
    if target is not None:
        met = f["round_trips"] <= target[0] and f["bytes_total"] <= target[1]
        yield (
            f"       target <= {target[0]} round trips and <= {target[1]:,} B in all "
            f"({f['bytes_total']:,} B): {verdict(met)}"
        )
    yield f"       {f['trace']}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--repair-items", type=int, default=1_000_000)
    parser.add_argument("--differences", type=int, nargs="+", default=[1, 100])
    parser.add_argument(
        "--repair-trials",
        type=int,
        default=3,
        help="repairs through the stored index per number of differences (each on new events)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--seed-by-sync",
        action="store_true",
        help="seed every Homebase replica through a real sync (slow at 1M events)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temporary directory)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="keep the built event-log replicas here and reuse them in later runs "
        "(each run measures on a copy)",
    )
    parser.add_argument(
        "--runs", type=int, default=21, help="in-sync sessions timed per size (p50, p90)"
    )
    parser.add_argument("--skip-notes", action="store_true", help="leave out the notes figures")
    parser.add_argument(
        "--jobs",
        type=int,
        choices=(1, 2),
        default=2,
        help="2: run the in-memory repair figures in a second process meanwhile",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.events) or args.notes < 10 or args.repair_items < 100:
        parser.error("--events must be >= 1, --notes >= 10 and --repair-items >= 100")
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    results: dict[str, Any] = {}
    repair_args = (args.repair_items, args.differences, args.seed)
    pool = ProcessPoolExecutor(max_workers=1) if args.jobs > 1 else None
    repair = pool.submit(bench_repair, *repair_args) if pool is not None else None
    with tempfile.TemporaryDirectory(prefix="pixie-bench-sync-", dir=args.dir) as tmpname:
        tmp = Path(tmpname)
        # Key files go to the temporary directory, never to the user's keychain.
        os.environ["PIXIE_KEYSTORE"] = "file"
        keys = (args.cache or tmp) / "keys"
        os.environ["PIXIE_KEYS"] = str(keys.resolve())
        results["where"] = str(tmp)
        for n in args.events:
            r = bench_log(
                tmp,
                n,
                args.seed,
                args.seed_by_sync,
                args.cache,
                args.runs,
                args.differences,
                args.repair_trials,
            )
            results[f"log_{n}"] = r
            if not args.json:
                print("\n".join(report_log(r)), flush=True)
        if not args.skip_notes:
            r = bench_notes(tmp, args.notes, args.seed)
            results[f"notes_{args.notes}"] = r
            if not args.json:
                print("\n".join(report_notes(r)), flush=True)
    if repair is not None and pool is not None:
        r = repair.result()
        pool.shutdown()
    else:
        r = bench_repair(*repair_args)
    results["repair"] = r
    if not args.json:
        print("\n".join(report_repair(r)), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
