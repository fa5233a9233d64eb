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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from sqlalchemy import ForeignKey, String, Table, bindparam, insert, select
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.orm import Mapped, Session, mapped_column

from pixie.device.errors import BadInput, NotFound
from pixie.device.store import statedigest
from pixie.device.store.db import Base, Database, driver_sql
from pixie.protocol.digest import alias_item, contact_item, detail_item
from pixie.protocol.syncwire import DETAIL_CHARS, DETAIL_FIELDS, MAX_DETAIL_AT

MAX_NAME_CHARS = 200
_FIELD_CHARS = 16  # the column; every field name is far shorter
# What a message calls each detail.
DETAIL_NAMES = {
    "org": "organisation",
    "title": "title",
    "birthday": "birthday",
    "note": "note",
    "phone": "phone",
    "address": "address",
}


class Contact(Base):
    __tablename__ = "contact"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))
    name_key: Mapped[str] = mapped_column(String(MAX_NAME_CHARS), unique=True)
    created_at: Mapped[int]


class ContactAlias(Base):
    __tablename__ = "contact_alias"

    alias_key: Mapped[str] = mapped_column(String(MAX_NAME_CHARS), primary_key=True)
    contact_id: Mapped[str] = mapped_column(ForeignKey("contact.id"), index=True)
    alias: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))


class ContactDetail(Base):
    """One detail of a contact: its value and when that value was written.

    A row per (contact, field) rather than columns on ``contact``: each detail
    converges on its own (last writer wins on (at, value)), so its value and
    time belong together, and a detail nobody knows is no row at all instead
    of a pair of NULL columns; the digest item of a detail maps onto one row;
    and a field added later needs no new migration. Adding the table is also
    the one migration that can run again harmlessly (``IF NOT EXISTS``).
    """

    __tablename__ = "contact_detail"

    contact_id: Mapped[str] = mapped_column(ForeignKey("contact.id"), primary_key=True)
    field: Mapped[str] = mapped_column(String(_FIELD_CHARS), primary_key=True)
    value: Mapped[str] = mapped_column(String(max(DETAIL_CHARS.values())))
    at: Mapped[int]


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


_INSERT_CONTACT_SQL = driver_sql(
    insert(Contact).values(
        id=bindparam("id"),
        name=bindparam("name"),
        name_key=bindparam("name_key"),
        created_at=bindparam("created_at"),
    )
)
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


def _by_words(session: Session, key: str) -> str | None:
    """The one contact whose name holds every word of ``key`` once titles are
    left out of both ("Dr. Nowak", "Nowak" and "Tomasz Nowak" for "Dr. Tomasz
    Nowak"); None if nobody or several do. Only names, never aliases: an alias
    is matched whole or not at all."""
    wanted = name_words(key)
    if not wanted:
        return None
    found: list[str] = []
    for cid, their_key in session.connection().exec_driver_sql("SELECT id, name_key FROM contact"):
        words = set(name_words(their_key))
        if all(w in words for w in wanted):
            found.append(str(cid))
            if len(found) > 1:
                return None
    return found[0] if found else None


def _columns_sql(table: type[Base], *columns: str) -> str:
    """A plain SELECT of a model's columns, its names taken from the model."""
    t = cast(Table, table.__table__)
    return f"SELECT {', '.join(t.c[c].name for c in columns)} FROM {t.name}"


# What the items of the contact book are made of, for the driver (see `contact_items`).
CONTACTS_SQL = _columns_sql(Contact, "id", "name")
ALIASES_SQL = _columns_sql(ContactAlias, "alias_key", "contact_id", "alias")
DETAILS_SQL = _columns_sql(ContactDetail, "contact_id", "field", "value", "at")


def contact_items_of(conn: sqlite3.Connection | sqlite3.Cursor | DBAPICursor) -> list[bytes]:
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


def contact_items(session: Session) -> Iterator[bytes]:
    """Every state-digest item of the contact book: contacts, aliases, details.

    Read on the session's own driver connection, inside its transaction (this
    runs in every digest rebuild and, through the replica, every sync: the
    ORM cost several times the three statements). Anything the session has
    pending is flushed first, as the ORM's reads would have done."""
    if session.autoflush:
        session.flush()
    conn = cast(sqlite3.Connection, session.connection().connection.driver_connection)
    yield from contact_items_of(conn)


def put_detail_in(
    session: Session, contact_id: str, field: str, value: str, at: int, *, from_sync: bool = False
) -> bool:
    """Set a contact's detail if (at, value) wins over what it holds (a clean
    value, see `clean_detail`); returns whether anything changed.

    An import (``from_sync`` false) that brings the value already held
    changes nothing, not even the time: importing one address book twice
    leaves no trace. Sync compares (at, value) whole, so two replicas that
    imported one value at different times still agree on one time."""
    if not -MAX_DETAIL_AT <= at <= MAX_DETAIL_AT:
        raise BadInput(f"contact detail time {at} is out of range")
    row = session.get(ContactDetail, (contact_id, field))
    if row is None:
        session.add(ContactDetail(contact_id=contact_id, field=field, value=value, at=at))
        session.flush()
        statedigest.update(session, add=[detail_item(contact_id, field, value, at)])
        return True
    if (row.value == value and not from_sync) or (at, value) <= (row.at, row.value):
        return False
    statedigest.update(
        session,
        add=[detail_item(contact_id, field, value, at)],
        remove=[detail_item(contact_id, field, row.value, row.at)],
    )
    row.value, row.at = value, at
    return True


def _card_details(card: ContactCard) -> list[tuple[str, str]]:
    out = []
    for field in DETAIL_FIELDS:
        value = getattr(card, field)
        if value is not None:
            cleaned = clean_detail(field, value)
            if cleaned is not None:
                out.append((field, cleaned))
    return out


class ContactBook:
    """Reads and writes contacts inside a caller's unit of work."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    def resolve_in(session: Session, name: str, *, loose: bool = False) -> str | None:
        """The contact a name or alias belongs to.

        With ``loose`` (how people and models ask: "Ada"), a name that matches
        nobody exactly may still match exactly one contact's first name, or,
        failing that, exactly one contact whose name holds all its words,
        titles such as "Dr." left out ("Dr. Nowak", "Nowak").
        Writers never resolve loosely, so an import cannot merge two people.
        """
        key = name_key(name)
        # One statement on the driver (this runs on every check_notebook call):
        # exact names and aliases rank 0; with ``loose``, up to two contacts
        # whose name starts with the word rank 1 (names in [key + " ", key + "!")).
        low, high = (key + " ", key + "!") if loose and " " not in key else ("", "")
        rows = session.connection().exec_driver_sql(_RESOLVE_SQL, (key, key, low, high)).all()
        exact = [r[0] for r in rows if r[1] == 0]
        if exact:
            return str(exact[0])
        loose_hits = [r[0] for r in rows if r[1] == 1]
        if len(loose_hits) == 1:
            return str(loose_hits[0])
        if not loose or loose_hits:
            return None
        return _by_words(session, key)

    @classmethod
    def ensure_in(cls, session: Session, name: str, now: int) -> tuple[str, bool]:
        """Resolve a name, creating the contact if nobody answers to it."""
        name = clean_name(name)
        existing = cls.resolve_in(session, name)
        if existing is not None:
            return existing, False
        cid = contact_id_for(name)
        # A plain insert: the ORM's unit of work costs several times it.
        session.connection().exec_driver_sql(_INSERT_CONTACT_SQL, (cid, name, name_key(name), now))
        statedigest.update(session, add=[contact_item(cid, name)])
        return cid, True

    @classmethod
    def merge_card_in(cls, session: Session, card: ContactCard, now: int) -> tuple[str, bool]:
        """Merge ``card`` into the book inside the caller's write: the contact
        one of its aliases (tried first: an address or a number is surer than a
        name) or its name already resolves to, else a new one; then every alias
        nobody else holds is added. An alias another contact holds is left
        with them: an import never moves an alias or merges two people.
        Then its details, each set if the contact has none, or replaced if
        this card is newer (see `put_detail_in`; ``now`` is the card's time).
        Everything is checked before anything is written.
        Returns the contact's id and whether it was created."""
        name = clean_name(card.name)
        aliases = [clean_name(a, "alias") for a in card.aliases]
        details = _card_details(card)
        cid = None
        for alias in aliases:
            cid = cls.resolve_in(session, alias)
            if cid is not None:
                break
        created = False
        if cid is None:
            cid, created = cls.ensure_in(session, name, now)
        for alias in [name, *aliases]:
            if cls.resolve_in(session, alias) is None:
                key = name_key(alias)
                session.add(ContactAlias(alias_key=key, contact_id=cid, alias=alias))
                session.flush()
                statedigest.update(session, add=[alias_item(key, cid, alias)])
        for field, value in details:
            put_detail_in(session, cid, field, value, now)
        return cid, created

    @staticmethod
    def details_in(session: Session, contact_id: str) -> ContactDetails:
        rows = session.execute(
            select(ContactDetail.field, ContactDetail.value).where(
                ContactDetail.contact_id == contact_id
            )
        )
        known = {field: value for field, value in rows if field in DETAIL_FIELDS}
        return ContactDetails(**known) if known else NO_DETAILS

    def details(self, contact_id: str) -> ContactDetails:
        """The details known about a contact (all None for one nobody knows)."""
        with self.db.reading() as session:
            return self.details_in(session, contact_id)

    def info(self, contact_id: str) -> ContactInfo:
        """One contact: name, aliases and details; NotFound if there is none."""
        with self.db.reading() as session:
            row = session.get(Contact, contact_id)
            if row is None:
                raise NotFound(f"no contact {contact_id!r:.40}")
            aliases = session.scalars(
                select(ContactAlias.alias)
                .where(ContactAlias.contact_id == contact_id)
                .order_by(ContactAlias.alias_key)
            ).all()
            return ContactInfo(row.id, row.name, tuple(aliases), self.details_in(session, row.id))

    def add(self, name: str, aliases: list[str], now: int) -> tuple[str, bool]:
        """Create a contact (or extend an existing one) with aliases; all or nothing."""
        name = clean_name(name)
        cleaned = [clean_name(a, "alias") for a in aliases]
        with self.db.writing() as session:
            cid, created = self.ensure_in(session, name, now)
            for alias in cleaned:
                owner = self.resolve_in(session, alias)
                if owner is not None and owner != cid:
                    raise BadInput(f"alias {alias!r} already names another contact")
                if owner is None:
                    key = name_key(alias)
                    session.add(ContactAlias(alias_key=key, contact_id=cid, alias=alias))
                    session.flush()
                    statedigest.update(session, add=[alias_item(key, cid, alias)])
        return cid, created

    def resolve(self, name: str) -> str:
        with self.db.reading() as session:
            cid = self.resolve_in(session, clean_name(name), loose=True)
        if cid is None:
            raise NotFound(f"no contact named {name!r}")
        return cid

    def all(self) -> list[ContactInfo]:
        with self.db.reading() as session:
            contacts = session.scalars(select(Contact).order_by(Contact.name_key)).all()
            aliases: dict[str, list[str]] = {}
            for row in session.scalars(select(ContactAlias).order_by(ContactAlias.alias_key)):
                aliases.setdefault(row.contact_id, []).append(row.alias)
            details: dict[str, dict[str, str]] = {}
            for d in session.scalars(select(ContactDetail)):
                if d.field in DETAIL_FIELDS:
                    details.setdefault(d.contact_id, {})[d.field] = d.value
            return [
                ContactInfo(
                    c.id,
                    c.name,
                    tuple(aliases.get(c.id, ())),
                    ContactDetails(**details[c.id]) if c.id in details else NO_DETAILS,
                )
                for c in contacts
            ]

    def names(self) -> dict[str, str]:
        with self.db.reading() as session:
            return dict(session.execute(select(Contact.id, Contact.name)).all())
