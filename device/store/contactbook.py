"""The contact book's tables and its writes.

The people of a life: a contact per person (a display name and the key it
is matched by), the aliases they are reached by (nicknames, addresses, phone
numbers) and their details. The values, the rules for them and every read
are in `contacts`, which needs no database layer; this module declares the
tables and keeps them and the state digest in step on every write.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import ForeignKey, String, bindparam, insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from pixie.device.errors import BadInput
from pixie.device.store import statedigest
from pixie.device.store.contacts import (
    MAX_NAME_CHARS,
    ContactCard,
    ContactDetails,
    ContactReader,
    clean_detail,
    clean_name,
    contact_id_for,
    contact_items_of,
    details_on,
    name_key,
    resolve_on,
)
from pixie.device.store.db import Base, Database, driver_of, driver_sql
from pixie.protocol.digest import alias_item, contact_item, detail_item
from pixie.protocol.syncmessages import DETAIL_CHARS, DETAIL_FIELDS, MAX_DETAIL_AT

_FIELD_CHARS = 16  # the column; every field name is far shorter


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


_INSERT_CONTACT_SQL = driver_sql(
    insert(Contact).values(
        id=bindparam("id"),
        name=bindparam("name"),
        name_key=bindparam("name_key"),
        created_at=bindparam("created_at"),
    )
)
# An alias, written on the driver too: an address book of thousands of cards
# adds one per card, and the ORM's unit of work cost ten times the insert.
_INSERT_ALIAS_SQL = driver_sql(
    insert(ContactAlias).values(
        alias_key=bindparam("alias_key"),
        contact_id=bindparam("contact_id"),
        alias=bindparam("alias"),
    )
)


def contact_items(session: Session) -> Iterator[bytes]:
    """Every state-digest item of the contact book: contacts, aliases, details.

    Read on the session's own driver connection, inside its transaction (this
    runs in every digest rebuild and, through the replica, every sync: the
    ORM cost several times the three statements). Anything the session has
    pending is flushed first, as the ORM's reads would have done."""
    if session.autoflush:
        session.flush()
    yield from contact_items_of(driver_of(session, flush=False))


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


class ContactBook(ContactReader):
    """The contact book: its reads (`ContactReader`) and its writes, inside a
    caller's unit of work or one of its own."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.db: Database = db

    @staticmethod
    def resolve_in(session: Session, name: str, *, loose: bool = False) -> str | None:
        """`contacts.resolve_on`, inside ``session``'s transaction (what it
        has flushed included)."""
        return resolve_on(driver_of(session, flush=False), name, loose=loose)

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
                driver_of(session, flush=False).execute(_INSERT_ALIAS_SQL, (key, cid, alias))
                statedigest.update(session, add=[alias_item(key, cid, alias)])
        for field, value in details:
            put_detail_in(session, cid, field, value, now)
        return cid, created

    @staticmethod
    def details_in(session: Session, contact_id: str) -> ContactDetails:
        return details_on(driver_of(session, flush=False), contact_id)

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
                    driver_of(session, flush=False).execute(_INSERT_ALIAS_SQL, (key, cid, alias))
                    statedigest.update(session, add=[alias_item(key, cid, alias)])
        return cid, created


__all__ = [
    "Contact",
    "ContactAlias",
    "ContactBook",
    "ContactDetail",
    "contact_items",
    "put_detail_in",
]
