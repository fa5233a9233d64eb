"""Loading an importer's items into the log: one transaction, streamed in
batches, all or nothing; cards merged as they come; skips counted by reason;
listeners told after the commit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest import load as loading
from pixie.device.ingest.base import Item, Skipped, stable_id
from pixie.device.node.keyed import Node
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent, Row

T0 = 1_741_986_300_000_000  # 2025-03-14T21:05:00Z


def message(i: int, contact: str | None = None) -> NewEvent:
    at = T0 + i * 1_000_000
    return NewEvent(
        kind=EventKind.MESSAGE,
        at=at,
        text=f"message {i}",
        contact=contact,
        id=stable_id("test", i, at_us=at),
    )


def items(count: int, *, fail_at: int | None = None) -> Iterator[Item]:
    yield ContactCard("Priya Raman", aliases=("priya@helix.example",))
    for i in range(count):
        if i == fail_at:
            raise BadInput(f"life.txt, line {i + 1}: broken")
        if i % 1000 == 7:
            yield Skipped("system message")
        yield message(i, "priya@helix.example")


def test_a_long_import_is_written_in_batches_in_one_transaction(node: Node) -> None:
    count = loading.BATCH * 2 + 5
    heard: list[int] = []

    def listener(rows: Sequence[Row]) -> None:
        heard.extend(r[0] for r in rows)

    node.log.subscribe(listener)
    report = loading.load(node.log, items(count))
    assert (report.imported, report.already_present, report.cards) == (count, 0, 1)
    assert report.new_contacts == 1
    assert report.skipped == {"system message": len(range(7, count, 1000))}
    assert report.kinds == {"message": count}
    assert node.log.count() == count
    # every row reached the listener once, in order, after the commit
    assert heard == list(range(1, count + 1))
    # the events name an address; they resolve to the card's contact
    (priya,) = node.contacts.all()
    assert priya.name == "Priya Raman"
    assert {r.contact_id for r in node.log.all_records()} == {priya.id}


def test_a_second_load_adds_only_what_is_new(node: Node) -> None:
    loading.load(node.log, items(300))
    report = loading.load(node.log, items(350))
    assert (report.imported, report.already_present, report.new_contacts) == (50, 300, 0)
    assert node.log.count() == 350


def test_an_error_after_several_batches_writes_nothing(node: Node) -> None:
    before = node.log.count()
    digest = node.digest()
    with pytest.raises(BadInput, match="line 5001: broken"):
        loading.load(node.log, items(6000, fail_at=5000))
    assert node.log.count() == before
    assert node.contacts.all() == []  # the card merged before the failure is gone too
    assert node.digest() == digest


def test_a_card_seen_again_is_not_merged_again(node: Node) -> None:
    card = ContactCard("Ana", aliases=("ana@example.org",))
    stream: list[Item] = [card, message(1, "ana@example.org"), card, message(2, "Ana")]
    report = loading.load(node.log, stream)
    assert (report.cards, report.new_contacts, report.imported) == (1, 1, 2)
    (ana,) = node.contacts.all()
    assert set(ana.aliases) >= {"ana@example.org"}


def test_stable_ids_never_change_between_releases() -> None:
    # An id minted by an earlier release must come out the same forever, or a
    # re-import after an upgrade would double every event: pinned here.
    assert stable_id("mbox", "<a@b>", at_us=1_700_000_000_000_000) == (
        "018bcfe5-6800-86fc-9dd3-284da4cb84ca"
    )
    # a version 8 UUID, variant 10, led by the event's millisecond
    other = stable_id("whatsapp", "Priya", T0, None, "ok", 1, at_us=T0)
    assert other[14] == "8" and other[19] in "89ab"
    assert int(other.replace("-", "")[:12], 16) == T0 // 1000
    assert other != stable_id("whatsapp", "Priya", T0, None, "ok", 2, at_us=T0)
