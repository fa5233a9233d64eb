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
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from pixie.device.errors import BadInput
from pixie.device.ingest.base import ImportOptions, Item, Progress, stable_id, where
from pixie.device.store.contacts import clean_name
from pixie.device.store.memlog import NewEvent, check_ref, check_text, parse_kind
from pixie.device.store.strictjson import loads_strict
from pixie.protocol.errors import ProtocolError
from pixie.protocol.ids import parse_id
from pixie.protocol.timestamps import parse_time

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
    return NewEvent(
        kind=parse_kind(obj["kind"]),
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
    number = 0
    read = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            if progress is not None:
                progress(read)
            return
        number += 1
        read += len(raw)
        if progress is not None and number % PROGRESS_LINES == 0:
            progress(read)
        if len(raw) > MAX_LINE_BYTES:
            raise BadInput(f"line {number}: longer than {MAX_LINE_BYTES // 1024} KiB")
        if not raw.strip():
            continue
        try:
            obj = loads_strict(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadInput(f"line {number}: not valid UTF-8") from None
        except BadInput as exc:
            raise BadInput(f"line {number}: {exc}") from None
        try:
            yield event_from_object(obj)
        except BadInput as exc:
            raise BadInput(f"line {number}: {exc}") from None


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
    "iter_events",
    "loads_strict",  # it lives in pixie.device.store.strictjson now
    "read_events",
    "with_stable_id",
]
