"""Reading events from JSON Lines: strict, bounded, all-or-nothing.

Every line is parsed and validated as it is read, inside the import's one
transaction, so a bad line anywhere stops the import with its line number and
leaves the log untouched.
`IMPORTER` is this format's entry in the importer registry
(`pixie.device.ingest.registry`), and the one `pixie log import` falls back
to when no importer recognises a file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from pixie.device.errors import BadInput
from pixie.device.ingest.base import ImportOptions, Item, Progress, stable_id, where
from pixie.device.store.contacts import clean_name
from pixie.device.store.kinds import ACCOUNT_KINDS
from pixie.device.store.memlog import (
    MAX_REF_CHARS,
    MAX_TEXT_CHARS,
    EventKind,
    NewEvent,
    check_ref,
    check_text,
    parse_kind,
)
from pixie.device.store.strictjson import loads_strict
from pixie.protocol.errors import ProtocolError
from pixie.protocol.ids import CANONICAL_ID, parse_id
from pixie.protocol.timestamps import MAX_US, MIN_US, parse_time

MAX_LINE_BYTES = 256 * 1024
REQUIRED = ("kind", "at", "text")
OPTIONAL = ("contact", "thread", "source", "id", "from_me")
_REQUIRED = frozenset(REQUIRED)
_ALLOWED = frozenset(REQUIRED + OPTIONAL)


def event_from_object(obj: Any) -> NewEvent:
    """Validate one decoded JSON object into a `NewEvent`."""
    if not isinstance(obj, dict):
        raise BadInput("each line must be a JSON object")
    if not obj.keys() <= _ALLOWED:
        raise BadInput(f"unknown field {sorted(obj.keys() - _ALLOWED)[0]!r:.40}")
    if not obj.keys() >= _REQUIRED:
        raise BadInput(f"missing field {sorted(_REQUIRED - obj.keys())[0]!r}")
    try:
        at = parse_time(obj["at"])
        event_id = parse_id(obj["id"]) if obj.get("id") is not None else None
    except ProtocolError as exc:
        raise BadInput(str(exc)) from None
    from_me = obj.get("from_me")
    if from_me is not None and not isinstance(from_me, bool):
        raise BadInput("from_me must be true or false")
    contact = obj.get("contact")
    kind = parse_kind(obj["kind"])
    if kind in ACCOUNT_KINDS:
        raise BadInput(f"kind {kind.value!r} is the account's own record, written by pairing")
    return NewEvent(
        kind=kind,
        at=at,
        text=check_text(obj["text"]),
        contact=clean_name(contact) if contact is not None else None,
        thread=check_ref(obj.get("thread"), "thread"),
        source=check_ref(obj.get("source"), "source"),
        from_me=from_me,
        id=event_id,
    )


PROGRESS_LINES = 2048  # lines between two calls of a reader's progress hook


def read_events(stream: IO[bytes], progress: Callable[[int], None] | None = None) -> list[NewEvent]:
    """Every event of a JSON Lines stream; ``progress`` hears the bytes read so far."""
    return list(iter_events(stream, progress))


def iter_events(
    stream: IO[bytes], progress: Callable[[int], None] | None = None
) -> Iterator[NewEvent]:
    """The events of a JSON Lines stream in order, each line as `slow_event`
    reads it: a blank line is skipped, a bad one stops the reading with its
    number. An ordinary line goes the fast way (`fast_event`), which gives
    the same event; anything else, bad lines included, the slow way."""
    number = 0
    read = 0
    readline = stream.readline
    limit = MAX_LINE_BYTES + 1
    while True:
        raw = readline(limit)
        if not raw:
            if progress is not None:
                progress(read)
            return
        number += 1
        read += len(raw)
        if progress is not None and number % PROGRESS_LINES == 0:
            progress(read)
        event = fast_event(raw) if len(raw) <= MAX_LINE_BYTES else None
        if event is None:
            event = slow_event(raw, number)
            if event is None:
                continue
        yield event


def slow_event(raw: bytes, number: int) -> NewEvent | None:
    """The event on line ``number``, None for a blank line, or a `BadInput`
    naming the line and what is wrong with it: the reference for every line."""
    if len(raw) > MAX_LINE_BYTES:
        raise BadInput(f"line {number}: longer than {MAX_LINE_BYTES // 1024} KiB")
    if not raw.strip():
        return None
    try:
        obj = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"line {number}: not valid UTF-8") from None
    except BadInput as exc:
        raise BadInput(f"line {number}: {exc}") from None
    try:
        return event_from_object(obj)
    except BadInput as exc:
        raise BadInput(f"line {number}: {exc}") from None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_fromisoformat = datetime.fromisoformat
_KIND_OF = {kind.value: kind for kind in EventKind if kind not in ACCOUNT_KINDS}
_is_uuid = CANONICAL_ID.fullmatch
_NAMES: dict[str, str] = {}
_orjson_loads = orjson.loads


def fast_event(line: bytes) -> NewEvent | None:
    """The event on one raw line (with or without its newline) if it is an
    ordinary one, else None: then `slow_event` reads the line, to the same
    event or to the error.

    Most lines of an import are plain: one object alone on its line, the
    usual fields, a UTC time ending in Z. This checks exactly what
    `event_from_object` checks, more cheaply, and leaves everything else to
    it. The line is decoded by orjson, straight from its bytes. For every
    value a field may hold (strings, booleans, null) it gives what Python's
    decoder gives; the two differ only on numbers (orjson reads an integer
    beyond 64 bits as a float), which no field takes. What orjson refuses
    and Python's decoder takes (a lone surrogate's escape, NaN, deep
    nesting) is the slow way's to take or to name. In a line with no
    backslash no string can hold a NUL, a line break or a lone surrogate:
    the decoder refuses raw control characters in strings, UTF-8 cannot
    spell a surrogate, and only an escape could write either. So only a line
    with an escape is searched for them.
    """
    try:
        obj = _orjson_loads(line)
        if type(obj) is not dict or not _ALLOWED.issuperset(obj):
            return None
        plain = b"\\" not in line
        kind = _KIND_OF[obj["kind"]]
        at = obj["at"]
        if type(at) is str and 10 <= len(at) <= 40 and "T" in at:
            # parse_time's arithmetic, in one step; a time with no offset
            # cannot be taken from the epoch (a TypeError, so the slow way).
            at = (_fromisoformat(at) - _EPOCH) // _MICROSECOND
            if not MIN_US <= at < MAX_US:
                return None
        else:
            at = parse_time(at)
        text = obj["text"]
        if not (plain and type(text) is str and len(text) <= MAX_TEXT_CHARS and text.strip()):
            text = check_text(text)
        get = obj.get
        thread = get("thread")
        if thread is not None and not (
            plain and type(thread) is str and len(thread) <= MAX_REF_CHARS and thread.strip()
        ):
            thread = check_ref(thread, "thread")
        source = get("source")
        if source is not None and not (
            plain and type(source) is str and len(source) <= MAX_REF_CHARS and source.strip()
        ):
            source = check_ref(source, "source")
        contact = get("contact")
        if contact is not None:
            name = _NAMES.get(contact)
            if name is None:
                name = clean_name(contact)
                if len(_NAMES) >= 4096:
                    _NAMES.clear()
                _NAMES[contact] = name
            contact = name
        event_id = get("id")
        if event_id is not None:
            if _is_uuid(event_id) is None:
                return None
            event_id = event_id.lower()
        from_me = get("from_me")
        if from_me is not None and type(from_me) is not bool:
            return None
    except Exception:  # bad JSON, a missing field, a bad value: the slow way says it
        return None
    return _new_event(kind, at, text, contact, thread, source, from_me, event_id)


def _event_maker() -> Callable[..., NewEvent]:
    """A function that makes a `NewEvent` from its fields in order, as the
    constructor does, in about half its time: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` by name,
    which is most of what an import spends on an event after decoding it.
    This sets the slots directly. Should `NewEvent` ever have another shape
    (other fields, a ``__post_init__``, no slots), it is the constructor."""
    names = ("kind", "at", "text", "contact", "thread", "source", "from_me", "id")
    if (
        tuple(f.name for f in fields(NewEvent)) != names
        or hasattr(NewEvent, "__post_init__")
        or getattr(NewEvent, "__slots__", None) != names
    ):
        return NewEvent
    new = object.__new__
    k, a, t, c, th, so, fm, i = (getattr(NewEvent, name).__set__ for name in names)

    def make(
        kind: EventKind,
        at: int,
        text: str,
        contact: str | None,
        thread: str | None,
        source: str | None,
        from_me: bool | None,
        event_id: str | None,
    ) -> NewEvent:
        event = new(NewEvent)
        k(event, kind)
        a(event, at)
        t(event, text)
        c(event, contact)
        th(event, thread)
        so(event, source)
        fm(event, from_me)
        i(event, event_id)
        return event

    return make


_new_event = _event_maker()


# What `sniff` reads of a file at most: its first line, if that is shorter.
SNIFF_BYTES = 64 * 1024
SUFFIXES = (".jsonl", ".ndjson")


def with_stable_id(event: NewEvent) -> NewEvent:
    """``event`` with an id: its own if the line gave one, else one derived
    from everything the line says, so importing the same file twice (or a
    file that grew) adds only the lines that are new. Two lines that say
    exactly the same thing are one event."""
    if event.id is not None:
        return event
    derived = stable_id(
        "jsonl",
        event.kind.value,
        event.at,
        event.contact,
        event.thread,
        event.source,
        "" if event.from_me is None else int(event.from_me),
        event.text,
        at_us=event.at,
    )
    return replace(event, id=derived)


class JsonlImporter:
    """JSON Lines, one event object a line, as `event_from_object` reads it."""

    name = "jsonl"
    units = ("event", "events")

    def sniff(self, path: Path) -> bool:
        """A name ending .jsonl or .ndjson, or a regular file whose first line
        is one JSON object with the required fields. Anything else (a pipe, a
        device, a file that cannot be read) is not peeked at: reading it would
        take bytes the import itself needs."""
        if path.suffix.lower() in SUFFIXES:
            return True
        try:
            # Checked before opening: opening a named pipe would wait for a writer.
            if not stat.S_ISREG(path.stat().st_mode):
                return False
            with path.open("rb") as stream:
                first = stream.readline(SNIFF_BYTES).strip()
            obj = loads_strict(first.decode("utf-8"))
        except (OSError, ValueError, BadInput):
            return False
        return isinstance(obj, dict) and obj.keys() >= _REQUIRED

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every event of the file at ``path``, each with a stable id."""
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
        with stream:
            size = _size(stream)
            hook = None if progress is None else (lambda read: progress(read, size))
            try:
                for event in iter_events(stream, hook):
                    yield with_stable_id(event)
            except BadInput as exc:
                raise BadInput(where(path, str(exc))) from None
            except OSError as exc:
                raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None

    def read_stream(self, stream: IO[bytes], progress: Progress | None = None) -> Iterator[Item]:
        """`read` for a stream that is not a file (standard input)."""
        hook = None if progress is None else (lambda read: progress(read, read))
        for event in iter_events(stream, hook):
            yield with_stable_id(event)


def _size(stream: IO[bytes]) -> int:
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):
        return 0


IMPORTER = JsonlImporter()

__all__ = [
    "IMPORTER",
    "MAX_LINE_BYTES",
    "OPTIONAL",
    "PROGRESS_LINES",
    "REQUIRED",
    "SNIFF_BYTES",
    "SUFFIXES",
    "JsonlImporter",
    "event_from_object",
    "fast_event",
    "iter_events",
    "loads_strict",  # it lives in pixie.device.store.strictjson now
    "read_events",
    "slow_event",
    "with_stable_id",
]
