"""A person's page carries their contact card's numbers and address, and a
newer number said in a message supersedes the card's."""

from __future__ import annotations

import datetime as dt

from pixie.device.distill.llm import LLMRouter
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.service import NotetakingService
from pixie.device.node.keyed import Node
from pixie.device.store.contacts import ContactBook, ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind

T0 = int(dt.datetime(2026, 3, 2, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000
DAY = 86_400_000_000


async def test_card_numbers_and_address_reach_the_page_and_a_new_number_wins(node: Node) -> None:
    card = ContactCard(
        "Rosie Bell",
        ("+447700900321",),
        phone="mobile +44 7700 900321",
        address="14 Otley Road, Leeds, LS6 2AL",
    )
    with node.db.writing() as session:
        ContactBook.merge_card_in(session, card, T0)
    chat = [
        NewEvent(EventKind.MESSAGE, T0, "Hiya! Long time", contact="Rosie Bell", thread="t-r"),
        NewEvent(
            EventKind.MESSAGE,
            T0 + 60_000_000,
            "how are you?",
            from_me=True,
            thread="t-r",
            contact="Rosie Bell",
        ),
    ]
    node.log.append(chat, now=0)
    router = LLMRouter((OfflineDistiller(),))
    await NotetakingService(node.db, node.notebook, router).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    body = page.body or ""
    assert "- Phone: mobile +44 7700 900321; from your contacts" in body
    assert "- Home: lives at 14 Otley Road, Leeds, LS6 2AL; from your contacts" in body
    new = "New phone, who dis 😂 my new number is 07700 900654, the old one's dead"
    node.log.append(
        [NewEvent(EventKind.MESSAGE, T0 + 5 * DAY, new, contact="Rosie Bell", thread="t-r")],
        now=0,
    )
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    body = page.body or ""
    assert "- Phone: 07700 900654; as of 7 Mar 2026" in body
    assert "900321" not in body  # one number at a time: the newest


async def test_card_emails_reach_the_page_and_a_new_email_wins(node: Node) -> None:
    card = ContactCard(
        "Rosie Bell",
        ("rosiebell.md@gmail.com", "r.bell@leedsth.nhs.uk", "+447700900321"),
        phone="mobile +44 7700 900321",
    )
    with node.db.writing() as session:
        ContactBook.merge_card_in(session, card, T0)
    chat = [
        NewEvent(EventKind.MESSAGE, T0, "Hiya! Long time", contact="Rosie Bell", thread="t-r"),
        NewEvent(
            EventKind.MESSAGE, T0 + 60_000_000, "how are you?", from_me=True, contact="Rosie Bell"
        ),
    ]
    node.log.append(chat, now=0)
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    body = page.body or ""
    # Both addresses, in the book's order; the number is no email.
    assert "- Email: r.bell@leedsth.nhs.uk, rosiebell.md@gmail.com; from your contacts" in body
    new = "Work moved us to a new system, my new email is rosie.bell@nhs.net"
    node.log.append(
        [NewEvent(EventKind.MESSAGE, T0 + 5 * DAY, new, contact="Rosie Bell", thread="t-r")],
        now=0,
    )
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    body = page.body or ""
    assert "- Email: rosie.bell@nhs.net; as of 7 Mar 2026" in body
    assert "rosiebell.md@gmail.com" not in body  # one at a time: the newest
