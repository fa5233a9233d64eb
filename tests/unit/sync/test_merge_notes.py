"""The replica's merge of note versions, case by case: where a body comes
from when a version arrives without one, what a newer version does to a note
parked with a holder, and several versions of one note in a batch. Each case
ends with the maintained digest equal to the one rebuilt from the rows."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pixie.device.node.keyed import Node
from pixie.device.store.db import peek
from pixie.device.store.notes import content_hash
from pixie.protocol.hlc import Stamp
from pixie.protocol.syncmessages import ClearFields, NoteVersion, Records
from tests.support.synchelp import open_pair, replica

HOLDER = "ab" * 32
NOTE = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
NOW_MS = time.time_ns() // 1_000_000 - 3_600_000  # an hour ago: never from the future


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    phone, mac = open_pair(tmp_path)
    mac.close()
    try:
        yield phone
    finally:
        phone.close()


def version(body: str, *, at: int = 0, send_body: bool = True, note_id: str = NOTE) -> NoteVersion:
    """A clear note from another replica, stamped ``at`` ms after NOW_MS; with
    ``send_body`` False it comes as a sender whose body is parked sends it."""
    clear = ClearFields(
        "guidance",
        None,
        "Running",
        body if send_body else None,
        None,
        ("health",),
        None,
        None,
        1_700_000_000_000_000,
    )
    stamp = Stamp(NOW_MS + at, 0, "a1b2").encode()
    return NoteVersion(note_id, stamp, content_hash(body), False, False, clear=clear)


def merge(node: Node, *versions: NoteVersion) -> int:
    return replica(node).apply(Records(notes=versions), in_order=True)


def row(node: Node, note_id: str = NOTE) -> tuple[object, ...] | None:
    found = peek(
        node.db,
        "SELECT updated_at, content_hash, body, holder, tags FROM note WHERE id = ?",
        (note_id,),
    )
    return found[0] if found else None


def releases(node: Node) -> list[tuple[object, ...]]:
    return peek(node.db, "SELECT note_id, content_hash, holder FROM pending_release")


def park(node: Node, note_id: str = NOTE) -> None:
    """Clear the body as an offload does once its holder has acked."""
    conn = sqlite3.connect(node.db.path)
    with conn:
        conn.execute("UPDATE note SET body = NULL, holder = ? WHERE id = ?", (HOLDER, note_id))
    conn.close()


def test_a_newer_version_without_its_body_leaves_a_parked_note_parked(node: Node) -> None:
    first = version("Ada wants to run again")
    assert merge(node, first) == 1
    park(node)
    newer = version("Ada wants to run again", at=5, send_body=False)  # same hash, later stamp

    assert merge(node, newer) == 1
    assert row(node) == (newer.stamp, first.content_hash, None, HOLDER, '["health"]')
    assert releases(node) == []  # the holding is still the note's only body
    assert node.digest() == node.recompute_digest()


def test_a_newer_version_with_a_body_makes_a_parked_note_resident_and_releases_it(
    node: Node,
) -> None:
    first = version("Ada wants to run again")
    merge(node, first)
    park(node)
    newer = version("Ada runs on Tuesdays now", at=5)

    assert merge(node, newer) == 1
    assert row(node) == (
        newer.stamp,
        newer.content_hash,
        "Ada runs on Tuesdays now",
        None,
        '["health"]',
    )
    assert releases(node) == [(NOTE, first.content_hash, HOLDER)]
    assert node.digest() == node.recompute_digest()


def test_a_version_whose_body_is_nowhere_here_is_not_applied(node: Node) -> None:
    before = node.digest()
    lost = version("only the sender's holder has this", send_body=False)

    assert merge(node, lost) == 0
    assert row(node) is None
    assert node.digest() == before == node.recompute_digest()


def test_of_several_versions_of_one_note_in_a_batch_the_newest_stands(node: Node) -> None:
    old, newest, middle = (
        version("first draft"),
        version("third draft", at=20),
        version("second draft", at=10),
    )

    assert merge(node, old, newest, middle) == 2  # the middle one is older than what is held
    assert row(node) == (newest.stamp, newest.content_hash, "third draft", None, '["health"]')
    assert node.digest() == node.recompute_digest()
    # And again: nothing is newer, so nothing changes.
    assert merge(node, old, middle, newest) == 0
    assert node.digest() == node.recompute_digest()
