"""The importers' shared helpers: ids derived in steps equal `stable_id`,
and `LocalTimes` converts wall-clock times exactly as `to_us` does, through
offset changes of every shape."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pixie.device.ingest.base import (
    ImportOptions,
    LocalTimes,
    id_from_digest,
    id_hasher,
    id_parts,
    stable_id,
    to_us,
)
from pixie.device.ingest.whatsapp import IMPORTER as WHATSAPP
from pixie.device.store.memlog import NewEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "whatsapp"


def test_an_id_hashed_in_steps_is_the_stable_id() -> None:
    parts = ("Priya", 1_741_986_300_000_000, "Priya", "ok", 0)
    for split in range(len(parts) + 1):
        hasher = id_hasher("whatsapp", *parts[:split])
        hasher.update(id_parts(*parts[split:]))
        assert id_from_digest(hasher.digest(), 1_741_986_300_000_000) == stable_id(
            "whatsapp", *parts, at_us=1_741_986_300_000_000
        )
    assert id_parts(None, "é") == "\x1f\x1e\x1fé".encode()


def test_whatsapp_ids_are_the_stable_ids_of_their_parts() -> None:
    """An id: the chat, the timestamp as written, the sender, the text and
    the repeat count, timed by the written time read as UTC (so no --tz
    changes it); the earlier scheme's id (the minute in the zone) rides along
    as the legacy id."""
    items = WHATSAPP.read(
        FIXTURES / "WhatsApp Chat with Priya.txt",
        ImportOptions(me=("Sam",), tz=ZoneInfo("America/New_York")),
        None,
    )
    seen: dict[tuple[int, str, str], int] = {}
    for event in (i for i in items if isinstance(i, NewEvent)):
        sender = "Sam" if event.from_me else "Priya"
        minute = event.at - event.at % 60_000_000
        occurrence = seen.get((minute, sender, event.text), 0)
        seen[(minute, sender, event.text)] = occurrence + 1
        assert event.legacy_id == stable_id(
            "whatsapp", "Priya", minute, sender, event.text, occurrence, at_us=event.at
        )
        wall = minute - 4 * 3600 * 1_000_000  # New York is UTC-4 in mid-March 2025
        day = dt.datetime.fromtimestamp(wall / 1e6, dt.UTC)
        stamp = f"{day:%d/%m/%Y} {day.hour}:{day:%M}:00"
        assert event.id == stable_id(
            "whatsapp", "Priya", stamp, sender, event.text, occurrence, at_us=wall
        )


@pytest.mark.parametrize(
    ("zone", "year"),
    [
        ("Europe/Lisbon", 2025),  # one hour, at 01:00 UTC
        ("America/New_York", 2024),  # one hour, at 02:00 local
        ("Australia/Lord_Howe", 2025),  # half an hour
        ("Asia/Kathmandu", 1986),  # a quarter-hour step, once
        ("UTC", 2025),
    ],
)
def test_local_times_match_to_us_around_every_change_of_offset(zone: str, year: int) -> None:
    tz = ZoneInfo(zone)
    times = LocalTimes(tz)
    day = dt.date(year, 1, 1)
    changes: list[dt.date] = []
    while day.year == year:
        noon = dt.datetime.combine(day, dt.time(12), tzinfo=tz)
        before = dt.datetime.combine(day - dt.timedelta(days=1), dt.time(12), tzinfo=tz)
        if noon.utcoffset() != before.utcoffset():
            changes.append(day)
        day += dt.timedelta(days=1)
    checked = [dt.date(year, 6, 1), *changes, *(c - dt.timedelta(days=1) for c in changes)]
    for day in checked:
        for minute in range(0, 24 * 60, 7):
            hour, rest = divmod(minute, 60)
            wall = dt.datetime.combine(day, dt.time(hour, rest, 30))
            assert times.us(day, hour, rest, 30) == to_us(wall, tz), (zone, wall)
    if zone != "UTC":
        assert changes, "the zone changes its offset in that year"
