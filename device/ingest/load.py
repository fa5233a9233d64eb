"""Running an importer into the memory log: one durable transaction per
import, streamed in batches, all or nothing.

`load` drains an importer's items into the log inside one write
transaction. Events are written in batches of `BATCH` (so a 1 GB mailbox
never sits in memory whole), contact cards are merged into the contact book
as they come, and skips are counted by reason. Any `BadInput` (or other
error) from the importer or the store rolls the whole import back: nothing
is written, and the error names the file and the record. Events whose id the
log already holds are counted as already present, which is what makes a
second import of the same export, or of one that grew, add only what is new.
An event may also carry the id an earlier version of its importer gave the
same record (``legacy_id``): if the log holds that one, it is present too, so
a data dir filled before an importer's ids changed gets no duplicates.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from pixie.device.ingest.base import Item, Skipped
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import MemoryLog, NewEvent

BATCH = 2048  # events written per batch inside the one transaction
CARDS_REMEMBERED = 4096  # cards an import skips when they come again


@dataclass(slots=True)
class ImportReport:
    """What one import did, for the summary line and ``--json``."""

    imported: int = 0  # events written
    already_present: int = 0  # events whose id the log held before
    new_contacts: int = 0  # contacts created (by cards or by events' names)
    cards: int = 0  # distinct contact cards read
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> how many
    kinds: Counter[str] = field(default_factory=Counter)  # event kind -> how many written

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def load(
    log: MemoryLog,
    items: Iterable[Item],
    *,
    now: int | None = None,
) -> ImportReport:
    """Write every item into ``log`` in one durable transaction; all or nothing.

    ``now`` dates the contacts the import creates and the details it sets
    (the log's clock if not given). Listeners (the text mirror) hear the new
    rows after the commit, in batches.
    """
    if now is None:
        now = log.clock.now_us()
    report = ImportReport()
    with log.db.writing() as session:
        first = log.top_in(session)
        _Writer(log, session, now, report).drain(items)
    log.committed_after(first)
    return report


class _Writer:
    def __init__(self, log: MemoryLog, session: Session, now: int, report: ImportReport) -> None:
        self.log = log
        self.session = session
        self.now = now
        self.report = report
        self.pending: list[NewEvent] = []
        # The cards merged lately (at most `CARDS_REMEMBERED`, oldest forgotten
        # first): mail repeats the same few people, and an address book of
        # 200,000 distinct cards must not be held whole.
        self.cards: OrderedDict[ContactCard, None] = OrderedDict()

    def drain(self, items: Iterable[Item]) -> None:
        for item in items:
            if isinstance(item, NewEvent):
                self.pending.append(item)
                if len(self.pending) >= BATCH:
                    self.flush()
            elif isinstance(item, ContactCard):
                self.card(item)
            elif isinstance(item, Skipped):
                self.report.skipped[item.reason] += 1
            else:  # pragma: no cover - an importer's programming error
                raise TypeError(f"an importer yielded {type(item).__name__}")
        self.flush()

    def card(self, card: ContactCard) -> None:
        # Mail repeats the same few people on every message: a card seen
        # already in this import changes nothing and is not merged again.
        if card in self.cards:
            self.cards.move_to_end(card)
            return
        # Events read before this card are written first, so the card cannot
        # change whom an earlier event's name or address resolves to.
        self.flush()
        self.cards[card] = None
        if len(self.cards) > CARDS_REMEMBERED:
            self.cards.popitem(last=False)
        self.report.cards += 1
        _, created = ContactBook.merge_card_in(self.session, card, self.now)
        self.report.new_contacts += created

    def flush(self) -> None:
        if not self.pending:
            return
        legacy = [e.legacy_id for e in self.pending if e.legacy_id is not None]
        if legacy and (held := self.log.held_in(self.session, legacy)):
            # Imported before under the importer's earlier ids: already present.
            fresh = [e for e in self.pending if e.legacy_id not in held]
            self.report.already_present += len(self.pending) - len(fresh)
            self.pending = fresh
            if not fresh:
                return
        result, rows = self.log.append_in(self.session, self.pending, now=self.now)
        self.report.imported += len(result.ids)
        self.report.already_present += result.skipped
        self.report.new_contacts += result.new_contacts
        self.report.kinds.update(r[4] for r in rows)
        self.pending = []


__all__ = ["BATCH", "ImportReport", "load"]
