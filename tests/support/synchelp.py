"""Helpers shared by the sync tests: two replicas, a loopback, and state dumps."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.contactbook import put_detail_in
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.provision import create_data_dir
from pixie.device.store.replica import NodeReplica
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync import membership
from pixie.protocol.sync import Loopback, SyncSession

RELAY = "127.0.0.1:1"


def open_pair(tmp: Path) -> tuple[Node, Node]:
    create_data_dir(tmp / "device", name="phone", role="device")
    create_data_dir(tmp / "homebase", name="mac", role="homebase")
    return Node.open(tmp / "device"), Node.open(tmp / "homebase")


@contextmanager
def paired_siblings(tmp: Path) -> Iterator[tuple[Node, Node]]:
    """`open_pair`, each node holding the other as a sibling; both closed at the end."""
    phone, mac = open_pair(tmp)
    for node, other, role in ((phone, mac, "homebase"), (mac, phone, "device")):
        node.siblings.add(SiblingInfo(other.public_key(), role, role, RELAY, 0))
    try:
        yield phone, mac
    finally:
        phone.close()
        mac.close()


def open_laptop(tmp: Path) -> Node:
    """A third peer's data dir (a device named laptop), not yet paired."""
    create_data_dir(tmp / "laptop", name="laptop", role="device")
    return Node.open(tmp / "laptop")


def pair_in_account(inviter: Node, joiner: Node) -> None:
    """What pairing stores on each side, and the inviter's membership record of it."""
    joiner.siblings.add(SiblingInfo(inviter.public_key(), inviter.name, inviter.role, RELAY, 1))
    info = SiblingInfo(joiner.public_key(), joiner.name, joiner.role, RELAY, 1)
    inviter.siblings.add(info)
    membership.welcome(inviter, info)


def sync_in_account(a: Node, b: Node) -> None:
    """`sync`, then each side's sibling book brought in step, as the driver does."""
    sync(a, b)
    membership.reconcile(a)
    membership.reconcile(b)


def replica(node: Node) -> NodeReplica:
    return NodeReplica(node.db, node.log, node.origin)


def sync(a: Node, b: Node) -> tuple[Loopback, SyncSession, SyncSession]:
    opener = SyncSession(replica(a), opener=True)
    responder = SyncSession(replica(b), opener=False)
    loop = Loopback(opener, responder)
    loop.run()
    return loop, opener, responder


def say(
    node: Node, text: str, contact: str = "Ada Lovelace", at: int = 1_700_000_000_000_000
) -> None:
    node.log.append([NewEvent(EventKind.MESSAGE, at, text, contact=contact, thread="t1")], now=at)


def dump(node: Node) -> dict[str, object]:
    """Everything that converges, in a comparable form (no local row numbers)."""
    con = sqlite3.connect(node.db.path)
    try:
        events = con.execute(
            "SELECT id, origin, seq, kind, at, contact_id, thread, source, from_me, text "
            "FROM memory_event ORDER BY id"
        ).fetchall()
        notes = con.execute(
            "SELECT id, zone, updated_at, content_hash, deleted, user_edited, kind, identity_key, "
            "title, body, contact_id, tags, source_ref, about_date, created_at, nonce, ciphertext "
            "FROM note ORDER BY id"
        ).fetchall()
        contacts = con.execute("SELECT id, name, name_key FROM contact ORDER BY id").fetchall()
        aliases = con.execute(
            "SELECT alias_key, contact_id, alias FROM contact_alias ORDER BY alias_key"
        ).fetchall()
        details = con.execute(
            "SELECT contact_id, field, value, at FROM contact_detail ORDER BY contact_id, field"
        ).fetchall()
    finally:
        con.close()
    return {
        "events": events,
        "notes": notes,
        "contacts": contacts,
        "aliases": aliases,
        "details": details,
    }


def write_every_kind(node: Node) -> None:
    """Events, clear notes changed and deleted, a sealed note, contacts with
    an alias and a detail: every kind of item the digest sums."""
    for i in range(40):
        say(node, f"message {i}", contact="Grace Hopper")
    cid = node.contacts.add("Ada Lovelace", ["Ada"], now=0)[0]
    note_id = node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, cid, "Ada", "Runs marathons.", cid, ("sport",))
    ).note_id
    node.notebook.edit(note_id, body="the user's words")
    gone = node.notebook.add_user_note(NoteKind.GUIDANCE, "Be brief", "Short answers please.")
    node.notebook.delete(gone)
    node.notebook.record_sealed(SealedKind.HUDDLE_TAKEAWAY, title="t", body="sealed body")
    with node.db.writing() as session:
        assert put_detail_in(session, cid, "org", "Analytical Engines", 1)
    with node.db.writing() as session:
        assert put_detail_in(session, cid, "org", "Difference Engines", 2)  # a replaced item
