"""Reading calendar events from iCalendar files (.ics): one event per occurrence.

A calendar is parsed whole by ``icalendar`` (calendars are small; a file over
`MAX_FILE_BYTES` is refused), then every VEVENT series is expanded by
``recurring_ical_events``: RRULE, RDATE and EXDATE give the occurrences, and a
VEVENT with a RECURRENCE-ID replaces (moves, retitles or cancels) the one it
names. Only occurrences that start inside a window around the import are
kept, `PAST` before ``options.now_us`` to `FUTURE` after it, so a rule without
an end ("every day") still gives a bounded number.

Expansion is bounded before it starts, from each rule alone (`_Rule`): its
FREQ, INTERVAL and every BY part that multiplies occurrences (BYSECOND,
BYMINUTE, BYHOUR, BYDAY, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYMONTH) give how
many times a day it can fire at most and on average. A rule that can fire
more often than hourly is skipped (FREQ=HOURLY;BYMINUTE=0..59 is a minutely
rule). A rule whose start lies so far before the window that reaching it
would mean stepping through more than `MAX_EXPANSION` occurrences is
skipped (the library steps through every one from the start). A series is
cut to its newest `MAX_OCCURRENCES` in the window (the window starts later
for it), and a file to `MAX_FILE_OCCURRENCES` (more for a larger file, see
`_file_limit`). Each cut is one line in the import's summary.

Times: a TZID names its VTIMEZONE, an IANA zone or a Windows zone name
("W. Europe Standard Time"); a zone nobody knows reads like a floating time.
A floating time is read in the calendar's X-WR-TIMEZONE if it declares a
known one, else in ``options.tz``. An all-day event (a DATE) starts at local
midnight of ``options.tz``.

Each occurrence's people (ORGANIZER and ATTENDEEs with a name or a mailto
address; rooms and resources left out) become contact cards, yielded before
the event; the event's contact is the first of them who is not the user.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import stat
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    ContactCard,
    ImportOptions,
    Item,
    Progress,
    Skipped,
    clean_text,
    fit_text,
    ref,
    stable_id,
    to_us,
    where,
)
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.protocol.syncmessages import MAX_SHORT_CHARS

SUFFIXES = (".ics", ".ical", ".ifb")
SNIFF_BYTES = 4096
MAGIC = b"BEGIN:VCALENDAR"
MAX_FILE_BYTES = 64 * 1024 * 1024
# The window of occurrences kept: ten years back and one year ahead of the
# import (in days, so it does not depend on leap years or month lengths).
PAST = dt.timedelta(days=3653)
FUTURE = dt.timedelta(days=366)
# At most this many occurrences of one series: an hourly rule over the whole
# window would otherwise give close to 100,000 events.
MAX_OCCURRENCES = 10_000
# A rule fires at most this often a day, or it is skipped: no calendar means
# a minutely or secondly rule as events, and expanding one costs minutes.
MAX_PER_DAY = 24
# At most this many occurrences stepped through before a series' window:
# FREQ=HOURLY from the year 1 would take minutes to reach today.
MAX_EXPANSION = 200_000
# At most this many occurrences of a whole file, plus `FILE_OCCURRENCES_PER_KIB`
# for each KiB of it: 200 hourly series in 20 KB would otherwise give 2
# million events.
MAX_FILE_OCCURRENCES = 20_000
FILE_OCCURRENCES_PER_KIB = 20
_SECONDS_A_DAY = 86_400
_SERIES_CUT = "occurrences past the limit of one series"
# Properties an occurrence's time depends on: broken, the event cannot be read.
_TIME_PROPERTIES = frozenset(
    {"DTSTART", "DTEND", "DURATION", "RRULE", "RDATE", "EXDATE", "RECURRENCE-ID"}
)
_NOT_PEOPLE = frozenset({"ROOM", "RESOURCE"})
_UTC = dt.UTC


def _iso(moment: object) -> str:
    """A recurrence id as text: a date, a floating time, or a UTC time."""
    if isinstance(moment, dt.datetime) and moment.tzinfo is not None:
        return moment.astimezone(_UTC).replace(tzinfo=None).isoformat() + "Z"
    if not isinstance(moment, dt.date):  # a damaged file's duration or period
        return str(moment)
    return moment.isoformat()


def _one_line(value: object, limit: int = MAX_SHORT_CHARS) -> str:
    text = " ".join(clean_text(str(value)).split())
    return text[:limit].rstrip()


def _text(component: Any, name: str) -> str:
    value = component.get(name)
    if value is None:
        return ""
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    return clean_text(str(value))


class _Person:
    __slots__ = ("address", "card", "name")

    def __init__(self, name: str, address: str | None, card_name: str | None = None) -> None:
        self.name = name
        self.address = address
        self.card = ContactCard(name=card_name or name, aliases=(address,) if address else ())

    @property
    def contact(self) -> str:
        return self.address or self.name


def _person(value: Any) -> _Person | None:
    """An ORGANIZER or ATTENDEE as a person, or None for a room, a resource,
    or one with neither a name nor a mailto address."""
    params = getattr(value, "params", {})
    if str(params.get("CUTYPE", "")).upper() in _NOT_PEOPLE:
        return None
    raw = str(value).strip()
    address = None
    if raw.lower().startswith("mailto:"):
        candidate = "".join(raw[7:].split()).lower()
        if "@" in candidate and 0 < len(candidate) <= MAX_SHORT_CHARS:
            address = candidate
    name = _one_line(params.get("CN", ""))
    if name.lower().startswith("mailto:"):
        name = name[7:].strip()
    if not name or (address is not None and name.lower() == address):
        # Google writes the address as the name of a guest it has no name
        # for; the address's local part reads as a name, as mail's does.
        if address is None:
            return None
        return _Person(address, address, address.split("@", 1)[0] or address)
    return _Person(name, address)


def _people(component: Any) -> list[_Person]:
    found: list[_Person] = []
    for key in ("ORGANIZER", "ATTENDEE"):
        values = component.get(key)
        if values is None:
            continue
        for value in values if isinstance(values, list) else [values]:
            person = _person(value)
            if person is not None:
                found.append(person)
    return found


def _is_me(options: ImportOptions, person: _Person) -> bool:
    return options.is_me(person.address, person.name)


def _local(moment: dt.date, tz: dt.tzinfo) -> dt.datetime:
    """A DATE at local midnight of ``tz``; a floating time read in ``tz``."""
    if not isinstance(moment, dt.datetime):
        return dt.datetime(moment.year, moment.month, moment.day, tzinfo=tz)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=tz)


def _when(start: dt.date, end: dt.date | None) -> str:
    """When an occurrence happens, in its own zone: "2026-03-14 15:00–16:00",
    or "2026-03-14 all day"."""
    if not isinstance(start, dt.datetime):
        last = end - dt.timedelta(days=1) if isinstance(end, dt.date) else start
        if not isinstance(end, dt.datetime) and isinstance(last, dt.date) and last > start:
            return f"{start.isoformat()} – {last.isoformat()} all day"
        return f"{start.isoformat()} all day"
    text = start.strftime("%Y-%m-%d %H:%M")
    if isinstance(end, dt.datetime) and end > start:
        if end.tzinfo is not None and start.tzinfo is not None:
            end = end.astimezone(start.tzinfo)
        if end.date() == start.date():
            return f"{text}–{end.strftime('%H:%M')}"
        return f"{text} – {end.strftime('%Y-%m-%d %H:%M')}"
    return text


def _first(component: Any, name: str) -> Any:
    """A property a component should have once: the first when written twice."""
    value = component.get(name)
    return value[0] if isinstance(value, list) else value


def _parts(rule: Any, name: str) -> list[Any]:
    values = rule.get(name) if hasattr(rule, "get") else None
    return list(values) if values else []


class _Rule:
    """How often a VEVENT's RRULEs can fire, from the rules alone: at most
    (``peak``) and on average (``rate``) a day, and how many occurrences
    they are limited to by COUNT (None: unlimited). Upper bounds: a BY part
    is taken to add every value it lists."""

    def __init__(self, component: Any) -> None:
        rules = component.get("RRULE")
        listed = rules if isinstance(rules, list) else [] if rules is None else [rules]
        self.peak = 0.0
        self.rate = 0.0
        self.count: int | None = 0
        self.until: list[Any] = []  # each rule's UNTIL, when every rule has one
        for rule in listed:
            peak, rate = _rates(rule)
            self.peak += peak
            self.rate += rate
            counts = _parts(rule, "COUNT")
            if self.count is not None:
                self.count = self.count + int(counts[0]) if counts else None
            untils = _parts(rule, "UNTIL")
            self.until.append(untils[0] if untils else None)
        if not listed:
            self.count = None
        if None in self.until:
            self.until = []

    @property
    def repeats(self) -> bool:
        return self.rate > 0


def _rates(rule: Any) -> tuple[float, float]:
    """(at most, on average) occurrences a day of one RRULE."""
    freq = str((_parts(rule, "FREQ") or [""])[0]).upper()
    interval = max(1, int((_parts(rule, "INTERVAL") or [1])[0]))

    def many(name: str) -> int:
        return max(1, len(set(map(str, _parts(rule, name)))))

    seconds, minutes, hours = many("BYSECOND"), many("BYMINUTE"), many("BYHOUR")
    if freq == "SECONDLY":
        peak = _SECONDS_A_DAY / interval
        return peak, peak
    if freq == "MINUTELY":
        peak = 1440 / interval * seconds
        return peak, peak
    if freq == "HOURLY":
        peak = 24 / interval * minutes * seconds
        return peak, peak
    times = hours * minutes * seconds  # in a day the rule fires on
    days = {"DAILY": 1.0, "WEEKLY": 7.0, "MONTHLY": 30.0, "YEARLY": 365.0}.get(freq)
    if days is None:
        return 0.0, 0.0  # the library refuses it, with its own message
    fired = 1
    if freq == "WEEKLY":
        fired = many("BYDAY")
    elif freq == "MONTHLY":
        fired = max(many("BYMONTHDAY"), 5 * many("BYDAY"))
    elif freq == "YEARLY":
        fired = max(
            many("BYYEARDAY"),
            many("BYMONTHDAY") * many("BYMONTH"),
            53 * many("BYDAY"),
            7 * many("BYWEEKNO"),
            many("BYMONTH"),
        )
    return float(times), min(times * fired / (days * interval), float(times))


def _file_limit(size: int) -> int:
    return MAX_FILE_OCCURRENCES + FILE_OCCURRENCES_PER_KIB * (size // 1024)


def _event_name(component: Any) -> str:
    uid = component.get("UID")
    summary = _one_line(component.get("SUMMARY", ""), 60)
    if uid is not None:
        return f"event {_one_line(uid, 60)!r}"
    return f"event {summary!r}" if summary else "an event without a UID"


class IcsImporter:
    """iCalendar files: every occurrence of every VEVENT inside the window."""

    name = "ics"
    units = ("calendar event", "calendar events")

    def sniff(self, path: Path) -> bool:
        """A name ending .ics, .ical or .ifb, or a regular file that starts
        (after a byte order mark and blank space) with BEGIN:VCALENDAR. A
        pipe or a device is never read: its bytes belong to the import."""
        if path.suffix.lower() in SUFFIXES:
            return True
        return _starts_with(path, MAGIC)

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every occurrence of ``path``'s events in the window, each after the
        cards of its people. Nothing is yielded before the whole file parsed."""
        data = _read_bounded(path)
        calendars = _parse(path, data)
        now = dt.datetime(1970, 1, 1, tzinfo=_UTC) + dt.timedelta(microseconds=options.now_us)
        low_us = to_us(now - PAST, _UTC)
        high_us = to_us(now + FUTURE, _UTC)
        carded: set[ContactCard] = set()
        left = [_file_limit(len(data))]
        for calendar in calendars:
            yield from self._calendar(path, calendar, options, low_us, high_us, carded, left)
        if progress is not None:
            progress(len(data), len(data))

    def _calendar(
        self,
        path: Path,
        calendar: Any,
        options: ImportOptions,
        low_us: int,
        high_us: int,
        carded: set[ContactCard],
        left: list[int],
    ) -> Iterator[Item]:
        """The occurrences of one calendar; ``left[0]``: how many more the
        file may still give (shared by its calendars)."""
        skips: list[Skipped] = []
        dropped: set[str] = set()
        windows: dict[str, int] = {}  # UID -> where its series' window starts
        for component in list(calendar.subcomponents):
            if component.name != "VEVENT":
                continue
            broken = [name for name, _ in component.errors if name in _TIME_PROPERTIES]
            if broken:
                raise BadInput(where(path, f"{_event_name(component)}: unreadable {broken[0]}"))
            if component.get("DTSTART") is None:
                calendar.subcomponents.remove(component)
                skips.append(Skipped("event without a start"))
                continue
            if component.get("UID") is None:
                # The event's own identity stands in for the UID it lacks.
                basis = f"{component.get('SUMMARY', '')}\x1f{_iso(_first(component, 'DTSTART').dt)}"
                digest = hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()
                component.add("UID", f"pixie-nouid-{digest[:32]}")
            cut = self._bound(component, options, low_us, high_us, windows)
            if cut is not None:
                dropped.add(str(component["UID"]))
                skips.append(Skipped(cut))
        if dropped:
            for component in list(calendar.subcomponents):
                if component.name == "VEVENT" and str(component["UID"]) in dropped:
                    calendar.subcomponents.remove(component)
        yield from skips
        _drop_unknown_calendar_zone(calendar)
        import recurring_ical_events  # loaded by the calendar import alone

        try:
            query = recurring_ical_events.of(calendar)
        except Exception as exc:  # the library raises its own and icalendar's errors
            raise BadInput(where(path, f"cannot expand the calendar: {exc}")) from None
        for series in query.series:
            if left[0] <= 0:
                yield Skipped("series past the file's limit of occurrences")
                continue
            series_low = windows.get(str(series.uid), low_us)
            shifted = series_low > low_us
            if shifted:  # its older occurrences are left out
                yield Skipped(_SERIES_CUT)
            try:
                yield from self._series(
                    series, options, series_low, high_us, carded, left, noted=shifted
                )
            except BadInput:
                raise
            except Exception as exc:  # a rule or a date the library cannot expand
                raise BadInput(
                    where(path, f"event {_one_line(series.uid, 60)!r}: cannot expand: {exc}")
                ) from None

    @staticmethod
    def _bound(
        component: Any, options: ImportOptions, low_us: int, high_us: int, windows: dict[str, int]
    ) -> str | None:
        """Why a VEVENT's series is skipped, if it is (see the module
        docstring); else None, with its window's start in ``windows`` when
        only its newest occurrences are kept."""
        rule = _Rule(component)
        if not rule.repeats:
            return None
        if rule.peak > MAX_PER_DAY:
            return "repeats more often than hourly"
        day_us = _SECONDS_A_DAY * 1_000_000
        start = _first(component, "DTSTART").dt
        if not isinstance(start, dt.date):  # a duration or a period where a date goes
            return "a start that is not a date"
        start_us = to_us(_local(start, options.tz), options.tz)
        # Where its newest occurrences are: the window's end, its UNTIL, or
        # where its COUNT runs out (at the highest rate it could have).
        end_us = high_us
        if rule.until:
            end_us = min(end_us, max(to_us(_local(u, options.tz), options.tz) for u in rule.until))
        if rule.count is not None:
            end_us = min(end_us, start_us + int(rule.count / rule.rate * day_us))
        series_low = max(low_us, end_us - int(MAX_OCCURRENCES / rule.rate * day_us))
        before = max(0, series_low - start_us) / day_us * rule.rate
        if rule.count is not None:
            before = min(before, rule.count)
        if before > MAX_EXPANSION:
            return "repeats too often since too long ago to expand"
        if series_low > max(low_us, start_us):
            windows[str(component["UID"])] = series_low
        return None

    def _series(
        self,
        series: Any,
        options: ImportOptions,
        low_us: int,
        high_us: int,
        carded: set[ContactCard],
        left: list[int],
        *,
        noted: bool = False,
    ) -> Iterator[Item]:
        """One series' occurrences in [low_us, high_us), at most
        `MAX_OCCURRENCES` of them and what the file has ``left``; ``noted``:
        a cut of this series was already said."""
        # Bounds padded by a day: floating and all-day times are placed in
        # ``options.tz`` below, and the exact window is applied after that.
        epoch = dt.datetime(1970, 1, 1, tzinfo=_UTC)
        low = (epoch + dt.timedelta(microseconds=low_us, days=-1)).astimezone(options.tz)
        high = (epoch + dt.timedelta(microseconds=high_us, days=1)).astimezone(options.tz)
        kept = 0
        for occurrence in series.between(low, high):
            start_us = to_us(_local(occurrence.start, options.tz), options.tz)
            if not low_us <= start_us < high_us:
                continue
            if kept == MAX_OCCURRENCES:
                if not noted:
                    yield Skipped(_SERIES_CUT)
                return
            if left[0] <= 0:
                yield Skipped("occurrences past the file's limit")
                return
            kept += 1
            left[0] -= 1
            component = occurrence.as_component(True)
            yield from self._occurrence(component, occurrence, start_us, options, carded)

    def _occurrence(
        self,
        component: Any,
        occurrence: Any,
        start_us: int,
        options: ImportOptions,
        carded: set[ContactCard],
    ) -> Iterator[Item]:
        if str(component.get("STATUS", "")).upper() == "CANCELLED":
            yield Skipped("cancelled")
            return
        uid = str(component["UID"])
        # A recurrence id only for an occurrence of a series (the library
        # also sets one on a single event's copy): a single event is its UID.
        recurring = bool(occurrence.recurrence_ids) or any(
            component.get(key) is not None for key in ("RRULE", "RDATE")
        )
        rid_prop = component.get("RECURRENCE-ID") if recurring else None
        rid = _iso(rid_prop.dt) if rid_prop is not None else None
        people = _people(component)
        others = [p for p in people if not _is_me(options, p)]
        for person in others:
            if person.card not in carded:
                carded.add(person.card)
                yield person.card
        organizer = component.get("ORGANIZER")
        from_me = None
        if organizer is not None:
            chief = _person(organizer)
            from_me = chief is not None and _is_me(options, chief)
        lines = [_one_line(component.get("SUMMARY", ""), 500) or "(untitled event)"]
        lines.append(_when(occurrence.start, occurrence.end))
        location = _one_line(component.get("LOCATION", ""), 500)
        if location:
            lines.append(f"Location: {location}")
        names = list(dict.fromkeys(p.name for p in others))
        if names:
            lines.append("With: " + "; ".join(names))
        description = _text(component, "DESCRIPTION")
        if description:
            lines.extend(["", description])
        yield NewEvent(
            kind=EventKind.CALENDAR,
            at=start_us,
            text=fit_text("\n".join(lines)),
            contact=others[0].contact if others else None,
            thread=ref("cal:", uid),
            source=ref("ics:", uid, f"#{rid}" if rid else ""),
            from_me=from_me,
            id=stable_id("ics", uid, rid, at_us=start_us),
        )


def _drop_unknown_calendar_zone(calendar: Any) -> None:
    """Forget an X-WR-TIMEZONE no zone database knows: its floating times are
    then read in ``options.tz`` rather than refused."""
    zone = calendar.get("X-WR-TIMEZONE")
    if zone is None:
        return
    try:
        zoneinfo.ZoneInfo(str(zone).strip())
    except (ValueError, OSError, zoneinfo.ZoneInfoNotFoundError):
        del calendar["X-WR-TIMEZONE"]


def _starts_with(path: Path, magic: bytes) -> bool:
    """Whether ``path`` is a regular file whose first bytes, after a byte
    order mark and blank space, are ``magic`` (case ignored)."""
    try:
        # Checked before opening: opening a named pipe would wait for a writer.
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        with path.open("rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[: len(magic)].upper() == magic


def _read_bounded(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise BadInput(
                    f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB,"
                    " too large for a calendar"
                )
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise BadInput(
            f"{path.name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB,"
            " too large for a calendar"
        )
    return data


def _parse(path: Path, data: bytes) -> list[Any]:
    import icalendar  # loaded by the calendar import alone, not by every command

    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        components = icalendar.Calendar.from_ical(data, multiple=True)
    except Exception as exc:  # icalendar raises ValueError and its own errors
        raise BadInput(where(path, f"not an iCalendar file: {_one_line(exc, 120)}")) from None
    calendars = [c for c in components if c.name == "VCALENDAR"]
    if not calendars:
        raise BadInput(where(path, "no complete VCALENDAR in the file"))
    return calendars


IMPORTER = IcsImporter()

__all__ = [
    "FUTURE",
    "IMPORTER",
    "MAX_EXPANSION",
    "MAX_FILE_BYTES",
    "MAX_FILE_OCCURRENCES",
    "MAX_OCCURRENCES",
    "MAX_PER_DAY",
    "PAST",
    "SUFFIXES",
    "IcsImporter",
]
