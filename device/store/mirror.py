"""MemoryTextMirror: the plain-text index that makes grep over the log fast.

The log is rows in SQLite; a pattern search wants long runs of text. The mirror
keeps every searchable event as one line of UTF-8, and keeps it on disk beside
the database, so that a new process (``pixie grep``) maps it and searches at
once instead of reading a million rows back first.

On disk (the data dir's ``mirror/`` folder)
-------------------------------------------
* a **base**: lines in (time, id) order, written whole by a rebuild and never
  changed afterwards;
* a **tail**: lines the log gained since, appended in commit order;
* for each, a text file (every line ends in a newline) and an index file of
  one fixed `_REC` record per line (where the line starts, its time, log
  number, event id, kind and the length of its contact-name prefix);
* ``head.json``: which base and tail files are current and how many lines
  and bytes of each belong to the mirror, the log number it has read up to
  (with that row's event id), a CRC-32 of the tail's bytes, and the contact
  names its lines were written with. It is replaced whole (written aside,
  then renamed), so a reader sees one head or the next, never half of one.

Readers map the files read-only and take only the bytes the head names;
writers (the daemon after each commit, or a command that finds the mirror
behind the log) hold ``lock`` (an advisory file lock) while they append, and
write the head last. Files are never shortened in place beyond what no head
has named: a rebuild or a reset writes new files under new names, and the old
ones are unlinked once the head no longer names them (a process that still has
them mapped keeps reading its own copy).

When the mirror is not to be trusted, it is rebuilt from the log, which is the
truth; it never answers from a mirror it cannot vouch for:

* missing or unreadable head, or files shorter than it says: rebuild;
* files longer than the head says (a writer stopped between its append and
  its head): the extra bytes are cut off and the rows read again;
* the tail's bytes do not match their CRC (a crash that lost part of an
  append the head already counted): the tail is dropped and its rows read
  again from the log;
* the log's row at the head's number is not the event the head recorded, or
  the log is shorter (another database in the folder): rebuild;
* a contact whose name a line carries has since been renamed: rebuild;
* the tail grows past `COMPACT_MIN` lines and an eighth of the base: rebuild,
  so the base stays the bulk and the tail stays cheap to check.

The base's bytes are written and flushed to disk before the head that names
them, and are never written again. The tail is not flushed on each append: its
CRC, checked whenever a process opens the mirror, catches what a crash lost.

Search walks the tail whole (it is small) and the base from its newest end
back, in runs of lines that double in size, and stops as soon as the base has
given ``limit`` hits: every line before them is older.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import mmap
import os
import shutil
import sqlite3
import struct
import tempfile
import threading
import uuid
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from sqlalchemy import select

from pixie.device.store.contacts import Contact
from pixie.device.store.db import Database, driver_sql
from pixie.device.store.memlog import SEARCHABLE_KINDS, TOP_SQL, EventKind, MemoryEvent, Row

log = logging.getLogger(__name__)

BLOCK_LINES = 4096
"""Lines of the base in the first run a search scans from the newest end
(each further run is twice as long, up to `MAX_RUN_LINES`)."""
MAX_RUN_LINES = 1 << 18
COMPACT_MIN = 65_536
"""Tail lines below which the tail is never merged into a new base."""
FORMAT = 1
MIRROR_FOLDER = "mirror"
"""The mirror's folder in a data dir."""
_KINDS: tuple[EventKind, ...] = tuple(EventKind)
_FROM_ME = 0x80  # high bit of a line's kind byte: the user wrote it
_KIND_CODE: dict[str, int] = {k.value: i for i, k in enumerate(_KINDS)}
_SEARCHABLE_VALUES = sorted(k.value for k in SEARCHABLE_KINDS)
_SEARCHABLE = frozenset(_SEARCHABLE_VALUES)
# One line's record: where it starts in the text, its time, log number,
# prefix bytes, kind byte, three bytes of padding, event id.
_REC = struct.Struct("<QqqIB3x16s")
_STRIDE = _REC.size // 8  # records are whole numbers of 8-byte words
_HEAD = "head.json"
_LOCK = "lock"
_MAX_HEAD_BYTES = 64 << 20

_NAMES_SQL = driver_sql(select(Contact.id, Contact.name))
_ROW_ID_SQL = f"SELECT id FROM {MemoryEvent.__tablename__} WHERE n = ?"


class Matcher(Protocol):
    """The slice of a compiled RE2 pattern the mirror needs."""

    def search(self, text: Any, pos: int = 0, endpos: int | None = None) -> object: ...


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
    """One line of the mirror before it is written."""

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


class _Damaged(Exception):
    """The files on disk do not match their head."""


_EMPTY = memoryview(b"")


class _Segment:
    """A run of lines on disk: its text and its records, mapped read-only, and
    exactly as many of each as the head names."""

    __slots__ = ("count", "idx", "size", "starts", "text")

    def __init__(self, text: mmap.mmap | bytes, idx: mmap.mmap | bytes, count: int) -> None:
        self.text, self.count, self.size = text, count, len(text)
        self.idx = memoryview(idx)
        self.starts = self.idx.cast("Q")[::_STRIDE] if count else _EMPTY.cast("Q")

    @classmethod
    def open(cls, folder: Path, name: str, count: int, size: int) -> _Segment:
        text = _map(folder / f"{name}.txt", size)
        idx = _map(folder / f"{name}.idx", count * _REC.size)
        return cls(text, idx, count)

    def record(self, i: int) -> tuple[int, int, int, int, int, bytes]:
        """(start, at, n, prefix bytes, kind byte, id) of line ``i``."""
        found: tuple[int, int, int, int, int, bytes] = _REC.unpack_from(self.idx, i * _REC.size)
        return found

    def key(self, i: int) -> tuple[int, bytes]:
        _, at, _, _, _, event_id = self.record(i)
        return at, event_id

    def end(self, i: int) -> int:
        """Where line ``i``'s newline is."""
        return (self.starts[i + 1] if i + 1 < self.count else self.size) - 1

    def line(self, i: int) -> bytes:
        return bytes(self.text[self.starts[i] : self.end(i)])

    def scan(self, matcher: Matcher, lo: int, hi: int) -> Iterator[tuple[int, int, int]]:
        """(line, match start, match end) of each of lines [lo, hi) the matcher
        finds, one hit per line, oldest line first."""
        if lo >= hi:
            return
        starts, text = self.starts, self.text
        pos, endpos = starts[lo], self.end(hi - 1) + 1
        while pos < endpos:
            m = matcher.search(text, pos, endpos)
            if m is None:
                return
            start, end = m.span()  # type: ignore[attr-defined]
            i = bisect_right(starts, start, lo, hi) - 1
            yield i, start, end
            if i + 1 >= hi:
                return
            pos = starts[i + 1]  # one hit per line: resume at the next line


def _map(path: Path, length: int) -> mmap.mmap | bytes:
    """The first ``length`` bytes of a file, mapped read-only (bytes, to
    search and slice, as a matcher such as `PersonLines` expects)."""
    if length == 0:
        return b""
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size < length:
                raise _Damaged(f"{path.name} is shorter than its head says")
            mapped = mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise _Damaged(f"{path.name} unreadable ({exc.strerror})") from exc
    with contextlib.suppress(AttributeError, OSError):  # not on every platform
        mapped.madvise(mmap.MADV_RANDOM)
    return mapped


@dataclass
class _Head:
    """What ``head.json`` says."""

    base: str
    base_lines: int
    base_bytes: int
    base_top: int  # the log number the base was built up to
    tail: str
    tail_lines: int
    tail_bytes: int
    tail_text_crc: int  # CRC-32 of the tail's text
    tail_idx_crc: int  # CRC-32 of the tail's records
    top: int  # every row with n <= top is in the mirror
    top_id: str | None  # the event id of row `top` (None: no row yet)
    names: dict[str, str]  # the contact names the lines were written with
    serial: int  # grows by one for every file name the folder has used

    def dump(self) -> bytes:
        return json.dumps({"format": FORMAT, **self.__dict__}, sort_keys=True).encode()

    @classmethod
    def load(cls, raw: bytes) -> _Head:
        try:
            found = json.loads(raw)
            if not isinstance(found, dict) or found.pop("format", None) != FORMAT:
                raise _Damaged("head of another format")
            head = cls(**found)
        except (ValueError, TypeError) as exc:
            raise _Damaged(f"unreadable head ({exc})") from exc
        for field_name in (
            "base_lines",
            "base_bytes",
            "base_top",
            "tail_lines",
            "tail_bytes",
            "tail_text_crc",
            "tail_idx_crc",
            "top",
            "serial",
        ):
            value = getattr(head, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise _Damaged(f"bad {field_name} in head")
        if head.top_id is not None and not isinstance(head.top_id, str):
            raise _Damaged("bad top_id in head")
        if not isinstance(head.names, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in head.names.items()
        ):
            raise _Damaged("bad names in head")
        for name in (head.base, head.tail):
            if not isinstance(name, str) or not name.isalnum():
                raise _Damaged("bad file name in head")
        return head


class MemoryTextMirror:
    """The derived text index over the searchable kinds of the log, kept on
    disk in ``folder`` (a private temporary folder if none is given or the
    given one cannot be written)."""

    def __init__(self, db: Database, folder: Path | None = None) -> None:
        self.db = db
        self._lock = threading.RLock()
        self._folder = folder
        self._private: Path | None = None
        self._head: _Head | None = None
        self._head_stat: tuple[int, int, int] | None = None
        self._base = _Segment(b"", b"", 0)
        self._tail = _Segment(b"", b"", 0)

    # -- the folder ----------------------------------------------------------

    def _where(self) -> Path:
        if self._private is not None:
            return self._private
        if self._folder is not None:
            try:
                self._folder.mkdir(mode=0o700, exist_ok=True)
                if os.access(self._folder, os.W_OK):
                    return self._folder
            except OSError:
                pass
            log.warning("text mirror folder not writable; keeping the mirror in a temporary one")
        self._private = Path(tempfile.mkdtemp(prefix="pixie-mirror-"))
        return self._private

    @contextlib.contextmanager
    def _writer(self) -> Iterator[Path]:
        """The folder, held against other writers (in this and other processes)."""
        folder = self._where()
        fd = os.open(folder / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield folder
        finally:
            os.close(fd)  # closing releases the lock

    def close(self) -> None:
        """Let go of the mapped files (and a private folder)."""
        with self._lock:
            self._head = None
            self._base = self._tail = _Segment(b"", b"", 0)
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None

    # -- feeding -----------------------------------------------------------

    def on_commit(self, rows: Sequence[Row]) -> None:
        """Log listener: index rows the moment they commit (if opened). Never
        raises into the write that committed them: a mirror that cannot take
        them is closed, and the next search reopens it and reads them."""
        with self._lock:
            if self._head is None:
                return  # the first search opens the mirror and reads them from the log
            try:
                self._on_commit(rows)
            except (_Damaged, OSError) as exc:
                log.info("text mirror closed until the next search: %s", exc)
                self._head = None

    def _on_commit(self, rows: Sequence[Row]) -> None:
        logged = list(map(_Logged._make, rows))
        with self._writer() as folder:
            self._reload_if_moved(folder)
            head = self._head
            if head is None or logged[0].n != head.top + 1:
                self._catch_up_locked(folder)  # another writer got in between
                return
            names = head.names
            if any(r.contact_id and r.contact_id not in names for r in logged):
                names = {**self._load_names(), **names}
            searchable = [r for r in logged if r.kind in _SEARCHABLE]
            entries = [self._entry(r, names) for r in searchable]
            used = {r.contact_id: names.get(r.contact_id) or "" for r in searchable if r.contact_id}
            self._append(folder, entries, used, logged[-1].n, logged[-1].id)

    def is_built(self) -> bool:
        """Whether this mirror has been opened (and so indexes rows as they commit)."""
        return self._head is not None

    def ensure_current(self) -> None:
        """Open (or build) on first use; afterwards index whatever the log gained since."""
        with self._lock:
            folder = self._where()
            if self._head is None or self._moved(folder):
                try:
                    self._open(folder)
                except _Damaged as exc:
                    log.info("text mirror rebuilt: %s", exc)
                    self.rebuild()
                    return
            head = self._head
            assert head is not None
            with self.db.snapshot() as conn:
                top = conn.execute(TOP_SQL).fetchone()[0] or 0
                names = dict(conn.execute(_NAMES_SQL).fetchall())
                same_row = head.top_id is None or _row_id(conn, head.top) == head.top_id
            if top < head.top or not same_row or _renamed(head.names, names):
                self.rebuild()
            elif top > head.top:
                with self._writer() as locked:
                    self._catch_up_locked(locked)

    def rebuild(self) -> None:
        """Build the mirror again from the log, as a new base and an empty tail."""
        with self._lock, self._writer() as folder:
            self._rebuild_locked(folder)

    def _rebuild_locked(self, folder: Path) -> None:
        """`rebuild`, the writer lock held.

        Linear in the log: rows come straight from the driver's cursor, each
        line is made by one loop without a per-row call, and the collector is
        paused while the entries are made (they hold no cycles, and a million
        new objects would otherwise trigger full collections that walk all of
        them again and again). The base is written aside, flushed and renamed
        into place before the head that names it."""
        try:
            old = self._read_head(folder)
        except _Damaged:
            old = None
        serial = max(old.serial if old else 0, self._head.serial if self._head else 0)
        base, tail = f"b{serial + 1}", f"t{serial + 2}"
        paused = gc.isenabled()
        gc.disable()
        try:
            with self.db.snapshot() as conn:
                names = dict(conn.execute(_NAMES_SQL).fetchall())
                top = conn.execute(TOP_SQL).fetchone()[0] or 0
                top_id = _row_id(conn, top) if top else None
                entries, used = self._entries(self._raw_rows(conn, 0, top), names)
            entries.sort(key=_order)
            lines, size = len(entries), _write_segment(folder, base, entries)
            del entries
            _write_segment(folder, tail, [])
        finally:
            if paused:
                gc.enable()
        head = _Head(
            base=base,
            base_lines=lines,
            base_bytes=size,
            base_top=top,
            tail=tail,
            tail_lines=0,
            tail_bytes=0,
            tail_text_crc=0,
            tail_idx_crc=0,
            top=top,
            top_id=top_id,
            names=used,
            serial=serial + 2,
        )
        self._write_head(folder, head)
        self._open(folder)
        _remove_unnamed(folder, head)

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

    @staticmethod
    def _entries(
        rows: Iterable[tuple[Any, ...]], names: dict[str, str]
    ) -> tuple[list[_Entry], dict[str, str]]:
        """`_entry` of each row in `_Searchable`'s column order, in one loop,
        and the name each contact's lines were written with ("" for none)."""
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
        return out, {contact_id: names.get(contact_id) or "" for contact_id in prefixes}

    @staticmethod
    def _entry(row: _Logged, names: dict[str, str]) -> _Entry:
        contact_id = row.contact_id
        name = names.get(contact_id) if contact_id else None
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

    def _load_names(self) -> dict[str, str]:
        with self.db.snapshot() as conn:
            return dict(conn.execute(_NAMES_SQL).fetchall())

    # -- the files -----------------------------------------------------------

    @staticmethod
    def _read_head(folder: Path) -> _Head | None:
        try:
            with (folder / _HEAD).open("rb") as f:
                raw = f.read(_MAX_HEAD_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _Damaged(f"head unreadable ({exc.strerror})") from exc
        if len(raw) > _MAX_HEAD_BYTES:
            raise _Damaged("head too large")
        return _Head.load(raw)

    @staticmethod
    def _write_head(folder: Path, head: _Head) -> None:
        """Replace the head whole: written aside, then renamed over. Not
        flushed: a head that a crash leaves empty or cut short does not parse,
        and the mirror is then rebuilt; one that reverts to the one before
        names fewer lines, and the rows after it are read again."""
        aside = folder / f"{_HEAD}.partial"
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, head.dump())
        finally:
            os.close(fd)
        aside.replace(folder / _HEAD)

    @staticmethod
    def _stat(folder: Path) -> tuple[int, int, int] | None:
        try:
            st = (folder / _HEAD).stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _moved(self, folder: Path) -> bool:
        """Whether another writer has replaced the head since this one read it."""
        return self._stat(folder) != self._head_stat

    def _reload_if_moved(self, folder: Path) -> None:
        if self._head is not None and self._moved(folder):
            try:
                self._open(folder)
            except _Damaged:
                self._head = None

    def _open(self, folder: Path) -> None:
        """Map what the head names, checking the tail's bytes against their
        CRCs. Raises `_Damaged` (leaving this mirror closed) if anything is off."""
        self._head = None
        stat = self._stat(folder)
        head = self._read_head(folder)
        if head is None:
            raise _Damaged("no mirror yet")
        base = _Segment.open(folder, head.base, head.base_lines, head.base_bytes)
        tail = _Segment.open(folder, head.tail, head.tail_lines, head.tail_bytes)
        if (zlib.crc32(tail.text), zlib.crc32(tail.idx)) != (head.tail_text_crc, head.tail_idx_crc):
            raise _Damaged("the tail does not match its checksum")
        self._base, self._tail, self._head, self._head_stat = base, tail, head, stat

    def _catch_up_locked(self, folder: Path) -> None:
        """Append the rows the log gained since the head (the writer lock held)."""
        self._reload_if_moved(folder)
        if self._head is None:
            try:
                self._open(folder)
            except _Damaged as exc:
                log.info("text mirror rebuilt: %s", exc)
                self._rebuild_locked(folder)
                return
        head = self._head
        assert head is not None
        with self.db.snapshot() as conn:
            top = conn.execute(TOP_SQL).fetchone()[0] or 0
            if top <= head.top:
                return
            rows = list(self._raw_rows(conn, head.top, top))
            top_id = _row_id(conn, top)
            names = head.names
            if any(row[_CONTACT_AT] and row[_CONTACT_AT] not in names for row in rows):
                names = {**dict(conn.execute(_NAMES_SQL).fetchall()), **names}
        entries, used = self._entries(rows, names)
        self._append(folder, entries, used, top, top_id)

    def _append(
        self,
        folder: Path,
        entries: list[_Entry],
        used: dict[str, str],
        top: int,
        top_id: str | None,
    ) -> None:
        """Add lines to the tail and move the head to ``top`` (writer lock held)."""
        head = self._head
        assert head is not None
        if head.tail_lines + len(entries) > max(COMPACT_MIN, head.base_lines // 8):
            self._rebuild_locked(folder)  # the tail would outgrow its share: a new base
            return
        text, records = bytearray(), bytearray()
        for e in entries:
            records += _REC.pack(head.tail_bytes + len(text), e.at, e.n, e.plen, e.kind, e.id)
            text += e.line
            text += b"\n"
        try:
            for suffix, size, more in (
                ("txt", head.tail_bytes, text),
                ("idx", head.tail_lines * _REC.size, records),
            ):
                with (folder / f"{head.tail}.{suffix}").open("r+b") as f:
                    # Bytes past what the head names were never counted (a
                    # writer stopped before its head): written over.
                    f.truncate(size)
                    f.seek(size)
                    f.write(more)
        except OSError as exc:
            log.info("text mirror rebuilt: tail not writable (%s)", exc.strerror)
            self._rebuild_locked(folder)
            return
        new = _Head(
            **{
                **head.__dict__,
                "tail_lines": head.tail_lines + len(entries),
                "tail_bytes": head.tail_bytes + len(text),
                "tail_text_crc": zlib.crc32(text, head.tail_text_crc),
                "tail_idx_crc": zlib.crc32(records, head.tail_idx_crc),
                "top": top,
                "top_id": top_id,
                "names": {**used, **head.names},
            }
        )
        self._write_head(folder, new)
        # The bytes just written are this writer's own: mapped without
        # reading the whole tail back for its checksum.
        tail = _Segment.open(folder, new.tail, new.tail_lines, new.tail_bytes)
        self._tail, self._head, self._head_stat = tail, new, self._stat(folder)

    # -- searching ---------------------------------------------------------

    def search(self, matcher: Matcher, limit: int) -> list[MirrorHit]:
        """The newest ``limit`` lines the matcher finds, newest first.

        The tail is scanned whole; the base from its newest end back, in runs
        of lines that double in length, until it has given ``limit`` hits:
        every older line of the base is older than those.
        """
        self.ensure_current()
        with self._lock:
            base, tail = self._base, self._tail
            found: list[tuple[int, bytes, _Segment, int, int, int]] = []
            for i, start, end in tail.scan(matcher, 0, tail.count):
                found.append((*tail.key(i), tail, i, start, end))
            hi, run, from_base = base.count, BLOCK_LINES, 0
            while hi > 0 and from_base < limit:
                lo = max(0, hi - run)
                for i, start, end in base.scan(matcher, lo, hi):
                    found.append((*base.key(i), base, i, start, end))
                    from_base += 1
                hi, run = lo, min(run * 2, MAX_RUN_LINES)
            found.sort(key=lambda h: (h[0], h[1]), reverse=True)
            return [_hit(seg, i, start, end) for _, _, seg, i, start, end in found[:limit]]

    # -- inspection (tests and status) ---------------------------------------

    def lines(self) -> list[tuple[str, str]]:
        """Every indexed line as (event id, line text), oldest first."""
        self.ensure_current()
        with self._lock:
            keyed = [
                (seg.key(i), seg, i) for seg in (self._base, self._tail) for i in range(seg.count)
            ]
            keyed.sort(key=lambda k: k[0])
            return [(str(uuid.UUID(bytes=key[1])), seg.line(i).decode()) for key, seg, i in keyed]

    def __len__(self) -> int:
        with self._lock:
            return self._base.count + self._tail.count

    def is_empty(self) -> bool:
        self.ensure_current()
        return not len(self)


def _hit(seg: _Segment, i: int, start: int, end: int) -> MirrorHit:
    line_start, at, n, plen, kind, event_id = seg.record(i)
    line = seg.line(i)
    body_bytes = line[plen:]
    # Offsets are bytes within the segment; the snippet wants characters of
    # the body. A match inside the name prefix counts as matching at offset 0.
    rel_start = max(0, start - line_start - plen)
    rel_end = max(rel_start, end - line_start - plen)
    s = len(body_bytes[:rel_start].decode(errors="ignore"))
    e = len(body_bytes[:rel_end].decode(errors="ignore"))
    return MirrorHit(
        n=n,
        event_id=str(uuid.UUID(bytes=event_id)),
        kind=_KINDS[kind & ~_FROM_ME],
        from_me=bool(kind & _FROM_ME),
        at=at,
        contact=line[: plen - 2].decode() if plen else None,
        body=body_bytes.decode(),
        match_start=s,
        match_end=e,
    )


def _row_id(conn: sqlite3.Connection, n: int) -> str | None:
    row = conn.execute(_ROW_ID_SQL, (n,)).fetchone()
    return None if row is None else str(row[0])


def _renamed(written: dict[str, str], now: dict[str, str | None]) -> bool:
    """Whether a contact's name differs from the one their lines carry."""
    return any((now.get(contact_id) or "") != name for contact_id, name in written.items())


def _write_segment(folder: Path, name: str, entries: Sequence[_Entry]) -> int:
    """Write a segment's two files aside, flush them and rename them into
    place; the text's length."""
    size = 0
    for suffix in ("txt", "idx"):
        aside = folder / f"{name}.{suffix}.partial"
        with aside.open("wb") as f:
            aside.chmod(0o600)
            if suffix == "txt":
                for e in entries:
                    f.write(e.line)
                    f.write(b"\n")
                size = f.tell()
            else:
                offset = 0
                for e in entries:
                    f.write(_REC.pack(offset, e.at, e.n, e.plen, e.kind, e.id))
                    offset += len(e.line) + 1
            f.flush()
            if entries:  # an empty file has nothing a crash could lose
                os.fsync(f.fileno())
        aside.replace(folder / f"{name}.{suffix}")
    return size


def _remove_unnamed(folder: Path, head: _Head) -> None:
    """Unlink the segment files the head no longer names."""
    keep = {f"{head.base}.txt", f"{head.base}.idx", f"{head.tail}.txt", f"{head.tail}.idx"}
    for path in folder.iterdir():
        if path.suffix in (".txt", ".idx", ".partial") and path.name not in keep:
            if path.name == f"{_HEAD}.partial":
                continue
            with contextlib.suppress(OSError):
                path.unlink()
