"""A replica's driver reads give what the ORM's gave, on worlds the simulator made.

`NodeReplica.marks` reads the log's marks, the note marks and the contact
book in one statement, and note versions go out from driver rows: each is
compared here with the same thing read through ORM objects.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from pixie.device.store import replicarows as replica_module
from pixie.device.store.contactbook import Contact, ContactAlias, ContactDetail
from pixie.device.store.memlog import MemoryEvent
from pixie.device.store.notetable import Note, NoteMark
from pixie.protocol.digest import Fingerprint, alias_item, contact_item, detail_item
from pixie.protocol.reconcile import range_fingerprint
from pixie.protocol.syncmessages import Marks
from pixie.sim.world import Peer, World


def _orm_marks(peer: Peer) -> Marks:
    with peer.node.db.reading() as session:
        log = session.execute(
            select(MemoryEvent.origin, func.max(MemoryEvent.seq)).group_by(MemoryEvent.origin)
        ).all()
        notes = session.execute(select(NoteMark.origin, NoteMark.stamp)).all()
        items = [contact_item(c.id, c.name) for c in session.scalars(select(Contact))]
        items += [
            alias_item(a.alias_key, a.contact_id, a.alias)
            for a in session.scalars(select(ContactAlias))
        ]
        items += [
            detail_item(d.contact_id, d.field, d.value, d.at)
            for d in session.scalars(select(ContactDetail))
        ]
    fp = Fingerprint.of(items)
    return Marks(
        tuple(sorted((str(o), int(s)) for o, s in log)),
        tuple(sorted((str(o), str(s)) for o, s in notes)),
        range_fingerprint(fp.total, fp.count),
    )


@pytest.mark.parametrize("seed", [1, 9, 23])
def test_marks_and_note_versions_match_the_orm(seed: int) -> None:
    with World(seed) as world:
        for step in range(45):
            world.step()
            if step % 15 != 14:
                continue
            for peer in world.peers.values():
                assert peer.replica.marks() == _orm_marks(peer)
                with peer.node.db.reading() as session:
                    by_orm = {
                        n.id: replica_module._wire_note(n) for n in session.scalars(select(Note))
                    }
                rows = replica_module._note_rows(
                    peer.node.db,
                    replica_module._NOTES_BY_ID.format(",".join("?" * len(by_orm))),
                    list(by_orm),
                )
                by_driver = {r.id: replica_module._wire_note(r) for r in rows}
                assert by_driver == by_orm
                for version in by_driver.values():
                    assert type(version.user_edited) is bool and type(version.deleted) is bool
