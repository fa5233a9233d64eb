"""MemoryTextMirror: the plain-text index that makes grep over the log fast.

The log is rows in SQLite; a pattern search wants one long string. The mirror
keeps every searchable event as one line of UTF-8 in time order, packed into
blocks of at most `BLOCK_LINES` lines, so RE2 can scan a block in one call and a
search can walk blocks from the newest back and stop as soon as it has enough.

It is derived data and therefore disposable: it lives in memory, is built from
the log on first use (a cold start), is fed by the log after every commit, and
before each search checks the log's append watermark so that rows written by
another process are indexed too. A search never silently misses an event.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import uuid
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from sqlalchemy import select

from pixie.device.store.contacts import Contact
from pixie.device.store.db import Database, driver_sql
from pixie.device.store.memlog import SEARCHABLE_KINDS, TOP_SQL, EventKind, MemoryEvent, Row

BLOCK_LINES = 1024
_KINDS: tuple[EventKind, ...] = tuple(EventKind)
_FROM_ME = 0x80  # high bit of a line's kind byte: the user wrote it
_KIND_CODE: dict[str, int] = {k.value: i for i, k in enumerate(_KINDS)}
_SEARCHABLE_VALUES = sorted(k.value for k in SEARCHABLE_KINDS)
_SEARCHABLE = frozenset(_SEARCHABLE_VALUES)


_NAMES_SQL = driver_sql(select(Contact.id, Contact.name))


class Matcher(Protocol):
    """The slice of a compiled RE2 pattern the mirror needs."""

    def search(self, text: bytes, pos: int | None = None, endpos: int | None = None) -> object: ...


def mirror_line(contact_name: str | None, text: str) -> tuple[str, str]:
    """The searchable line of an event, as (prefix, body).

    The contact's name leads the line so that a search for a person finds what
    they said even when the text never names them.
    """
    prefix = f"{contact_name}: " if contact_name else ""
    return prefix, text.replace("\n", " ").replace("\r", " ")


@dataclass(frozen=True, slots=True)
class MirrorHit:
    n: int
    event_id: str
    kind: EventKind
    at: int
    contact: str | None
    from_me: bool
    body: str  # the event text as one line
    match_start: int  # character offsets of the match within body
    match_end: int


class _Entry(NamedTuple):
    """One line of the mirror before packing."""

    at: int
    id: bytes  # the event id's 16 bytes
    n: int
    kind: int  # the kind's code, `_FROM_ME` set if the user wrote it
    plen: int  # bytes of the contact prefix at the start of `line`
    line: bytes


def _order(e: _Entry) -> tuple[int, bytes]:
    """Where a line goes: by time, then id."""
    return e.at, e.id


class _Logged(NamedTuple):
    """A row the log hands its listeners (memlog's `Row`), by the names of
    memlog's `COLUMNS`."""

    n: int
    id: str
    origin: str
    seq: int
    kind: str
    at: int
    contact_id: str | None
    thread: str | None
    source: str | None
    from_me: bool | None
    text: str


class _Searchable(NamedTuple):
    """What the mirror reads of an event: `_RAW_ROWS_SQL` selects these columns of
    the log, in this order."""

    n: int
    id: str
    kind: str
    at: int
    contact_id: str | None
    text: str
    from_me: bool | None


_RAW_ROWS_SQL = (
    f"SELECT {', '.join(_Searchable._fields)} FROM {MemoryEvent.__tablename__} "
    f"WHERE n > ? AND n <= ? AND kind IN ({', '.join('?' * len(_SEARCHABLE_VALUES))})"
)
_CONTACT_AT = _Searchable._fields.index("contact_id")


class _Block:
    """Lines in ascending (at, id) order, packed for one-call scanning."""

    __slots__ = ("at", "ids", "kinds", "ns", "plens", "starts", "text")

    def __init__(self, entries: Sequence[_Entry]) -> None:
        self.at = array("q", (e.at for e in entries))
        self.ids = b"".join(e.id for e in entries)
        self.ns = array("q", (e.n for e in entries))
        self.kinds = bytes(e.kind for e in entries)
        self.plens = array("l", (e.plen for e in entries))
        self.text = b"\n".join(e.line for e in entries)
        starts = array("q")
        pos = 0
        for e in entries:
            starts.append(pos)
            pos += len(e.line) + 1
        self.starts = starts

    def __len__(self) -> int:
        return len(self.ns)

    def key(self, i: int) -> tuple[int, bytes]:
        return self.at[i], self.ids[16 * i : 16 * i + 16]

    def line(self, i: int) -> bytes:
        end = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[i] : end]

    def entries(self) -> list[_Entry]:
        lines = self.text.split(b"\n")
        return [
            _Entry(
                at=self.at[i],
                id=self.ids[16 * i : 16 * i + 16],
                n=self.ns[i],
                kind=self.kinds[i],
                plen=self.plens[i],
                line=lines[i],
            )
            for i in range(len(self))
        ]


class MemoryTextMirror:
    """The derived, in-memory text index over the searchable kinds of the log."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.RLock()
        self._blocks: list[_Block] = []
        self._last_keys: list[tuple[int, bytes]] = []  # last key of each block
        self._watermark = 0  # every row with n <= watermark is indexed
        self._loaded = False
        self._names: dict[str, str] = {}

    # -- feeding -----------------------------------------------------------

    def on_commit(self, rows: Sequence[Row]) -> None:
        """Log listener: index rows the moment they commit (if already built)."""
        with self._lock:
            if not self._loaded:
                return  # the cold-start build will read them from the log
            logged = list(map(_Logged._make, rows))
            if logged[0].n != self._watermark + 1:
                self._catch_up()  # another writer got in between: read the gap
                return
            if any(r.contact_id and r.contact_id not in self._names for r in logged):
                self._names = self._load_names()
            self._ingest(self._entry(r) for r in logged if r.kind in _SEARCHABLE)
            self._watermark = max(self._watermark, logged[-1].n)

    def is_built(self) -> bool:
        """Whether the mirror is in memory (and so indexes rows as they commit)."""
        return self._loaded

    def ensure_current(self) -> None:
        """Build on first use; afterwards index whatever the log gained since."""
        with self._lock:
            if not self._loaded:
                self.rebuild()
            else:
                self._catch_up()

    def rebuild(self) -> None:
        """Throw the mirror away and build it again from the log.

        Linear in the log: rows come straight from the driver's cursor, each
        line is made by one loop without a per-row call, and the collector is
        paused while the entries are made (they hold no cycles, and a million
        new objects would otherwise trigger full collections that walk all of
        them again and again)."""
        with self._lock:
            self._names = self._load_names()
            paused = gc.isenabled()
            gc.disable()
            try:
                with self.db.snapshot() as conn:
                    top = conn.execute(TOP_SQL).fetchone()[0] or 0
                    entries = self._entries(self._raw_rows(conn, 0, top))
                entries.sort(key=_order)
                self._blocks = [
                    _Block(entries[i : i + BLOCK_LINES])
                    for i in range(0, len(entries), BLOCK_LINES)
                ]
            finally:
                if paused:
                    gc.enable()
            self._last_keys = [b.key(len(b) - 1) for b in self._blocks]
            self._watermark = top
            self._loaded = True

    @staticmethod
    def _raw_rows(conn: sqlite3.Connection, after: int, upto: int) -> Iterator[tuple[Any, ...]]:
        """`_Searchable`'s columns of the searchable events with ``after < n <=
        upto``, as the driver's plain tuples."""
        cursor = conn.execute(_RAW_ROWS_SQL, (after, upto, *_SEARCHABLE_VALUES))
        try:
            while batch := cursor.fetchmany(4096):
                yield from batch
        finally:
            cursor.close()

    def _entries(self, rows: Iterable[tuple[Any, ...]]) -> list[_Entry]:
        """`_entry` of each row in `_Searchable`'s column order, in one loop."""
        names = self._names
        prefixes: dict[str, bytes] = {}
        out: list[_Entry] = []
        append = out.append
        for n, event_id, kind, at, contact_id, raw, from_me in rows:
            prefix = b""
            if contact_id:
                prefix = prefixes.get(contact_id, b"")
                if not prefix and contact_id not in prefixes:
                    name = names.get(contact_id)
                    prefix = prefixes[contact_id] = mirror_line(name, "")[0].encode()
            text = mirror_line(None, raw)[1] if "\n" in raw or "\r" in raw else raw
            append(
                _Entry(
                    at,
                    bytes.fromhex(event_id.replace("-", "")),
                    n,
                    _KIND_CODE[kind] | (_FROM_ME if from_me else 0),
                    len(prefix),
                    prefix + text.encode(),
                )
            )
        return out

    def _catch_up(self) -> None:
        # Most looks find nothing new: they cost one statement on the driver.
        # The new rows are read in the same snapshot as the top, the way a
        # rebuild reads them (`_entries` makes the lines `_entry` would).
        with self.db.snapshot() as conn:
            top = conn.execute(TOP_SQL).fetchone()[0] or 0
            if top <= self._watermark:
                return
            rows = list(self._raw_rows(conn, self._watermark, top))
        if any(row[_CONTACT_AT] and row[_CONTACT_AT] not in self._names for row in rows):
            self._names = self._load_names()
        self._ingest(self._entries(rows))
        self._watermark = top

    def _load_names(self) -> dict[str, str]:
        with self.db.snapshot() as conn:
            return dict(conn.execute(_NAMES_SQL).fetchall())

    def _entry(self, row: _Logged) -> _Entry:
        contact_id = row.contact_id
        name = self._names.get(contact_id) if contact_id else None
        prefix, body = mirror_line(name, row.text)
        pbytes = prefix.encode()
        return _Entry(
            row.at,
            bytes.fromhex(row.id.replace("-", "")),
            row.n,
            _KIND_CODE[row.kind] | (_FROM_ME if row.from_me else 0),
            len(pbytes),
            pbytes + body.encode(),
        )

    def _ingest(self, new: Iterable[_Entry]) -> None:
        batch = sorted(new, key=_order)
        if not batch:
            return
        # Group the new lines by the block whose key range takes them; anything
        # newer than every block goes to the last one (the common case).
        groups: dict[int, list[_Entry]] = {}
        last = len(self._blocks) - 1
        for entry in batch:
            i = bisect_left(self._last_keys, _order(entry))
            groups.setdefault(min(i, last) if last >= 0 else 0, []).append(entry)
        for i in sorted(groups, reverse=True):  # right to left keeps indices valid
            old = self._blocks[i].entries() if i <= last else []
            merged = sorted(old + groups[i], key=_order)
            pieces = [
                _Block(merged[j : j + BLOCK_LINES]) for j in range(0, len(merged), BLOCK_LINES)
            ]
            self._blocks[i : i + 1] = pieces
            self._last_keys[i : i + 1] = [b.key(len(b) - 1) for b in pieces]

    # -- searching ---------------------------------------------------------

    def search(self, matcher: Matcher, limit: int) -> list[MirrorHit]:
        """The newest ``limit`` lines the matcher finds, newest first.

        Blocks are scanned from the newest back, and the scan stops once a
        block boundary is reached with ``limit`` hits in hand: every older block
        can only hold older lines.
        """
        self.ensure_current()
        hits: list[MirrorHit] = []
        with self._lock:
            for block in reversed(self._blocks):
                found = list(self._scan(block, matcher))
                for i, start, end in reversed(found):
                    hits.append(self._hit(block, i, start, end))
                if len(hits) >= limit:
                    break
        return hits[:limit]

    @staticmethod
    def _scan(block: _Block, matcher: Matcher) -> Iterator[tuple[int, int, int]]:
        text, starts = block.text, block.starts
        size = len(text)
        pos = 0
        while pos <= size:
            m = matcher.search(text, pos)
            if m is None:
                return
            start, end = m.span()  # type: ignore[attr-defined]
            i = bisect_right(starts, start) - 1
            yield i, start, end
            if i + 1 >= len(starts):
                return
            pos = starts[i + 1]  # one hit per line: resume at the next line

    @staticmethod
    def _hit(block: _Block, i: int, start: int, end: int) -> MirrorHit:
        line = block.line(i)
        plen = block.plens[i]
        body_bytes = line[plen:]
        # Offsets are bytes within the block; the snippet wants characters of the
        # body. A match inside the name prefix counts as matching at offset 0.
        rel_start = max(0, start - block.starts[i] - plen)
        rel_end = max(rel_start, end - block.starts[i] - plen)
        s = len(body_bytes[:rel_start].decode(errors="ignore"))
        e = len(body_bytes[:rel_end].decode(errors="ignore"))
        return MirrorHit(
            n=block.ns[i],
            event_id=str(uuid.UUID(bytes=block.ids[16 * i : 16 * i + 16])),
            kind=_KINDS[block.kinds[i] & ~_FROM_ME],
            from_me=bool(block.kinds[i] & _FROM_ME),
            at=block.at[i],
            contact=line[: plen - 2].decode() if plen else None,
            body=body_bytes.decode(),
            match_start=s,
            match_end=e,
        )

    # -- inspection (tests and status) ---------------------------------------

    def lines(self) -> list[tuple[str, str]]:
        """Every indexed line as (event id, line text), oldest first."""
        self.ensure_current()
        with self._lock:
            out: list[tuple[str, str]] = []
            for block in self._blocks:
                for i in range(len(block)):
                    eid = str(uuid.UUID(bytes=block.ids[16 * i : 16 * i + 16]))
                    out.append((eid, block.line(i).decode()))
            return out

    def __len__(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._blocks)

    def is_empty(self) -> bool:
        self.ensure_current()
        return not self._blocks
