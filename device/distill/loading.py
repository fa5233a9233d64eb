"""Reading a pass's material from the memory log: the scan for sources with
new rows, each source's lines (a long thread month by month, a weekly series
as its rhythm), and the marks that say what was read."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pixie.device.distill.contract import (
    MAX_EARLIER_LINES,
    MAX_FACT_CHARS,
    MAX_LINES,
    MAX_OCCURRENCES,
    SourceKind,
)
from pixie.device.distill.digests import build_request
from pixie.device.distill.extract import (
    EMAIL_ADDRESS,
    FIRST_PERSON,
    MONTHS,
    SECOND_PERSON,
    facts_in,
)
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.prompt import parse_result
from pixie.device.distill.sources import (
    EARLIER_SCAN,
    THREAD_KIND,
    Loaded,
    Row,
    Source,
)
from pixie.device.distill.stored import fit_title
from pixie.device.notebook.clear import Distilled
from pixie.device.store import distillreads as reads
from pixie.device.store.db import Database
from pixie.device.store.notes import MAX_IDENTITY_CHARS, MAX_TAGS

# -- the service -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scan:
    since: int  # the scan watermark the pass started from
    top: int  # the newest log row when it looked
    candidates: tuple[tuple[Source, tuple[int, ...]], ...]  # with their new rows (posts, calls)


# Repeating entries whose note is about an occurrence more than a day past
# while the log has a later one: the note named it as the next, and is
# written again ("Next: ..."). A day either way covers the note's day being
# on the calendar's wall clock and the log's times in UTC; a daily series in
# a zone far from UTC may so keep a stale "Next" until its next change.
SERIES_PREFIX = "series:"
# The log kinds each filed source's rows have.
_FILED_KINDS = {
    SourceKind.POST: ("post",),
    SourceKind.CALL: ("call", "voicemail"),
    SourceKind.JOURNAL: ("journal",),
    SourceKind.CALENDAR: ("calendar",),
    SourceKind.MAIL: ("email",),
}
_CARD_ORDER = ("org", "title", "birthday", "phone", "email", "address", "note")
MAX_CARD_EMAILS = 3  # of a contact's email addresses on their page
# A pass with more sources than GROUP_BACKLOG to look at (an import, a first
# pass) commits them in groups of up to MAX_GROUP sources, each group holding
# the write lock for about MAX_GROUP_SECONDS at most (see `distill_group`).
GROUP_BACKLOG = 32
MAX_GROUP = 64
MAX_GROUP_SECONDS = 0.05


def load_source(
    conn: sqlite3.Connection,
    source: Source,
    new_rows: tuple[int, ...],
    since: int,
    everything: bool,
    now: int = 0,
) -> Loaded | None:
    """`NotetakingService.load`, inside a transaction of the caller's (a few
    small statements: on a connection already in a transaction they cost
    less than the one statement `peek_filed` makes of them)."""
    mark = reads.mark_of(conn, source.mark_key)
    people: list[str] = []
    fresh: list[Row] = []
    occurrences: tuple[int, ...] = ()
    months: tuple[tuple[str, tuple[Row, ...]], ...] = ()
    if source.thread is not None:
        family = source.kind
        kind = THREAD_KIND[family]
        top = reads.thread_top(conn, source.thread, kind)
        if top is None:
            return None
        if mark is not None and mark >= top and not everything and not source.again:
            return None
        if family is SourceKind.CALENDAR:
            every = reads.thread_rows(conn, source.thread, "calendar", MAX_OCCURRENCES)
            every.reverse()
            occurrences = tuple(r[2] for r in every)
            rows = series_lines(every)
        else:
            rows = reads.thread_rows(conn, source.thread, kind, MAX_LINES)
            rows.sort(key=lambda r: (r[2], r[0]))
        people = reads.thread_people(conn, source.thread, kind)
        if family is SourceKind.CONVERSATION:
            since_n = 0 if everything or mark is None else mark
            fresh = reads.thread_rows_after(conn, source.thread, kind, since_n, EARLIER_SCAN)
            months = _months(conn, source.thread, rows, fresh)
    elif source.contact_id is not None:
        top = reads.direct_top(conn, source.contact_id)
        if top is None or (mark is not None and mark >= top and not everything):
            return None
        rows = reads.direct_rows(conn, source.contact_id, MAX_LINES)
        rows.sort(key=lambda r: (r[2], r[0]))
        people = [source.contact_id]
        since_n = 0 if everything or mark is None else mark
        fresh = reads.direct_rows_after(conn, source.contact_id, since_n, EARLIER_SCAN)
    else:
        if mark is not None and since > 0:
            # Filed under a source distilled before: its older rows are not
            # among the new ones, so read them all.
            if source.event_id is not None:
                rows = reads.rows_by_id(conn, source.event_id)
            else:
                rows = reads.rows_by_source(conn, str(source.source), _FILED_KINDS[source.kind])
        else:
            rows = reads.rows_by_n(conn, new_rows)
        shaped = _filed(source, rows, mark, everything)
        if shaped is None:
            return None
        rows, top, people = shaped
    names = reads.contact_names(conn, set(people) | {r[3] for r in rows if r[3] is not None})
    card: dict[str, str] = {}
    if len(people) == 1:
        card = reads.card(conn, people[0])
    loaded = _loaded(source, rows, top, people, fresh, names, card)
    if occurrences or months:
        loaded = replace(
            loaded, occurrences=occurrences, now=now if occurrences else 0, months=months
        )
    return loaded


# -- a long thread, month by month ------------------------------------------------------
#
# A thread's digest covers its newest MAX_LINES messages: a year of chat with
# a partner keeps only its last few weeks there, and the person page keeps
# facts, not what was said. So a thread longer than one request also gets a
# digest per calendar month (UTC) that has new messages: "Callum Reid — May
# 2026", made by the built-in distiller from that month's newest MAX_LINES
# messages (a model is not asked again for each month), filed under the
# thread with the month in its identity, so a re-run rewrites the month in
# place. A month with fewer than MIN_MONTH_MESSAGES messages gets none: the
# thread digest and the person page hold what little it says.

MIN_MONTH_MESSAGES = 5
MAX_MONTHS = 24  # months written by one pass of one thread (the newest)


def _months(
    conn: sqlite3.Connection, thread: str, rows: Sequence[Row], fresh: Sequence[Row]
) -> tuple[tuple[str, tuple[Row, ...]], ...]:
    """The months of a long thread that have new messages, each with its
    newest messages, oldest first; none for a thread one request holds."""
    if len(rows) < MAX_LINES:
        return ()
    if reads.thread_messages(conn, thread) <= MAX_LINES:
        return ()
    touched = sorted({_month_of(r[2]) for r in fresh}, reverse=True)[:MAX_MONTHS]
    out = []
    for month in sorted(touched):
        start, end = _month_span(month)
        found = reads.month_rows(conn, thread, start, end, MAX_LINES)
        if len(found) >= MIN_MONTH_MESSAGES:
            found.sort(key=lambda r: (r[2], r[0]))
            out.append((month, tuple(found)))
    return tuple(out)


def _month_of(at: int) -> str:
    day = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC)
    return f"{day.year:04d}-{day.month:02d}"


def _month_span(month: str) -> tuple[int, int]:
    year, number = int(month[:4]), int(month[5:])
    start = dt.datetime(year, number, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + number // 12, number % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp()) * 1_000_000, int(end.timestamp()) * 1_000_000


def _month_identity(thread_key: str, month: str) -> str:
    """A month digest's identity: the thread's, then the month; hashed when
    that would be too long (cut, two months of a long thread id would meet)."""
    key = f"{thread_key}@{month}"
    if len(key) <= MAX_IDENTITY_CHARS:
        return key
    return f"month-sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def month_items(loaded: Loaded, base: Distilled) -> list[Distilled]:
    """A digest per month of a long thread (see above)."""
    out: list[Distilled] = []
    for month, rows in loaded.months:
        shown = replace(loaded, rows=rows, earlier=(), details=(), months=())
        answer = parse_result(
            OfflineDistiller().answer_now(replace(build_request(shown), person=None))
        )
        label = f"{MONTHS[int(month[5:]) - 1]} {month[:4]}"
        out.append(
            Distilled(
                kind=base.kind,
                identity_key=_month_identity(base.identity_key, month),
                title=fit_title(f"{base.title} — {label}"),
                body=answer.summary,
                contact_id=base.contact_id,
                tags=tuple(
                    dict.fromkeys((*answer.tags, MONTHS[int(month[5:]) - 1].casefold(), month[:4]))
                )[:MAX_TAGS],
                source_ref=base.source_ref,
                about_date=max(r[2] for r in rows),
            )
        )
    return out


def series_lines(every: Sequence[Row]) -> list[Row]:
    """What a model is shown of a repeating calendar entry (every occurrence,
    earliest first): the first occurrence, and each later one whose title,
    place, people or notes differ from the one before it (a moved or retitled
    week), the newest of those if there are many."""
    if not every:
        return []
    shown = [every[0]]
    last = _without_when(every[0][5])
    for row in every[1:]:
        text = _without_when(row[5])
        if text != last:
            shown.append(row)
            last = text
    return shown[:1] + shown[1:][-(MAX_LINES - 1) :]


def _without_when(text: str) -> str:
    """A calendar entry's text less its second line, the time the importer
    writes there: what two occurrences of one entry share."""
    lines = text.split("\n")
    return "\n".join(lines[:1] + lines[2:])


def _filed(
    source: Source, rows: list[Row], mark: int | None, everything: bool
) -> tuple[list[Row], int, list[str]] | None:
    """A post's, call's, journal's or calendar entry's rows as shown (in
    order, the newest MAX_LINES), its newest row, and the other people in
    it; None if there are none, or its watermark covers them."""
    if not rows:
        return None
    top = max(r[0] for r in rows)
    if mark is not None and mark >= top and not everything:
        return None
    rows.sort(key=lambda r: (r[2], r[0]))
    if source.kind is SourceKind.POST:  # the post itself, then its newest replies
        rows = rows[:1] + rows[1:][-(MAX_LINES - 1) :]
    rows = rows[-MAX_LINES:]
    people = list(dict.fromkeys(r[3] for r in rows if r[3] is not None and not r[4]))
    return rows, top, people


def _loaded(
    source: Source,
    rows: list[Row],
    top: int,
    people: list[str],
    fresh: list[Row],
    names: dict[str, str],
    card: dict[str, str],
) -> Loaded:
    if "email" in card:  # the first few addresses, in the order the book sorts them
        # (an alias with "@" may be a handle: only addresses count; none
        # left is an empty value, which the line below leaves out)
        emails = [a for a in card["email"].split(", ") if EMAIL_ADDRESS.fullmatch(a)]
        card = {**card, "email": ", ".join(emails[:MAX_CARD_EMAILS])[:MAX_FACT_CHARS]}
    details = tuple((f, card[f]) for f in _CARD_ORDER if card.get(f)) if len(people) == 1 else ()
    people.sort(key=lambda cid: (names.get(cid, "").casefold(), cid))
    one = people[0] if source.kind is SourceKind.CONVERSATION and len(people) == 1 else None
    shown = {r[0] for r in rows}
    earlier = _stating(r for r in fresh if r[0] not in shown)
    return Loaded(source, tuple(rows), top, names, tuple(people), one, earlier, details)


def peek_filed(
    db: Database, source: Source, new_rows: tuple[int, ...], since: int, everything: bool
) -> Loaded | Unread | None:
    """`load_source` for a post, call, journal or calendar entry whose rows are all
    among the new ones, in one statement on one snapshot (`Database.peek`,
    which needs no session): its rows, its watermark, the names of the
    people in them and the cards of the others; `_UNREAD` when it takes more
    than that statement."""
    rows, mark, names, cards = reads.filed(db, new_rows, source.mark_key)
    if mark is not None and since > 0:
        return _UNREAD  # filed under a source distilled before: read it all
    shaped = _filed(source, rows, mark, everything)
    if shaped is None:
        return None
    rows, top, people = shaped
    ids = set(people) | {r[3] for r in rows if r[3] is not None}
    names = {cid: name for cid, name in names.items() if cid in ids}
    card = cards.get(people[0], {}) if len(people) == 1 else {}
    return _loaded(source, rows, top, people, [], names, card)


class Unread:
    """`peek_filed`'s word for a source that one statement does not cover."""


_UNREAD = Unread()


def _stating(rows: Iterable[Row]) -> tuple[Row, ...]:
    """Of rows given newest first, the newest MAX_EARLIER_LINES that state a
    fact (about their writer, or the user's about the person written to),
    oldest first."""
    kept: list[Row] = []
    for row in rows:
        text = row[5]
        if facts_in(text, None, FIRST_PERSON, loose=not row[4]) or (
            row[4] and facts_in(text, None, SECOND_PERSON)
        ):
            kept.append(row)
            if len(kept) >= MAX_EARLIER_LINES:
                break
    kept.sort(key=lambda r: (r[2], r[0]))
    return tuple(kept)
