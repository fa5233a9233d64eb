"""``pixie import`` end to end on every format's hand-written fixtures: the
format is detected from the file, the summary counts what came in, a second
import adds nothing, and bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pixie.device.ingest import registry
from tests.support.cli import db_fingerprint, run_cli

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest"

# One fixture per format, the name detection must give it, and the unit the
# summary counts its events in.
CASES = [
    ("mbox/thunderbird-thread.mbox", "mbox", "emails"),
    ("mbox/gmail-takeout.mbox", "mbox", "emails"),
    ("ics/google.ics", "ics", "calendar events"),
    ("vcf/iphone.vcf", "vcf", "contacts"),
    ("whatsapp/WhatsApp Chat with Priya.txt", "whatsapp", "messages"),
    ("whatsapp/WhatsApp-Chat mit Jonas.txt", "whatsapp", "messages"),
    ("telegram/result.json", "telegram", "messages"),
    ("telegram/personal_chat.json", "telegram", "messages"),
    ("journal/vault", "journal", "journal entries"),
    ("journal/journal.md", "journal", "journal entries"),
]
ME = ("--me", "ana@example.org", "--me", "Ana Lima", "--tz", "Europe/Lisbon")


def counts(data: Path) -> tuple[int, int]:
    con = sqlite3.connect(data / "pixie.db")
    try:
        events = con.execute("SELECT count(*) FROM memory_event").fetchone()[0]
        contacts = con.execute("SELECT count(*) FROM contact").fetchone()[0]
    finally:
        con.close()
    return events, contacts


@pytest.mark.parametrize(("fixture", "name", "unit"), CASES)
def test_each_format_is_detected_imported_and_idempotent(
    data_dir: Path, fixture: str, name: str, unit: str
) -> None:
    path = FIXTURES / fixture
    found = registry.detect(path)
    assert found is not None and found.name == name

    first = run_cli("--data", str(data_dir), "import", str(path), *ME, "--json")
    assert first.code == 0, first.err
    report = first.json()
    assert isinstance(report, dict)
    assert report["format"] == name
    assert report["imported"] + report["contact_cards"] > 0
    after_first = counts(data_dir)
    assert after_first[0] == report["imported"]

    text = run_cli("--data", str(data_dir), "import", str(path), *ME)
    assert text.code == 0, text.err
    assert unit in text.out
    if report["imported"]:
        assert text.out.startswith(f"imported 0 {unit} (")
        assert f"({report['imported']:,} already present)" in text.out
    assert counts(data_dir) == after_first  # nothing new, not even a contact


def test_the_format_can_be_named_and_a_wrong_one_is_refused(data_dir: Path) -> None:
    box = FIXTURES / "mbox" / "thunderbird-thread.mbox"
    named = run_cli("--data", str(data_dir), "import", str(box), "--format", "mbox", "--json")
    assert named.code == 0, named.err
    before = db_fingerprint(data_dir)
    wrong = run_cli("--data", str(data_dir), "import", str(box), "--format", "ics")
    assert wrong.code == 2
    assert wrong.err.startswith("pixie: error: ")
    assert "thunderbird-thread.mbox" in wrong.err
    assert wrong.err.count("\n") == 1
    unknown = run_cli("--data", str(data_dir), "import", str(box), "--format", "xml")
    assert (unknown.code, unknown.err.count("\n")) == (2, 1)
    assert "no importer named 'xml'" in unknown.err
    assert db_fingerprint(data_dir) == before


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--tz", "Mars/Olympus"), "--tz: unknown time zone 'Mars/Olympus'"),
        (("--me", "   "), "--me: '   ' is not an address"),
    ],
)
def test_bad_flags_are_one_line_and_change_nothing(
    data_dir: Path, flags: tuple[str, ...], needle: str
) -> None:
    before = db_fingerprint(data_dir)
    res = run_cli("--data", str(data_dir), "import", str(FIXTURES / "ics" / "google.ics"), *flags)
    assert res.code == 2
    assert needle in res.err and res.err.count("\n") == 1
    assert db_fingerprint(data_dir) == before


def test_a_bad_record_late_in_a_file_writes_nothing(tmp_path: Path, data_dir: Path) -> None:
    good = (FIXTURES / "whatsapp" / "WhatsApp Chat with Priya.txt").read_bytes()
    broken = tmp_path / "WhatsApp Chat with Priya.txt"
    broken.write_bytes(good + b"\xff\xfe not UTF-8 at the end\n")
    before = db_fingerprint(data_dir)
    res = run_cli("--data", str(data_dir), "import", str(broken), "--tz", "UTC")
    assert res.code == 2, res.out
    assert res.err.startswith("pixie: error: WhatsApp Chat with Priya.txt")
    assert "line" in res.err and res.err.count("\n") == 1
    assert db_fingerprint(data_dir) == before
    assert counts(data_dir) == (0, 0)


def test_a_missing_path_and_an_undetectable_file_are_refused(
    tmp_path: Path, data_dir: Path
) -> None:
    missing = run_cli("--data", str(data_dir), "import", str(tmp_path / "nope.mbox"))
    assert (missing.code, missing.err) == (
        2,
        f"pixie: error: cannot read {tmp_path / 'nope.mbox'}: no such file or folder\n",
    )
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    res = run_cli("--data", str(data_dir), "import", str(blob))
    assert res.code == 2
    assert "cannot tell what format 'blob.bin' is in; name it with --format" in res.err


def test_an_export_that_grew_adds_only_the_new_messages(tmp_path: Path, data_dir: Path) -> None:
    chat = tmp_path / "WhatsApp Chat with Priya.txt"
    chat.write_text(
        "14/03/2025, 21:05 - Priya: Dinner on Friday?\n14/03/2025, 21:06 - Ana Lima: Yes!\n",
        encoding="utf-8",
    )
    first = run_cli("--data", str(data_dir), "import", str(chat), *ME, "--json").json()
    assert isinstance(first, dict) and first["imported"] == 2
    with chat.open("a", encoding="utf-8") as out:
        out.write("14/03/2025, 21:06 - Ana Lima: Yes!\n15/03/2025, 09:00 - Priya: Booked.\n")
    grown = run_cli("--data", str(data_dir), "import", str(chat), *ME, "--json").json()
    assert isinstance(grown, dict)
    # the repeated "Yes!" in the same minute is a second message, not a duplicate
    assert (grown["imported"], grown["already_present"]) == (2, 2)
    shown = run_cli("--data", str(data_dir), "log", "show")
    texts = [json.loads(line)["text"] for line in shown.out.splitlines()]
    assert texts.count("Yes!") == 2 and "Booked." in texts


def test_contacts_from_a_card_and_from_mail_are_one_person(data_dir: Path) -> None:
    vcf = FIXTURES / "vcf" / "iphone.vcf"
    assert run_cli("--data", str(data_dir), "import", str(vcf)).code == 0
    people = run_cli("--data", str(data_dir), "contacts", "list", "--json")
    assert people.code == 0
    before = len(people.out.splitlines())
    # importing the same address book again merges every card into its contact
    again = run_cli("--data", str(data_dir), "import", str(vcf))
    assert again.out.startswith("read ") and ": 0 new" in again.out
    after = run_cli("--data", str(data_dir), "contacts", "list", "--json")
    assert len(after.out.splitlines()) == before
