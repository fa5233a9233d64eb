"""The state digest's reads and updates on the driver agree with the ORM.

`statedigest.update` writes through the session's driver connection, inside
its transaction, unless the session holds the digest's row as an object (then
through that object); `contact_items` reads on the driver after flushing what
the session has pending, as the ORM's own reads would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from pixie.device.node.keyed import Node
from pixie.device.store import statedigest
from pixie.device.store.contactbook import Contact, ContactAlias, contact_items
from pixie.device.store.contacts import contact_id_for
from pixie.device.store.db import Meta, peek
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.protocol.digest import Fingerprint, alias_item, contact_item, event_item

ITEM_A = event_item("00000000-0000-4000-8000-000000000001")
ITEM_B = event_item("00000000-0000-4000-8000-000000000002")


@pytest.fixture
def fresh(node: Node) -> Iterator[Node]:
    """A node with one event, so its digest row exists."""
    node.log.append([NewEvent(EventKind.JOURNAL, 1, "one")], now=0)
    yield node


def _stored(node: Node) -> Fingerprint:
    with node.db.reading() as session:
        value = session.scalar(select(Meta.value).where(Meta.key == statedigest.DIGEST_KEY))
    return Fingerprint.decode(value) if value else Fingerprint()


def test_an_update_lands_in_its_transaction_and_only_there(fresh: Node) -> None:
    start = statedigest.current(fresh.db)
    with fresh.db.writing() as session:
        statedigest.update(session, add=[ITEM_A, ITEM_B])
        statedigest.update(session, remove=[ITEM_B])
        # Not committed yet: another reader still sees the old digest.
        assert statedigest.current(fresh.db) == start
    assert statedigest.current(fresh.db) == _stored(fresh) == start.add(ITEM_A)
    with pytest.raises(RuntimeError), fresh.db.writing() as session:
        statedigest.update(session, add=[ITEM_B])
        raise RuntimeError("roll back")
    assert statedigest.current(fresh.db) == start.add(ITEM_A)


def test_a_row_the_session_holds_is_updated_through_it(fresh: Node) -> None:
    start = statedigest.current(fresh.db)
    with fresh.db.writing() as session:
        row = session.get(Meta, statedigest.DIGEST_KEY)
        assert row is not None
        statedigest.update(session, add=[ITEM_A])
        assert Fingerprint.decode(row.value) == start.add(ITEM_A)
        statedigest.update(session, add=[ITEM_B])
        assert Fingerprint.decode(row.value) == start.add(ITEM_A).add(ITEM_B)
    assert statedigest.current(fresh.db) == start.add(ITEM_A).add(ITEM_B)


def test_a_pending_row_is_updated_through_it(fresh: Node) -> None:
    with fresh.db.writing() as session:
        session.execute(Meta.__table__.delete().where(Meta.key == statedigest.DIGEST_KEY))
        pending = Meta(key=statedigest.DIGEST_KEY, value=Fingerprint().add(ITEM_A).encode())
        session.add(pending)
        statedigest.update(session, add=[ITEM_B])
        assert Fingerprint.decode(pending.value) == Fingerprint().add(ITEM_A).add(ITEM_B)
    assert statedigest.current(fresh.db) == Fingerprint().add(ITEM_A).add(ITEM_B)


def test_a_missing_row_is_created(fresh: Node) -> None:
    with fresh.db.writing() as session:
        session.execute(Meta.__table__.delete().where(Meta.key == statedigest.DIGEST_KEY))
    assert statedigest.current(fresh.db) == Fingerprint()
    with fresh.db.writing() as session:
        statedigest.update(session, add=[])  # nothing changes: no row either
    assert peek(fresh.db, "SELECT count(*) FROM meta WHERE key = 'state_fingerprint'") == [(0,)]
    with fresh.db.writing() as session:
        statedigest.update(session, add=[ITEM_A])
    assert statedigest.current(fresh.db) == Fingerprint().add(ITEM_A)


def test_contact_items_see_what_the_session_has_pending(fresh: Node) -> None:
    cid = contact_id_for("Ada")
    with fresh.db.writing() as session:
        session.add(Contact(id=cid, name="Ada", name_key="ada", created_at=0))
        session.add(
            ContactAlias(alias_key="ada@example.org", contact_id=cid, alias="ada@example.org")
        )
        items = set(contact_items(session))
    assert contact_item(cid, "Ada") in items
    assert alias_item("ada@example.org", cid, "ada@example.org") in items
    with fresh.db.reading() as session:
        assert set(contact_items(session)) == items
