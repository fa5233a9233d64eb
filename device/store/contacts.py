"""Contacts: display names and aliases, resolved case-insensitively, and details.

A contact's id is derived from its normalised name, so two devices that each
learn about "Ada" on their own agree on who she is before they ever sync.

Details (organisation, title, birthday, note) come from address books. Each is
one value with the time it was written; of two values for one detail the
greater (time, value) wins, on import as in sync, so every replica ends up
with the same one whatever order the imports and syncs happen in.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import re
import sqlite3
import unicodedata
from dataclasses import dataclass

from pixie.device.errors import BadInput, NotFound
from pixie.device.store.plaindb import DriverAccess
from pixie.protocol.digest import alias_item, contact_item, detail_item
from pixie.protocol.syncmessages import DETAIL_CHARS, DETAIL_FIELDS

MAX_NAME_CHARS = 200
# What a message calls each detail.
DETAIL_NAMES = {
    "org": "organisation",
    "title": "title",
    "birthday": "birthday",
    "note": "note",
    "phone": "phone",
    "address": "address",
}


@dataclass(frozen=True, slots=True)
class ContactDetails:
    """What is known about a contact besides names: None where nothing is."""

    org: str | None = None
    title: str | None = None
    birthday: str | None = None  # "YYYY-MM-DD", or "--MM-DD" when the year is unknown
    note: str | None = None
    phone: str | None = None  # the card's numbers as written, with their kinds
    address: str | None = None  # the card's first postal address, on one line

    def as_dict(self) -> dict[str, str | None]:
        return {field: getattr(self, field) for field in DETAIL_FIELDS}

    def __bool__(self) -> bool:
        return any(getattr(self, field) is not None for field in DETAIL_FIELDS)


NO_DETAILS = ContactDetails()


@dataclass(frozen=True, slots=True)
class ContactInfo:
    id: str
    name: str
    aliases: tuple[str, ...]
    details: ContactDetails = NO_DETAILS


@dataclass(frozen=True, slots=True)
class ContactCard:
    """What an import knows about a person: a display name, the aliases they
    are reached by (nicknames, email addresses, phone numbers as
    `phone_alias` writes them) and, from an address book, details.

    Merged into the contact book by `ContactBook.merge_card_in`: a card whose
    alias (an address, a phone number) or name already belongs to a contact
    extends that contact instead of making a second one.
    """

    name: str
    aliases: tuple[str, ...] = ()
    org: str | None = None
    title: str | None = None
    birthday: str | None = None  # "YYYY-MM-DD", or "--MM-DD" when the year is unknown
    note: str | None = None
    phone: str | None = None  # numbers as written ("mobile +44 7700 900123")
    address: str | None = None  # a postal address on one line


_PHONE = re.compile(r"\+?[\d\s().\-/]{6,}")


def phone_alias(value: str) -> str | None:
    """A phone number as an alias: its digits, with a leading "+" kept, so
    "+44 7700 900-123" and "+447700900123" are one alias. None if ``value`` is
    not shaped like a phone number."""
    value = value.strip()
    if value.lower().startswith("tel:"):
        value = value[4:]
    if not _PHONE.fullmatch(value):
        return None
    digits = "".join(ch for ch in value if ch.isdigit())
    if not 6 <= len(digits) <= 20:
        return None
    return ("+" if value.startswith("+") else "") + digits


def clean_name(name: object, what: str = "contact name") -> str:
    """Validate a display name: non-empty, bounded, one line, trimmed."""
    if not isinstance(name, str):
        raise BadInput(f"{what} must be a string")
    return _clean_name(name, what)


@functools.lru_cache(maxsize=4096)  # imports repeat the same few names many times
def _clean_name(name: str, what: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise BadInput(f"{what} is empty")
    if len(cleaned) > MAX_NAME_CHARS:
        raise BadInput(f"{what} is longer than {MAX_NAME_CHARS} characters")
    categories = {unicodedata.category(ch) for ch in cleaned}
    if "Cc" in categories:
        raise BadInput(f"{what} contains control characters")
    if "Cs" in categories:
        # A lone surrogate (from a JSON escape or an argument that is not
        # UTF-8) is no character, and SQLite cannot store one.
        raise BadInput(f"{what} is not valid Unicode (a lone surrogate)")
    return cleaned


_BIRTHDAY = re.compile(r"(?:([0-9]{4})-|--)([0-9]{2})-([0-9]{2})")


def clean_detail(field: str, value: object) -> str | None:
    """A detail's value in its stored form, None if it is blank, or BadInput.

    A note may run over lines (line ends become "\n", each line is trimmed on
    the right, tabs are kept) and holds at most 2,000 characters; the others
    are one line, spacing collapsed, at most 200. A birthday is a date,
    "YYYY-MM-DD", or "--MM-DD" when the year is unknown."""
    limit = DETAIL_CHARS.get(field)
    if limit is None:
        raise BadInput(f"unknown contact detail {field!r:.40}")
    what = f"contact {DETAIL_NAMES[field]}"
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string")
    if field == "note":
        lines = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        cleaned = "\n".join(line.rstrip() for line in lines).strip()
        allowed = {"\n", "\t"}
    else:
        cleaned = " ".join(value.split())
        allowed = set()
    if not cleaned:
        return None
    if len(cleaned) > limit:
        raise BadInput(f"{what} is longer than {limit:,} characters")
    categories = {unicodedata.category(ch) for ch in set(cleaned) - allowed}
    if "Cc" in categories:
        raise BadInput(f"{what} contains control characters")
    if "Cs" in categories:
        raise BadInput(f"{what} is not valid Unicode (a lone surrogate)")
    if field == "birthday":
        _check_birthday(cleaned)
    return cleaned


def _check_birthday(value: str) -> None:
    shape = _BIRTHDAY.fullmatch(value)
    try:
        if shape is None:
            raise ValueError
        year, month, day = shape.groups()
        # Without a year, any day some year has (29 February included).
        datetime.date(int(year or 2000), int(month), int(day))
    except ValueError:
        raise BadInput(
            f"contact birthday {value!r:.40} is not a date (YYYY-MM-DD, or --MM-DD)"
        ) from None


def name_key(name: str) -> str:
    """The case- and spacing-insensitive form names are matched by."""
    return unicodedata.normalize("NFKC", " ".join(name.split())).casefold()


def contact_id_for(name: str) -> str:
    return hashlib.sha256(b"pixie-contact\0" + name_key(name).encode()).hexdigest()[:32]


_RESOLVE_SQL = (
    "SELECT id, 0 FROM contact WHERE name_key = ?"
    " UNION ALL SELECT contact_id, 0 FROM contact_alias WHERE alias_key = ?"
    " UNION ALL SELECT * FROM (SELECT id, 1 FROM contact WHERE name_key >= ? AND name_key < ?"
    " LIMIT 2)"
)


# Words that say how to address someone, not who they are: "Dr. Nowak" is
# asked for as readily as "Dr. Tomasz Nowak" or "Tomasz Nowak".
TITLES = frozenset(
    "dr doctor mr mrs ms miss mx prof professor sir dame madam fr father rev sr sra".split()
)
_NAME_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)


def name_words(name: str) -> list[str]:
    """A name's words, folded, titles ("Dr.", "Mrs") left out."""
    return [w for w in _NAME_WORD.findall(name_key(name)) if w not in TITLES]


_TAG_DROP = re.compile(r"[^\w\s-]|_")


def name_tag(name: str) -> str:
    """A name as a note's tag is written: folded, punctuation dropped ("Dr.
    Nowak" -> "dr nowak"); empty if nothing is left."""
    return " ".join(_TAG_DROP.sub(" ", name_key(name)).split())


# The contact book's reads, on a driver connection: the statements name the
# tables and columns `contactbook` declares (a test holds them to it), so
# that this module, and a reader without the database layer, need none.
CONTACTS_SQL = "SELECT id, name FROM contact"
ALIASES_SQL = "SELECT alias_key, contact_id, alias FROM contact_alias"
DETAILS_SQL = "SELECT contact_id, field, value, at FROM contact_detail"
_NAME_KEYS_SQL = "SELECT id, name_key FROM contact"
_CONTACT_SQL = "SELECT id, name FROM contact WHERE id = ?"
_ALIASES_OF_SQL = "SELECT alias FROM contact_alias WHERE contact_id = ? ORDER BY alias_key"
_DETAILS_OF_SQL = "SELECT field, value FROM contact_detail WHERE contact_id = ?"
_ALL_SQL = "SELECT id, name FROM contact ORDER BY name_key"
_ALL_ALIASES_SQL = "SELECT contact_id, alias FROM contact_alias ORDER BY alias_key"
_ALL_DETAILS_SQL = "SELECT contact_id, field, value FROM contact_detail"

Reading = sqlite3.Connection | sqlite3.Cursor


def _by_words(conn: Reading, key: str) -> str | None:
    """The one contact whose name holds every word of ``key`` once titles are
    left out of both ("Dr. Nowak", "Nowak" and "Tomasz Nowak" for "Dr. Tomasz
    Nowak"); None if nobody or several do. Only names, never aliases: an alias
    is matched whole or not at all."""
    wanted = name_words(key)
    if not wanted:
        return None
    found: list[str] = []
    for cid, their_key in conn.execute(_NAME_KEYS_SQL):
        words = set(name_words(their_key))
        if all(w in words for w in wanted):
            found.append(str(cid))
            if len(found) > 1:
                return None
    return found[0] if found else None


def resolve_on(conn: Reading, name: str, *, loose: bool = False) -> str | None:
    """The contact a name or alias belongs to, read on a driver connection.

    With ``loose`` (how people and models ask: "Ada"), a name that matches
    nobody exactly may still match exactly one contact's first name, or,
    failing that, exactly one contact whose name holds all its words,
    titles such as "Dr." left out ("Dr. Nowak", "Nowak").
    Writers never resolve loosely, so an import cannot merge two people.
    """
    key = name_key(name)
    # One statement (this runs on every check_notebook call): exact names and
    # aliases rank 0; with ``loose``, up to two contacts whose name starts
    # with the word rank 1 (names in [key + " ", key + "!")).
    low, high = (key + " ", key + "!") if loose and " " not in key else ("", "")
    rows = conn.execute(_RESOLVE_SQL, (key, key, low, high)).fetchall()
    exact = [r[0] for r in rows if r[1] == 0]
    if exact:
        return str(exact[0])
    loose_hits = [r[0] for r in rows if r[1] == 1]
    if len(loose_hits) == 1:
        return str(loose_hits[0])
    if not loose or loose_hits:
        return None
    return _by_words(conn, key)


def details_on(conn: Reading, contact_id: str) -> ContactDetails:
    """The details known about a contact (all None for one nobody knows)."""
    rows = conn.execute(_DETAILS_OF_SQL, (contact_id,)).fetchall()
    known = {field: value for field, value in rows if field in DETAIL_FIELDS}
    return ContactDetails(**known) if known else NO_DETAILS


def contact_items_of(conn: Reading) -> list[bytes]:
    """Every state-digest item of the contact book, read on a driver
    connection or cursor (inside whatever transaction it is in)."""
    items = [contact_item(cid, name) for cid, name in conn.execute(CONTACTS_SQL).fetchall()]
    items += [
        alias_item(key, cid, alias) for key, cid, alias in conn.execute(ALIASES_SQL).fetchall()
    ]
    items += [
        detail_item(cid, field, value, at)
        for cid, field, value, at in conn.execute(DETAILS_SQL).fetchall()
    ]
    return items


class ContactReader:
    """The contact book's reads, each in one read transaction on the driver:
    what check_notebook and the commands that show contacts need. Works on a
    `Database` or on a `plaindb.PlainDatabase` alike."""

    def __init__(self, db: DriverAccess) -> None:
        self.db = db

    def details(self, contact_id: str) -> ContactDetails:
        """The details known about a contact (all None for one nobody knows)."""
        with self.db.reading(plain=True) as conn:
            return details_on(conn, contact_id)

    def info(self, contact_id: str) -> ContactInfo:
        """One contact: name, aliases and details; NotFound if there is none."""
        with self.db.reading(plain=True) as conn:
            row = conn.execute(_CONTACT_SQL, (contact_id,)).fetchone()
            if row is None:
                raise NotFound(f"no contact {contact_id!r:.40}")
            aliases = tuple(a for (a,) in conn.execute(_ALIASES_OF_SQL, (contact_id,)))
            return ContactInfo(str(row[0]), str(row[1]), aliases, details_on(conn, contact_id))

    def resolve(self, name: str) -> str:
        """The contact a name answers to, loosely (see `resolve_on`); NotFound if none."""
        cleaned = clean_name(name)
        with self.db.reading(plain=True) as conn:
            cid = resolve_on(conn, cleaned, loose=True)
        if cid is None:
            raise NotFound(f"no contact named {name!r}")
        return cid

    def all(self) -> list[ContactInfo]:
        with self.db.reading(plain=True) as conn:
            contacts = conn.execute(_ALL_SQL).fetchall()
            aliases: dict[str, list[str]] = {}
            for cid, alias in conn.execute(_ALL_ALIASES_SQL):
                aliases.setdefault(cid, []).append(alias)
            details: dict[str, dict[str, str]] = {}
            for cid, field, value in conn.execute(_ALL_DETAILS_SQL):
                if field in DETAIL_FIELDS:
                    details.setdefault(cid, {})[field] = value
        return [
            ContactInfo(
                cid,
                name,
                tuple(aliases.get(cid, ())),
                ContactDetails(**details[cid]) if cid in details else NO_DETAILS,
            )
            for cid, name in contacts
        ]

    def names(self) -> dict[str, str]:
        with self.db.reading(plain=True) as conn:
            return {str(cid): str(name) for cid, name in conn.execute(CONTACTS_SQL)}
