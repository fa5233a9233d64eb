"""Times and outcomes in words: "3 minutes ago", "yesterday", "Mon 7 Dec
2026, 16:05" in this computer's own time zone, "no answer".

Instants (a log event, a sync) are shown in the local zone of the machine
that serves the page. A note's date is a calendar day (distillation stamps an
appointment or a journal day at midnight UTC), so it is shown as that day,
never moved across midnight by the zone. Every template puts the exact UTC
time beside the words, in a ``<time datetime>`` and its ``title``.
"""

from __future__ import annotations

import datetime as dt

from pixie.protocol.timestamps import format_date, format_time

MINUTE = 60
HOUR = 60 * MINUTE
DAY_US = 86_400_000_000

# How a sync session ended (`SyncOutcome`'s values), in words.
OUTCOMES = {
    "in_sync": "already in sync",
    "synced": "synced",
    "superseded": "synced by another session",
    "no_answer": "no answer",
    "failed": "failed",
}


def _local(us: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).astimezone()


def _utc_day(us: int) -> dt.date:
    return dt.date.fromisoformat(format_date(us))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def local_time(us: int) -> str:
    """The instant in this computer's zone: "Mon 7 Dec 2026, 16:05"."""
    t = _local(us)
    return f"{t:%a} {t.day} {t:%b %Y, %H:%M}"


def day(us: int) -> str:
    """A note's calendar day: "Sun 1 Nov 2026"."""
    d = _utc_day(us)
    return f"{d:%a} {d.day} {d:%b %Y}"


def iso(us: int) -> str:
    """The exact UTC time, for ``datetime`` and ``title`` attributes."""
    return format_time(us)


def ago(us: int, now_us: int) -> str:
    """How long before ``now_us`` the instant was, or the local day when it
    was a week or more ago (or is ahead)."""
    seconds = (now_us - us) // 1_000_000
    if seconds < -MINUTE:
        return local_time(us)
    if seconds < MINUTE:
        return "just now"
    if seconds < HOUR:
        return _plural(seconds // MINUTE, "minute") + " ago"
    days = (_local(now_us).date() - _local(us).date()).days
    if days == 0:
        return _plural(seconds // HOUR, "hour") + " ago"
    if days == 1:
        return f"yesterday, {_local(us):%H:%M}"
    if days < 7:
        return f"{_local(us):%A}, {_local(us):%H:%M}"
    return local_time(us)


def today_start_us(now_us: int) -> int:
    """Midnight UTC of today's local date: where the calendar days of notes
    that are today or later begin."""
    today = _local(now_us).date()
    return int(dt.datetime(today.year, today.month, today.day, tzinfo=dt.UTC).timestamp()) * (
        1_000_000
    )


def ahead(us: int, now_us: int) -> str:
    """A note's day against today's local date: "today", "tomorrow", "in 5 days"."""
    days = (_utc_day(us) - _local(now_us).date()).days
    if days < 0:
        return _plural(-days, "day") + " ago" if days < -1 else "yesterday"
    if days == 0:
        return "today"
    if days == 1:
        return "tomorrow"
    if days < 14:
        return f"in {days} days"
    if days < 62:
        return f"in {days // 7} weeks"
    return f"in {days // 30} months"


def birthday(value: str) -> str:
    """A contact card's birthday, "YYYY-MM-DD" or "--MM-DD" with no year, as
    "10 Dec 1815" or "10 Dec" (as written when it is neither)."""
    year, _, rest = value.partition("-") if not value.startswith("--") else ("", "", value[2:])
    try:
        d = dt.date(int(year) if year else 2000, int(rest[:2]), int(rest[3:5]))
    except ValueError:
        return value
    if len(rest) != 5 or rest[2] != "-":
        return value
    return f"{d.day} {d:%b}" + (f" {d.year}" if year else "")


def outcome(value: str) -> str:
    """A sync outcome in words ("no answer" for ``no_answer``)."""
    return OUTCOMES.get(value, value.replace("_", " "))


__all__ = [
    "OUTCOMES",
    "ago",
    "ahead",
    "birthday",
    "day",
    "iso",
    "local_time",
    "outcome",
    "today_start_us",
]
