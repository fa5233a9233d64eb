"""Reading events from JSON Lines: strict, bounded, all-or-nothing.

Every line is parsed and validated before anything is written, so a bad line
anywhere stops the import with its line number and leaves the log untouched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import IO, Any

from pixie.device.errors import BadInput
from pixie.device.store.contacts import clean_name
from pixie.device.store.memlog import NewEvent, check_ref, check_text, parse_kind
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


def _no_constant(name: str) -> Any:
    raise BadInput(f"not valid JSON ({name} is not a JSON value)")


def loads_strict(text: str) -> Any:
    """Decode one JSON document, refusing what Python's decoder lets through
    or fails on in its own ways: NaN and Infinity, a number too long to
    convert (a ValueError), nesting deep enough to exhaust the stack."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadInput("JSON nested too deeply") from None
    except ValueError:
        raise BadInput("not valid JSON (a number too long to read)") from None


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
