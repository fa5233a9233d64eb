"""The exception family of the protocol package, and how an error names a value."""

from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """Raised for anything the protocol core cannot accept: a malformed id,
    frame or message. Never a half-built value."""


def shown(value: Any, limit: int = 20) -> str:
    """A value from the wire as an error message may show it: a clipped repr of
    an integer or a string, or else only its type's name. Formatting a value of
    unchecked type costs what its size and nesting make it cost (a repr of a
    list nested a thousand deep raises RecursionError), so nothing else is ever
    formatted."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "..."
    if isinstance(value, str):
        clipped = repr(value[:limit])
        return clipped if len(value) <= limit else clipped + "..."
    return f"a value of type {type(value).__name__}"
