"""Contact details between two replicas: they travel, they converge on one
value per detail (the greater (time, value)), an older value never overwrites
a newer one, and a detail that is malformed on the wire or in the merge is
refused whole."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from pixie.device.node.keyed import Node
from pixie.device.store.contactbook import ContactBook, contact_items
from pixie.device.store.contacts import ContactCard, ContactDetails, contact_id_for
from pixie.device.store.memlog import MemoryEvent
from pixie.device.store.notetable import Note
from pixie.device.store.statedigest import note_version
from pixie.protocol.digest import Fingerprint, detail_item, event_item, item_hash
from pixie.protocol.errors import ProtocolError
from pixie.protocol.sync import Phase
from pixie.protocol.syncmessages import (
    MAX_DETAIL_AT,
    MAX_NOTE_DETAIL_CHARS,
    MAX_SHORT_CHARS,
    Batch,
    ContactEntry,
    DetailEntry,
    Records,
)
from pixie.protocol.syncwire import decode, encode
from tests.support.synchelp import dump, open_pair, replica, sync

T1 = 1_700_000_000_000_000
T2 = T1 + 86_400_000_000
SESSION = b"\x01" * 8
ADA = contact_id_for("Ada Lovelace")


def merge(node: Node, card: ContactCard, now: int) -> str:
    with node.db.writing() as session:
        return ContactBook.merge_card_in(session, card, now)[0]


def details_rows(node: Node) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(node.db.path)
    try:
        return con.execute(
            "SELECT contact_id, field, value, at FROM contact_detail ORDER BY contact_id, field"
        ).fetchall()
    finally:
        con.close()


def synced(a: Node, b: Node) -> None:
    _loop, opener, responder = sync(a, b)
    assert opener.phase is Phase.DONE and responder.phase is Phase.DONE


def assert_converged(a: Node, b: Node) -> None:
    assert a.digest() == b.digest()
    assert dump(a) == dump(b) and details_rows(a) == details_rows(b)
    for node in (a, b):  # the digest kept on every write is the one the rows give
        with node.db.reading() as session:
            contacts = list(contact_items(session))
            fp = Fingerprint.of(event_item(i) for i in session.scalars(select(MemoryEvent.id)))
            fp = fp.update(add=[note_version(n) for n in session.scalars(select(Note))])
        assert sum(1 for i in contacts if i[:1] == b"D") == len(details_rows(node))
        assert fp.update(add=contacts) == node.digest()


def test_a_detail_set_on_one_side_reaches_the_other(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    merge(a, ContactCard("Ada Lovelace", ("ada@example.org",), org="Acme", note="Two\nlines"), T1)
    synced(a, b)
    assert b.contacts.details(ADA) == ContactDetails(org="Acme", note="Two\nlines")
    assert_converged(a, b)
    _loop, again, _ = sync(a, b)
    assert again.stats.in_sync_at_hello


def test_different_details_on_each_side_converge(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    merge(a, ContactCard("Ada Lovelace", org="Acme", title="Programmer"), T2)
    merge(b, ContactCard("Ada Lovelace", org="Engines Ltd", birthday="--12-10"), T1)
    merge(b, ContactCard("Grace Hopper", title="Rear Admiral"), T1)
    synced(a, b)
    assert_converged(a, b)
    for node in (a, b):
        assert node.contacts.details(ADA) == ContactDetails(
            org="Acme", title="Programmer", birthday="--12-10"
        )
        assert node.contacts.details(contact_id_for("Grace Hopper")).title == "Rear Admiral"


def test_an_older_value_does_not_overwrite_a_newer_one(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    # b learns the newer value first; a's older import syncs in afterwards.
    merge(b, ContactCard("Ada Lovelace", org="Newer Org"), T2)
    merge(a, ContactCard("Ada Lovelace", org="Older Org"), T1)
    synced(a, b)
    assert a.contacts.details(ADA).org == b.contacts.details(ADA).org == "Newer Org"
    assert_converged(a, b)
    # The older entry sent again, straight to the replica, changes nothing.
    older = ContactEntry(ADA, "Ada Lovelace", (), (DetailEntry("org", "Older Org", T1),))
    before = (details_rows(b), b.digest())
    assert replica(b).apply(Records(contacts=(older,)), in_order=True) == 0
    assert (details_rows(b), b.digest()) == before


def test_one_value_imported_at_two_times_settles_on_one_time(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    merge(a, ContactCard("Ada Lovelace", org="Acme"), T1)
    merge(b, ContactCard("Ada Lovelace", org="Acme"), T2)
    assert a.digest() != b.digest()
    synced(a, b)
    assert_converged(a, b)
    assert details_rows(a) == [(ADA, "org", "Acme", T2)]


def test_the_same_time_is_settled_by_the_value(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    merge(a, ContactCard("Ada Lovelace", note="alpha"), T1)
    merge(b, ContactCard("Ada Lovelace", note="beta"), T1)
    synced(b, a)
    assert_converged(a, b)
    assert a.contacts.details(ADA).note == "beta"


def test_merging_is_order_free_and_repeatable(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    entries = [
        ContactEntry(ADA, "Ada Lovelace", (), (DetailEntry("org", "One", T1),)),
        ContactEntry(ADA, "Ada Lovelace", (), (DetailEntry("org", "Two", T2),)),
        ContactEntry(ADA, "Ada Lovelace", (), (DetailEntry("org", "Three", T1 + 5),)),
    ]
    replica(a).apply(Records(contacts=tuple(entries)), in_order=True)
    for entry in [*reversed(entries), *entries]:
        replica(b).apply(Records(contacts=(entry,)), in_order=True)
    assert details_rows(a) == details_rows(b) == [(ADA, "org", "Two", T2)]
    assert a.digest() == b.digest()


def test_details_ride_with_the_first_entry_of_a_contact_with_many_aliases(
    tmp_path: Path,
) -> None:
    a, b = open_pair(tmp_path)
    aliases = tuple(f"ada{i}@example.org" for i in range(70))
    merge(a, ContactCard("Ada Lovelace", aliases, org="Acme", title="Countess"), T1)
    (first, second) = [r for r in replica(a)._all_contacts() if r.id == ADA]
    assert {d.field for d in first.details} == {"org", "title"} and second.details == ()
    synced(a, b)
    assert_converged(a, b)


def test_repair_sends_details_by_their_keys(tmp_path: Path) -> None:
    a, b = open_pair(tmp_path)
    merge(a, ContactCard("Ada Lovelace", org="Acme"), T1)
    items = dict(replica(a).items())
    key = detail_item(ADA, "org", "Acme", T1)[:17]
    assert items[key] == item_hash(detail_item(ADA, "org", "Acme", T1))
    (records,) = list(replica(a).records_for([key]))
    (entry,) = records.contacts
    assert entry.details == (DetailEntry("org", "Acme", T1),)
    replica(b).apply(records, in_order=False)
    assert b.contacts.details(ADA).org == "Acme"


# -- the wire -----------------------------------------------------------------------------


ENTRY = ContactEntry(
    ADA,
    "Ada Lovelace",
    ("Ada",),
    (
        DetailEntry("org", "Acme", T1),
        DetailEntry("note", "n" * MAX_NOTE_DETAIL_CHARS, -5),
        DetailEntry("birthday", "--02-29", MAX_DETAIL_AT),
    ),
)


def _tree(entry: ContactEntry) -> Any:
    return msgpack.unpackb(encode(Batch(SESSION, 0, False, Records(contacts=(entry,)))), raw=False)


def test_details_survive_the_codec_and_a_contact_without_any_stays_three_items() -> None:
    message = Batch(SESSION, 0, False, Records(contacts=(ENTRY,)))
    assert decode(encode(message)) == message
    plain = dataclasses.replace(ENTRY, details=())
    (wire,) = _tree(plain)[4][0]
    assert len(wire) == 3  # what a peer from before details decodes
    old = Batch(SESSION, 0, False, Records(contacts=(plain,)))
    assert decode(encode(old)) == old


def _refused(tree: Any, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode(msgpack.packb(tree, use_bin_type=True))


def _with_details(details: Any) -> Any:
    tree = _tree(ENTRY)
    tree[4][0][0][3] = details
    return tree


@pytest.mark.parametrize(
    ("details", "match"),
    [
        ([["nickname", "Ada", 1]], "contact detail field must be one of"),
        ([["org", "o" * (MAX_SHORT_CHARS + 1), 1]], "contact org must be text of at most 200"),
        ([["note", "n" * (MAX_NOTE_DETAIL_CHARS + 1), 1]], "contact note must be text"),
        ([["org", "A", 1], ["org", "B", 2]], "appears twice"),
        ([["org", "A", MAX_DETAIL_AT + 1]], "contact detail time"),
        ([["org", "A", -MAX_DETAIL_AT - 1]], "contact detail time"),
        ([["org", "A", True]], "contact detail time"),
        ([["org", b"A", 1]], "contact org must be text"),
        ([["org", "A"]], "contact detail must have 3 items"),
        ([[7, "A", 1]], "contact detail field"),
        ([["org", "A", 1]] * 7, "contact details must be a list of at most 6"),
        ("org", "contact details must be a list"),
    ],
)
def test_malformed_details_are_refused_by_the_codec(details: Any, match: str) -> None:
    _refused(_with_details(details), match)


def test_a_contact_of_the_wrong_arity_is_refused() -> None:
    tree = _tree(ENTRY)
    _refused(_replace_contact(tree, tree[4][0][0][:2]), "contact must have 3 or 4 items")
    _refused(_replace_contact(tree, [*tree[4][0][0], []]), "contact must be a list of at most 4")


def _replace_contact(tree: Any, contact: Any) -> Any:
    tree = list(tree)
    tree[4] = [[contact], *tree[4][1:]]
    return tree


# Whatever msgpack can carry.
INTS = st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["org", "title", "birthday", "note", "x", ""]),
            st.one_of(st.text(max_size=30), INTS, st.none(), st.binary(max_size=4)),
            st.one_of(INTS, st.text(max_size=3)),
        ),
        max_size=6,
    )
)
def test_any_details_decode_or_are_refused_cleanly(details: list[tuple[Any, Any, Any]]) -> None:
    data = msgpack.packb(_with_details([list(d) for d in details]), use_bin_type=True)
    try:
        message = decode(data)
    except ProtocolError:
        return
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    ("detail", "match"),
    [
        (DetailEntry("org", "  Acme  ", T1), "not in its stored form"),
        (DetailEntry("title", "Two\nlines", T1), "not in its stored form"),
        (DetailEntry("birthday", "yesterday", T1), "is not a date"),
        (DetailEntry("note", "", T1), "not in its stored form"),
        (DetailEntry("note", "bell\x07", T1), "control characters"),
        (DetailEntry("nickname", "Ada", T1), "unknown contact detail"),
        (DetailEntry("org", "Acme", MAX_DETAIL_AT + 1), "time out of range"),
    ],
)
def test_a_batch_with_a_malformed_detail_is_refused_whole(
    tmp_path: Path, detail: DetailEntry, match: str
) -> None:
    _a, b = open_pair(tmp_path)
    merge(b, ContactCard("Grace Hopper", title="Rear Admiral"), T1)
    good = ContactEntry(ADA, "Ada Lovelace", ("Ada",), (DetailEntry("title", "Countess", T2),))
    bad = ContactEntry(contact_id_for("Zoë Martin"), "Zoë Martin", (), (detail,))
    before = (dump(b), details_rows(b), b.digest())
    with pytest.raises(ProtocolError, match=match):
        replica(b).apply(Records(contacts=(good, bad)), in_order=True)
    assert (dump(b), details_rows(b), b.digest()) == before
