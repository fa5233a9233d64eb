"""What a first real import must not trip over: who the user is (learned once,
asked or noticed, corrected afterwards by ``pixie contacts me``), ids that no
flag changes, a .zip and its unpacked ``_chat.txt`` as one chat, the ids of
earlier imports still recognised, and dates whose order no date in the file
tells."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from pixie.device.agent.grep import GrepMemoryTool, compile_query
from pixie.device.ingest.base import ImportOptions
from pixie.device.ingest.load import load
from pixie.device.ingest.whatsapp import IMPORTER as WHATSAPP
from pixie.device.node.keyed import Node
from pixie.device.store import distillreads
from pixie.device.store.memlog import NewEvent
from pixie.device.web.reads import timeline
from tests.support.cli import db_fingerprint, run_cli
from tests.support.synchelp import paired_siblings, sync

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest"
PRIYA = FIXTURES / "whatsapp" / "WhatsApp Chat with Priya.txt"
THEO = FIXTURES / "whatsapp" / "WhatsApp Chat with Theo.txt"
IOS_CHAT = FIXTURES / "whatsapp-ios" / "_chat.txt"
SAMS = {"yes! 8pm at the usual place", "[attached: IMG-20250315-WA0001.jpg]"}


def pixie(data: Path, *argv: str, stdin: bytes | None = b"") -> tuple[int, str, str]:
    res = run_cli("--data", str(data), *argv, stdin=stdin)
    return res.code, res.out, res.err


def imported(data: Path, *argv: str) -> dict[str, int]:
    code, out, err = pixie(data, "import", *argv, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert isinstance(report, dict)
    return report


def rows(data: Path, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(data / "pixie.db")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def mine_as_shown(data: Path) -> set[str]:
    """The texts `pixie log show` reports as the user's."""
    code, out, err = pixie(data, "log", "show")
    assert code == 0, err
    shown = [json.loads(line) for line in out.splitlines()]
    return {e["text"] for e in shown if e["kind"] == "message" and e.get("from_me")}


# -- who the user is -----------------------------------------------------------------


def test_me_set_once_decides_every_later_import(data_dir: Path) -> None:
    """Trap: without --me the user's own messages were another person's. Now
    `pixie config set me` says it once for every import."""
    code, out, err = pixie(data_dir, "config", "set", "me", "Sam, sam@example.org")
    assert code == 0, err
    assert out.strip() == "me = Sam, sam@example.org"
    code, _, err = pixie(data_dir, "import", str(PRIYA), "--tz", "UTC")
    assert code == 0, err
    assert err == ""  # nothing to warn about
    assert mine_as_shown(data_dir) == SAMS
    names = {r[0] for r in rows(data_dir, "SELECT name FROM contact")}
    assert names == {"Priya"}  # the user is not a contact
    code, out, _ = pixie(data_dir, "config", "show")
    assert "me = Sam, sam@example.org  (me.json)" in out.splitlines()


def test_init_me_stores_who_you_are(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    code, _, err = pixie(data, "init", "--me", "Sam", "--me", "+44 7700 900123")
    assert code == 0, err
    assert json.loads((data / "me.json").read_text()) == {"me": ["Sam", "+44 7700 900123"]}
    pixie(data, "import", str(PRIYA), "--tz", "UTC")
    assert mine_as_shown(data) == SAMS


def test_an_import_knowing_no_identity_says_so_in_one_line(data_dir: Path) -> None:
    """Not on a terminal (scripts, the demo): imported as before, and one notice."""
    code, out, err = pixie(data_dir, "import", str(PRIYA), "--tz", "UTC")
    assert code == 0, err
    assert out.startswith("imported 7 messages")
    [line] = err.splitlines()
    assert line.startswith("pixie: notice: no identity of yours is known")
    assert "pixie config set me" in line and "pixie contacts me NAME" in line
    assert mine_as_shown(data_dir) == set()
    # A format without senders has nothing to tell apart: no notice.
    code, _, err = pixie(data_dir, "import", str(FIXTURES / "ics" / "google.ics"), "--tz", "UTC")
    assert code == 0 and err == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_first_import_asks_once(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("Sam, sam@example.org\n"))
    code, _, err = pixie(data_dir, "import", str(PRIYA), "--tz", "UTC", stdin=None)
    assert code == 0, err
    assert err.startswith("Who are you in these messages?")
    assert "notice" not in err
    assert mine_as_shown(data_dir) == SAMS
    assert json.loads((data_dir / "me.json").read_text()) == {"me": ["Sam", "sam@example.org"]}
    # Asked once: an empty answer is kept too, and is not asked again.
    other = data_dir.parent / "other"
    shutil.copytree(data_dir, other)
    (other / "me.json").unlink()
    monkeypatch.setattr("sys.stdin", _Terminal("\n"))
    code, _, err = pixie(other, "import", str(THEO), "--tz", "UTC", stdin=None)
    assert code == 0 and "notice: no identity" in err
    monkeypatch.setattr("sys.stdin", _Terminal("never read\n"))
    code, _, err = pixie(other, "import", str(THEO), "--tz", "UTC", stdin=None)
    assert code == 0 and not err.startswith("Who are you")


def test_contacts_me_remarks_what_was_imported_before(data_dir: Path) -> None:
    """Trap: imported without --me, then again with it: "already present" and
    nothing fixed. `pixie contacts me NAME` re-marks them, in every read."""
    pixie(data_dir, "import", str(PRIYA), "--tz", "UTC")
    with Node.open(data_dir) as node:  # the text mirror built before the correction
        assert not any(h.from_me for h in node.mirror.search(compile_query("^")[0], 50))
    before = db_fingerprint(data_dir)

    code, out, err = pixie(data_dir, "contacts", "me", "sam")
    assert code == 0, err
    assert out.strip() == "Sam is you: 2 messages re-marked as yours"
    assert db_fingerprint(data_dir) != before  # one event more: nothing edited
    assert rows(data_dir, "SELECT kind, text FROM memory_event WHERE kind = 'identity'") == [
        ("identity", "sam")
    ]
    assert mine_as_shown(data_dir) == SAMS
    _every_read_sees_sams_messages_as_mine(data_dir)

    code, out, _ = pixie(data_dir, "contacts", "me", "Sam")
    assert out.strip() == "Sam is already you; nothing to re-mark"
    # Later imports know who the user is, with no flag and no notice.
    code, _, err = pixie(data_dir, "import", str(IOS_CHAT), "--tz", "UTC")
    assert code == 0 and err == ""
    ios = rows(data_dir, "SELECT text, from_me FROM memory_event WHERE thread = 'whatsapp:Ada'")
    assert {t for t, me in ios if me} == {
        "yes, carriage 4",
        "[attached: 00000012-PHOTO-2025-03-14-21-07-02.jpg]",
    }


def _every_read_sees_sams_messages_as_mine(data: Path) -> None:
    with Node.open(data) as node:
        query = compile_query("^")[0]
        hits = node.mirror.search(query, 50)
        assert {h.body for h in hits if h.from_me} == SAMS
        result = GrepMemoryTool(node.mirror).run("usual place|IMG-")
        assert result.hits and all(h.from_me for h in result.hits)
        # Your own words, as the model reads them: "you", not "you -> Sam".
        assert all(h.contact is None and h.who() == " · you" for h in result.hits)
        lines, _, _ = timeline(node.mirror, None, None)
        assert {line.snippet for line in lines if line.from_me} == SAMS
        with node.db.reading(plain=True) as conn:
            thread = distillreads.thread_rows(conn, "whatsapp:Priya", "message", 50)
        assert {text for _, _, _, _, me, text in thread if me} == SAMS


def test_contacts_me_refuses_nobody_in_one_line(data_dir: Path) -> None:
    before = db_fingerprint(data_dir)
    code, out, err = pixie(data_dir, "contacts", "me", "Nobody Here")
    assert (code, out) == (2, "")
    assert err == "pixie: error: no contact named 'Nobody Here' (see pixie contacts list)\n"
    assert db_fingerprint(data_dir) == before


def test_the_correction_syncs_to_a_sibling(tmp_path: Path) -> None:
    with paired_siblings(tmp_path) as (phone, mac):
        items = WHATSAPP.read(PRIYA, ImportOptions(), None)
        load(phone.log, items)
        sync(phone, mac)
        mac.mirror.search(compile_query("^")[0], 50)  # the sibling's mirror built first
        phone.close()
        code, _, err = pixie(tmp_path / "device", "contacts", "me", "Sam")
        assert code == 0, err
        with Node.open(tmp_path / "device") as again:
            sync(again, mac)
        hits = mac.mirror.search(compile_query("^")[0], 50)
        assert {h.body for h in hits if h.from_me} == SAMS
        with mac.db.reading(plain=True) as conn:
            thread = distillreads.thread_rows(conn, "whatsapp:Priya", "message", 50)
        assert {text for _, _, _, _, me, text in thread if me} == SAMS


# -- ids no flag changes ---------------------------------------------------------------


def test_another_tz_adds_no_duplicates(data_dir: Path) -> None:
    """Trap: the same file again with another --tz added every message again."""
    assert imported(data_dir, str(PRIYA), "--me", "Sam", "--tz", "UTC")["imported"] == 7
    again = imported(data_dir, str(PRIYA), "--me", "Sam", "--tz", "America/New_York")
    assert (again["imported"], again["already_present"]) == (0, 7)


def test_a_zip_and_its_unpacked_chat_are_one_chat(data_dir: Path, tmp_path: Path) -> None:
    """Trap: the unzipped iOS _chat.txt was a thread of its own (named after
    its folder, or "whatsapp:chat") and duplicated the .zip's messages."""
    archive = tmp_path / "WhatsApp Chat - Ada.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(IOS_CHAT, "_chat.txt")
        z.writestr("00000012-PHOTO-2025-03-14-21-07-02.jpg", b"\xff\xd8\xff")
    unpacked = tmp_path / "Downloads" / "_chat.txt"
    unpacked.parent.mkdir()
    shutil.copy(IOS_CHAT, unpacked)
    first = imported(data_dir, str(archive), "--me", "Sam", "--tz", "UTC")
    assert first["imported"] == 5
    again = imported(data_dir, str(unpacked), "--me", "Sam", "--tz", "UTC")
    assert (again["imported"], again["already_present"]) == (0, 5)
    assert rows(data_dir, "SELECT DISTINCT thread FROM memory_event") == [("whatsapp:Ada",)]


def test_a_chat_txt_with_no_chat_name_takes_its_speakers() -> None:
    """No folder name, no system line under the chat's name: the thread is
    named by who speaks, the same whoever --me names."""
    text = "[14/03/25, 21:05:09] Ada: hi\n[14/03/25, 21:06:00] Sam: hello\n"
    threads = set()
    for me in ((), ("Sam",), ("Ada",)):
        with _bare_chat(text) as path:
            items = WHATSAPP.read(path, ImportOptions(me=me), None)
            threads |= {i.thread for i in items if isinstance(i, NewEvent)}
    assert threads == {"whatsapp:Ada, Sam"}


class _bare_chat:
    def __init__(self, text: str) -> None:
        self.text = text

    def __enter__(self) -> Path:
        import tempfile

        self.folder = Path(tempfile.mkdtemp())
        path = self.folder / "_chat.txt"
        path.write_text(self.text)
        return path

    def __exit__(self, *_: object) -> None:
        shutil.rmtree(self.folder)


@pytest.mark.parametrize("source", [PRIYA, IOS_CHAT])
def test_a_data_dir_filled_with_the_earlier_ids_gets_no_duplicates(
    data_dir: Path, tmp_path: Path, source: Path
) -> None:
    """An import under the earlier scheme (its ids: the minute in the zone;
    a _chat.txt named by its folder), then the same file now: nothing added."""
    path = tmp_path / "Downloads" / source.name
    path.parent.mkdir()
    shutil.copy(source, path)
    options = ImportOptions(me=("Sam",), tz=ImportOptions().tz)
    earlier = [
        replace(i, id=i.legacy_id, legacy_id=None, thread=_earlier_thread(path))
        if isinstance(i, NewEvent)
        else i
        for i in WHATSAPP.read(path, options, None)
    ]
    with Node.open(data_dir) as node:
        assert load(node.log, earlier).imported > 0
    now = imported(data_dir, str(path), "--me", "Sam", "--tz", "UTC")
    assert now["imported"] == 0 and now["already_present"] > 0


def _earlier_thread(path: Path) -> str:
    return "whatsapp:Downloads" if path.name == "_chat.txt" else "whatsapp:Priya"


# -- the order of day and month -----------------------------------------------------


def test_dates_no_date_decides_are_read_day_first_with_a_notice(data_dir: Path) -> None:
    """Trap: every day <= 12, read day-first without a word."""
    code, _, err = pixie(data_dir, "import", str(THEO), "--me", "Sam", "--tz", "UTC")
    assert code == 0, err
    [line] = err.splitlines()
    assert line.startswith("pixie: notice: WhatsApp Chat with Theo.txt: ")
    assert "read as day-first" in line and "--date-order month-first" in line
    # 3 April, not 4 March.
    assert rows(data_dir, "SELECT min(at) FROM memory_event")[0][0] == 1_743_674_400_000_000


def test_date_order_flag_decides(data_dir: Path) -> None:
    code, _, err = pixie(
        data_dir, "import", str(THEO), "--me", "Sam", "--tz", "UTC", "--date-order", "month-first"
    )
    assert code == 0 and err == ""
    # 4 March 2025, 10:00 UTC.
    assert rows(data_dir, "SELECT min(at) FROM memory_event")[0][0] == 1_741_082_400_000_000
    # A file whose dates say the order needs no flag and hears no notice.
    code, _, err = pixie(data_dir, "import", str(PRIYA), "--me", "Sam", "--tz", "UTC")
    assert code == 0 and err == ""


def test_dates_that_contradict_each_other_are_refused_in_one_line(
    data_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "WhatsApp Chat with X.txt"
    path.write_text("14/03/2025, 21:05 - X: a\n03/14/2025, 21:06 - X: b\n")
    before = db_fingerprint(data_dir)
    for flags in ((), ("--date-order", "day-first")):
        code, out, err = pixie(data_dir, "import", str(path), "--me", "Sam", *flags)
        assert (code, out) == (2, "")
        [line] = err.splitlines()
        assert line.startswith("pixie: error: WhatsApp Chat with X.txt, line 2: dates are written")
    code, _, err = pixie(data_dir, "import", str(path), "--date-order", "sideways")
    assert code == 2 and "--date-order" in err
    assert db_fingerprint(data_dir) == before
