"""Field checks shared by the wire codecs (`relaywire`, `syncwire`, `peerwire`).

Each takes a value as msgpack decoded it, the field's name as an error message
says it, and the field's bounds; it returns the value, typed, or raises
`ProtocolError`. A check looks at a value's type and size before anything
else, and a message names the field and its bounds, never a value a peer sent
(see `errors.shown`). msgpack decodes to exact types (no subclasses), and a
boolean is never taken for an integer.

Where two codecs have always worded the same check differently, the wording is
the caller's to choose (``noun``, ``show_length``): what an error says stays
what it said.
"""

from __future__ import annotations

from collections.abc import Callable
from types import NoneType
from typing import Any, TypeVar

from .errors import ProtocolError

INT64_MAX = (1 << 63) - 1

T = TypeVar("T")


# -- text -----------------------------------------------------------------------------------


def has_lone_surrogate(value: str) -> bool:
    """Whether ``value`` holds a lone surrogate (U+D800 to U+DFFF): no character
    at all (a JSON escape or an argument that is not UTF-8 makes one), which
    UTF-8, and so SQLite, cannot store. An ASCII string is answered without
    looking at it; any other by the codec, at C speed (a pattern search over
    a page-long note took microseconds)."""
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# -- scalars ------------------------------------------------------------------------------


def integer(value: object, what: str, low: int = 0, high: int = INT64_MAX) -> int:
    """An integer from ``low`` to ``high``, both included."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProtocolError(f"{what} must be an integer from {low} to {high}")
    return value


def non_negative(value: object, what: str) -> int:
    """An integer from 0 to `INT64_MAX`, said in other words than `integer`'s."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ProtocolError(f"{what} must be a non-negative integer")
    return value


def boolean(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(f"{what} must be true or false")
    return value


def binary(
    value: object,
    what: str,
    *,
    size: int | None = None,
    limit: int | None = None,
    show_length: bool = False,
) -> bytes:
    """Bytes: exactly ``size`` of them, if given, and at most ``limit``, if given
    (``show_length``: a message about the size says the length that came)."""
    if not isinstance(value, bytes):
        raise ProtocolError(f"{what} must be bytes")
    if size is not None and len(value) != size:
        got = f", not {len(value)}" if show_length else ""
        raise ProtocolError(f"{what} must be {size} bytes{got}")
    if limit is not None and len(value) > limit:
        raise ProtocolError(f"{what} is over {limit} bytes")
    return value


def sized(value: object, what: str, size: int) -> bytes:
    """Exactly ``size`` bytes, with one message for whatever else came."""
    if not isinstance(value, bytes) or len(value) != size:
        raise ProtocolError(f"{what} must be {size} bytes")
    return value


def text(value: object, what: str, limit: int, *, noun: str = "text") -> str:
    """A string of at most ``limit`` characters (``noun``: what a message calls one)."""
    if not isinstance(value, str) or len(value) > limit:
        raise ProtocolError(f"{what} must be {noun} of at most {limit} characters")
    return value


def optional_text(value: object, what: str, limit: int) -> str | None:
    """None, or `text`."""
    return None if value is None else text(value, what, limit)


# -- arrays -------------------------------------------------------------------------------


def array(value: object, what: str, limit: int, exact: int | None = None) -> list[Any]:
    """A list of at most ``limit`` items (exactly ``exact``, if given)."""
    if not isinstance(value, list) or len(value) > limit:
        raise ProtocolError(f"{what} must be a list of at most {limit} items")
    if exact is not None and len(value) != exact:
        raise ProtocolError(f"{what} must have {exact} items")
    return value


# A column is one field of many records, checked whole with builtins: its
# length, the set of its items' types, then its extremes.

_TYPE_NAMES = {int: "integers", str: "text", bool: "booleans", NoneType: "nil"}


def column(value: object, what: str, n: int, types: set[type], limit: int) -> list[Any]:
    """A column of exactly ``n`` items (``n`` at most ``limit``), one per record,
    each of one of ``types`` exactly."""
    items = array(value, what, limit)
    if len(items) != n:
        raise ProtocolError(f"{what} must have {n} items, one per event id")
    if not set(map(type, items)) <= types:
        names = " or ".join(sorted(_TYPE_NAMES[t] for t in types))
        raise ProtocolError(f"{what} must hold only {names}")
    return items


def integer_column(
    value: object, what: str, n: int, low: int, high: int, limit: int
) -> tuple[int, ...]:
    """A `column` of integers, each from ``low`` to ``high``."""
    items = column(value, what, n, {int}, limit)
    if items and not (low <= min(items) and max(items) <= high):
        raise ProtocolError(f"each {what} must be an integer from {low} to {high}")
    return tuple(items)


def text_column(value: object, what: str, n: int, chars: int, limit: int) -> tuple[str, ...]:
    """A `column` of strings of at most ``chars`` characters."""
    items = column(value, what, n, {str}, limit)
    if max(map(len, items), default=0) > chars:
        raise ProtocolError(f"{what} must be text of at most {chars} characters")
    return tuple(items)


def optional_text_column(
    value: object, what: str, n: int, chars: int, limit: int
) -> tuple[str | None, ...]:
    """A `column` of strings of at most ``chars`` characters, or None."""
    items = column(value, what, n, {str, NoneType}, limit)
    if max(map(len, filter(None, items)), default=0) > chars:
        raise ProtocolError(f"{what} must be text of at most {chars} characters")
    return tuple(items)


def coded_column(
    table: object, index: object, what: str, n: int, check: Callable[[Any], T], limit: int
) -> tuple[T, ...]:
    """A column sent as a table of distinct values (each passed through ``check``)
    and an index into it per record, every entry used."""
    values = [check(v) for v in array(table, f"{what} table", limit)]
    if len(set(values)) != len(values):
        raise ProtocolError(f"the {what} table holds a value twice")
    codes = column(index, f"{what} index", n, {int}, limit)
    if set(codes) != set(range(len(values))):
        raise ProtocolError(f"each {what} index must name a table entry, and each entry be used")
    return tuple(map(values.__getitem__, codes))


__all__ = [
    "INT64_MAX",
    "array",
    "binary",
    "boolean",
    "coded_column",
    "column",
    "integer",
    "integer_column",
    "non_negative",
    "optional_text",
    "optional_text_column",
    "sized",
    "text",
    "text_column",
]
