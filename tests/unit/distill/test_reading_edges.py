"""The edges of reading people's words: whose a dose, a job or a wish is,
what is no wish and no injury, and numbers told apart."""

from __future__ import annotations

import datetime as dt

import pytest

from pixie.device.distill.contract import ME, FactKind, Line, SourceKind, make_request
from pixie.device.distill.extract import facts_in
from pixie.device.distill.llm import LLMRouter
from pixie.device.distill.offline import (
    _NUMBERS,
    OfflineDistiller,
    _names_in,
    _numbers_said,
    distill,
    others_in,
)
from pixie.device.distill.service import NotetakingService
from pixie.device.node.keyed import Node
from pixie.device.store.contacts import ContactBook, ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind

T0 = int(dt.datetime(2026, 10, 2, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000
MINUTE = 60_000_000


def _chat(*texts: str) -> list[dict[str, object]]:
    """others_in over a chat with Ann, her lines and yours in turn."""
    lines = [
        Line(T0 + i * MINUTE, ME if i % 2 else "Ann", bool(i % 2), text)
        for i, text in enumerate(texts)
    ]
    return others_in(make_request(SourceKind.CONVERSATION, "Ann", "Ann", ["Ann"], lines))


def _journal(entry: str) -> dict[str, object]:
    line = Line(T0, ME, True, entry, "journal")
    return distill(make_request(SourceKind.JOURNAL, "the user's journal", None, (), [line]))


def test_a_turkish_capital_i_in_a_line_about_someone_is_read_not_a_crash() -> None:
    said = _chat("Did you see Tom?", "He told İ and Deniz about the new flat")
    assert said and said[0]["name"] == "Tom"
    _journal("Coffee with Tom. He sent İ. Yılmaz the scans of my knee.")  # no KeyError


@pytest.mark.parametrize(
    "entry",
    [
        "Baked the cake and added 5 ml vanilla extract to the icing.",
        "The baby drank 120 ml of formula before bed.",
        "Mum takes 5 mg of amlodipine every morning now.",
    ],
)
def test_an_amount_or_someone_else_s_dose_is_no_medication_of_yours(entry: str) -> None:
    facts = _journal(entry)["facts"]
    assert isinstance(facts, list)
    assert not any("medication" in str(f["text"]) for f in facts)


def test_a_dose_your_doctor_changed_is_yours() -> None:
    facts = _journal("She increased amlodipine to 10 mg every morning.")["facts"]
    assert isinstance(facts, list)
    assert [f["text"] for f in facts] == [
        "She increased amlodipine to 10 mg every morning (medication, your journal)"
    ]


def test_your_own_job_is_not_filed_under_whom_the_sentence_is_about() -> None:
    said = _chat("Saw Tom today at the station", "He knows I work at Google now.")
    assert [(s["name"], s["kind"]) for s in said] == [("Tom", "other")]


@pytest.mark.parametrize(
    ("line", "wish"),
    [
        ("She kept talking about that teal teapot", True),
        ("He keeps sending me links to that kettle", True),
        ("She's been eyeing the red Dutch oven at Heals", True),
        ("He kept mentioning the divorce", False),
        ("He keeps texting me about the broken boiler", False),
        ("She'd love a lift to the station tomorrow", False),
    ],
)
def test_what_is_a_wish(line: str, wish: bool) -> None:
    said = _chat("Did you see Maria?", line)
    assert said, line
    assert (said[0]["kind"] == "wish") is wish
    assert "is been" not in str(said[0]["text"])  # "She's been": she has been


def test_every_word_of_a_place_after_the_is_no_name() -> None:
    assert _names_in("Dinner at the Blue Door with Sam") == ["Sam"]
    assert _names_in("Pints at the Red Lion Inn, then Maria Silva came") == ["Maria Silva"]


def test_numbers_are_told_apart_and_a_call_s_turns_keep_their_speaker() -> None:
    lines = [
        Line(T0, "Ann", False, "It was £15 for the tickets and £150 for the hotel"),
        Line(
            T0 + MINUTE,
            "Ann",
            False,
            "Ann: call me on 07700 900318\nMe: mine is 07700 900999",
            "call",
        ),
    ]
    numbers = _numbers_said(lines, "", T0 + MINUTE, _NUMBERS)
    assert any(n.startswith("£15 ") for n in numbers)
    assert any(n.startswith("£150 ") for n in numbers)
    assert any(n.startswith("07700 900999 (you,") for n in numbers)
    assert any(n.startswith("07700 900318 (Ann,") for n in numbers)


async def test_a_handle_is_no_email_on_a_page(node: Node) -> None:
    card = ContactCard("Bob Stone", ("@bobby", "bob@example.org"), phone="mobile 07700 900111")
    with node.db.writing() as session:
        ContactBook.merge_card_in(session, card, T0)
    node.log.append(
        [
            NewEvent(EventKind.MESSAGE, T0, "Long time! How's the new flat?", contact="Bob Stone"),
            NewEvent(EventKind.MESSAGE, T0 + MINUTE, "All good", from_me=True, contact="Bob Stone"),
        ],
        now=0,
    )
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    assert "- Email: bob@example.org; from your contacts" in (page.body or "")
    assert "@bobby" not in (page.body or "")


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        (
            "Wanted you to hear it from me first: I've accepted a job at Hartley's, "
            "an independent pharmacy in Chorlton.",
            "works at Hartley's (new job)",
        ),
        ("I have taken the post with NHS Digital", "works at NHS Digital (new job)"),
        ("I've been offered a job at Boots", None),  # offered is not taken
    ],
)
def test_a_job_taken_is_where_you_work(said: str, fact: str | None) -> None:
    found = [f.text for f in facts_in(said, None) if f.kind is FactKind.WORK]
    assert found == ([fact] if fact else [])
