"""Contact details in the store: what an import card sets, when a newer card
replaces a value, that a repeat leaves no trace, the bounds, the digest, and
the v4 -> v5 migration an existing data dir goes through on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import select

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.errors import BadInput
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.contactbook import ContactBook, ContactDetail, contact_items
from pixie.device.store.contacts import ContactCard, ContactDetails
from pixie.device.store.memlog import MemoryEvent
from pixie.device.store.notes import NoteKind
from pixie.device.store.notetable import Note
from pixie.device.store.statedigest import note_version
from pixie.device.store.version import SCHEMA_VERSION
from pixie.protocol.digest import Fingerprint, event_item
from tests.support.cli import run_cli

T1 = 1_700_000_000_000_000
T2 = T1 + 86_400_000_000

ADA = ContactCard(
    "Ada Lovelace",
    ("ada@example.org", "+447700900123"),
    org="Analytical Engines Ltd",
    title="Programmer",
    birthday="1815-12-10",
    note="Met at the Babbage salon.\nPrefers letters.",
)


def merge(node: Node, card: ContactCard, now: int) -> tuple[str, bool]:
    with node.db.writing() as session:
        return ContactBook.merge_card_in(session, card, now)


def stored(node: Node) -> list[tuple[str, str, str, int]]:
    with node.db.reading() as session:
        rows = session.execute(
            select(
                ContactDetail.contact_id, ContactDetail.field, ContactDetail.value, ContactDetail.at
            ).order_by(ContactDetail.contact_id, ContactDetail.field)
        ).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def rebuilt_digest(node: Node) -> Fingerprint:
    """The digest from every row, details included, built here from scratch."""
    with node.db.reading() as session:
        fp = Fingerprint.of(event_item(i) for i in session.scalars(select(MemoryEvent.id)))
        fp = fp.update(add=[note_version(n) for n in session.scalars(select(Note))])
        return fp.update(add=list(contact_items(session)))


def test_a_card_sets_every_detail_and_readers_see_them(node: Node) -> None:
    cid, created = merge(node, ADA, T1)
    assert created
    expected = ContactDetails(
        org="Analytical Engines Ltd",
        title="Programmer",
        birthday="1815-12-10",
        note="Met at the Babbage salon.\nPrefers letters.",
    )
    assert node.contacts.details(cid) == expected
    (info,) = node.contacts.all()
    assert info.details == expected and set(info.aliases) == {"ada@example.org", "+447700900123"}
    assert node.contacts.info(cid).details == expected
    assert {(f, at) for _, f, _, at in stored(node)} == {
        ("org", T1),
        ("title", T1),
        ("birthday", T1),
        ("note", T1),
    }
    assert node.digest() == rebuilt_digest(node)


def test_a_contact_found_by_its_address_gains_the_details(node: Node) -> None:
    cid, _ = node.contacts.add("Ada Lovelace", ["ada@example.org"], now=0)
    other, created = merge(node, ContactCard("A. Lovelace", ("ada@example.org",), org="Acme"), T1)
    assert other == cid and not created
    assert node.contacts.details(cid) == ContactDetails(org="Acme")
    assert node.digest() == rebuilt_digest(node)


def test_a_missing_detail_is_added_by_any_card(node: Node) -> None:
    cid, _ = merge(node, ContactCard("Ada Lovelace", org="Acme"), T2)
    # An older card still fills what the contact lacks, and keeps what it has.
    merge(node, ContactCard("Ada Lovelace", org="Older Org", title="Countess"), T1)
    assert node.contacts.details(cid) == ContactDetails(org="Acme", title="Countess")
    assert node.digest() == rebuilt_digest(node)


def test_a_newer_card_replaces_a_different_value_and_an_older_one_does_not(node: Node) -> None:
    cid, _ = merge(node, ContactCard("Ada Lovelace", org="Acme", title="Programmer"), T1)
    merge(node, ContactCard("Ada Lovelace", org="Engines Ltd"), T2)
    assert node.contacts.details(cid) == ContactDetails(org="Engines Ltd", title="Programmer")
    before = (stored(node), node.digest())
    merge(node, ContactCard("Ada Lovelace", org="Acme"), T1 + 1)
    assert (stored(node), node.digest()) == before
    # Each detail by its own time: this card is older than the organisation
    # and newer than the title.
    merge(node, ContactCard("Ada Lovelace", org="Acme", title="Countess"), T1 + 1)
    assert node.contacts.details(cid) == ContactDetails(org="Engines Ltd", title="Countess")
    assert node.digest() == rebuilt_digest(node)


def test_the_same_time_is_decided_by_the_value(node: Node) -> None:
    # Two cards of one import share its time: the greater value wins,
    # whichever came first, as it does between replicas.
    cid, _ = merge(node, ContactCard("Ada Lovelace", org="Beta"), T1)
    merge(node, ContactCard("Ada Lovelace", org="Alpha"), T1)
    assert node.contacts.details(cid).org == "Beta"
    merge(node, ContactCard("Ada Lovelace", org="Gamma"), T1)
    assert node.contacts.details(cid).org == "Gamma"


def test_an_identical_value_leaves_no_trace(node: Node) -> None:
    merge(node, ADA, T1)
    before = (stored(node), node.digest())
    # Spacing that cleans to the same value is the same value.
    again = ContactCard(
        "Ada Lovelace",
        org="  Analytical   Engines Ltd ",
        title="Programmer",
        birthday="1815-12-10",
        note="Met at the Babbage salon.  \r\nPrefers letters.\n",
    )
    merge(node, again, T2)
    assert (stored(node), node.digest()) == before


def test_blank_details_are_no_details(node: Node) -> None:
    cid, _ = merge(node, ContactCard("Ada Lovelace", org="   ", note="\n \n", title=""), T1)
    assert node.contacts.details(cid) == ContactDetails()
    assert not node.contacts.details(cid)
    assert stored(node) == []


def test_a_note_keeps_its_lines_and_tabs_and_one_line_fields_collapse(node: Node) -> None:
    card = ContactCard("Ada Lovelace", title="Head\tof\n Engines", note="a\tb\r\n\r\nc  ")
    cid, _ = merge(node, card, T1)
    assert node.contacts.details(cid) == ContactDetails(title="Head of Engines", note="a\tb\n\nc")


def test_a_birthday_without_a_year_may_be_the_29th_of_february(node: Node) -> None:
    cid, _ = merge(node, ContactCard("Ada Lovelace", birthday="--02-29"), T1)
    assert node.contacts.details(cid).birthday == "--02-29"


@pytest.mark.parametrize(
    ("details", "match"),
    [
        ({"note": "n" * 2001}, "contact note is longer than 2,000 characters"),
        ({"org": "o" * 201}, "contact organisation is longer than 200 characters"),
        ({"title": "t" * 201}, "contact title is longer than 200 characters"),
        ({"org": "Acme\x07"}, "contact organisation contains control characters"),
        ({"note": "line\x00"}, "contact note contains control characters"),
        ({"note": "esc\x1b[31m"}, "contact note contains control characters"),
        ({"title": "Boss\ud800"}, "contact title is not valid Unicode"),
        ({"birthday": "1990-02-30"}, "contact birthday '1990-02-30' is not a date"),
        ({"birthday": "--13-01"}, "is not a date"),
        ({"birthday": "3 May"}, "is not a date"),
        ({"birthday": "1990-5-3"}, "is not a date"),
        ({"org": 42}, "contact organisation must be a string"),
    ],
)
def test_bad_details_are_refused_and_nothing_is_written(
    node: Node, details: dict[str, object], match: str
) -> None:
    before = node.digest()
    card = ContactCard("Ada Lovelace", ("ada@example.org",), **details)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match=match):
        merge(node, card, T1)
    assert node.contacts.all() == [] and stored(node) == [] and node.digest() == before


def test_a_note_of_exactly_2000_characters_and_an_org_of_200_are_kept(node: Node) -> None:
    cid, _ = merge(node, ContactCard("Ada Lovelace", org="o" * 200, note="n" * 2000), T1)
    details = node.contacts.details(cid)
    assert details.org == "o" * 200 and details.note == "n" * 2000


def _make_version_4(data_dir: Path) -> None:
    """What a version-4 data dir looked like: no contact_detail table."""
    con = sqlite3.connect(data_dir / "pixie.db")
    with con:
        con.execute("DROP TABLE contact_detail")
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()


def _table_shape(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    con = sqlite3.connect(path)
    try:
        columns = con.execute("PRAGMA table_info(contact_detail)").fetchall()
        keys = con.execute("PRAGMA foreign_key_list(contact_detail)").fetchall()
    finally:
        con.close()
    return columns, keys


def test_a_version_4_data_dir_is_migrated_on_open_and_keeps_its_contacts(
    data_dir: Path, tmp_path: Path
) -> None:
    with Node.open(data_dir) as n:
        cid, _ = n.contacts.add("Ada Lovelace", ["ada@example.org"], now=0)
    fresh = _table_shape(data_dir / "pixie.db")
    _make_version_4(data_dir)
    assert _table_shape(data_dir / "pixie.db") == ([], [])
    with Node.open(data_dir) as n:
        assert n.db.meta()["schema_version"] == str(SCHEMA_VERSION) == "10"
        (info,) = n.contacts.all()
        assert (info.id, info.aliases, info.details) == (
            cid,
            ("ada@example.org",),
            ContactDetails(),
        )
        merge(n, ContactCard("Ada", ("ada@example.org",), org="Acme"), T1)
        assert n.contacts.details(cid) == ContactDetails(org="Acme")
        assert n.digest() == rebuilt_digest(n)
    # The migrated table is the one a new data dir creates.
    assert _table_shape(data_dir / "pixie.db") == fresh
    # And opening again migrates nothing more.
    with Node.open(data_dir) as n:
        assert n.contacts.details(cid) == ContactDetails(org="Acme")


# -- where the details are shown ------------------------------------------------------


def test_contacts_list_shows_the_details(data_dir: Path) -> None:
    with Node.open(data_dir) as n:
        cid = merge(n, ADA, T1)[0]
        n.contacts.add("Grace Hopper", [], now=0)
    listed = run_cli("--data", str(data_dir), "contacts", "list", "--json")
    assert listed.code == 0
    by_name = {c["name"]: c for c in listed.json()}  # type: ignore[attr-defined]
    assert by_name["Ada Lovelace"] == {
        "id": cid,
        "name": "Ada Lovelace",
        "aliases": ["+447700900123", "ada@example.org"],
        "org": "Analytical Engines Ltd",
        "title": "Programmer",
        "birthday": "1815-12-10",
        "note": "Met at the Babbage salon.\nPrefers letters.",
        "phone": None,
        "address": None,
    }
    assert by_name["Grace Hopper"]["org"] is None and by_name["Grace Hopper"]["note"] is None
    text = run_cli("--data", str(data_dir), "contacts", "list")
    assert text.code == 0
    assert text.out.splitlines()[:6] == [
        f"{cid}  Ada Lovelace (also: +447700900123, ada@example.org)",
        "    organisation: Analytical Engines Ltd",
        "    title: Programmer",
        "    birthday: 1815-12-10",
        "    note:",
        "      Met at the Babbage salon.",
    ]
    assert text.out.splitlines()[6] == "      Prefers letters."


def test_check_notebook_about_a_person_ends_with_their_contact_card(node: Node) -> None:
    cid = merge(node, ADA, T1)[0]
    node.contacts.add("Grace Hopper", [], now=0)
    node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, cid, "Ada Lovelace", "Runs marathons.", cid, ("sport",))
    )
    tool = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
    answer = tool.call({"person": "ada@example.org"}).splitlines()
    assert answer[0] == "1 note about ada@example.org:"
    assert answer[-2:] == [
        "Contact card · Ada Lovelace (organisation: Analytical Engines Ltd; title: Programmer;"
        " birthday: 1815-12-10; also: +447700900123, ada@example.org)",
        "   Note: Met at the Babbage salon. Prefers letters.",
    ]
    # Known to the book, no notes: the card still answers.
    merge(node, ContactCard("Grace Hopper", org="US Navy"), T1)
    assert tool.call({"person": "Grace"}).splitlines() == [
        "No notes in the Notebook about Grace.",
        "Contact card · Grace Hopper (organisation: US Navy)",
    ]
    # Nothing known beyond the name: no card; no person asked about: none either.
    merge(node, ContactCard("Zoë Martin"), T1)
    assert tool.call({"person": "Zoë Martin"}) == "No notes in the Notebook about Zoë Martin."
    assert "Contact card" not in tool.call({})


def test_a_long_alias_list_and_note_are_cut_on_the_card(node: Node) -> None:
    aliases = tuple(f"ada{i:02}@example.org" for i in range(12))
    merge(node, ContactCard("Ada Lovelace", aliases, note="word " * 399), T1)
    tool = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
    card, note = tool.call({"person": "Ada"}).splitlines()[-2:]
    shown = ", ".join(aliases[:8])
    assert card == f"Contact card · Ada Lovelace (also: {shown} and 4 more)"
    assert len(note.removeprefix("   Note: ")) == 600 and note.endswith("…")
