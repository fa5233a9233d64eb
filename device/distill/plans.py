"""Plans and appointments in what people wrote: an arrangement to meet (what,
when and where), a calendar entry's time and birthday, and a day in the
words people ask with."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import Appointment, Fact, FactKind
from pixie.device.distill.extract import (
    _DAY_MONTH,
    _MONTH_INDEX,
    _NAME_STOP,
    MONTHS,
    NAME,
    WEEKDAYS,
    _tidy,
    day_month,
)

# -- plans -------------------------------------------------------------------------

_ACTIVITY = re.compile(
    r"\b(dinner|lunch|breakfast|brunch|coffee|drinks|a walk|video call|call|climbing|"
    r"a run|concert|gig|cinema|movie|party|visit)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"\b(today|tonight|tomorrow|this weekend|next week|the weekend|(?:next )?(?:monday|"
    r"tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}|\d{1,2} ?(?:am|pm))\b", re.IGNORECASE)
PLAN_WINDOW_US = 12 * 3_600_000_000  # the lines of one arrangement


@dataclass(frozen=True, slots=True)
class Said:
    """A line as plan-finding reads it."""

    at: int
    text: str


def plan_in(lines: Sequence[Said]) -> Fact | None:
    """The latest arrangement among ``lines`` (oldest first): an activity and
    a day or a time, with the place and time if named, gathered from the
    proposal and the lines after it; None if the latest lines arrange nothing."""
    recent = [
        s
        for s in lines[-10:]
        if (_ACTIVITY.search(s.text) and (_WHEN.search(s.text) or _CLOCK.search(s.text)))
    ]
    if not recent:
        return None
    start = recent[-1].at  # the proposal; the answers, place and time follow it
    window = [s for s in lines if start <= s.at <= start + PLAN_WINDOW_US]
    last = window[-1].at
    what = when = clock = place = None
    for s in window:
        what = what or _group(_ACTIVITY, s.text)
        when = _group(_WHEN, s.text) or when
        clock = _group(_CLOCK, s.text) or clock
        for pattern in _PLACES:
            for match in pattern.finditer(s.text):
                candidate = _tidy(match.group(1)) or ""
                first = candidate.split()[0] if candidate else ""
                if candidate and first not in _NAME_STOP and first.casefold() not in _NOT_PLACES:
                    place = candidate
    if what is None:
        return None
    parts = [what.casefold()]
    if when:
        parts.append(when.casefold() if when.casefold() in _LOWER_WHEN else when.capitalize())
    if place:
        parts.append(f"at {place}")
    if clock:
        parts.append(f"at {clock}")
    return Fact(FactKind.PLAN, " ".join(parts), last)


# A place in an arrangement: "at Casa Lisa", "Casa Lisa at 19:30?", "let's do Musa".
_PLACES = (
    re.compile(rf"\bat ({NAME})"),
    re.compile(rf"^(?:[a-z]+[,!.]? )?({NAME}),? at \d"),
    re.compile(rf"\b(?i:let's do|let’s do|how about) ({NAME})"),
)


def arranges(text: str) -> bool:
    """Whether ``text`` arranges something (an activity and a day or a time):
    the stuff of plans, which come and go, not of what someone is like."""
    return bool(_ACTIVITY.search(text) and (_WHEN.search(text) or _CLOCK.search(text)))


_LOWER_WHEN = frozenset(
    {"today", "tonight", "tomorrow", "this weekend", "next week", "the weekend"}
)
_NOT_PLACES = frozenset(w.casefold() for w in (*WEEKDAYS, *MONTHS)) | {
    "i",
    "ok",
    "yes",
    "perfect",
    "great",
    "deal",
    "booked",
    "let's",
    "how",
    "what",
    "want",
    "free",
    "are",
    "can",
    "call",
    "video",
}


def _group(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


# -- appointments ------------------------------------------------------------------

_ISO_WHEN = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?: (\d{2}:\d{2}))?(?:–(\d{2}:\d{2}))?(?: – (\d{4}-\d{2}-\d{2}))?"
    r"(?: (\d{2}:\d{2}))?(?: all day)?$"
)
_LABEL_WHEN = re.compile(
    r"(?:,\s*)?\b(?:(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?,? )?(\d{1,2}) "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?(?: (\d{4}))?"
    r"(?:,? (?:at )?(\d{1,2}:\d{2}))?"
)


def appointment_in(text: str, at: int) -> Appointment | None:
    """A calendar entry's text as an appointment, or None when it names no day.

    The iCalendar importer writes the summary, then the time on its own line
    ("2026-03-14 15:00–16:00", "2026-03-14 all day"), then "Location: ..."
    and "With: a; b". A one-line entry names its day in words ("Fri 14 Mar
    10:00"); a day without a year is the first such day on or after ``at``.
    """
    lines = [line.strip() for line in text.splitlines()]
    if len(lines) >= 2 and (iso := _ISO_WHEN.match(lines[1])):
        day = f"{iso.group(1)}-{iso.group(2)}-{iso.group(3)}"
        try:  # a day or time no calendar has ("2026-02-30", "24:00") names none
            dt.date.fromisoformat(day)
            if iso.group(4):
                dt.time.fromisoformat(iso.group(4))
        except ValueError:
            return None
        place = next(
            (x[len("Location:") :].strip() for x in lines if x.startswith("Location:")), None
        )
        people = next((x[len("With:") :].strip() for x in lines if x.startswith("With:")), "")
        with_ = tuple(p.strip() for p in people.split(";") if p.strip())
        return Appointment(lines[0], day, iso.group(4), place or None, with_)
    first = lines[0] if lines else ""
    found = list(_LABEL_WHEN.finditer(first))
    if not found:
        return None
    match = found[-1]
    month = _MONTH_INDEX[match.group(3).casefold()]
    base = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).date()
    try:
        if match.group(4):
            when = dt.date(int(match.group(4)), month, int(match.group(2)))
        else:
            when = dt.date(base.year, month, int(match.group(2)))
            if when < base - dt.timedelta(days=1):
                when = dt.date(base.year + 1, month, int(match.group(2)))
    except ValueError:
        return None
    what = first[: match.start()].strip(" ,-–:") or first
    return Appointment(what, when.isoformat(), match.group(5), None, ())


def birthday_in_calendar(text: str) -> tuple[str, str] | None:
    """A birthday entry ("Ada's birthday (10 December)"): whose, and the day."""
    match = re.search(rf"({NAME})[’']s birthday\b(?: \(?({_DAY_MONTH})\)?)?", text)
    if match is None or not match.group(2):
        return None
    return match.group(1), day_month(match.group(2)) or match.group(2)


def date_words(day: str) -> tuple[str, str, str]:
    """ "2026-03-14" -> ("Saturday", "March", "Saturday 14 March 2026")."""
    date = dt.date.fromisoformat(day)
    weekday, month = WEEKDAYS[date.weekday()], MONTHS[date.month - 1]
    return weekday, month, f"{weekday} {date.day} {month} {date.year}"


def day_start_us(day: str) -> int:
    date = dt.date.fromisoformat(day)
    return int(dt.datetime(date.year, date.month, date.day, tzinfo=dt.UTC).timestamp()) * 1_000_000


__all__ = [
    "Said",
    "appointment_in",
    "arranges",
    "birthday_in_calendar",
    "date_words",
    "day_start_us",
    "plan_in",
]
