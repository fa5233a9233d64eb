"""The trio drivers take time and randomness from their node (or from what they
are given), never from the process: a node opened with a `ManualClock` and a
`SeededEntropy` gets session ids, request ids, message ids, invite secrets,
expiries and report times from them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.holdings import PendingRelease
from pixie.device.store.notes import NoteKind
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.store.siblings import Still
from pixie.device.sync.driver import SyncEndpoint, SyncOutcome
from pixie.device.sync.offload import NoteOffloadService, candidates
from pixie.device.sync.pairing import SECRET_BYTES, InviteCode, new_code
from pixie.device.sync.peers import Incoming, PeerLink
from pixie.device.sync.relayclient import RelayAddress
from pixie.homebase.holder import Holder
from pixie.protocol import syncwire
from pixie.protocol.clock import ManualClock, SeededEntropy
from pixie.protocol.envelope import open_envelope
from pixie.protocol.offload import new_request_id
from pixie.protocol.peerwire import (
    MESSAGE_ID_BYTES,
    OffloadRequest,
    PeerMessage,
    Ping,
    SyncData,
    decode_body,
    encode_body,
)

NOW_US = 1_800_000_000_123_456  # 2027, well away from the machine's clock
SIBLING = b"\x02" * 32
HOLDER = b"\x03" * 32
RELAY = RelayAddress("127.0.0.1", 1)


@pytest.fixture
def manual_node(data_dir: Path) -> Iterator[Node]:
    with Node.open(data_dir, clock=ManualClock(NOW_US), entropy=SeededEntropy(7)) as n:
        yield n


class Wire:
    """A link that keeps what is sent and never answers."""

    def __init__(self) -> None:
        self.identity = SigningKey(b"\x01" * 32)
        self.lane: trio.CapacityLimiter | None = None
        self.sent: list[tuple[bytes, PeerMessage]] = []

    async def send(
        self, recipient: bytes, message: PeerMessage, *, still: Still | None = None
    ) -> int:
        self.sent.append((recipient, message))
        return 1

    async def receive(self) -> Incoming:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover


def test_the_endpoint_and_the_offload_service_default_to_the_node_s_sources(
    manual_node: Node,
) -> None:
    wire = Wire()
    endpoint = SyncEndpoint(manual_node, wire)  # type: ignore[arg-type]
    assert endpoint.clock is manual_node.clock and endpoint.entropy is manual_node.entropy
    service = NoteOffloadService(manual_node, HOLDER, wire.send, wire.receive)
    assert service.clock is manual_node.clock and service.entropy is manual_node.entropy
    assert service.ledger.clock is manual_node.clock


async def test_a_sync_session_takes_its_id_and_its_report_time_from_the_endpoint(
    manual_node: Node,
) -> None:
    wire = Wire()
    clock = ManualClock(NOW_US)
    endpoint = SyncEndpoint(
        manual_node,
        wire,  # type: ignore[arg-type]
        idle_timeout=0.05,
        clock=clock,
        entropy=SeededEntropy(11),
    )
    report = await endpoint.sync_with(SIBLING)

    assert report.outcome is SyncOutcome.NO_ANSWER
    assert report.finished_at == NOW_US / 1_000_000
    ((to, first), *_) = wire.sent
    assert to == SIBLING and isinstance(first, SyncData)
    hello = syncwire.decode(first.payload)
    assert isinstance(hello, syncwire.Hello)
    assert hello.session == SeededEntropy(11).token_bytes(syncwire.SESSION_BYTES)


async def test_a_sync_session_over_a_seeded_node_is_the_same_every_time(
    tmp_path: Path,
) -> None:
    hellos: list[bytes] = []
    for run in range(2):
        path = tmp_path / f"data{run}"
        create_data_dir(path, name="test", role="device")
        with Node.open(path, clock=ManualClock(NOW_US), entropy=SeededEntropy(5)) as node:
            wire = Wire()
            endpoint = SyncEndpoint(node, wire, idle_timeout=0.05)  # type: ignore[arg-type]
            report = await endpoint.sync_with(SIBLING)
            assert report.finished_at == NOW_US / 1_000_000
            _, first = wire.sent[0]
            assert isinstance(first, SyncData)
            hello = syncwire.decode(first.payload)
            assert isinstance(hello, syncwire.Hello)
            hellos.append(hello.session)
    assert hellos[0] == hellos[1]


async def test_an_offload_attempt_draws_its_request_id_from_the_service(
    manual_node: Node,
) -> None:
    note_id = manual_node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "ada", "ada page", "Ada prefers mornings.", tags=())
    ).note_id
    wire = Wire()
    service = NoteOffloadService(
        manual_node, HOLDER, wire.send, wire.receive, timeout=0.05, entropy=SeededEntropy(3)
    )
    report = await service.offload(note_id)

    assert not report.cleared
    ((to, request),) = wire.sent
    assert to == HOLDER and isinstance(request, OffloadRequest)
    assert request.request == new_request_id(SeededEntropy(3))


def test_a_queued_release_is_dated_by_the_node_s_clock(manual_node: Node) -> None:
    wire = Wire()
    service = NoteOffloadService(manual_node, HOLDER, wire.send, wire.receive)
    service.ledger.orphaned("0190aaaa-0000-7000-8000-000000000000", "ab" * 32)
    with manual_node.db.reading() as session:
        since = [p.since for p in session.query(PendingRelease).all()]
    assert since == [NOW_US]


def test_candidates_are_judged_by_the_node_s_clock(manual_node: Node) -> None:
    note_id = manual_node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, "ada", "ada page", "Ada prefers mornings.", tags=())
    ).note_id
    # The note was written at the node's now: not older than a day by its
    # clock, and older than a day once the clock has moved on two.
    assert note_id not in candidates(manual_node, 1)
    assert isinstance(manual_node.clock, ManualClock)
    manual_node.clock.advance(2 * 86_400 * 1_000_000)
    assert note_id in candidates(manual_node, 1)


def test_an_invite_code_takes_its_secret_and_expiry_from_what_it_is_given() -> None:
    inviter = bytes(SigningKey(b"\x01" * 32).verify_key)
    code = new_code(inviter, RELAY, 300, ManualClock(NOW_US), SeededEntropy(9))
    assert code.secret == SeededEntropy(9).token_bytes(SECRET_BYTES)
    assert code.expires_at == NOW_US // 1_000_000 + 300
    text = code.encode()
    assert InviteCode.parse(text, now=NOW_US / 1_000_000) == code
    with pytest.raises(Exception, match="expired"):
        InviteCode.parse(text, now=NOW_US / 1_000_000 + 301)


class Relay:
    """A relay client that keeps the envelopes sent."""

    def __init__(self) -> None:
        self.envelopes: list[bytes] = []

    async def send(self, recipient: bytes, envelope: bytes) -> None:
        self.envelopes.append(envelope)


async def test_message_ids_come_from_the_link_s_entropy(manual_node: Node) -> None:
    body = decode_body(encode_body(Ping(1), 1, entropy=SeededEntropy(4)))
    assert body.message_id == SeededEntropy(4).token_bytes(MESSAGE_ID_BYTES)

    sibling = SigningKey(b"\x05" * 32)
    key = bytes(sibling.verify_key)
    manual_node.siblings.add(SiblingInfo(key, "mac", "homebase", str(RELAY), 0))
    relay = Relay()
    link = PeerLink(
        manual_node.identity(),
        manual_node.siblings,
        relay,  # type: ignore[arg-type]
        entropy=SeededEntropy(4),
    )
    await link.send(key, Ping(2))
    (envelope,) = relay.envelopes
    sent = decode_body(open_envelope(sibling, envelope).body)
    assert sent.message == Ping(2) and sent.message_id == body.message_id


def test_the_holder_core_reads_the_node_s_clock_and_entropy(manual_node: Node) -> None:
    holder = Holder(manual_node)
    assert holder.core.clock is manual_node.clock
    assert holder.core.entropy is manual_node.entropy
    clock, entropy = ManualClock(1), SeededEntropy(1)
    given = Holder(manual_node, clock=clock, entropy=entropy)
    assert given.core.clock is clock and given.core.entropy is entropy
