"""A repeating calendar entry, understood as one thing ("Climbing with Priya,
weekly on Thursdays at 19:00, since 4 Dec 2025, until 26 Nov 2026, 2 weeks
skipped") rather than fifty appointments.

The calendar importer writes one event per occurrence, all on the series'
thread; distillation reads them as one source (`service.series_lines`) and
hands the starts of every occurrence to `series_of`, with the text of the
first. Days and times are the calendar's own: the first occurrence's text
says its local day and time ("2026-01-08 19:00–21:00"), which against its
start in UTC gives the zone's offset, and every occurrence is read in that
offset (a change of summer time moves a start by an hour, never by a day,
for anything between 01:00 and 23:00).

How often is read from the gaps between occurrences: their median, in days,
names the cadence. An occurrence missing from a daily, weekly or fortnightly
rhythm is "skipped" (an EXDATE, a cancelled week); a monthly or yearly one
is not checked for gaps, since months differ in length and rules such as
"the second Tuesday" do not keep one gap.

Only `Series.around` depends on when it is asked (which occurrence is next,
which was last); everything else is the same for the same occurrences, so a
re-run of distillation rewrites nothing until an occurrence has passed.
"""

from __future__ import annotations

import datetime as dt
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import Appointment
from pixie.device.distill.extract import MONTHS, WEEKDAYS
from pixie.device.distill.plans import appointment_in

DAY_US = 86_400_000_000
MAX_LISTED_SKIPS = 6  # skipped days named in words; the rest are counted
_CADENCES = (  # (most days of a median gap, its name, the step checked for skips)
    (1, "daily", 1),
    (7, "weekly", 7),
    (14, "every two weeks", 14),
    (21, "every three weeks", 21),
    (31, "monthly", 0),
    (92, "every few months", 0),
    (366, "yearly", 0),
)


@dataclass(frozen=True, slots=True)
class Series:
    """A repeating entry: what, how often, and its local days."""

    appointment: Appointment  # the first occurrence: what, day, time, place, with
    cadence: str  # "weekly", "every two weeks", ..., or "repeating"
    days: tuple[dt.date, ...]  # every occurrence's local day, in order
    skipped: tuple[dt.date, ...]  # days missing from the rhythm
    offset_us: int  # the calendar's zone offset at the first occurrence

    @property
    def first(self) -> dt.date:
        return self.days[0]

    @property
    def last(self) -> dt.date:
        return self.days[-1]

    @property
    def weekday(self) -> str | None:
        """The weekday every occurrence falls on, if they all share one."""
        days = {d.weekday() for d in self.days}
        return WEEKDAYS[days.pop()] if len(days) == 1 else None

    def local_start(self, at: int) -> int:
        """An occurrence's start (UTC microseconds) as the calendar's wall clock."""
        return at + self.offset_us

    def around(self, now: int) -> tuple[dt.date | None, dt.date | None]:
        """The first occurrence's day on or after ``now``'s day (UTC
        microseconds, read in the calendar's zone), and the last before it."""
        today = _day(now + self.offset_us)
        upcoming = next((d for d in self.days if d >= today), None)
        past = next((d for d in reversed(self.days) if d < today), None)
        return upcoming, past


def series_of(text: str, at: int, occurrences: Sequence[int]) -> Series | None:
    """The series whose first occurrence reads ``text`` and starts at ``at``,
    with every occurrence starting at ``occurrences`` (ascending); None when
    the text names no day or there are fewer than two occurrences."""
    if len(occurrences) < 2:
        return None
    found = appointment_in(text, at)
    if found is None:
        return None
    local = dt.datetime.fromisoformat(found.day + (f"T{found.time}" if found.time else "T00:00"))
    utc = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).replace(tzinfo=None)
    offset = int((local - utc).total_seconds()) * 1_000_000
    days = tuple(dict.fromkeys(_day(o + offset) for o in sorted(occurrences)))
    if len(days) < 2:
        return None
    gaps = [(b - a).days for a, b in itertools.pairwise(days)]
    median = statistics.median_low(gaps)
    cadence, step = "repeating", 0
    for most, name, check in _CADENCES:
        if median <= most:
            cadence, step = name, check
            break
    skipped: list[dt.date] = []
    if step and median == step:
        present = set(days)
        day = days[0]
        while day < days[-1]:
            day += dt.timedelta(days=step)
            # A day either side: a start near midnight moved by summer time.
            near = (day - dt.timedelta(days=1), day, day + dt.timedelta(days=1))
            if not any(d in present for d in near):
                skipped.append(day)
    return Series(found, cadence, days, tuple(skipped), offset)


def _day(local_us: int) -> dt.date:
    return dt.datetime.fromtimestamp(local_us / 1_000_000, tz=dt.UTC).date()


def short(day: dt.date, *, year: bool = True) -> str:
    """ "4 Dec 2025", or "4 Dec" without the year."""
    text = f"{day.day} {MONTHS[day.month - 1][:3]}"
    return f"{text} {day.year}" if year else text


def rhythm(series: Series) -> str:
    """ "weekly on Thursdays at 19:00": how often, which day, what time."""
    parts = [series.cadence]
    weekday = series.weekday
    if weekday is not None and series.cadence not in ("daily",):
        parts.append(f"on {weekday}s")
    if series.appointment.time:
        parts.append(f"at {series.appointment.time}")
    return " ".join(parts)


def dates_by_month(days: Sequence[dt.date], limit: int) -> str:
    """ "Dec 2025: 4, 11, 18; Jan 2026: 8, 15" within ``limit`` characters
    (the earliest months dropped first, and said so)."""
    months: dict[tuple[int, int], list[int]] = {}
    for day in days:
        months.setdefault((day.year, day.month), []).append(day.day)
    parts = [
        f"{MONTHS[m - 1][:3]} {y}: {', '.join(str(d) for d in ds)}" for (y, m), ds in months.items()
    ]
    text = "; ".join(parts)
    while len(text) > limit and len(parts) > 1:
        parts = parts[1:]
        text = "…; " + "; ".join(parts)
    return text[:limit]


def skipped_words(series: Series) -> str:
    """ "2 skipped (25 Dec 2025, 1 Jan 2026)", or "" when none was."""
    if not series.skipped:
        return ""
    named = ", ".join(short(d) for d in series.skipped[:MAX_LISTED_SKIPS])
    more = len(series.skipped) - MAX_LISTED_SKIPS
    tail = f" and {more} more" if more > 0 else ""
    return f"{len(series.skipped)} skipped ({named}{tail})"


__all__ = ["Series", "dates_by_month", "rhythm", "series_of", "short", "skipped_words"]
