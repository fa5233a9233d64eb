"""Whose words a fact is: a sentence about a third person is not filed on
its speaker's page, and attachments, media marks and quoted lines are never
read as anything said; and the edges of reading people's words: whose a
dose, a job or a wish is, what is no wish, and numbers told apart."""

from __future__ import annotations

import datetime as dt

import pytest

from pixie.device.distill.contract import (
    ME,
    DistillRequest,
    FactKind,
    Line,
    SourceKind,
    make_request,
)
from pixie.device.distill.extract import facts_in
from pixie.device.distill.offline import OfflineDistiller, distill
from pixie.device.distill.offline_others import _names_in, about_someone_else, others_in
from pixie.device.distill.offline_talk import _numbers_said, without_media
from pixie.device.distill.offline_words import _NUMBERS
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.node.keyed import Node
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind

T0 = int(dt.datetime(2026, 10, 2, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000
MINUTE = 60_000_000
DAY = 86_400_000_000


def _talk(person: str, lines: list[Line]) -> dict[str, object]:
    """The built-in distiller's answer for a one-to-one chat with ``person``."""
    return distill(make_request(SourceKind.CONVERSATION, person, person, [person], lines))


def _journal(entry: str) -> dict[str, object]:
    """The built-in distiller's answer for one journal entry."""
    line = Line(T0, ME, True, entry, "journal")
    return distill(make_request(SourceKind.JOURNAL, "the user's journal", None, (), [line]))


def _chat(*texts: str) -> list[dict[str, object]]:
    """others_in over a chat with Ann, her lines and yours in turn."""
    lines = [
        Line(T0 + i * MINUTE, ME if i % 2 else "Ann", bool(i % 2), text)
        for i, text in enumerate(texts)
    ]
    return others_in(make_request(SourceKind.CONVERSATION, "Ann", "Ann", ["Ann"], lines))


def page_texts(answer: dict[str, object]) -> list[str]:
    facts = answer["person_facts"]
    assert isinstance(facts, list)
    return [str(f["text"]) for f in facts]


@pytest.mark.parametrize(
    ("sentence", "other"),
    [
        ("She kept talking about that teal Le Creuset teapot", True),
        ("He's moving to Bristol in March", True),
        ("Their kitchen is finally finished", True),
        ("Maria's new job starts on Monday", True),
        ("My sister moved her bakery to Braga", False),
        ("Made ramen from scratch, the broth took 12 hours", False),
        ("Conductor wants the cellos louder", False),
        ("It's been a long week at the hospital", False),
    ],
)
def test_a_sentence_about_someone_else(sentence: str, other: bool) -> None:
    assert about_someone_else(sentence) is other


def _tom_on_maria(third: str, mine: str) -> list[Line]:
    """Tom telling of Maria and her teapot, then ``third``, and your answer."""
    return [
        Line(T0, "Tom", False, "Saw Maria at the market yesterday, she looked well."),
        Line(T0 + MINUTE, "Tom", False, "She kept talking about that teal Le Creuset teapot."),
        Line(T0 + 2 * MINUTE, "Tom", False, third),
        Line(T0 + 3 * MINUTE, ME, True, mine),
    ]


def test_what_tom_says_of_maria_is_not_on_toms_page() -> None:
    lines = _tom_on_maria("I finally finished the shed roof this weekend.", "Nice one!")
    answer = _talk("Tom", lines)
    texts = page_texts(answer)
    assert not any("teapot" in t for t in texts)
    assert any("shed roof" in t for t in texts)
    assert "teapot" in str(answer["summary"])  # the digest still holds it


def test_attachments_and_quotes_are_never_facts() -> None:
    lines = [
        Line(T0, "Mum", False, "[attached: 00000012-PHOTO-2026-10-02-09-00-00.jpg]"),
        Line(T0 + MINUTE, "Mum", False, "[media omitted]"),
        Line(T0 + 2 * MINUTE, "Mum", False, "> Dad repainted the whole fence green\nLovely!"),
        Line(T0 + 3 * MINUTE, "Mum", False, "I planted three apple trees in the garden today."),
    ]
    request = make_request(SourceKind.CONVERSATION, "Mum", "Mum", ["Mum"], lines)
    cleaned = without_media(request)
    assert [line.text for line in cleaned.lines] == [
        "Lovely!",
        "I planted three apple trees in the garden today.",
    ]
    texts = page_texts(distill(request))
    assert not any("PHOTO" in t or "jpg" in t or "fence" in t for t in texts)
    assert any("apple trees" in t for t in texts)
    summary = str(distill(request)["summary"])
    assert "jpg" not in summary and "fence" not in summary


def test_a_request_of_media_alone_keeps_one_line() -> None:
    lines = [Line(T0, "Mum", False, "[photo]")]
    request = make_request(SourceKind.CONVERSATION, "Mum", "Mum", ["Mum"], lines)
    assert without_media(request).lines == request.lines[:1]
    distill(request)  # answers without a line to read


def test_a_journal_says_things_about_you() -> None:
    entry = "\n".join(
        [
            "# Finger",
            "Third go on the crimpy blue and something in my left ring finger went with a pop.",
            "- Two weeks completely off the wall.",
            "Where I am: a tiny flat in Headingley, eight years at the hospital now.",
            "My resolution for next year: run the Leeds half marathon in under two hours.",
            "Lovely weather today.",
        ]
    )
    facts = {(f["kind"], f["text"]) for f in _journal(entry)["facts"]}  # type: ignore[union-attr]
    assert (
        "health",
        "Third go on the crimpy blue and something in your left ring finger went with a pop "
        "(injury, your journal)",
    ) in facts
    assert (
        "plan",
        "Your resolution for next year: run the Leeds half marathon in under two hours "
        "(your journal)",
    ) in facts
    assert not any("#" in text or "weather" in text for _, text in facts)


def test_what_tom_says_of_maria_goes_to_marias_page() -> None:
    lines = _tom_on_maria(
        "Priya's moving to Bristol in March for the job.", "Did Tom's sister ever call you back?"
    )
    others = _talk("Tom", lines)["others"]
    assert others == [
        {
            "name": "Maria",
            "kind": "wish",  # a gift idea, filed as one
            "text": "kept talking about that teal Le Creuset teapot (said by Tom)",
            "date": "2026-10-02",
        },
        {
            "name": "Priya",
            "kind": "other",
            "text": "moving to Bristol in March for the job (said by Tom)",
            "date": "2026-10-02",
        },
    ]  # not a question, not about Tom himself


async def test_a_fact_about_a_named_contact_reaches_their_page(node: Node) -> None:
    chat = [
        NewEvent(
            EventKind.MESSAGE,
            T0,
            "Lovely to see you Saturday!",
            contact="Maria Silva",
            thread="t-m",
        ),
        NewEvent(
            EventKind.MESSAGE,
            T0 + MINUTE,
            "You too, come again soon",
            from_me=True,
            contact="Maria Silva",
            thread="t-m",
        ),
        NewEvent(
            EventKind.MESSAGE,
            T0 + DAY,
            "Saw Maria at the market, she looked well.",
            contact="Tom Reid",
            thread="t-t",
        ),
        NewEvent(
            EventKind.MESSAGE,
            T0 + DAY + MINUTE,
            "She kept talking about that teal Le Creuset teapot.",
            contact="Tom Reid",
            thread="t-t",
        ),
    ]
    node.log.append(chat, now=0)
    await NotetakingService(node.db, node.notebook, LLMRouter((OfflineDistiller(),))).run_pass()
    pages = {n.title: n.body or "" for n in node.notebook.clear_notes(NoteKind.PERSON)}
    assert (
        "Gift idea: kept talking about that teal Le Creuset teapot (said by Tom)"
        in pages["Maria Silva"]
    )
    assert "teapot" not in pages["Tom Reid"]
    (maria,) = [n for n in node.notebook.clear_notes(NoteKind.PERSON) if n.title == "Maria Silva"]
    assert {"gift ideas", "presents"} <= set(maria.tags)
    (tom,) = [n for n in node.notebook.clear_notes(NoteKind.PERSON) if n.title == "Tom Reid"]
    assert "gift ideas" not in tom.tags


def test_an_answer_s_pronoun_is_whom_the_question_asked_about() -> None:
    lines = [
        Line(T0, "Chioma", False, "Any ideas for Callum yet? I'm completely stuck on Marcus"),
        Line(
            T0 + MINUTE,
            ME,
            True,
            "He keeps sending me links to that Fellow Stagg pour-over kettle, the matte black one.",
        ),
    ]
    assert _talk("Chioma", lines)["others"] == [
        {
            "name": "Callum",  # not Marcus, named last: the question was about Callum
            "kind": "wish",
            "text": "keeps sending you links to that Fellow Stagg pour-over kettle, "
            "the matte black one (said by you)",
            "date": "2026-10-02",
        }
    ]


def test_a_quoted_wish_in_a_journal_is_the_wish_of_whom_the_sentence_before_was_about() -> None:
    entry = (
        "# 2026-11-08\n\nSunday walk back from Dundas with Claire. She stopped again at the "
        "window of Clayworks Studio and watched someone throwing a bowl on the wheel. "
        '"I\'d love to learn that one day." Third time this fall.'
    )
    answer = _journal(entry)
    others = answer["others"]
    assert isinstance(others, list)
    wishes = [o for o in others if o["kind"] == "wish"]
    assert wishes == [
        {
            "name": "Claire",
            "kind": "wish",
            "text": "would love to learn that one day (stopped again at the window of "
            "Clayworks Studio and watched someone throwing a bowl on the wheel) (said by you)",
            "date": "2026-10-02",
        }
    ]
    # Her words, not the writer's: nothing about the user from the quote.
    facts = answer["facts"]
    assert isinstance(facts, list)
    assert not any("learn" in str(f["text"]) for f in facts)


@pytest.mark.parametrize(
    ("said", "wish"),
    [
        ("I'd love a proper pour-over kettle.", "would love a proper pour-over kettle"),
        ("I've always wanted to learn the cello", "would love to learn the cello"),
        ("I would really love one of those linen aprons!", "would love one of those linen aprons"),
        ("I'd love to catch up soon!", None),
        ("Would love to see you both", None),
        ("I'd love to know what you think?", None),
    ],
)
def test_a_wish_in_someone_s_own_words(said: str, wish: str | None) -> None:
    found = [f.text for f in facts_in(said, None) if f.kind is FactKind.WISH]
    assert found == ([wish] if wish else [])


def test_a_turkish_capital_i_is_told_as_written() -> None:
    _journal("İ. Yılmaz fixed my knee, I walk without pain now.")  # no KeyError: as written


async def test_a_source_the_distiller_breaks_on_fails_alone(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pixie.device.distill.offline as offline

    real = offline._conversation

    def fragile(request: DistillRequest) -> dict[str, object]:
        if any("boom" in line.text for line in request.lines):
            raise KeyError("a bug on an odd message")
        return real(request)

    monkeypatch.setattr(offline, "_conversation", fragile)
    events = [
        NewEvent(EventKind.MESSAGE, T0 + i * MINUTE, text, contact=who, thread=thread)
        for i, (who, thread, text) in enumerate(
            [
                ("Ada", "t-a", "boom goes the message"),
                *[("Bo", f"t-{k}", "hello there, how is the new job going") for k in range(5)],
            ]
        )
    ]
    node.log.append(events, now=0)
    report = await NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),))
    ).run_pass()
    assert report.failed == 1 and report.sources == 5  # the rest were distilled
    titles = {n.title for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)}
    assert "Ada" not in titles and "Bo" in titles


def test_a_health_sentence_says_whether_it_tells_of_an_injury_or_of_symptoms() -> None:
    entry = "\n".join(
        [
            "Third go on the crimpy blue and something in my left ring finger went with a pop.",
            "Third morning this week I woke up with a pounding head and a ringing in my ears.",
            "My new running shoes are great for long runs on the canal path.",
        ]
    )
    answer = _journal(entry)
    facts = {str(f["text"]) for f in answer["facts"]}  # type: ignore[union-attr]
    assert (
        "Third go on the crimpy blue and something in your left ring finger went with a pop "
        "(injury, your journal)"
    ) in facts
    assert (
        "Third morning this week you woke up with a pounding head and a ringing in your ears "
        "(symptoms, your journal)"
    ) in facts
    tags = answer["tags"]
    assert isinstance(tags, list)
    assert {"injury", "symptoms"} <= set(tags)


def test_what_a_sentence_says_of_someone_is_read_for_their_home_and_work() -> None:
    entry = (
        "Last Thursday climbing with Priya at the Depot. She's moving to Bristol next week, "
        "head of chemistry at St Werburgh's. Tom's new job at Helix Bio starts Monday."
    )
    others = _journal(entry)["others"]
    assert isinstance(others, list)
    said = {(o["name"], o["kind"], o["text"]) for o in others}
    assert ("Priya", "home", "moving to Bristol") in said
    assert ("Priya", "work", "works at St Werburgh's as head of chemistry") in said
    assert ("Tom", "work", "works at Helix Bio (new job)") in said
    # The sentence itself stays, as said.
    assert any(n == "Priya" and k == "other" and "moving to Bristol" in t for n, k, t in said)


# -- the edges: whose a dose, a job or a wish is, and numbers told apart ---------------


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
