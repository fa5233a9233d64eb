"""A person's page carries their contact card's numbers and address, and a
newer number said in a message supersedes the card's."""

from __future__ import annotations

import datetime as dt

from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.node.keyed import Node
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind

T0 = int(dt.datetime(2026, 3, 2, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000
DAY = 86_400_000_000


async def _page_after(node: Node, text: str, at: int, *, from_me: bool = False) -> str:
    """Rosie's page after her message ``text`` (or yours) and a pass."""
    message = NewEvent(
        EventKind.MESSAGE, at, text, from_me=from_me, contact="Rosie Bell", thread="t-r"
    )
    node.log.append([message], now=0)
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    return page.body or ""


async def _with_card(node: Node, card: ContactCard) -> str:
    """Rosie's page from her card and a first exchange."""
    with node.db.writing() as session:
        ContactBook.merge_card_in(session, card, T0)
    node.log.append(
        [NewEvent(EventKind.MESSAGE, T0, "Hiya! Long time", contact="Rosie Bell", thread="t-r")],
        now=0,
    )
    return await _page_after(node, "how are you?", T0 + 60_000_000, from_me=True)


async def test_card_numbers_and_address_reach_the_page_and_a_new_number_wins(node: Node) -> None:
    card = ContactCard(
        "Rosie Bell",
        ("+447700900321",),
        phone="mobile +44 7700 900321",
        address="14 Otley Road, Leeds, LS6 2AL",
    )
    body = await _with_card(node, card)
    assert "- Phone: mobile +44 7700 900321; from your contacts" in body
    assert "- Home: lives at 14 Otley Road, Leeds, LS6 2AL; from your contacts" in body
    new = "New phone, who dis 😂 my new number is 07700 900654, the old one's dead"
    body = await _page_after(node, new, T0 + 5 * DAY)
    assert "- Phone: 07700 900654; as of 7 Mar 2026" in body
    assert "900321" not in body  # one number at a time: the newest


async def test_card_emails_reach_the_page_and_a_new_email_wins(node: Node) -> None:
    card = ContactCard(
        "Rosie Bell",
        ("rosiebell.md@gmail.com", "r.bell@leedsth.nhs.uk", "+447700900321"),
        phone="mobile +44 7700 900321",
    )
    body = await _with_card(node, card)
    # Both addresses, in the book's order; the number is no email.
    assert "- Email: r.bell@leedsth.nhs.uk, rosiebell.md@gmail.com; from your contacts" in body
    new = "Work moved us to a new system, my new email is rosie.bell@nhs.net"
    body = await _page_after(node, new, T0 + 5 * DAY)
    assert "- Email: rosie.bell@nhs.net; as of 7 Mar 2026" in body
    assert "rosiebell.md@gmail.com" not in body  # one at a time: the newest
