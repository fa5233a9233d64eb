"""Journal entries from a folder of Markdown or plain-text notes (an Obsidian
vault, a folder of daily notes, a Day One Markdown export) or from one file.

Every ``.md``, ``.markdown`` and ``.txt`` file under the folder is read, in
sorted order; hidden files and folders (``.obsidian``, ``.git``, ``.trash``)
are passed over, and so are symbolic links, which could lead out of the
folder or round in a circle. A file is one entry, unless it holds two or more
dated headings (``## 2025-03-14``, ``# Friday, 14 March 2025``,
``## March 14, 2025``, ``### 14.03.2025``): then each dated section is one
entry, and the text before the first of them belongs to the file's own date,
or is skipped when the file has none.

An entry's date comes from, in order: the front matter's ``date`` or
``created``, the dated heading, the file name (``2025-03-14.md``,
``20250314.md``, ``Journal 2025-03-14.txt``) or its folders (``2025/03/14.md``).
A file dated nowhere is skipped, not dated by its modification time: copying,
syncing or restoring a folder rewrites those, and a memory that placed a
year of entries on the day of a backup would be worse than one without them.
A date without a time is read as noon in the import's zone, so the entry
stays on its day in any zone within eleven hours of it; a time without an
offset is read in the import's zone too. A front matter date that names no
day (``date: 2025-02-30``) is refused with its line; a heading or a file name
that does is only text, since headings and names hold numbers of all sorts.

An entry's text is its Markdown as written, front matter removed: the front
matter's title leads it as a heading (unless the text already starts with
it), its tags close it ("Tags: garden, spring"). Front matter and dated
headings are not content: an entry with nothing else is skipped as empty.

Front matter is read by a few lines of this module rather than a YAML
library: a journal's front matter is a flat list of ``key: value`` lines of
which four keys matter (``date``, ``created``, ``title``, ``tags``), and a
full YAML parser is a large surface (tags, anchors, aliases, arbitrary types)
to expose to every file of a folder for so little.

Ids are stable: they derive from the file's path within the folder, the
section's date and a SHA-256 of the entry's text. Importing the same folder
again adds nothing, and a folder that grew adds only its new entries. The
memory log is append-only, so an entry edited since the last import is a new
event, next to the old one rather than in its place.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    ImportOptions,
    Item,
    Progress,
    Skipped,
    clean_text,
    fit_text,
    stable_id,
)
from pixie.device.ingest.journaldates import When, _NoDate, date_at_start, front_date, name_date
from pixie.device.store.memlog import MAX_REF_CHARS, EventKind, NewEvent

SUFFIXES = (".md", ".markdown", ".txt")
MAX_FILE_BYTES = 16 * 1024 * 1024
SNIFF_BYTES = 4096
SNIFF_ENTRIES = 200  # folder entries `sniff` looks at, at most
SNIFF_DEPTH = 3  # folder levels `sniff` looks into: enough for 2025/03/14.md
PROGRESS_FILES = 64  # files between two calls of the progress hook
PROGRESS_BYTES = 1024 * 1024  # ... or bytes, whichever comes first


# --- one file -------------------------------------------------------------------

_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_KEY = re.compile(r"([A-Za-z_][\w\-]*)[ \t]*:[ \t]*(.*)")
_LIST_ITEM = re.compile(r"[ \t]*-[ \t]+(.*)")
_FRONT_OPEN = "---"
_FRONT_CLOSE = ("---", "...")
_FRONT_KEYS = ("date", "created", "title", "tags")


@dataclass(slots=True)
class FrontMatter:
    """What a file's front matter says, and the line its body starts on."""

    body_start: int = 0
    when: When | None = None
    title: str | None = None
    tags: tuple[str, ...] = ()


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].strip()
    return value


def _tag_list(value: str) -> list[str]:
    value = _unquote(value)
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    pieces = value.split(",") if "," in value else value.split()
    return [t for t in (_unquote(p).lstrip("#") for p in pieces) if t]


def _front_line(line: str) -> bool:
    """Whether a line can stand in front matter: a key, a list item, a nested
    or continued value, a comment or nothing. A leading rule followed by
    prose and another rule is no front matter."""
    return not line.strip() or line[0] in " \t-#" or _KEY.fullmatch(line.rstrip()) is not None


_COMMENT = re.compile(r"\s+#.*")


def read_front_matter(lines: list[str], name: str) -> FrontMatter:
    """The flat ``key: value`` lines of a leading ``---`` block. Nested values
    are passed over, but for ``tags`` written as a list of ``- item`` lines.
    A block that never closes is no front matter (a leading rule, rather)."""
    if not lines or lines[0].rstrip() != _FRONT_OPEN:
        return FrontMatter()
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FRONT_CLOSE), None)
    if end is None or not all(_front_line(lines[i]) for i in range(1, end)):
        return FrontMatter()
    found: dict[str, tuple[str, int]] = {}
    tags: list[str] = []
    listing = False
    for number in range(1, end):
        line = lines[number]
        if listing and (item := _LIST_ITEM.fullmatch(line)):
            tags.extend(_tag_list(item[1]))
            continue
        listing = False
        m = _KEY.fullmatch(line.rstrip())
        if m is None:
            continue
        key, value = m[1].lower(), m[2].strip()
        if key in _FRONT_KEYS and key not in found:
            if key != "tags" and value[:1] not in ("'", '"'):
                value = _COMMENT.sub("", value)
            found[key] = (value, number + 1)
        if key == "tags":
            listing = not value
            tags.extend(_tag_list(value))
    front = FrontMatter(body_start=end + 1, tags=tuple(dict.fromkeys(tags)))
    for key in ("date", "created"):
        if key not in found:
            continue
        value, number = found[key]
        try:
            front.when = front_date(_unquote(value))
        except _NoDate:
            raise BadInput(f"{name}, line {number}: {key} {value!r:.60} is not a date") from None
        if front.when is not None:
            break
    if "title" in found:
        front.title = _unquote(found["title"][0]) or None
    return front


@dataclass(frozen=True, slots=True)
class Part:
    """A stretch of a file's body: its lines, the dated heading it starts with
    (if any) and that heading's date."""

    lines: list[str]
    when: When | None
    heading: bool


def split_body(lines: list[str], start: int) -> list[Part]:
    """The body's parts: the text before the first dated heading, then one
    part for each dated heading and what follows it up to the next one.
    Headings inside fenced code are text."""
    parts: list[Part] = []
    current: list[str] = []
    when: When | None = None
    heading = False
    fence: str | None = None
    for number in range(start, len(lines)):
        line = lines[number]
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener[1][0] == fence[0] and len(opener[1]) >= len(fence):
                fence = None
        elif opener:
            fence = opener[1]
        elif (m := _HEADING.fullmatch(line)) is not None:
            try:
                dated = date_at_start(m[2])
            except _NoDate:
                # "## 1.15.2024 release" names no day: a heading like any other,
                # its text kept in the section it stands in.
                dated = None
            if dated is not None:
                parts.append(Part(current, when, heading))
                current, when, heading = [], dated, True
        current.append(line)
    parts.append(Part(current, when, heading))
    return parts


def _entry_text(lines: list[str], title: str | None, tags: tuple[str, ...]) -> str:
    body = "\n".join(lines).strip("\n")
    if title:
        first = next((line.strip() for line in lines if line.strip()), "")
        m = _HEADING.fullmatch(first)
        if (m[2] if m else first).strip() != title:
            body = f"# {title}\n\n{body}" if body else f"# {title}"
    if tags:
        body += "\n\nTags: " + ", ".join(tags)
    return body


def _is_empty(part: Part) -> bool:
    """Whether a part says nothing but its dated heading."""
    lines = part.lines[1:] if part.heading else part.lines
    return not clean_text("\n".join(lines))


_UNSAFE_REF = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def _source(relative: str, section: str) -> str:
    """An entry's source: "journal:", the path, and "#" and the section's
    date for a section; at most `MAX_REF_CHARS` long, a longer one keeping
    its end (the file name) behind a hash of the whole."""
    tail = _UNSAFE_REF.sub("\ufffd", relative) + (f"#{section}" if section else "")
    source = f"journal:{tail}"
    if len(source) <= MAX_REF_CHARS:
        return source
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    head = f"journal:{digest}:\u2026"
    return head + tail[len(tail) - (MAX_REF_CHARS - len(head)) :]


def entries(
    data: bytes, relative: str, parts: tuple[str, ...], options: ImportOptions
) -> Iterator[Item]:
    """The entries (or skips) of one file's bytes; ``relative`` names it in
    errors, sources and ids, ``parts`` are the path components its date may
    come from."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(f"{relative}, line {line}: not UTF-8 text") from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    front = read_front_matter(lines, relative)
    pieces = split_body(lines, front.body_start)
    own = front.when or name_date(parts)
    if len(pieces) <= 2:
        # No or one dated heading: the whole file is one entry.
        lines = [line for p in pieces for line in p.lines]
        single = Part(lines, pieces[-1].when, False)
        if all(_is_empty(p) for p in pieces):
            yield Skipped("empty entry")
            return
        when = front.when or single.when or own
        if when is None:
            yield Skipped("entry without a date")
            return
        yield _event(single, when, "", relative, front.title, front.tags, options)
        return
    lead, sections = pieces[0], pieces[1:]
    if not _is_empty(lead):
        if own is None:
            yield Skipped("undated text before the first dated heading")
        else:
            yield _event(lead, own, "", relative, front.title, front.tags, options)
    for section in sections:
        if _is_empty(section):
            yield Skipped("empty entry")
            continue
        assert section.when is not None
        yield _event(section, section.when, section.when.key(), relative, None, front.tags, options)


def _event(
    part: Part,
    when: When,
    section: str,
    relative: str,
    title: str | None,
    tags: tuple[str, ...],
    options: ImportOptions,
) -> NewEvent:
    whole = clean_text(_entry_text(part.lines, title, tags))
    text = fit_text(whole)
    at = when.at_us(options.tz)
    # Of the whole text: an edit past the cut of a very long entry is an edit too.
    content = hashlib.sha256(whole.encode("utf-8")).hexdigest()
    return NewEvent(
        kind=EventKind.JOURNAL,
        at=at,
        text=text,
        contact=None,
        thread=None,
        source=_source(relative, section),
        from_me=True,
        id=stable_id("journal", relative, section, content, at_us=at),
    )


# --- the folder -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Note:
    """An eligible file: where it is, how the import names it, its size."""

    path: Path
    relative: str
    parts: tuple[str, ...]
    size: int
    top: bool  # the path the user gave, rather than a file found in a folder


def _label(path: Path) -> str:
    return path.name or str(path)


def _eligible(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(SUFFIXES)


def _too_big(relative: str) -> BadInput:
    return BadInput(f"{relative} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")


def walk(folder: Path) -> list[Note]:
    """Every eligible regular file under ``folder``, in sorted order, without
    following symbolic links or entering hidden folders. The walk keeps its
    own stack, so no depth of folders exhausts Python's."""
    notes: list[Note] = []
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[tuple[str, ...], Iterator[os.DirEntry[str]]]] = []

    def enter(directory: Path, prefix: tuple[str, ...]) -> None:
        try:
            info = directory.stat()
            if (info.st_dev, info.st_ino) in seen:
                return  # a bind mount leading back up
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(directory) as listing:
                found = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            name = "/".join(prefix) or _label(folder)
            raise BadInput(f"cannot read folder {name}: {exc.strerror}") from None
        stack.append((prefix, iter(found)))

    enter(folder, ())
    while stack:
        prefix, entries_ = stack[-1]
        entry = next(entries_, None)
        if entry is None:
            stack.pop()
            continue
        if entry.name.startswith("."):
            continue
        parts = (*prefix, entry.name)
        relative = "/".join(parts)
        try:
            if entry.is_dir(follow_symlinks=False):
                enter(Path(entry.path), parts)
                continue
            if not _eligible(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            size = entry.stat(follow_symlinks=False).st_size
        except OSError as exc:
            raise BadInput(f"cannot read {relative}: {exc.strerror}") from None
        if size > MAX_FILE_BYTES:
            raise _too_big(relative)
        notes.append(Note(Path(entry.path), relative, parts, size, top=False))
    return notes


def _load(note: Note) -> bytes:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not note.top:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(note.path, flags)
    except OSError as exc:
        raise BadInput(f"cannot read {note.relative}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as stream:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadInput(f"{note.relative} is not a regular file")
            data = stream.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise BadInput(f"cannot read {note.relative}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _too_big(note.relative)
    return data


def _starts_like_journal(head: bytes, whole: bool) -> bool:
    """Whether a file's first bytes (``whole``: all of them) open with a
    closed front matter block holding a ``key: value`` line, or with a dated
    heading."""
    text = head.decode("utf-8", "ignore").removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if not whole:
        lines = lines[:-1]  # the last line may be cut short
    if lines and lines[0].rstrip() == _FRONT_OPEN:
        keys = False
        for line in lines[1:]:
            if line.rstrip() in _FRONT_CLOSE:
                return keys
            keys = keys or _KEY.fullmatch(line.rstrip()) is not None
        return False
    first = next((line for line in lines if line.strip()), "")
    m = _HEADING.fullmatch(first)
    if m is None:
        return False
    try:
        return date_at_start(m[2]) is not None
    except _NoDate:
        return False


def _folder_has_notes(folder: Path) -> bool:
    budget = SNIFF_ENTRIES
    level = [folder]
    for _ in range(SNIFF_DEPTH):
        below: list[Path] = []
        for directory in level:
            try:
                with os.scandir(directory) as listing:
                    for entry in listing:
                        budget -= 1
                        if budget < 0:
                            return False
                        if entry.name.startswith("."):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
                        elif _eligible(entry.name) and entry.is_file(follow_symlinks=False):
                            return True
            except OSError:
                continue
        level = below
    return False


class JournalImporter:
    """Markdown and plain-text journals: a folder of notes, or one file."""

    name = "journal"
    units = ("journal entry", "journal entries")

    def sniff(self, path: Path) -> bool:
        """A folder with a ``.md``, ``.markdown`` or ``.txt`` file within its
        first levels (looking at no more than a couple of hundred entries, and
        at none of their contents), a regular ``.md`` or ``.markdown`` file,
        or a ``.txt`` file whose first 4 KiB open with front matter or a dated
        heading (other plain text, such as a chat export, is another format's).
        Nothing but a regular file is ever opened."""
        try:
            mode = path.stat().st_mode
            if stat.S_ISDIR(mode):
                return _folder_has_notes(path)
            if not stat.S_ISREG(mode):
                return False  # opening a pipe would wait for, or take, its bytes
            suffix = path.suffix.lower()
            if suffix in (".md", ".markdown"):
                return True
            if suffix != ".txt":
                return False
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as stream:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return False
                head = stream.read(SNIFF_BYTES)
        except (OSError, ValueError):
            return False
        return _starts_like_journal(head, len(head) < SNIFF_BYTES)

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every entry of the folder or file at ``path``, file by file."""
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise BadInput(f"cannot read {_label(path)}: {exc.strerror}") from None
        if stat.S_ISDIR(mode):
            notes = walk(path)
            if not notes:
                raise BadInput(f"no .md or .txt files in {_label(path)}")
        elif stat.S_ISREG(mode):
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise _too_big(path.name)
            notes = [Note(path, path.name, path.parts, size, top=True)]
        else:
            raise BadInput(f"{_label(path)} is neither a folder nor a file")
        total = sum(n.size for n in notes)
        done = reported = 0
        for count, note in enumerate(notes, start=1):
            data = _load(note)
            yield from entries(data, note.relative, note.parts, options)
            done += len(data)
            if progress is not None and (
                count % PROGRESS_FILES == 0 or done - reported >= PROGRESS_BYTES
            ):
                progress(done, max(total, done))
                reported = done
        if progress is not None:
            progress(done, max(total, done))


IMPORTER = JournalImporter()

__all__ = [
    "IMPORTER",
    "MAX_FILE_BYTES",
    "SNIFF_BYTES",
    "SUFFIXES",
    "JournalImporter",
    "date_at_start",
    "entries",
    "front_date",
    "name_date",
    "read_front_matter",
    "walk",
]
