"""The dates a journal gives its entries: at the start of a line or heading,
in front matter, or in a file's and its folders' names, each read the
ways people write them."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from pixie.device.ingest.base import (
    to_us,
)

NOON = dt.time(12)

# --- dates ----------------------------------------------------------------------

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month_name>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = (
    r"(?:(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\.?,?\s+)?"
)
_ORDINAL = r"(?:st|nd|rd|th)?"
# A date at the start of a heading: ISO (2025-03-14, 2025/03/14, 2025.03.14),
# day first with dots (14.03.2025, as much of Europe writes it), or with an
# English month name either side of the day, after an optional weekday.
# Slashed dates with the year last are left alone: 03/04/2025 is March in
# one country and April in the next.
_DATE_FORMS = (
    _WEEKDAY + r"(?P<year>\d{4})([-/.])(?P<month>\d{1,2})\2(?P<day>\d{1,2})",
    _WEEKDAY + r"(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})",
    _WEEKDAY + r"(?P<day>\d{1,2})" + _ORDINAL + r"\s+" + _MONTH + r",?\s+(?P<year>\d{4})",
    _WEEKDAY + _MONTH + r"\s+(?P<day>\d{1,2})" + _ORDINAL + r",?\s+(?P<year>\d{4})",
)
_DATES = tuple(re.compile(form, re.IGNORECASE) for form in _DATE_FORMS)
# An optional time after a heading's date ("2025-03-14 21:05", "..., at 9:05 pm").
_TIME = re.compile(
    r"(?:\s*[,@]?\s*(?:at\s+)?|T)(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
    r"(?:\s*(?P<ampm>[ap])\.?m\.?)?",
    re.IGNORECASE,
)
# What may follow a date in a heading: nothing, or anything but a letter or digit
# ("2025-03-14 Friday", "[[2025-03-14]]"; not "2025-03-14abc").
_AFTER_DATE = re.compile(r"$|[\W_]")
# What may come before it: marks, not words ("**2025-03-14**", "[[...", an emoji).
_BEFORE_DATE = re.compile(r"[\W_]*")
# A front matter value: ISO 8601 date, with or without a time and an offset.
_FRONT_DATE = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[T ]\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,]\d+)?)?"
    r"\s*(?P<offset>Z|[+-]\d{2}(?::?\d{2})?)?)?",
    re.IGNORECASE,
)
_NAME_ISO = re.compile(r"(?<!\d)(\d{4})[-_.](\d{1,2})[-_.](\d{1,2})(?!\d)")
_NAME_COMPACT = re.compile(r"(?<!\d)(\d{4})(\d{2})(\d{2})(?!\d)")
_YEAR = re.compile(r"\d{4}")
_MONTH_DIR = re.compile(r"\d{1,2}")
_DAY_NAME = re.compile(r"(\d{1,2})(?:[\s_\-].*)?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class When:
    """A date as an entry states it: a day, perhaps a time, perhaps an offset."""

    day: dt.date
    time: dt.time | None = None
    offset: dt.tzinfo | None = None

    def at_us(self, tz: dt.tzinfo) -> int:
        moment = dt.datetime.combine(self.day, self.time or NOON)
        return to_us(moment.replace(tzinfo=self.offset) if self.offset else moment, tz)

    def key(self) -> str:
        """How a section is named in its source and id: "2025-03-14" or "2025-03-14T21:05"."""
        if self.time is None:
            return self.day.isoformat()
        return f"{self.day.isoformat()}T{self.time.isoformat(timespec='minutes')}"


class _NoDate(ValueError):
    """Something shaped like a date that is none (2025-02-30)."""


def _day(year: str | int, month: str | int, day: str | int) -> dt.date:
    try:
        return dt.date(int(year), int(month), int(day))
    except ValueError:
        raise _NoDate(f"{year}-{month}-{day}") from None


def _clock(hour: str, minute: str, second: str | None, ampm: str | None = None) -> dt.time:
    h = int(hour)
    if ampm:
        if not 1 <= h <= 12:
            raise _NoDate(f"{hour}:{minute} {ampm}m")
        h = h % 12 + (12 if ampm.lower() == "p" else 0)
    try:
        return dt.time(h, int(minute), int(second or 0))
    except ValueError:
        raise _NoDate(f"{hour}:{minute}") from None


def _offset(text: str | None) -> dt.tzinfo | None:
    if not text:
        return None
    if text.upper() == "Z":
        return dt.UTC
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:4] or 0)
    if minutes >= 24 * 60:
        raise _NoDate(text)
    return dt.timezone(dt.timedelta(minutes=-minutes if text[0] == "-" else minutes))


def date_at_start(text: str) -> When | None:
    """The date (and time) a heading or a name starts with, if it starts with
    one; raises `_NoDate` for a date-shaped start that is no date. A time
    after it that is no time ("25:00") is left as text, the date kept."""
    text = _BEFORE_DATE.sub("", text, count=1)  # its one match is at the start
    for form in _DATES:
        m = form.match(text)
        if m is None:
            continue
        parts = m.groupdict()
        month = _MONTHS[parts["month_name"].lower()] if parts.get("month_name") else parts["month"]
        rest = text[m.end() :]
        clock = _TIME.match(rest)
        time = None
        if clock is not None and _AFTER_DATE.match(rest[clock.end() :]):
            try:
                time = _clock(clock["hour"], clock["minute"], clock["second"], clock["ampm"])
                rest = rest[clock.end() :]
            except _NoDate:
                time = None
        if not _AFTER_DATE.match(rest):
            continue  # "2025-03-14abc" is not a date followed by a title
        return When(_day(parts["year"], month, parts["day"]), time)
    return None


def front_date(value: str) -> When | None:
    """A front matter ``date``/``created`` value; None when it is not
    date-shaped (a template's "{{date}}"), `_NoDate` when it is but is no date."""
    m = _FRONT_DATE.fullmatch(value)
    if m is None:
        return None
    day = _day(m["year"], m["month"], m["day"])
    if m["hour"] is None:
        return When(day)
    return When(day, _clock(m["hour"], m["minute"], m["second"]), _offset(m["offset"]))


def name_date(parts: tuple[str, ...]) -> When | None:
    """The date a file's name or folders give: "2025-03-14 Friday.md",
    "20250314.md", "Journal 2025-03-14.txt", "2025/03/14.md". A number that
    is not a real date is just a number here: names hold all sorts of them."""
    stem = PurePosixPath(parts[-1]).stem
    for pattern in (_NAME_ISO, _NAME_COMPACT):
        for m in pattern.finditer(stem):
            try:
                return When(_day(*m.groups()))
            except _NoDate:
                continue
    try:
        found = date_at_start(stem.strip())
    except _NoDate:
        found = None
    if found is not None:
        return When(found.day)
    day = _DAY_NAME.fullmatch(stem)
    if day and len(parts) >= 3 and _YEAR.fullmatch(parts[-3]) and _MONTH_DIR.fullmatch(parts[-2]):
        try:
            return When(_day(parts[-3], parts[-2], day[1]))
        except _NoDate:
            return None
    return None
