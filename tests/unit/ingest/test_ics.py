"""The iCalendar importer: occurrences, zones, people, skips, sniffing, bad files."""

from __future__ import annotations

import datetime as dt
import os
import zoneinfo
from pathlib import Path

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest import ics
from pixie.device.ingest import load as loading
from pixie.device.ingest.base import ContactCard, ImportOptions, Item, Skipped, to_us
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import EventKind, NewEvent
from tests.support.sniffing import sniff_without_blocking

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "ics"
LISBON = zoneinfo.ZoneInfo("Europe/Lisbon")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return to_us(dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC), dt.UTC)


def options(tz: dt.tzinfo = LISBON, me: tuple[str, ...] = ("me@example.com",)) -> ImportOptions:
    return ImportOptions(me=me, tz=tz, now_us=to_us(NOW, dt.UTC))


def read(name: str, opts: ImportOptions | None = None) -> list[Item]:
    return list(ics.IMPORTER.read(FIXTURES / name, opts or options(), None))


def events(items: list[Item]) -> list[NewEvent]:
    return [i for i in items if isinstance(i, NewEvent)]


def skips(items: list[Item]) -> list[str]:
    return [i.reason for i in items if isinstance(i, Skipped)]


def cards(items: list[Item]) -> list[ContactCard]:
    return [i for i in items if isinstance(i, ContactCard)]


def test_google_weekly_series_drops_the_exdate_and_moves_the_override() -> None:
    items = read("google.ics")
    sync = [e for e in events(items) if e.thread == "cal:5f3c1a2b9d8e@google.com"]
    # Tuesdays at 10:00 Lisbon from 3 March, six of them; 10 March excluded,
    # 17 March moved to Wednesday 18 March 15:00. Lisbon is UTC+0 until
    # summer time starts on 29 March, UTC+1 after.
    assert [e.at for e in sync] == [
        utc(2026, 3, 3, 10),
        utc(2026, 3, 18, 15),
        utc(2026, 3, 24, 10),
        utc(2026, 3, 31, 9),
        utc(2026, 4, 7, 9),
    ]
    assert all(e.kind is EventKind.CALENDAR for e in sync)
    moved = sync[1]
    assert moved.text.startswith("Engine sync (moved)\n2026-03-18 15:00–16:00")
    assert moved.source == "ics:5f3c1a2b9d8e@google.com#2026-03-17T10:00:00Z"
    # After the change to summer time the local hour stays 10:00.
    assert "2026-03-31 10:00–11:00" in sync[3].text


def test_google_text_people_and_contact() -> None:
    items = read("google.ics")
    first = events(items)[0]
    assert first.text == (
        "Engine sync\n"
        "2026-03-03 10:00–11:00\n"
        "Location: Room 4, Rua Augusta 10, Lisboa\n"
        "With: Ada Lovelace; bob@example.net\n"
        "\n"
        "Weekly sync on the analytical engine.\nAgenda in the shared document."
    )
    # The user organised it, so the contact is the first other attendee.
    assert first.contact == "ada.lovelace@example.org"
    assert first.from_me is True
    assert first.thread == "cal:5f3c1a2b9d8e@google.com"
    lunch = next(e for e in events(items) if e.thread == "cal:a9b8c7d6e5f4@google.com")
    assert lunch.at == utc(2026, 4, 20, 13, 30)
    assert lunch.contact == "grace@navy.example"
    assert lunch.from_me is False
    assert lunch.source == "ics:a9b8c7d6e5f4@google.com"  # a single event: no recurrence id
    assert "Room 4" not in lunch.text  # a resource is not a person
    assert cards(items) == [
        ContactCard("Ada Lovelace", ("ada.lovelace@example.org",)),
        ContactCard("bob", ("bob@example.net",)),  # Google writes the address as CN
        ContactCard("Grace Hopper", ("grace@navy.example",)),
    ]


def test_cards_come_before_the_events_that_name_them() -> None:
    seen: set[str] = set()
    for item in read("google.ics") + read("outlook.ics"):
        if isinstance(item, ContactCard):
            seen.update(item.aliases)
        elif isinstance(item, NewEvent) and item.contact is not None:
            assert item.contact in seen


def test_google_skips_the_cancelled_and_the_startless() -> None:
    assert sorted(skips(read("google.ics"))) == ["cancelled", "event without a start"]


def test_the_user_is_no_card_and_without_me_is_an_attendee() -> None:
    items = read("google.ics", options(me=()))
    assert ContactCard("Me Myself", ("me@example.com",)) in cards(items)
    first = events(items)[0]
    assert first.contact == "me@example.com"  # the organiser comes first
    assert first.from_me is False


def test_open_ended_daily_rule_is_bounded_by_the_window() -> None:
    found = events(read("daily.ics"))
    # Every day at 09:30 Lisbon from 6 January 2025 up to one year (366 days)
    # after the import on 1 June 2026: the last one is on 1 June 2027.
    days = (dt.date(2027, 6, 1) - dt.date(2025, 1, 6)).days + 1
    assert len(found) == days == 877
    assert found[0].at == utc(2025, 1, 6, 9, 30)
    assert found[-1].at == utc(2027, 6, 1, 8, 30)
    assert len({e.id for e in found}) == days


def test_all_day_yearly_birthday_at_local_midnight() -> None:
    found = events(read("birthday.ics", options(tz=NEW_YORK)))
    # The window opens 3,653 days before 1 June 2026 (31 May 2016) and closes
    # 366 days after it (2 June 2027): birthdays 2017 to 2027.
    assert [dt.datetime.fromtimestamp(e.at / 1e6, dt.UTC).year for e in found] == list(
        range(2017, 2028)
    )
    # Summer time in New York began on 12 March 2017: midnight is 04:00 UTC.
    assert found[0].at == utc(2017, 3, 14, 4)
    assert found[0].text == "Ada's birthday\n2017-03-14 all day"
    assert found[0].source == "ics:0C4A5F2E-1B7D-4C3A-9E8F-ADA1815BDAY#2017-03-14"
    lisbon = events(read("birthday.ics"))
    assert lisbon[0].at == utc(2017, 3, 14)


def test_floating_times_read_in_the_given_zone() -> None:
    lisbon = events(read("floating.ics"))
    new_york = events(read("floating.ics", options(tz=NEW_YORK)))
    assert lisbon[0].at == utc(2026, 4, 15, 17, 30)  # 18:30 WEST
    assert new_york[0].at == utc(2026, 4, 15, 22, 30)  # 18:30 EDT
    assert lisbon[0].text == "Yoga\n2026-04-15 18:30–19:30\nLocation: Studio"


def test_event_without_uid_gets_an_id_from_what_it_says() -> None:
    one = events(read("floating.ics"))[1]
    two = events(read("floating.ics"))[1]
    assert one.text.startswith("Event without a UID")
    assert one.id == two.id
    assert one.thread is not None and one.thread.startswith("cal:")
    assert one.thread == two.thread


def test_outlook_windows_zone_and_unknown_zone() -> None:
    items = read("outlook.ics")
    planning, rover = events(items)
    # 09:00 "W. Europe Standard Time" in July is UTC+2.
    assert planning.at == utc(2026, 7, 10, 7)
    assert planning.contact == "eva.schmidt@firma.example"
    assert "With: Schmidt, Eva; Müller, Hans" in planning.text
    assert "Konferenzraum Berlin" not in {c.name for c in cards(items)}
    # A zone nobody knows is read in the given zone (Lisbon, UTC+1 in July).
    assert rover.at == utc(2026, 7, 11, 8)


def test_stable_ids_across_two_reads() -> None:
    for name in ("google.ics", "outlook.ics", "birthday.ics", "floating.ics"):
        first = [e.id for e in events(read(name))]
        second = [e.id for e in events(read(name))]
        assert first == second
        assert len(set(first)) == len(first)
        assert all(i is not None for i in first)


def test_crlf_and_folded_lines_match_the_unfolded_lf_file(tmp_path: Path) -> None:
    raw = (FIXTURES / "google.ics").read_bytes()
    assert b"\r\n" in raw and b"\r\n " in raw
    plain = tmp_path / "plain.ics"
    plain.write_bytes(raw.replace(b"\r\n ", b"").replace(b"\r\n", b"\n"))
    assert read("google.ics") == list(ics.IMPORTER.read(plain, options(), None))


def test_progress_heard_at_the_end() -> None:
    heard: list[tuple[int, int]] = []
    list(ics.IMPORTER.read(FIXTURES / "daily.ics", options(), lambda a, b: heard.append((a, b))))
    size = (FIXTURES / "daily.ics").stat().st_size
    assert heard[-1] == (size, size)


def write(tmp_path: Path, body: str, name: str = "x.ics") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def calendar(*events_text: str) -> str:
    return "BEGIN:VCALENDAR\nVERSION:2.0\n" + "".join(events_text) + "END:VCALENDAR\n"


def test_too_frequent_rules_are_skipped(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        calendar(
            "BEGIN:VEVENT\nUID:tick\nDTSTART:20260101T000000Z\nRRULE:FREQ=MINUTELY\n"
            "SUMMARY:Tick\nEND:VEVENT\n"
        ),
    )
    assert list(ics.IMPORTER.read(path, options(), None)) == [
        Skipped("repeats more often than hourly")
    ]


def test_a_series_is_cut_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ics, "MAX_OCCURRENCES", 3)
    path = write(
        tmp_path,
        calendar(
            "BEGIN:VEVENT\nUID:d\nDTSTART:20260101T080000Z\nRRULE:FREQ=DAILY;COUNT=10\n"
            "SUMMARY:D\nEND:VEVENT\n"
        ),
    )
    items = list(ics.IMPORTER.read(path, options(), None))
    assert len(events(items)) == 3
    assert skips(items) == ["occurrences past the limit of one series"]


def test_cancelled_occurrence_of_a_series(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        calendar(
            "BEGIN:VEVENT\nUID:s\nDTSTART:20260101T080000Z\nRRULE:FREQ=DAILY;COUNT=3\n"
            "SUMMARY:S\nEND:VEVENT\n",
            "BEGIN:VEVENT\nUID:s\nRECURRENCE-ID:20260102T080000Z\nDTSTART:20260102T080000Z\n"
            "STATUS:CANCELLED\nSUMMARY:S\nEND:VEVENT\n",
        ),
    )
    items = list(ics.IMPORTER.read(path, options(), None))
    assert [e.at for e in events(items)] == [utc(2026, 1, 1, 8), utc(2026, 1, 3, 8)]
    assert skips(items) == ["cancelled"]


def test_long_uid_is_hashed_into_thread_and_source(tmp_path: Path) -> None:
    uid = "u" * 300
    path = write(
        tmp_path,
        calendar(f"BEGIN:VEVENT\nUID:{uid}\nDTSTART:20260101T080000Z\nSUMMARY:L\nEND:VEVENT\n"),
    )
    (event,) = events(list(ics.IMPORTER.read(path, options(), None)))
    assert event.thread is not None and event.source is not None
    assert len(event.thread) <= 200 and len(event.source) <= 200
    assert uid not in event.thread


def test_floating_time_in_a_calendar_that_names_its_zone(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "BEGIN:VCALENDAR\nVERSION:2.0\nX-WR-TIMEZONE:America/New_York\n"
        "BEGIN:VEVENT\nUID:f\nDTSTART:20260101T080000\nSUMMARY:F\nEND:VEVENT\nEND:VCALENDAR\n",
    )
    # The calendar's own zone wins over the one given for the import.
    (event,) = events(list(ics.IMPORTER.read(path, options(tz=LISBON), None)))
    assert event.at == utc(2026, 1, 1, 13)


def test_unknown_calendar_zone_falls_back(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "BEGIN:VCALENDAR\nVERSION:2.0\nX-WR-TIMEZONE:Nowhere/Special\n"
        "BEGIN:VEVENT\nUID:f\nDTSTART:20260101T080000\nSUMMARY:F\nEND:VEVENT\nEND:VCALENDAR\n",
    )
    (event,) = events(list(ics.IMPORTER.read(path, options(tz=NEW_YORK), None)))
    assert event.at == utc(2026, 1, 1, 13)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("hello, this is not a calendar\n", "not an iCalendar file"),
        ("", "no complete VCALENDAR"),
        ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:x\nDTSTART:20260101T100000Z\n", "no complete"),
        ("BEGIN:VCARD\nFN:Ada\nEND:VCARD\n", "no complete VCALENDAR"),
        (calendar("BEGIN:VEVENT\nUID:x\nDTSTART:2026BAD\nEND:VEVENT\n"), "unreadable DTSTART"),
        (
            calendar(
                "BEGIN:VEVENT\nUID:x\nDTSTART:20260101T100000Z\nRRULE:FREQ=OFTEN\nEND:VEVENT\n"
            ),
            "unreadable RRULE",
        ),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, body, "broken.ics")
    with pytest.raises(BadInput) as caught:
        list(ics.IMPORTER.read(path, options(), None))
    assert "broken.ics" in str(caught.value)
    assert message in str(caught.value)


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"missing\.ics"):
        list(ics.IMPORTER.read(tmp_path / "missing.ics", options(), None))


def test_file_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ics, "MAX_FILE_BYTES", 100)
    path = write(tmp_path, calendar("X" * 200 + "\n"), "big.ics")
    with pytest.raises(BadInput, match=r"big\.ics: larger than"):
        list(ics.IMPORTER.read(path, options(), None))


def test_sniff_by_suffix_and_content(tmp_path: Path) -> None:
    assert ics.IMPORTER.sniff(FIXTURES / "google.ics")
    assert ics.IMPORTER.sniff(tmp_path / "absent.ICAL")  # by name alone
    assert ics.IMPORTER.sniff(write(tmp_path, "\ufeff\n  BEGIN:VCALENDAR\nEND:VCALENDAR\n", "a"))
    assert ics.IMPORTER.sniff(write(tmp_path, "begin:vcalendar\n", "lower.txt"))
    assert not ics.IMPORTER.sniff(write(tmp_path, "BEGIN:VCARD\n", "card.txt"))
    assert not ics.IMPORTER.sniff(write(tmp_path, "", "empty"))
    assert not ics.IMPORTER.sniff(tmp_path / "absent")
    assert not ics.IMPORTER.sniff(tmp_path)  # a folder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_sniff_never_opens_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "calendar-pipe"
    os.mkfifo(fifo)
    assert sniff_without_blocking(ics.IMPORTER, fifo) is False


def test_names_and_units() -> None:
    assert ics.IMPORTER.name == "ics"
    assert ics.IMPORTER.units == ("calendar event", "calendar events")


def test_every_fixture_loads_and_a_second_import_adds_nothing(node: Node) -> None:
    for path in sorted(FIXTURES.glob("*.ics")):
        first = loading.load(node.log, ics.IMPORTER.read(path, options(), None))
        again = loading.load(node.log, ics.IMPORTER.read(path, options(), None))
        assert first.imported > 0
        assert (again.imported, again.already_present) == (0, first.imported)
    # An event naming an attendee's address resolves to that attendee's card.
    ada = node.contacts.info(node.contacts.resolve("ada.lovelace@example.org"))
    assert ada.name == "Ada Lovelace"
    assert all(c.name != "Me Myself" for c in node.contacts.all())


# -- calendars built to cost memory and minutes --------------------------------------


def _series(uid: str, start: str, rule: str) -> str:
    return f"BEGIN:VEVENT\nUID:{uid}\nDTSTART:{start}\nRRULE:{rule}\nSUMMARY:{uid}\nEND:VEVENT\n"


def test_an_hourly_rule_that_fires_every_second_is_skipped(tmp_path: Path) -> None:
    """FREQ=HOURLY with 60 minutes and 60 seconds is a secondly rule: the BY
    parts count, not the FREQ alone (this 400-byte file took gigabytes)."""
    every = ",".join(str(i) for i in range(60))
    path = write(
        tmp_path,
        calendar(
            _series("tick", "20260101T000000Z", f"FREQ=HOURLY;BYMINUTE={every};BYSECOND={every}")
        ),
    )
    assert list(ics.IMPORTER.read(path, options(), None)) == [
        Skipped("repeats more often than hourly")
    ]


def test_a_frequent_rule_from_long_ago_is_skipped_not_stepped_through(tmp_path: Path) -> None:
    """FREQ=HOURLY from the year 1 would step through 17 million occurrences
    before the window; a daily rule from 1900 is stepped through and kept."""
    path = write(
        tmp_path,
        calendar(
            _series("ancient", "00010101T000000Z", "FREQ=HOURLY"),
            _series("century", "19000101T080000Z", "FREQ=YEARLY"),
            _series("daily", "19000101T080000Z", "FREQ=DAILY"),
        ),
    )
    items = list(ics.IMPORTER.read(path, options(), None))
    assert skips(items).count("repeats too often since too long ago to expand") == 1
    found = events(items)
    assert {e.thread for e in found} == {"cal:century", "cal:daily"}
    # The daily series keeps its newest occurrences, up to now and a year ahead.
    daily = sorted(e.at for e in found if e.thread == "cal:daily")
    assert abs(len(daily) - (3653 + 366)) <= 2


def test_an_hourly_series_keeps_its_newest_occurrences_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, calendar(_series("hourly", "20200101T000000Z", "FREQ=HOURLY")))
    items = list(ics.IMPORTER.read(path, options(), None))
    found = sorted(e.at for e in events(items))
    assert len(found) == ics.MAX_OCCURRENCES
    assert skips(items) == ["occurrences past the limit of one series"]
    # The newest: they reach the end of the window (a year ahead of now).
    assert found[-1] >= to_us(NOW + ics.FUTURE - dt.timedelta(hours=2), dt.UTC)


def test_many_frequent_series_in_a_small_file_are_cut_at_the_files_limit(
    tmp_path: Path,
) -> None:
    """200 hourly series (20 KB) gave 2 million events and minutes of CPU."""
    body = calendar(*(_series(f"s{i}", "20260101T000000Z", "FREQ=HOURLY") for i in range(200)))
    path = write(tmp_path, body)
    items = list(ics.IMPORTER.read(path, options(), None))
    limit = ics.MAX_FILE_OCCURRENCES + ics.FILE_OCCURRENCES_PER_KIB * (len(body) // 1024)
    assert len(events(items)) == limit
    assert "series past the file's limit of occurrences" in skips(items)
