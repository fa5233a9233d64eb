"""`driver_of`, the one way from a session to its driver connection: it
runs inside the session's transaction, flushes what the session holds when
asked to, and is looked up again for each new transaction."""

from __future__ import annotations

from pixie.device.node.keyed import Node
from pixie.device.store.db import Meta, driver_of

ASK = "SELECT value FROM meta WHERE key = ?"


def test_a_flush_first_makes_the_session_and_the_driver_agree(node: Node) -> None:
    with node.db.writing() as session:
        session.add(Meta(key="probe-a", value="held"))
        assert driver_of(session, flush=False).execute(ASK, ("probe-a",)).fetchall() == []
        conn = driver_of(session, flush=True)
        assert conn.execute(ASK, ("probe-a",)).fetchall() == [("held",)]
        conn.execute("INSERT INTO meta (key, value) VALUES ('probe-b', 'raw')")
        assert driver_of(session, flush=False) is conn  # remembered within a transaction
    with node.db.reading() as session:
        rows = driver_of(session, flush=False).execute(ASK, ("probe-b",)).fetchall()
        assert rows == [("raw",)]  # written in the session's own transaction, committed with it


def test_a_connection_remembered_for_another_transaction_is_not_used(node: Node) -> None:
    with node.db.writing() as session:
        session.info["pixie_driver"] = (object(), "a connection of a finished transaction")
        conn = driver_of(session, flush=False)
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert session.info["pixie_driver"] == (session.get_transaction(), conn)
