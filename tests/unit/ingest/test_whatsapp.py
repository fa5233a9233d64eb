"""The WhatsApp chat importer: layouts and locales, day/month inference,
multi-line messages, system lines, stable ids, zips, sniffing, bad input."""

from __future__ import annotations

import datetime as dt
import os
import zipfile
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest.base import ImportOptions, Item, Skipped
from pixie.device.ingest.whatsapp import IMPORTER, bare_parse
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from tests.support.sniffing import sniff_without_blocking

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "whatsapp"
LISBON = ZoneInfo("Europe/Lisbon")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*fields: int) -> int:
    return int(dt.datetime(*fields, tzinfo=dt.UTC).timestamp()) * 1_000_000


def read(path: Path, tz: dt.tzinfo = LISBON, me: tuple[str, ...] = ("Sam",)) -> list[Item]:
    return list(IMPORTER.read(path, ImportOptions(me=me, tz=tz), None))


def events(items: list[Item]) -> list[NewEvent]:
    return [i for i in items if isinstance(i, NewEvent)]


def summary(items: list[Item]) -> list[tuple[int, str, str | None, bool | None]]:
    return [(e.at, e.text, e.contact, e.from_me) for e in events(items)]


def test_android_day_first_24_hour() -> None:
    items = read(FIXTURES / "WhatsApp Chat with Priya.txt")
    # Lisbon is on UTC in March until the 30th.
    assert summary(items) == [
        (utc(2025, 3, 14, 21, 5), "are we still on for Saturday?", "Priya", False),
        (utc(2025, 3, 14, 21, 6), "yes! 8pm at the usual place", "Priya", True),
        (utc(2025, 3, 14, 21, 6), "[media omitted]", "Priya", False),
        (utc(2025, 3, 14, 21, 7), "ok", "Priya", False),
        (utc(2025, 3, 14, 21, 7), "ok", "Priya", False),
        (utc(2025, 3, 15, 8, 30), "[attached: IMG-20250315-WA0001.jpg]", "Priya", True),
        (utc(2025, 3, 15, 8, 31), "lovely", "Priya", False),
    ]
    assert items[0] == Skipped("system message")
    assert items[1] == ContactCard(name="Priya")
    every = events(items)
    assert {e.thread for e in every} == {"whatsapp:Priya"}
    assert {e.kind for e in every} == {EventKind.MESSAGE}
    assert {e.source for e in every} == {"whatsapp"}
    # "ok" twice in one minute is two events.
    assert len({e.id for e in every}) == len(every)


def test_android_us_twelve_hour_month_first_proved_late() -> None:
    # Only the fifth line (3/14/25) shows the month comes first.
    items = read(FIXTURES / "WhatsApp Chat with Dana.txt", tz=NEW_YORK)
    # New York is UTC-5 until 9 March 2025, UTC-4 after.
    assert summary(items) == [
        (utc(2025, 1, 5, 14, 5), "happy new year!!", "Dana", False),
        (utc(2025, 1, 5, 17, 10), "you too", "Dana", True),
        (utc(2025, 2, 7, 5, 1), "still up?", "Dana", False),
        (utc(2025, 3, 15, 1, 5), "pi day dinner?", "Dana", False),
        (utc(2025, 3, 15, 1, 7), "sure", "Dana", True),
    ]


def test_ios_with_marks_seconds_and_media() -> None:
    items = read(FIXTURES / "WhatsApp Chat - Lena.txt")
    assert summary(items) == [
        (utc(2025, 3, 14, 21, 5, 9), "hi from the train", "Lena", False),
        (utc(2025, 3, 14, 21, 5, 41), "[media omitted]", "Lena", False),
        (
            utc(2025, 3, 14, 21, 6, 2),
            "[attached: 00000012-PHOTO-2025-03-14-21-06-02.jpg]",
            "Lena",
            True,
        ),
    ]
    # The encryption notice and the deleted message are marked system lines.
    assert [i for i in items if isinstance(i, Skipped)] == [Skipped("system message")] * 2
    assert {e.thread for e in events(items)} == {"whatsapp:Lena"}


def test_german_dotted_dates() -> None:
    items = read(FIXTURES / "WhatsApp-Chat mit Jonas.txt", tz=NEW_YORK)
    assert summary(items) == [
        (utc(2025, 3, 15, 1, 5), "Bis später!", "Jonas", False),
        (utc(2025, 3, 15, 1, 9), "Bis dann", "Jonas", True),
        (utc(2025, 3, 15, 11, 0), "[media omitted]", "Jonas", False),
    ]
    assert {e.thread for e in events(items)} == {"whatsapp:Jonas"}


def test_dotted_am_pm_and_spaces_before_them() -> None:
    items = read(FIXTURES / "WhatsApp Chat with Arjun.txt")
    assert summary(items) == [
        (utc(2025, 3, 14, 21, 5), "reached home", "Arjun", False),
        (utc(2025, 3, 14, 21, 6), "good night", "Arjun", True),
        (utc(2025, 3, 15, 0, 15), "can't sleep", "Arjun", False),
        (utc(2025, 3, 15, 12, 30), "lunch?", "Arjun", False),
    ]


def test_group_chat_system_lines_multiline_and_phone_senders() -> None:
    items = read(FIXTURES / "WhatsApp Chat with Lisbon trip.txt")
    assert items[:4] == [Skipped("system message")] * 4
    assert items[-1] == Skipped("system message")
    assert items[4] == ContactCard(name="Priya")
    assert items[6] == ContactCard(name="+44 7700 900123", aliases=("+447700900123",))
    assert summary(items) == [
        (
            utc(2025, 3, 1, 10, 2),
            "Flights are booked:\nTAP 1234, leaves 07:40\n\nback on Sunday 18:05",
            "Priya",
            False,
        ),
        (utc(2025, 3, 1, 10, 3), "who's bringing the guidebook?", "+44 7700 900123", False),
        # My message in a group names nobody.
        (utc(2025, 3, 1, 10, 4), "me", None, True),
    ]
    assert {e.thread for e in events(items)} == {"whatsapp:Lisbon trip"}


def test_ambiguous_dates_default_to_day_first() -> None:
    items = read(FIXTURES / "WhatsApp Chat with Theo.txt")
    # 3 April and 5 June (Lisbon summer time, UTC+1), not 4 March and 6 May.
    assert [e.at for e in events(items)] == [
        utc(2025, 4, 3, 9, 0),
        utc(2025, 6, 5, 17, 30),
        utc(2025, 6, 5, 17, 31),
    ]


def test_my_message_first_in_one_to_one_names_the_other_sender(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("14/03/2025, 21:05 - Sam: hello?\n14/03/2025, 21:06 - Mo: hi\n")
    items = read(path)
    assert items[0] == ContactCard(name="Mo")
    assert summary(items)[0][2:] == ("Mo", True)
    assert {e.thread for e in events(items)} == {"whatsapp:notes"}


def test_contradicting_date_orders_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "WhatsApp Chat with X.txt"
    path.write_text("14/03/2025, 21:05 - X: a\n03/14/2025, 21:06 - X: b\n")
    with pytest.raises(BadInput, match=r"WhatsApp Chat with X\.txt, line 2: .*day-first"):
        read(path)


def test_ids_are_stable_across_reads_and_a_grown_export(tmp_path: Path) -> None:
    source = FIXTURES / "WhatsApp Chat with Priya.txt"
    first = [e.id for e in events(read(source))]
    assert first == [e.id for e in events(read(source))]
    grown = tmp_path / source.name
    grown.write_text(
        source.read_text() + "15/03/2025, 08:31 - Priya: ok\n16/03/2025, 10:00 - Sam: ok\n"
    )
    again = [e.id for e in events(read(grown))]
    assert again[: len(first)] == first
    assert len(set(again)) == len(again) == len(first) + 2


def test_zip_export_reads_the_chat_member(tmp_path: Path) -> None:
    archive = tmp_path / "WhatsApp Chat - Lena.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.write(FIXTURES / "WhatsApp Chat - Lena.txt", "_chat.txt")
        z.writestr("00000012-PHOTO-2025-03-14-21-06-02.jpg", b"\xff\xd8\xff")
    assert IMPORTER.sniff(archive)
    from_zip = read(archive)
    assert from_zip == read(FIXTURES / "WhatsApp Chat - Lena.txt")


def test_progress_reaches_the_end() -> None:
    heard: list[tuple[int, int]] = []
    path = FIXTURES / "WhatsApp Chat with Priya.txt"
    list(
        IMPORTER.read(
            path, ImportOptions(tz=LISBON), lambda done, total: heard.append((done, total))
        )
    )
    assert heard[-1][0] == heard[-1][1] > 0


def test_bare_parse_counts_messages() -> None:
    assert bare_parse(FIXTURES / "WhatsApp Chat with Priya.txt") == 7
    assert bare_parse(FIXTURES / "WhatsApp Chat with Lisbon trip.txt") == 3


def test_sniff() -> None:
    for path in FIXTURES.iterdir():
        assert IMPORTER.sniff(path), path.name


def test_sniff_refuses_other_text_and_suffixes(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n14/03/2025, 21:05 - Priya: hi\n")
    assert not IMPORTER.sniff(notes)
    renamed = tmp_path / "chat.log"
    renamed.write_text("14/03/2025, 21:05 - Priya: hi\n")
    assert not IMPORTER.sniff(renamed)
    other_zip = tmp_path / "photos.zip"
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("a.jpg", b"x")
    assert not IMPORTER.sniff(other_zip)
    assert not IMPORTER.sniff(tmp_path / "missing.txt")
    assert not IMPORTER.sniff(tmp_path)


def test_sniff_does_not_open_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "chat.txt"
    os.mkfifo(fifo)
    # a sniff that opened it would block: asked with a deadline
    assert sniff_without_blocking(IMPORTER, fifo) is False


def test_a_file_that_is_no_chat_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "WhatsApp Chat with Nobody.txt"
    path.write_text("\nDear diary,\n14/03/2025, 21:05 - Priya: hi\n")
    with pytest.raises(BadInput, match=r"WhatsApp Chat with Nobody\.txt, line 2: not a WhatsApp"):
        read(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(BadInput, match=r"empty\.txt: no WhatsApp messages"):
        read(empty)


def test_non_utf8_is_refused_before_anything_is_yielded(tmp_path: Path) -> None:
    path = tmp_path / "WhatsApp Chat with Priya.txt"
    path.write_bytes(b"14/03/2025, 21:05 - Priya: hi\n14/03/2025, 21:06 - Priya: caf\xe9\n")
    items = IMPORTER.read(path, ImportOptions(tz=LISBON), None)
    with pytest.raises(BadInput, match=r"WhatsApp Chat with Priya\.txt, line 2: not UTF-8"):
        next(items)


def test_impossible_date_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("31/02/2025, 21:05 - Priya: hi\n")
    with pytest.raises(BadInput, match=r"x\.txt, line 1: no such date"):
        read(path)


def test_a_broken_zip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "WhatsApp Chat - Lena.zip"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(BadInput, match=r"WhatsApp Chat - Lena\.zip"):
        read(path)


def test_deleted_messages_are_skipped_and_long_chat_names_bounded(tmp_path: Path) -> None:
    path = tmp_path / f"WhatsApp Chat with {'Cousins ' * 28}.txt"  # 224 characters
    path.write_text(
        "14/03/2025, 21:05 - Priya: This message was deleted\n"
        "14/03/2025, 21:06 - Sam: You deleted this message\n"
        "14/03/2025, 21:07 - Priya: still here\n"
    )
    items = read(path)
    assert items[:2] == [Skipped("deleted message")] * 2
    (event,) = events(items)
    assert event.thread is not None and len(event.thread) == 200
    assert event.thread.startswith("whatsapp:Cousins Cousins")


# -- inputs built to cost minutes ------------------------------------------------------


def _zip(tmp_path: Path, chat: bytes) -> Path:
    path = tmp_path / "WhatsApp Chat with Ann.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_chat.txt", chat)
    return path


def test_a_zip_that_inflates_too_many_times_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat of one message and a gigabyte of blank lines zips to a
    megabyte; past a size any chat may have, the ratio decides."""
    from pixie.device.ingest import whatsappfile

    monkeypatch.setattr(whatsappfile, "ZIP_RATIO_FREE", 64 * 1024)
    bomb = _zip(tmp_path, b"[01/01/2024, 10:00:00] Ann: hi\n" + b"\n" * 4_000_000)
    with pytest.raises(BadInput, match=r"inflates 4,000,031 bytes from [\d,]+ \(more than 100"):
        read(bomb)
    # An ordinary chat of the same size is taken.
    lines = b"".join(
        b"[01/01/2024, 10:%02d:%02d] Ann: message %d with words of its own\n"
        % (i // 60 % 60, i % 60, i)
        for i in range(60_000)
    )
    assert len(events(read(_zip(tmp_path, lines)))) == 60_000


def test_runs_of_blank_and_continuation_lines_are_read_as_one_piece(tmp_path: Path) -> None:
    """8 MiB of blank lines after one message took seconds a megabyte (each
    line read, matched and kept one at a time); the message keeps its text."""
    chat = (
        b"[01/01/2024, 10:00:00] Ann: hi\n"
        + b"\n" * (8 * 1024 * 1024)
        + b"[01/01/2024, 10:01:00] Ann: there\nsecond line\n"
    )
    found = events(read(_zip(tmp_path, chat)))
    assert [e.text for e in found] == ["hi", "there\nsecond line"]


def test_continuation_lines_are_kept_as_if_read_one_at_a_time() -> None:
    """The cap on a message's text applies line by line, whatever the pieces."""
    from pixie.device.ingest.base import MAX_TEXT_CHARS
    from pixie.device.ingest.whatsapp import _head, _Pending

    head = _head("[01/01/2024, 10:00:00] Ann: hi")
    assert head is not None
    lines = ["", "a" * 1000, "b\r", "", "c" * (MAX_TEXT_CHARS - 1500), "d" * 3000, "e", ""]
    for pieces in ([lines], [[line] for line in lines], [lines[:3], lines[3:6], lines[6:]]):
        one_by_one, together = _Pending(1, head, "Ann", "hi"), _Pending(1, head, "Ann", "hi")
        for line in lines:
            chars = one_by_one.chars
            if chars <= MAX_TEXT_CHARS:
                one_by_one.lines.append(line.rstrip("\r"))
                one_by_one.chars += len(line.rstrip("\r")) + 1
        for piece in pieces:
            together.add("\n".join(piece))
        assert "\n".join(together.lines) == "\n".join(one_by_one.lines)
        assert together.chars == one_by_one.chars
