"""The text mirror's files: their format, and searching them once mapped.

`pixie.device.store.mirror` keeps these files in step with the log (see its
docstring for the layout and when they are rebuilt). This module holds what
needs no database: the records, the head, mapping the files and scanning
them, so that a command can search a mirror it finds current without loading
the database layer (`pixie.device.cli.quickgrep`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import itertools
import json
import mmap
import os
import struct
import threading
import uuid
import zlib
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pixie.device.store.kinds import EventKind

BLOCK_LINES = 4096
"""Lines of the base in the first run a search scans from the newest end
(each further run is twice as long, up to `MAX_RUN_LINES`)."""
MAX_RUN_LINES = 1 << 18
FORMAT = 2  # 2: the user's own words name no contact, as identity events say
MIRROR_FOLDER = "mirror"
"""The mirror's folder in a data dir."""
KINDS: tuple[EventKind, ...] = tuple(EventKind)
FROM_ME = 0x80  # high bit of a line's kind byte: the user wrote it
# One line's record: where it starts in the text, its time, log number,
# prefix bytes, kind byte, three bytes of padding, event id.
REC = struct.Struct("<QqqIB3x16s")
STRIDE = REC.size // 8  # records are whole numbers of 8-byte words
HEAD_FILE = "head.json"
LOCK_FILE = "lock"
MAX_HEAD_BYTES = 64 << 20


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


class Entry(NamedTuple):
    """One line of the mirror before it is written."""

    at: int
    id: bytes  # the event id's 16 bytes
    n: int
    kind: int  # the kind's code, `FROM_ME` set if the user wrote it
    plen: int  # bytes of the contact prefix at the start of `line`
    line: bytes


def line_order(e: Entry) -> tuple[int, bytes]:
    """Where a line goes: by time, then id."""
    return e.at, e.id


class Damaged(Exception):
    """The files on disk do not match their head."""


EMPTY = memoryview(b"")


class Segment:
    """A run of lines on disk: its text and its records, mapped read-only, and
    exactly as many of each as the head names."""

    __slots__ = ("count", "idx", "size", "starts", "text")

    def __init__(self, text: mmap.mmap | bytes, idx: mmap.mmap | bytes, count: int) -> None:
        self.text, self.count, self.size = text, count, len(text)
        self.idx = memoryview(idx)
        self.starts = self.idx.cast("Q")[::STRIDE] if count else EMPTY.cast("Q")

    @classmethod
    def open(cls, folder: Path, name: str, count: int, size: int) -> Segment:
        text = map_file(folder / f"{name}.txt", size)
        idx = map_file(folder / f"{name}.idx", count * REC.size)
        return cls(text, idx, count)

    def record(self, i: int) -> tuple[int, int, int, int, int, bytes]:
        """(start, at, n, prefix bytes, kind byte, id) of line ``i``."""
        found: tuple[int, int, int, int, int, bytes] = REC.unpack_from(self.idx, i * REC.size)
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


def map_file(path: Path, length: int) -> mmap.mmap | bytes:
    """The first ``length`` bytes of a file, mapped read-only (bytes, to
    search and slice, as a matcher such as `PersonLines` expects)."""
    if length == 0:
        return b""
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size < length:
                raise Damaged(f"{path.name} is shorter than its head says")
            mapped = mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise Damaged(f"{path.name} unreadable ({exc.strerror})") from exc
    return mapped


@dataclass
class Head:
    """What ``head.json`` says."""

    base: str
    base_lines: int
    base_bytes: int
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
    def load(cls, raw: bytes) -> Head:
        try:
            found = json.loads(raw)
            if not isinstance(found, dict) or found.pop("format", None) != FORMAT:
                raise Damaged("head of another format")
            head = cls(**found)
        except (ValueError, TypeError) as exc:
            raise Damaged(f"unreadable head ({exc})") from exc
        for field_name in (
            "base_lines",
            "base_bytes",
            "tail_lines",
            "tail_bytes",
            "tail_text_crc",
            "tail_idx_crc",
            "top",
            "serial",
        ):
            value = getattr(head, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise Damaged(f"bad {field_name} in head")
        if head.top_id is not None and not isinstance(head.top_id, str):
            raise Damaged("bad top_id in head")
        if not isinstance(head.names, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in head.names.items()
        ):
            raise Damaged("bad names in head")
        for name in (head.base, head.tail):
            if not isinstance(name, str) or not name.isalnum():
                raise Damaged("bad file name in head")
        return head


def read_head(folder: Path) -> Head | None:
    try:
        with (folder / HEAD_FILE).open("rb") as f:
            raw = f.read(MAX_HEAD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Damaged(f"head unreadable ({exc.strerror})") from exc
    if len(raw) > MAX_HEAD_BYTES:
        raise Damaged("head too large")
    return Head.load(raw)


def write_head(folder: Path, head: Head) -> None:
    """Replace the head whole: written aside, then renamed over. Not
    flushed: a head that a crash leaves empty or cut short does not parse,
    and the mirror is then rebuilt; one that reverts to the one before
    names fewer lines, and the rows after it are read again."""
    aside = folder / f"{HEAD_FILE}.partial"
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, head.dump())
    finally:
        os.close(fd)
    aside.replace(folder / HEAD_FILE)


def head_stat(folder: Path) -> tuple[int, int, int] | None:
    try:
        st = (folder / HEAD_FILE).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


# What the mirror checks its head against: the log's newest row, that row's
# event, the contacts' names. Plain statements, so that a quick command runs
# them on the driver without the database layer (a test holds them to
# store/memlog's TOP_SQL and to the Contact model).
TOP_SQL = "SELECT max(n) FROM memory_event"
ROW_ID_SQL = "SELECT id FROM memory_event WHERE n = ?"
NAMES_SQL = "SELECT id, name FROM contact"


class Standing(enum.Enum):
    """How a head stands to the log."""

    CURRENT = "current"
    BEHIND = "behind"  # the log has rows past the head: they are appended
    ASTRAY = "astray"  # another log, a shorter one, or a renamed contact: rebuilt


def row_id(conn: Any, n: int) -> str | None:
    """The event id of the log's row ``n``, if there is one."""
    row = conn.execute(ROW_ID_SQL, (n,)).fetchone()
    return None if row is None else str(row[0])


def standing(conn: Any, head: Head) -> Standing:
    """How ``head`` stands to the log ``conn`` reads (a DB-API connection, in
    one read transaction): astray if the log is shorter than the head, its row
    at the head's number is not the event the head recorded, or a contact
    whose name the lines carry has since been renamed; else behind if the log
    has rows past the head; else current."""
    top = conn.execute(TOP_SQL).fetchone()[0] or 0
    if top < head.top or (head.top_id is not None and row_id(conn, head.top) != head.top_id):
        return Standing.ASTRAY
    names = dict(conn.execute(NAMES_SQL).fetchall())
    if any((names.get(cid) or "") != name for cid, name in head.names.items()):
        return Standing.ASTRAY
    return Standing.BEHIND if top > head.top else Standing.CURRENT


def open_segments(folder: Path) -> tuple[Head, Segment, Segment, tuple[int, int, int] | None]:
    """The head, the base and the tail it names, mapped, and the head file's
    stat; the tail's bytes checked against their CRCs. Raises `Damaged`."""
    stat = head_stat(folder)
    head = read_head(folder)
    if head is None:
        raise Damaged("no mirror yet")
    base = Segment.open(folder, head.base, head.base_lines, head.base_bytes)
    tail = Segment.open(folder, head.tail, head.tail_lines, head.tail_bytes)
    if (zlib.crc32(tail.text), zlib.crc32(tail.idx)) != (head.tail_text_crc, head.tail_idx_crc):
        raise Damaged("the tail does not match its checksum")
    return head, base, tail, stat


def search_segments(base: Segment, tail: Segment, matcher: Matcher, limit: int) -> list[MirrorHit]:
    """The newest ``limit`` lines the matcher finds, newest first.

    The tail is scanned whole; the base from its newest end back, in runs of
    lines that double in length, until it has given ``limit`` hits: every
    older line of the base is older than those. A pattern is matched against
    lines, so it must be compiled multi-line (grep_memory's are: "(?m)"):
    without that, "^" would match only where a scan happens to start.
    """
    found: list[tuple[int, bytes, Segment, int, int, int]] = []
    for i, start, end in tail.scan(matcher, 0, tail.count):
        found.append((*tail.key(i), tail, i, start, end))
    hi, run, from_base = base.count, BLOCK_LINES, 0
    while hi > 0 and from_base < limit:
        lo = max(0, hi - run)
        for i, start, end in _scan_run(base, matcher, lo, hi):
            found.append((*base.key(i), base, i, start, end))
            from_base += 1
        hi, run = lo, min(run * 2, MAX_RUN_LINES)
    found.sort(key=lambda h: (h[0], h[1]), reverse=True)
    return [hit(seg, i, start, end) for _, _, seg, i, start, end in found[:limit]]


PARALLEL_LINES = 1 << 16
"""Runs of at least this many lines are scanned in parts on several threads."""
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _scan_run(
    seg: Segment, matcher: Matcher, lo: int, hi: int
) -> list[tuple[int, int, int]] | Iterator[tuple[int, int, int]]:
    """`Segment.scan` of lines [lo, hi), in parts on a thread each when the run
    is long and there is more than one processor: RE2 lets go of the
    interpreter while it scans, so a scan that finds nothing (the whole text
    read) takes about half as long on two cores. Hits come back in line
    order either way."""
    workers = min(os.cpu_count() or 1, 4)
    if hi - lo < PARALLEL_LINES or workers < 2:
        return seg.scan(matcher, lo, hi)
    global _pool  # noqa: PLW0603 - one pool a process, made on first need
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(workers, "pixie-grep")
        pool = _pool
    cuts = [lo + (hi - lo) * k // workers for k in range(workers + 1)]
    parts = [
        pool.submit(lambda a, b: list(seg.scan(matcher, a, b)), a, b)
        for a, b in itertools.pairwise(cuts)
    ]
    return [hit for part in parts for hit in part.result()]


def all_lines(*segments: Segment) -> list[tuple[str, str]]:
    """Every line of the segments as (event id, line text), oldest first."""
    keyed = [(seg.key(i), seg, i) for seg in segments for i in range(seg.count)]
    keyed.sort(key=lambda k: k[0])
    return [(str(uuid.UUID(bytes=key[1])), seg.line(i).decode()) for key, seg, i in keyed]


class MappedMirror:
    """A mirror's files as mapped, searched as they are (the caller has
    checked that they are current)."""

    def __init__(self, base: Segment, tail: Segment) -> None:
        self.base, self.tail = base, tail

    def search(self, matcher: Matcher, limit: int) -> list[MirrorHit]:
        return search_segments(self.base, self.tail, matcher, limit)

    def is_empty(self) -> bool:
        return not len(self)

    def __len__(self) -> int:
        return self.base.count + self.tail.count


def hit(seg: Segment, i: int, start: int, end: int) -> MirrorHit:
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
        kind=KINDS[kind & ~FROM_ME],
        from_me=bool(kind & FROM_ME),
        at=at,
        contact=line[: plen - 2].decode() if plen else None,
        body=body_bytes.decode(),
        match_start=s,
        match_end=e,
    )


def write_segment(folder: Path, name: str, entries: Sequence[Entry]) -> int:
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
                    f.write(REC.pack(offset, e.at, e.n, e.plen, e.kind, e.id))
                    offset += len(e.line) + 1
            f.flush()
            if entries:  # an empty file has nothing a crash could lose
                os.fsync(f.fileno())
        aside.replace(folder / f"{name}.{suffix}")
    return size


def remove_unnamed(folder: Path, head: Head) -> None:
    """Unlink the segment files the head no longer names."""
    keep = {f"{head.base}.txt", f"{head.base}.idx", f"{head.tail}.txt", f"{head.tail}.idx"}
    for path in folder.iterdir():
        if path.suffix in (".txt", ".idx", ".partial") and path.name not in keep:
            with contextlib.suppress(OSError):
                path.unlink()
