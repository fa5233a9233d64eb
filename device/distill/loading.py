"""Reading a pass's material from the memory log: the scan for sources with
new rows, each source's lines (a long thread month by month, a weekly series
as its rhythm), and the marks that say what was read."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pixie.device.distill.contract import (
    MAX_EARLIER_LINES,
    MAX_FACT_CHARS,
    MAX_LINES,
    MAX_OCCURRENCES,
    SourceKind,
)
from pixie.device.distill.extract import (
    EMAIL_ADDRESS,
    FIRST_PERSON,
    MONTHS,
    SECOND_PERSON,
    facts_in,
)
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.prompt import parse_result
from pixie.device.distill.series import DAY_US
from pixie.device.notebook.clear import (
    Distilled,
)
from pixie.device.store.db import Database
from pixie.device.store.notes import (
    MAX_IDENTITY_CHARS,
    MAX_TAGS,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.digests import build_request
from pixie.device.distill.sources import (
    DISTILLED_KINDS,
    EARLIER_SCAN,
    THREAD_KIND,
    Loaded,
    Row,
    Source,
)
from pixie.device.distill.stored import fit_title

# -- the service -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scan:
    since: int  # the scan watermark the pass started from
    top: int  # the newest log row when it looked
    candidates: tuple[tuple[Source, tuple[int, ...]], ...]  # with their new rows (posts, calls)


SCAN_SQL = (
    "SELECT n, id, kind, thread, contact_id, source FROM memory_event "
    f"WHERE n > ? AND kind IN {DISTILLED_KINDS} ORDER BY n"
)
_ROW_COLUMNS = "n, kind, at, contact_id, from_me, text"
_THREAD_SQL = {
    family: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = '{kind}' "
        f"ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
    )
    for family, kind in THREAD_KIND.items()
}
_THREAD_TOP_SQL = {
    family: f"SELECT max(n) FROM memory_event WHERE thread = ? AND kind = '{kind}'"
    for family, kind in THREAD_KIND.items()
}
_THREAD_NEW_SQL = {
    family: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = '{kind}' "
        f"AND n > ? ORDER BY at DESC, n DESC LIMIT {EARLIER_SCAN}"
    )
    for family, kind in THREAD_KIND.items()
}
# Repeating entries whose note is about an occurrence more than a day past
# while the log has a later one: the note named it as the next, and is
# written again ("Next: ..."). A day either way covers the note's day being
# on the calendar's wall clock and the log's times in UTC; a daily series in
# a zone far from UTC may so keep a stale "Next" until its next change.
SERIES_PREFIX = "series:"
DUE_SERIES_SQL = (
    "SELECT note.source_ref FROM note WHERE note.zone = 'clear' AND NOT note.deleted "
    f"AND note.kind = 'conversation_digest' AND note.source_ref LIKE '{SERIES_PREFIX}%' "
    "AND NOT note.user_edited AND note.body IS NOT NULL "
    "AND note.about_date < ? AND EXISTS (SELECT 1 FROM memory_event e "
    f"WHERE e.thread = substr(note.source_ref, {len(SERIES_PREFIX) + 1}) "
    f"AND e.kind = 'calendar' AND e.at > note.about_date + {DAY_US}) LIMIT 1000"
)
# The occurrences of a repeating calendar entry, the newest MAX_OCCURRENCES
# (a daily entry over the importer's eleven years has four thousand: the
# newest say what is next, the oldest only since when).
_SERIES_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = 'calendar' "
    f"ORDER BY at DESC, n DESC LIMIT {MAX_OCCURRENCES}"
)
_DIRECT_NEW_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread IS NULL AND kind = 'message' "
    f"AND contact_id = ? AND n > ? ORDER BY at DESC, n DESC LIMIT {EARLIER_SCAN}"
)
# A card's email addresses: the contact book keeps those as names a contact
# is known by, so they are read from its aliases as one "email" detail
# (``{}``: which contacts). GROUP BY, not HAVING alone: older SQLite refuses
# HAVING without it.
_EMAILS_SQL = (
    "SELECT contact_id, group_concat(alias, ', ') AS emails FROM (SELECT contact_id, alias "
    "FROM contact_alias WHERE contact_id {} AND alias LIKE '%@%' ORDER BY contact_id, alias) "
    "GROUP BY contact_id"
)
_DETAILS_SQL = (
    "SELECT field, value FROM contact_detail WHERE contact_id = ? "
    "UNION ALL SELECT 'email', emails FROM (" + _EMAILS_SQL.format("= ?") + ")"
)
_CARD_ORDER = ("org", "title", "birthday", "phone", "email", "address", "note")
MAX_CARD_EMAILS = 3  # of a contact's email addresses on their page
_THREAD_PEOPLE_SQL = {
    family: (
        "SELECT DISTINCT contact_id FROM memory_event "
        f"WHERE thread = ? AND kind = '{kind}' AND contact_id IS NOT NULL LIMIT 64"
    )
    for family, kind in THREAD_KIND.items()
}
_DIRECT_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread IS NULL AND kind = 'message' "
    f"AND contact_id = ? ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
)
_DIRECT_TOP_SQL = (
    "SELECT max(n) FROM memory_event WHERE thread IS NULL AND kind = 'message' AND contact_id = ?"
)
_BY_SOURCE_SQL = {
    SourceKind.POST: f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'post'",
    SourceKind.CALL: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? "
        "AND kind IN ('call', 'voicemail')"
    ),
    SourceKind.JOURNAL: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'journal'"
    ),
    SourceKind.CALENDAR: (
        f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'calendar'"
    ),
    SourceKind.MAIL: f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE source = ? AND kind = 'email'",
}
_BY_ID_SQL = f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE id = ?"
_BY_N_SQL = f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE n IN ({{}})"
# Rows (0), watermark (1), names (2: id, name) and the other people's cards
# (3: field, contact id, value) of a source whose rows are all new, as one
# statement: see `peek_filed`.
_FILED_SQL = (
    f"WITH r AS (SELECT {_ROW_COLUMNS} FROM memory_event WHERE n IN ({{}})) "
    f"SELECT 0, {_ROW_COLUMNS} FROM r "
    "UNION ALL SELECT 1, seen_n, NULL, NULL, NULL, NULL, NULL FROM distill_mark WHERE source = ? "
    "UNION ALL SELECT 2, NULL, id, NULL, NULL, NULL, name FROM contact "
    "WHERE id IN (SELECT contact_id FROM r) "
    "UNION ALL SELECT 3, NULL, field, NULL, contact_id, NULL, value FROM contact_detail "
    "WHERE contact_id IN (SELECT contact_id FROM r WHERE NOT from_me) "
    "UNION ALL SELECT 3, NULL, 'email', NULL, contact_id, NULL, emails FROM ("
    + _EMAILS_SQL.format("IN (SELECT contact_id FROM r WHERE NOT from_me)")
    + ")"
)
_MARK_READ_SQL = "SELECT seen_n FROM distill_mark WHERE source = ?"
MARK_SQL = (
    "INSERT INTO distill_mark (source, seen_n) VALUES (?, ?) "
    "ON CONFLICT (source) DO UPDATE SET seen_n = excluded.seen_n"
)
CHUNK = 500
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
    found = conn.execute(_MARK_READ_SQL, (source.mark_key,)).fetchone()
    mark: int | None = found[0] if found is not None else None
    people: list[str] = []
    fresh: list[Row] = []
    occurrences: tuple[int, ...] = ()
    months: tuple[tuple[str, tuple[Row, ...]], ...] = ()
    if source.thread is not None:
        family = source.kind
        top = conn.execute(_THREAD_TOP_SQL[family], (source.thread,)).fetchone()[0]
        if top is None:
            return None
        if mark is not None and mark >= top and not everything and not source.again:
            return None
        if family is SourceKind.CALENDAR:
            every = _rows(conn.execute(_SERIES_SQL, (source.thread,)))
            every.reverse()
            occurrences = tuple(r[2] for r in every)
            rows = series_lines(every)
        else:
            rows = _rows(conn.execute(_THREAD_SQL[family], (source.thread,)))
            rows.sort(key=lambda r: (r[2], r[0]))
        people = [r[0] for r in conn.execute(_THREAD_PEOPLE_SQL[family], (source.thread,))]
        if family is SourceKind.CONVERSATION:
            since_n = 0 if everything or mark is None else mark
            fresh = _rows(conn.execute(_THREAD_NEW_SQL[family], (source.thread, since_n)))
            months = _months(conn, source.thread, rows, fresh)
    elif source.contact_id is not None:
        top = conn.execute(_DIRECT_TOP_SQL, (source.contact_id,)).fetchone()[0]
        if top is None or (mark is not None and mark >= top and not everything):
            return None
        rows = _rows(conn.execute(_DIRECT_SQL, (source.contact_id,)))
        rows.sort(key=lambda r: (r[2], r[0]))
        people = [source.contact_id]
        since_n = 0 if everything or mark is None else mark
        fresh = _rows(conn.execute(_DIRECT_NEW_SQL, (source.contact_id, since_n)))
    else:
        if mark is not None and since > 0:
            # Filed under a source distilled before: its older rows are not
            # among the new ones, so read them all.
            if source.event_id is not None:
                rows = _rows(conn.execute(_BY_ID_SQL, (source.event_id,)))
            else:
                rows = _rows(conn.execute(_BY_SOURCE_SQL[source.kind], (source.source,)))
        else:
            rows = []
            for i in range(0, len(new_rows), CHUNK):
                chunk = new_rows[i : i + CHUNK]
                sql = _BY_N_SQL.format(",".join("?" * len(chunk)))
                rows += _rows(conn.execute(sql, chunk))
        shaped = _filed(source, rows, mark, everything)
        if shaped is None:
            return None
        rows, top, people = shaped
    names = _contact_names(conn, set(people) | {r[3] for r in rows if r[3] is not None})
    card: dict[str, str] = {}
    if len(people) == 1:
        card = dict(conn.execute(_DETAILS_SQL, (people[0], people[0])).fetchall())
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
_MONTH_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM memory_event WHERE thread = ? AND kind = 'message' "
    f"AND at >= ? AND at < ? ORDER BY at DESC, n DESC LIMIT {MAX_LINES}"
)
_THREAD_COUNT_SQL = "SELECT count(*) FROM memory_event WHERE thread = ? AND kind = 'message'"


def _months(
    conn: sqlite3.Connection, thread: str, rows: Sequence[Row], fresh: Sequence[Row]
) -> tuple[tuple[str, tuple[Row, ...]], ...]:
    """The months of a long thread that have new messages, each with its
    newest messages, oldest first; none for a thread one request holds."""
    if len(rows) < MAX_LINES:
        return ()
    total = conn.execute(_THREAD_COUNT_SQL, (thread,)).fetchone()[0]
    if total <= MAX_LINES:
        return ()
    touched = sorted({_month_of(r[2]) for r in fresh}, reverse=True)[:MAX_MONTHS]
    out = []
    for month in sorted(touched):
        start, end = _month_span(month)
        found = _rows(conn.execute(_MONTH_SQL, (thread, start, end)))
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
    found = db.peek(_FILED_SQL.format(",".join("?" * len(new_rows))), (*new_rows, source.mark_key))
    rows: list[Row] = []
    mark: int | None = None
    names: dict[str, str] = {}
    cards: dict[str, dict[str, str]] = {}
    for part, n, kind, at, cid, me, text in found:
        if part == 0:
            rows.append((n, kind, at, cid, bool(me), text))
        elif part == 1:
            mark = n
        elif part == 2:
            names[kind] = text
        else:
            cards.setdefault(cid, {})[kind] = text
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


def _rows(result: Any) -> list[Row]:
    return [(n, kind, at, cid, bool(me), text) for n, kind, at, cid, me, text in result]


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


def _contact_names(conn: sqlite3.Connection, ids: set[str]) -> dict[str, str]:
    wanted = sorted(ids)
    names: dict[str, str] = {}
    for i in range(0, len(wanted), CHUNK):
        chunk = wanted[i : i + CHUNK]
        sql = f"SELECT id, name FROM contact WHERE id IN ({','.join('?' * len(chunk))})"
        names.update(conn.execute(sql, chunk).fetchall())
    return names
