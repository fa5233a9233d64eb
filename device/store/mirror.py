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
  one fixed `REC` record per line (where the line starts, its time, log
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
  append the head already counted): rebuild;
* the log's row at the head's number is not the event the head recorded, or
  the log is shorter (another database in the folder), or a contact whose
  name a line carries has since been renamed: rebuild (`mirrorfiles.standing`
  makes these checks, for this module and for the quick grep alike);
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
import dataclasses
import fcntl
import gc
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
import zlib
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pixie.device.errors import DataDirError
from pixie.device.store import identities
from pixie.device.store.db import Database
from pixie.device.store.identities import FROM_ME_SQL, SHOWN_CONTACT_SQL
from pixie.device.store.kinds import SEARCHABLE_KINDS
from pixie.device.store.memlog import MemoryEvent, Row
from pixie.device.store.mirrorfiles import (
    FROM_ME,
    KINDS,
    LOCK_FILE,
    MIRROR_FOLDER,
    NAMES_SQL,
    REC,
    TOP_SQL,
    Damaged,
    Entry,
    Head,
    MappedMirror,
    Matcher,
    MirrorHit,
    Segment,
    Standing,
    all_lines,
    head_stat,
    line_order,
    mirror_line,
    open_segments,
    read_head,
    remove_unnamed,
    row_id,
    standing,
    write_head,
    write_segment,
)

__all__ = [
    "COMPACT_MIN",
    "MIRROR_FOLDER",
    "Matcher",
    "MemoryTextMirror",
    "MirrorHit",
    "mirror_line",
]

log = logging.getLogger(__name__)
_NONE = MappedMirror(Segment(b"", b"", 0), Segment(b"", b"", 0))  # before the first open

COMPACT_MIN = 65_536
"""Tail lines below which the tail is never merged into a new base."""
_KIND_CODE: dict[str, int] = {k.value: i for i, k in enumerate(KINDS)}
_SEARCHABLE_VALUES = sorted(k.value for k in SEARCHABLE_KINDS)
_SEARCHABLE = frozenset(_SEARCHABLE_VALUES)


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


# from_me as the identity events correct it (`identities.FROM_ME_SQL`), and
# no contact named on the user's own words (`identities.SHOWN_CONTACT_SQL`).
_RAW_ROWS_SQL = (
    f"SELECT {', '.join(_Searchable._fields)} FROM (SELECT "
    + ", ".join(
        f"{SHOWN_CONTACT_SQL} AS contact_id" if f == "contact_id" else f
        for f in _Searchable._fields[:-1]
    )
    + f", {FROM_ME_SQL} AS from_me "
    f"FROM {MemoryEvent.__tablename__} "
    f"WHERE n > ? AND n <= ? AND kind IN ({', '.join('?' * len(_SEARCHABLE_VALUES))}))"
)
_CONTACT_AT = _Searchable._fields.index("contact_id")


class MemoryTextMirror:
    """The derived text index over the searchable kinds of the log, kept on
    disk in ``folder`` (a private temporary folder if none is given or the
    given one cannot be written)."""

    def __init__(self, db: Database, folder: Path | None = None) -> None:
        self.db = db
        self._lock = threading.RLock()
        self._folder = folder
        self._ready: Path | None = None  # the folder, once made or chosen
        self._private: Path | None = None
        self._head: Head | None = None
        self._head_stat: tuple[int, int, int] | None = None
        self._files = _NONE
        # The contacts identity events say are the user, read once per head:
        # an identity event makes every writer rebuild, and so open anew.
        self._mine: frozenset[str] | None = None

    # -- the folder ----------------------------------------------------------

    def _where(self) -> Path:
        if self._ready is not None:
            return self._ready
        if self._folder is not None:
            try:
                self._folder.mkdir(mode=0o700, exist_ok=True)
                if os.access(self._folder, os.W_OK):
                    self._ready = self._folder
                    return self._ready
            except OSError:
                pass
            log.warning("text mirror folder not writable; keeping the mirror in a temporary one")
        self._private = self._ready = Path(tempfile.mkdtemp(prefix="pixie-mirror-"))
        return self._ready

    @contextlib.contextmanager
    def _writer(self) -> Iterator[Path]:
        """The folder, held against other writers (in this and other processes)."""
        folder = self._where()
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield folder
        finally:
            os.close(fd)  # closing releases the lock

    def close(self) -> None:
        """Let go of the mapped files (and a private folder)."""
        with self._lock:
            self._head = None
            self._files = _NONE
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = self._ready = None

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
            except (Damaged, OSError) as exc:
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
            if any(r.kind == identities.IDENTITY for r in logged):
                # Lines already written may be the user's now: written again.
                self._rebuild_locked(folder)
                return
            names = head.names
            if any(r.contact_id and r.contact_id not in names for r in logged):
                names = {**self._load_names(), **names}
            mine = self._me()
            searchable = (
                (
                    r.n,
                    r.id,
                    r.kind,
                    r.at,
                    None if r.contact_id in mine else r.contact_id,
                    r.text,
                    r.from_me or r.contact_id in mine,
                )
                for r in logged
                if r.kind in _SEARCHABLE
            )
            entries, used = self._entries(searchable, names, self.db.path)
            self._append(folder, entries, used, logged[-1].n, logged[-1].id)

    def _me(self) -> frozenset[str]:
        if self._mine is None:
            with self.db.reading(plain=True) as conn:
                self._mine = identities.me_contacts(conn)
        return self._mine

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
                except Damaged:
                    # A writer may have been replacing the files as they were
                    # read: look again with the writers held off, and rebuild
                    # only what is still wrong then.
                    with self._writer() as locked:
                        if self._open_or_rebuild_locked(locked):
                            return
            head = self._head
            assert head is not None
            with self.db.reading(plain=True) as conn:
                now = standing(conn, head)
            if now is Standing.ASTRAY:
                self.rebuild()
            elif now is Standing.BEHIND:
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
            old = read_head(folder)
        except Damaged:
            old = None
        serial = max(old.serial if old else 0, self._head.serial if self._head else 0)
        base, tail = f"b{serial + 1}", f"t{serial + 2}"
        paused = gc.isenabled()
        gc.disable()
        try:
            with self.db.reading(plain=True) as conn:
                names = dict(conn.execute(NAMES_SQL).fetchall())
                top = conn.execute(TOP_SQL).fetchone()[0] or 0
                top_id = row_id(conn, top) if top else None
                # Closed here, on any error too: left to the collector, the
                # reader would close its cursor after the connection is gone.
                with contextlib.closing(self._raw_rows(conn, 0, top)) as rows:
                    entries, used = self._entries(rows, names, self.db.path)
            entries.sort(key=line_order)
            lines, size = len(entries), write_segment(folder, base, entries)
            del entries
            write_segment(folder, tail, [])
        finally:
            if paused:
                gc.enable()
        head = Head(
            base=base,
            base_lines=lines,
            base_bytes=size,
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
        write_head(folder, head)
        self._open(folder)
        remove_unnamed(folder, head)

    @staticmethod
    def _raw_rows(
        conn: sqlite3.Connection, after: int, upto: int
    ) -> Generator[tuple[Any, ...], None, None]:
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
        rows: Iterable[tuple[Any, ...]], names: dict[str, str], where: Path
    ) -> tuple[list[Entry], dict[str, str]]:
        """`_entry` of each row in `_Searchable`'s column order, in one loop,
        and the name each contact's lines were written with ("" for none). A
        row no writer could have made (damage in the file) is `DataDirError`."""
        try:
            return MemoryTextMirror._entries_of(rows, names)
        except (ValueError, TypeError, AttributeError, KeyError):
            raise DataDirError(f"{where} is damaged (an event row that cannot be read)") from None

    @staticmethod
    def _entries_of(
        rows: Iterable[tuple[Any, ...]], names: dict[str, str]
    ) -> tuple[list[Entry], dict[str, str]]:
        prefixes: dict[str, bytes] = {}
        out: list[Entry] = []
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
                Entry(
                    at,
                    bytes.fromhex(event_id.replace("-", "")),
                    n,
                    _KIND_CODE[kind] | (FROM_ME if from_me else 0),
                    len(prefix),
                    prefix + text.encode(),
                )
            )
        return out, {contact_id: names.get(contact_id) or "" for contact_id in prefixes}

    def _load_names(self) -> dict[str, str]:
        with self.db.reading(plain=True) as conn:
            return dict(conn.execute(NAMES_SQL).fetchall())

    # -- the files -----------------------------------------------------------

    def _moved(self, folder: Path) -> bool:
        """Whether another writer has replaced the head since this one read it."""
        return head_stat(folder) != self._head_stat

    def _reload_if_moved(self, folder: Path) -> None:
        if self._head is not None and self._moved(folder):
            try:
                self._open(folder)
            except Damaged:
                self._head = None

    def _open(self, folder: Path) -> None:
        """Map what the head names, checking the tail's bytes against their
        CRCs. Raises `Damaged` (leaving this mirror closed) if anything is off."""
        self._head = None
        self._mine = None
        head, base, tail, stat = open_segments(folder)
        self._files, self._head, self._head_stat = MappedMirror(base, tail), head, stat

    def _open_or_rebuild_locked(self, folder: Path) -> bool:
        """Open the mirror, or rebuild it if it cannot be trusted (the writer
        lock held); whether it was rebuilt (and so is current)."""
        try:
            self._open(folder)
        except Damaged as exc:
            log.info("text mirror rebuilt: %s", exc)
            self._rebuild_locked(folder)
            return True
        return False

    def _catch_up_locked(self, folder: Path) -> None:
        """Append the rows the log gained since the head (the writer lock held)."""
        self._reload_if_moved(folder)
        if self._head is None and self._open_or_rebuild_locked(folder):
            return
        head = self._head
        assert head is not None
        with self.db.reading(plain=True) as conn:
            top = conn.execute(TOP_SQL).fetchone()[0] or 0
            if top <= head.top:
                return
            again = identities.landed_after(conn, head.top)
            if not again:
                rows = list(self._raw_rows(conn, head.top, top))
                top_id = row_id(conn, top)
                names = head.names
                if any(row[_CONTACT_AT] and row[_CONTACT_AT] not in names for row in rows):
                    names = {**dict(conn.execute(NAMES_SQL).fetchall()), **names}
        if again:  # lines already written may be the user's now: written again
            self._rebuild_locked(folder)
            return
        entries, used = self._entries(rows, names, self.db.path)
        self._append(folder, entries, used, top, top_id)

    def _append(
        self,
        folder: Path,
        entries: list[Entry],
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
            records += REC.pack(head.tail_bytes + len(text), e.at, e.n, e.plen, e.kind, e.id)
            text += e.line
            text += b"\n"
        try:
            for suffix, size, more in (
                ("txt", head.tail_bytes, text),
                ("idx", head.tail_lines * REC.size, records),
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
        new = dataclasses.replace(
            head,
            tail_lines=head.tail_lines + len(entries),
            tail_bytes=head.tail_bytes + len(text),
            tail_text_crc=zlib.crc32(text, head.tail_text_crc),
            tail_idx_crc=zlib.crc32(records, head.tail_idx_crc),
            top=top,
            top_id=top_id,
            names={**used, **head.names},
        )
        write_head(folder, new)
        # The bytes just written are this writer's own: mapped without
        # reading the whole tail back for its checksum.
        tail = Segment.open(folder, new.tail, new.tail_lines, new.tail_bytes)
        self._files = MappedMirror(self._files.base, tail)
        self._head, self._head_stat = new, head_stat(folder)

    # -- searching ---------------------------------------------------------

    def search(self, matcher: Matcher, limit: int) -> list[MirrorHit]:
        """The newest ``limit`` lines the matcher finds, newest first
        (`search_segments`), the mirror first brought up to date."""
        self.ensure_current()
        with self._lock:
            return self._files.search(matcher, limit)

    # -- inspection (tests and status) ---------------------------------------

    def lines(self) -> list[tuple[str, str]]:
        """Every indexed line as (event id, line text), oldest first."""
        self.ensure_current()
        with self._lock:
            return all_lines(self._files.base, self._files.tail)

    def __len__(self) -> int:
        with self._lock:
            return len(self._files)

    def is_empty(self) -> bool:
        self.ensure_current()
        return not len(self)
