"""The holder drops a request that makes it raise, counts it, and goes on."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from pixie.device.sync.peers import Incoming
from pixie.device.sync.relayclient import RelayUnavailable
from pixie.homebase.holder import Holder
from pixie.protocol.offload import body_hash
from pixie.protocol.peerwire import (
    MAX_HELD_BYTES,
    Body,
    FetchPart,
    FetchRequest,
    HolderRefusal,
    PeerMessage,
)
from tests.support.synchelp import open_pair

PHONE = b"\x01" * 32
NOTE = "0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10"


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    return await trio.to_thread.run_sync(fn, *args)


def fetch(body: bytes, counter: int) -> Incoming:
    request = FetchRequest(bytes([counter]) * 16, NOTE, body_hash(body))
    return Incoming(PHONE, Body(bytes(16), counter, request))


def hold(db: Path, body: bytes) -> None:
    """A holding written straight into the database (as a damaged or foreign
    data dir might have it)."""
    con = sqlite3.connect(db)
    with con:
        con.execute(
            "INSERT INTO holding (note_id, content_hash, owner, body, held_at, offload_counter) "
            "VALUES (?, ?, ?, ?, 0, 1)",
            (NOTE, body_hash(body).hex(), PHONE.hex(), body),
        )
    con.close()


async def test_a_request_that_makes_the_holder_raise_is_dropped_and_it_goes_on(
    tmp_path: Path,
) -> None:
    phone, mac = open_pair(tmp_path)
    replies: list[PeerMessage] = []

    async def reply(to: bytes, message: PeerMessage) -> int:
        replies.append(message)
        return 0

    try:
        huge = b"x" * (MAX_HELD_BYTES + 1)  # over what a fetch may carry: serving it raises
        hold(mac.db.path, huge)
        holder = Holder(mac)
        await holder.handle(fetch(huge, 1), reply, call)
        assert holder.dropped == {"ValueError": 1}
        assert replies == []
        # ... and the next request is served as ever.
        await holder.handle(fetch(b"never held", 2), reply, call)
        assert [type(r) for r in replies] == [HolderRefusal]
        assert not any(isinstance(r, FetchPart) for r in replies)
    finally:
        phone.close()
        mac.close()


async def test_connection_errors_still_reach_the_driver(tmp_path: Path) -> None:
    phone, mac = open_pair(tmp_path)

    async def reply(to: bytes, message: PeerMessage) -> int:
        raise RelayUnavailable("the relay went away")

    try:
        holder = Holder(mac)
        with pytest.raises(RelayUnavailable):
            await holder.handle(fetch(b"never held", 1), reply, call)
        assert not holder.dropped
    finally:
        phone.close()
        mac.close()


async def test_a_flood_of_refused_requests_is_logged_in_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    phone, mac = open_pair(tmp_path)

    async def reply(to: bytes, message: PeerMessage) -> int:
        return 0

    try:
        holder = Holder(mac)
        with caplog.at_level("WARNING", logger="pixie.holder"):
            for counter in range(1, 201):
                await holder.handle(fetch(b"never held", counter), reply, call)
        assert holder.refused == {"no holding for that note and hash": 200}
        lines = [r.getMessage() for r in caplog.records if r.name == "pixie.holder"]
        assert len(lines) == 5, lines  # the rest wait for the minute's summary
    finally:
        phone.close()
        mac.close()
