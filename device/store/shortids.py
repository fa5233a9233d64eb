"""Short ids: any unique prefix of a note's or an event's id stands for it.

Like git's abbreviated hashes, a command taking an id takes any prefix of at
least `MIN_PREFIX` characters that only one live clear note (or one event)
starts with; a prefix more than one starts with is an error listing them.
Lists show each id cut to the shortest prefix that is unique among all live
clear notes, at least `SHOWN_CHARS` long.

A note's id is a hash of its identity, so its first characters are as good
as random and 8 of them almost always suffice. An event's id is time-ordered
(UUIDv7, or an import's UUIDv8 led by the event's millisecond): events written
in the same moment share their first dozen characters, so a prefix that picks
one of them runs longer.

A prefix is looked up as a range of the primary key (ids >= prefix and below
the prefix followed by a character above every id character), one index seek
whatever the table's size. Sealed and deleted notes are never candidates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pixie.device.errors import BadInput, NotFound
from pixie.device.store.db import Database, peek

MIN_PREFIX = 4
SHOWN_CHARS = 8
FULL_CHARS = 36
SHOWN_CANDIDATES = 5
_PREFIX = re.compile(r"[0-9a-f-]+")
# Above "-", every digit and a-f: the end of a prefix's range.
_ABOVE_ID_CHARS = "g"

_NOTE_SQL = (
    "SELECT id FROM note WHERE id >= ? AND id < ? AND zone = 'clear' AND deleted = 0 "
    "ORDER BY id LIMIT ?"
)
_EVENT_SQL = "SELECT id FROM memory_event WHERE id >= ? AND id < ? ORDER BY id LIMIT ?"


def resolve_note_id(db: Database, text: str) -> str:
    """The id of the one live clear note whose id starts with ``text``."""
    return _resolve(db, text, _NOTE_SQL, "note")


def resolve_event_id(db: Database, text: str) -> str:
    """The id of the one event whose id starts with ``text``."""
    return _resolve(db, text, _EVENT_SQL, "event")


def _resolve(db: Database, text: str, sql: str, what: str) -> str:
    prefix = text.strip().lower()
    if not _PREFIX.fullmatch(prefix) or len(prefix) > FULL_CHARS:
        article = "an" if what[0] in "aeiou" else "a"
        raise BadInput(f"{text!r:.60} is not {article} {what} id or the start of one")
    if len(prefix) < MIN_PREFIX:
        raise BadInput(
            f"give at least {MIN_PREFIX} characters of the {what} id ({text!r} is short)"
        )
    found = [
        row[0] for row in peek(db, sql, (prefix, prefix + _ABOVE_ID_CHARS, SHOWN_CANDIDATES + 1))
    ]
    if not found:
        raise NotFound(f"no {what} with id {prefix}" + ("" if len(prefix) == FULL_CHARS else "…"))
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN_CANDIDATES])
        more = " and more" if len(found) > SHOWN_CANDIDATES else ""
        raise BadInput(
            f"{prefix} is the start of more than one {what} id ({listed}{more}); give more of it"
        )
    return str(found[0])


def note_ids(db: Database) -> list[str]:
    """Every live clear note's id, sorted: the set short forms must be unique in."""
    return [
        str(row[0])
        for row in peek(db, "SELECT id FROM note WHERE zone = 'clear' AND deleted = 0 ORDER BY id")
    ]


def short_forms(ids: Iterable[str], minimum: int = SHOWN_CHARS) -> dict[str, str]:
    """Each id cut to the shortest prefix no other id in ``ids`` starts with
    (at least ``minimum`` characters)."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, current in enumerate(ordered):
        need = minimum
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                need = max(need, _common(current, ordered[j]) + 1)
        out[current] = current[:need]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


__all__ = [
    "MIN_PREFIX",
    "SHOWN_CHARS",
    "note_ids",
    "resolve_event_id",
    "resolve_note_id",
    "short_forms",
]
