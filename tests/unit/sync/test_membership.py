"""An account of more than two peers: membership records (their rules, their
signatures) and the sibling books they keep in step, across a phone, a
Homebase and a laptop synced in process."""

from __future__ import annotations

import base64
from pathlib import Path

import msgpack
import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.sync import membership as account
from pixie.device.sync.driver import SyncEndpoint
from pixie.protocol import membership
from pixie.protocol.clock import SYSTEM_CLOCK, ManualClock
from pixie.protocol.errors import ProtocolError
from pixie.protocol.membership import ADD, REMOVE, Record
from tests.support.synchelp import (
    dump,
    open_laptop,
    pair_in_account,
    paired_siblings,
    say,
    sync,
    sync_in_account,
)

RELAY = "127.0.0.1:1"


def _key() -> SigningKey:
    return SigningKey.generate()


def _record(signer: SigningKey, action: str, key: SigningKey, at: int) -> Record:
    return membership.sign(
        signer, action, bytes(key.verify_key), name="x", role="device", relay=RELAY, at=at
    )


def test_a_record_round_trips_and_its_id_is_its_own() -> None:
    a = _key()
    record = _record(a, ADD, a, 5)
    assert membership.decode(record.text()) == record
    assert record.id == membership.decode(record.text()).id
    assert record.id != _record(a, ADD, a, 6).id


@pytest.mark.parametrize("where", ["name", "at", "signature"])
def test_a_changed_record_does_not_verify(where: str) -> None:
    a = _key()
    fields = msgpack.unpackb(
        base64.b64decode(_record(a, ADD, a, 5).text()[len(membership.PREFIX) :])
    )
    index = {"name": 2, "at": 5, "signature": 7}[where]
    value = fields[index]
    fields[index] = (
        "y"
        if isinstance(value, str)
        else value + 1
        if isinstance(value, int)
        else bytes([value[0] ^ 1]) + value[1:]
    )
    forged = membership.PREFIX + base64.b64encode(msgpack.packb(fields)).decode()
    with pytest.raises(ProtocolError):
        membership.decode(forged)


@pytest.mark.parametrize(
    "text",
    ["hello", membership.PREFIX + "!!", membership.PREFIX + "A" * 4000, membership.PREFIX],
)
def test_what_is_not_a_record_is_refused_with_one_line(text: str) -> None:
    with pytest.raises(ProtocolError):
        membership.decode(text)


def test_members_follow_the_records_whatever_their_order() -> None:
    phone, home, laptop, thief = _key(), _key(), _key(), _key()
    records = [
        _record(phone, ADD, phone, 1),  # a founder adds itself
        _record(phone, ADD, home, 2),
        _record(home, ADD, laptop, 3),
        _record(thief, ADD, thief, 4),  # self-added: counts (only siblings' logs reach here)
        _record(laptop, ADD, _key(), 5),
        _record(phone, REMOVE, laptop, 6),
        _record(laptop, ADD, _key(), 7),  # signed after its removal: counts for nothing
        _record(home, ADD, laptop, 8),  # removed for good
    ]
    forward = membership.members(records)
    backward = membership.members(reversed(records))
    assert forward == backward
    assert bytes(laptop.verify_key) in forward.removed
    assert bytes(laptop.verify_key) not in forward.members
    assert {bytes(phone.verify_key), bytes(home.verify_key)} <= set(forward.members)
    assert len(forward.members) == 4  # phone, home, thief, the one laptop added in time


def test_a_non_member_cannot_remove() -> None:
    phone, stranger = _key(), _key()
    held = membership.members([_record(phone, ADD, phone, 1), _record(stranger, REMOVE, phone, 2)])
    assert bytes(phone.verify_key) in held.members and not held.removed


def test_three_peers_learn_of_each_other_and_converge(tmp_path: Path) -> None:
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            pair_in_account(phone, laptop)
            say(phone, "from the phone", at=1_700_000_000_000_001)
            say(home, "from the Homebase", at=1_700_000_000_000_002)
            say(laptop, "from the laptop", at=1_700_000_000_000_003)
            # The Homebase was away at pairing time: it learns of the laptop
            # from the phone, and the laptop of the Homebase the same way.
            sync_in_account(home, phone)
            assert laptop.public_key() in {s.key for s in home.siblings.all()}
            sync_in_account(laptop, phone)
            assert home.public_key() in {s.key for s in laptop.siblings.all()}
            sync_in_account(laptop, home)  # directly, with no phone in between
            sync_in_account(home, phone)
            digests = {n.digest().digest() for n in (phone, home, laptop)}
            assert len(digests) == 1
            assert dump(phone) == dump(home) == dump(laptop)
        finally:
            laptop.close()


def test_a_removed_laptop_is_dropped_everywhere_and_told(tmp_path: Path) -> None:
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            pair_in_account(phone, laptop)
            sync_in_account(home, phone)
            sync_in_account(laptop, phone)
            gone = account.remove(phone, "LAPTOP")
            assert gone.key == laptop.public_key()
            assert laptop.public_key() not in {s.key for s in phone.siblings.all()}
            assert laptop.public_key() in phone.siblings.removed()
            sync_in_account(home, phone)
            assert laptop.public_key() not in {s.key for s in home.siblings.all()}
            assert laptop.public_key() in home.siblings.removed()
            # What the laptop holds stays with it. Over the relay no sibling
            # takes its envelopes in again (tests/integration); in this
            # loopback, with no envelopes, the record reaches it, and it
            # knows it is out.
            held = dump(laptop)["events"]
            sync_in_account(laptop, home)
            assert set(held) <= set(dump(laptop)["events"])
            assert account.reconcile(laptop).out is not None
            who, _ = account.removed_from(laptop) or ("", 0)
            assert who == phone.name
        finally:
            laptop.close()


def test_a_removal_counts_whatever_the_removers_clock_says(tmp_path: Path) -> None:
    """Records count in the order of their times. The Homebase, its clock an
    hour ahead, pairs the laptop; the phone, on time, removes it at once. A
    removal dated by the phone's clock would come before the records that
    made the phone and the laptop members, count for nothing, and leave the
    laptop in the account (the simulator with five peers found this)."""
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            home.clock = ManualClock(SYSTEM_CLOCK.now_us() + 3_600_000_000)
            pair_in_account(home, laptop)
            sync_in_account(phone, home)
            gone = laptop.public_key()
            assert phone.siblings.get(gone) is not None
            account.remove(phone, "laptop")
            assert phone.siblings.get(gone) is None and gone in phone.siblings.removed()
            assert gone in account.account(phone).removed
            sync_in_account(home, phone)
            assert home.siblings.get(gone) is None and gone in home.siblings.removed()
        finally:
            laptop.close()


class _Gate:
    """What the endpoint tells its link's gate."""

    def __init__(self) -> None:
        self.learnt: list[bytes] = []
        self.forgot: list[bytes] = []

    def learn(self, key: bytes) -> None:
        self.learnt.append(key)

    def forget(self, key: bytes) -> None:
        self.forgot.append(key)


class _QuietLink:
    """A link on which nothing arrives."""

    def __init__(self, node: Node) -> None:
        self.identity = node.identity()
        self.admission = _Gate()
        self.lane: trio.CapacityLimiter | None = None

    async def receive(self) -> None:
        await trio.sleep_forever()


async def test_records_taken_in_before_a_crash_are_read_when_the_endpoint_starts(
    tmp_path: Path,
) -> None:
    """A session applied the removal, and the process stopped before it read
    the records: the next endpoint to serve brings the book and gate in step
    before it takes any envelope in."""
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            pair_in_account(phone, laptop)
            sync_in_account(home, phone)
            account.remove(phone, "laptop")
            sync(home, phone)  # applied, not yet read (no reconcile)
            gone = laptop.public_key()
            assert home.siblings.get(gone) is not None
            link = _QuietLink(home)
            endpoint = SyncEndpoint(home, link)  # type: ignore[arg-type]
            with trio.fail_after(10):  # a bound on the whole test, not a wait for anything
                async with trio.open_nursery() as nursery:
                    await nursery.start(endpoint.serve)
                    assert home.siblings.get(gone) is None
                    assert gone in home.siblings.removed()
                    assert link.admission.forgot == [gone]
                    nursery.cancel_scope.cancel()
        finally:
            laptop.close()


def test_naming_a_device_that_is_not_there_changes_nothing(tmp_path: Path) -> None:
    with paired_siblings(tmp_path) as (phone, _home):
        before = dump(phone)
        with pytest.raises(NotFound):
            account.remove(phone, "tablet")
        with pytest.raises(BadInput):
            account.remove(phone, "  ")
        assert dump(phone) == before


def test_in_sync_among_three_each_pairwise_session_is_one_small_round_trip(
    tmp_path: Path,
) -> None:
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            pair_in_account(phone, laptop)
            for node in (phone, home, laptop):
                say(node, f"from {node.name}", at=1_700_000_000_000_000 + len(node.name))
            for a, b in ((home, phone), (laptop, phone), (laptop, home), (home, phone)):
                sync_in_account(a, b)
            for a, b in ((phone, home), (phone, laptop), (home, laptop)):
                loop, opener, _ = sync(a, b)
                assert opener.stats.in_sync_at_hello
                assert opener.stats.round_trips == 1
                assert loop.bytes_a_to_b <= 512 and loop.bytes_b_to_a <= 512
        finally:
            laptop.close()


async def test_three_peers_distilling_the_same_events_keep_one_note_each(
    tmp_path: Path,
) -> None:
    """Distillation's notes have identities of their own (kind, source), so
    the same events distilled on the phone, the laptop and the Homebase merge
    to one note per identity, whichever peer's version wins."""
    with paired_siblings(tmp_path) as (phone, home):
        laptop = open_laptop(tmp_path)
        try:
            pair_in_account(phone, laptop)
            for i in range(6):
                say(phone, f"I moved to Lyon in spring, message {i}", at=1_700_000_000_000_000 + i)
            for a, b in ((home, phone), (laptop, phone), (laptop, home)):
                sync_in_account(a, b)
            for node in (phone, home, laptop):
                await NotetakingService(
                    node.db, node.notebook, LLMRouter((OfflineDistiller(),))
                ).run_pass()
            for a, b in ((home, phone), (laptop, phone), (laptop, home), (home, phone)):
                sync_in_account(a, b)
            notes = [dump(n)["notes"] for n in (phone, home, laptop)]
            assert notes[0] == notes[1] == notes[2]
            live = [row for row in notes[0] if not row[4]]  # (id, zone, ..., deleted, ...)
            identities = [(row[6], row[7]) for row in live]  # (kind, identity key)
            assert live and len(identities) == len(set(identities))
        finally:
            laptop.close()
