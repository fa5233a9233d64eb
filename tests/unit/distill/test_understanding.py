"""What the distiller understands: facts read out of what people say (work,
home, family, birthdays, plans, pets, allergies, likes), the newest of a kind
superseding the older, person pages with their three sections, journals and
calendar entries, post digests that do not repeat the post, near-identical
posts filed as one note, and a model's answer landing in the same places as
the built-in distiller's."""

from __future__ import annotations

import datetime as dt

import pytest

from pixie.device.distill.contract import (
    ME,
    DistillRequest,
    Fact,
    FactKind,
    Line,
    SourceKind,
    make_request,
)
from pixie.device.distill.extract import SECOND_PERSON, card_facts, facts_in
from pixie.device.distill.journal import MAX_WEEK_BODY
from pixie.device.distill.offline import OfflineDistiller, distill
from pixie.device.distill.pages import (
    READ,
    THREADS,
    WHO,
    PersonPage,
    merge_facts,
    parse_person_page,
    render_person_page,
)
from pixie.device.distill.plans import Said, appointment_in, plan_in
from pixie.device.distill.posts import post_gist
from pixie.device.distill.prompt import SchemaViolation, parse_result
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.node.keyed import Node
from pixie.device.notebook.clear import UpsertOutcome
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import ClearNote, NoteKind, kept_up_title

DAY = 86_400_000_000
MINUTE = 60_000_000
T0 = int(dt.datetime(2026, 3, 2, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000  # a Monday


def kinds(facts: list[Fact]) -> list[tuple[str, str]]:
    return [(f.kind.value, f.text) for f in facts]


# -- the extractors, one by one --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("I got head of geography!! Starting in September", "head of geography"),
        ("I've been promoted to senior engineer at last", "senior engineer"),
        ("I'm the new deputy head", "deputy head"),
        ("I got project manager!", "project manager"),
    ],
)
def test_a_new_role_told_as_news(text: str, fact: str) -> None:
    assert kinds(facts_in(text, T0)) == [("role", fact)]


@pytest.mark.parametrize("text", ["I got the bread", "I got a cold", "I got head lice"])
def test_what_is_no_role(text: str) -> None:
    assert facts_in(text, T0) == []


@pytest.mark.parametrize(
    ("text", "kind", "fact"),
    [
        ("I work at Northwind Labs these days", "work", "works at Northwind Labs"),
        ("I work for Acme Corp, on the data team", "work", "works at Acme Corp"),
        ("I'm a nurse at St Mary's Hospital", "work", "works at St Mary's Hospital as a nurse"),
        ("I work as a structural engineer.", "role", "structural engineer"),
        (
            "got my first week at my new job at Helix Bio done",
            "work",
            "works at Helix Bio (new job)",
        ),
        ("I've started job hunting again", "work", "looking for a new job"),
        ("my manager at Helix Bio is great", "work", "works at Helix Bio"),
    ],
)
def test_job_and_employer(text: str, kind: str, fact: str) -> None:
    assert kinds(facts_in(text, T0)) == [(kind, fact)]


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("I live in Lisbon, near the river", "lives in Lisbon"),
        ("We've just moved to Porto!", "lives in Porto (moved)"),
        ("we're moving to a bigger flat in Bordeaux", "moving to Bordeaux"),
        ("my flat in Hackney has heating at last", "lives in Hackney"),
    ],
)
def test_where_they_live(text: str, fact: str) -> None:
    assert kinds(facts_in(text, T0)) == [("home", fact)]


def test_family_birthday_and_pets() -> None:
    said = (
        "my son Leo lost a tooth. my birthday is on the 3rd of August. I have a dog called Biscuit"
    )
    assert kinds(facts_in(said, T0)) == [
        ("family", "son Leo"),
        ("birthday", "3 August"),
        ("pet", "a dog called Biscuit"),
    ]
    assert kinds(facts_in("my twins Jules and Camille have chickenpox", T0)) == [
        ("family", "twins Jules and Camille")
    ]
    # The user about the person they write to.
    assert kinds(
        facts_in("how old is your daughter Ana now? your daughter Ana rocks", T0, SECOND_PERSON)
    ) == [("family", "daughter Ana")]
    assert kinds(facts_in("your new job at Helix Bio sounds great", T0, SECOND_PERSON)) == [
        ("work", "works at Helix Bio (new job)")
    ]


def test_questions_and_loose_phrases_state_nothing_about_the_user() -> None:
    assert facts_in("do you live in Porto?", T0) == []
    assert facts_in("how's the new job at Helix Bio?", T0) == []
    # "the new job at X" said by someone about themselves counts; said by the
    # user it is as likely about someone else, so the user's lines skip it.
    said = "first week at the new job at Helix Bio done"
    assert facts_in(said, T0) == []
    assert kinds(facts_in(said, T0, loose=True)) == [("work", "works at Helix Bio (new job)")]


def test_allergies_diet_and_preferences() -> None:
    said = (
        "Note to self: I'm allergic to peanuts. I'm vegetarian. I love spicy food. "
        "I hate mornings. I love it. I prefer tea to coffee. my favourite band is Radiohead."
    )
    assert kinds(facts_in(said, T0)) == [
        ("allergy", "allergic to peanuts"),
        ("diet", "vegetarian"),
        ("likes", "loves spicy food"),
        ("dislikes", "dislikes mornings"),
        ("likes", "prefers tea to coffee"),
        ("likes", "favourite band: Radiohead"),
    ]


def test_a_plan_gathers_what_when_where_and_time_from_the_exchange() -> None:
    lines = [
        Said(T0, "long run today, legs are dead"),
        Said(T0 + MINUTE, "dinner Friday?"),
        Said(T0 + 2 * MINUTE, "yes! where?"),
        Said(T0 + 3 * MINUTE, "Casa Lisa at 19:30?"),
        Said(T0 + 4 * MINUTE, "perfect, see you there"),
    ]
    plan = plan_in(lines)
    assert plan == Fact(FactKind.PLAN, "dinner Friday at Casa Lisa at 19:30", T0 + 4 * MINUTE)
    assert plan_in([Said(T0, "long run today, 18 km")]) is None  # a day alone arranges nothing


def test_the_newest_fact_of_a_kind_wins_and_others_accumulate() -> None:
    facts = [
        Fact(FactKind.WORK, "works at Helix Bio (new job)", T0 + 90 * DAY),
        Fact(FactKind.WORK, "looking for a new job", T0),
        Fact(FactKind.HOME, "lives in Lisbon", T0),
        Fact(FactKind.HOME, "lives in Porto (moved)", T0 + 30 * DAY),
        Fact(FactKind.FAMILY, "son Leo", T0),
        Fact(FactKind.FAMILY, "daughter Ana", T0 + DAY),
        Fact(FactKind.FAMILY, "Son Leo", T0 + 5 * DAY),  # the same fact, said again later
    ]
    merged = merge_facts(facts)
    assert kinds(merged) == [
        ("work", "works at Helix Bio (new job)"),
        ("home", "lives in Porto (moved)"),
        ("family", "Son Leo"),
        ("family", "daughter Ana"),
    ]
    assert merged[2].at == T0 + 5 * DAY - (T0 + 5 * DAY) % DAY  # dated by its newest day
    # Order does not matter: the merge is a function of the set.
    assert merge_facts(list(reversed(facts))) == merged


def test_contact_card_details_are_facts_from_your_contacts() -> None:
    facts = card_facts([("org", "Helix Bio"), ("title", "Data engineer"), ("birthday", "--08-03")])
    assert kinds(facts) == [
        ("work", "works at Helix Bio"),
        ("role", "Data engineer"),
        ("birthday", "3 August"),
    ]
    assert all(f.at is None for f in facts)
    said = Fact(FactKind.WORK, "looking for a new job", T0)
    assert kinds(merge_facts([*facts, said]))[0] == ("work", "looking for a new job")


def test_a_person_page_reads_back_as_it_was_written() -> None:
    page = PersonPage(
        (
            Fact(FactKind.WORK, "works at Helix Bio", T0 - T0 % DAY),
            Fact(FactKind.BIRTHDAY, "3 August"),
            Fact(FactKind.PLAN, "dinner Friday at Casa Lisa", T0 - T0 % DAY),
        ),
        ("You keep in touch.",),
        ("You asked “how was Lyon?” (2 Mar 2026); no answer yet.",),
    )
    body = render_person_page(page)
    assert body.splitlines() == [
        WHO,
        "- Work: works at Helix Bio; as of 2 Mar 2026",
        "- Birthday: 3 August; from your contacts",
        READ,
        "- You keep in touch.",
        THREADS,
        "- Plan: dinner Friday at Casa Lisa; as of 2 Mar 2026",
        "- You asked “how was Lyon?” (2 Mar 2026); no answer yet.",
    ]
    assert parse_person_page(body) == page
    assert render_person_page(parse_person_page(body)) == body


@pytest.mark.parametrize(
    ("text", "what", "day", "time", "place", "with_"),
    [
        (
            "Dentist check-up\n2026-03-14 10:00–10:45\nLocation: Rua das Flores 12\n"
            "With: Dr. Tomasz Nowak\n\nBring the insurance card",
            "Dentist check-up",
            "2026-03-14",
            "10:00",
            "Rua das Flores 12",
            ("Dr. Tomasz Nowak",),
        ),
        ("Team offsite\n2026-03-14 all day", "Team offsite", "2026-03-14", None, None, ()),
        (
            "Dentist: check-up with Dr. Nowak, Sat 14 Mar 10:00",
            "Dentist: check-up with Dr. Nowak",
            "2026-03-14",
            "10:00",
            None,
            (),
        ),
        ("Haircut, Fri 2 Jan 09:30", "Haircut", "2027-01-02", "09:30", None, ()),  # next year's
    ],
)
def test_appointments_from_calendar_text(
    text: str, what: str, day: str, time: str | None, place: str | None, with_: tuple[str, ...]
) -> None:
    found = appointment_in(text, T0 + 280 * DAY if day.startswith("2027") else T0)
    assert found is not None
    assert (found.what, found.day, found.time, found.place, found.with_) == (
        what,
        day,
        time,
        place,
        with_,
    )
    assert appointment_in("Pay rent", T0) is None


# -- the built-in distiller's answers ----------------------------------------------------


def test_a_post_digest_never_repeats_the_post() -> None:
    text = "Sunset from the Dom Luís I bridge tonight #porto"
    request = make_request(
        SourceKind.POST, "a post by the user", None, (), [Line(T0, ME, True, text, "post")]
    )
    summary = str(distill(request)["summary"])
    assert "Sunset" not in summary and "Dom Luís" not in summary
    assert summary == "You posted on 2 Mar 2026. Tagged #porto. No replies."


def test_a_journal_entry_feeds_about_you_and_a_dated_digest() -> None:
    text = "Long day. I work at Northwind Labs. I'm allergic to peanuts. Made soup."
    request = make_request(
        SourceKind.JOURNAL, "the user's journal", None, (), [Line(T0, ME, True, text, "journal")]
    )
    answer = parse_result(distill(request))
    assert kinds(list(answer.facts)) == [
        ("work", "works at Northwind Labs"),
        ("allergy", "allergic to peanuts"),
    ]
    assert answer.summary.startswith("Journal, Monday 2 March 2026.")
    assert "About you: works at Northwind Labs; allergic to peanuts." in answer.summary
    assert answer.tags[:2] == ("journal", "monday")


def test_an_answer_that_breaks_the_new_fields_is_refused() -> None:
    good = {"summary": "s", "person": None, "facts": [], "tags": []}
    for bad in (
        {**good, "facts": [{"kind": "job", "text": "x", "date": None}]},
        {**good, "person_facts": [{"kind": "work", "text": "x", "date": "2 March"}]},
        {**good, "person_facts": [{"kind": "work", "text": "x", "date": None, "why": 1}]},
        {**good, "open_threads": ["two\nlines"]},
        {
            **good,
            "appointments": [
                {"what": "x", "date": "2026-02-30", "time": None, "place": None, "with": []}
            ],
        },
        {
            **good,
            "appointments": [
                {"what": "x", "date": "2026-03-02", "time": "9am", "place": None, "with": []}
            ],
        },
    ):
        with pytest.raises(SchemaViolation):
            parse_result(bad)


# -- through the service, on a data dir ------------------------------------------------


def message(thread: str, who: str, at: int, text: str, me: bool = False) -> NewEvent:
    return NewEvent(EventKind.MESSAGE, at, text, contact=who, thread=thread, from_me=me)


async def distil(node: Node, *backends: object) -> PassReport:
    router = LLMRouter((*backends, OfflineDistiller()))  # type: ignore[arg-type]
    return await NotetakingService(node.db, node.notebook, router).run_pass()


def page_of(node: Node, name: str) -> ClearNote:
    contact = node.contacts.resolve(name)
    (page,) = [n for n in node.notebook.clear_notes(NoteKind.PERSON) if n.contact_id == contact]
    return page


def priya_life(node: Node) -> None:
    """A thread longer than one request, whose facts are said early on, a
    card with details, a call and a calendar entry."""
    with node.db.writing() as session:
        ContactBook.merge_card_in(
            session, ContactCard("Priya Raman", org="Old Team Ltd", birthday="--08-03"), T0
        )
    early = [
        message("t-priya", "Priya Raman", T0, "I live in Lisbon, in a tiny flat"),
        message("t-priya", "Priya Raman", T0 + MINUTE, "I've started job hunting, wish me luck"),
        message("t-priya", "Priya Raman", T0 + 2 * MINUTE, "my son Leo says hi"),
    ]
    chatter = [
        message("t-priya", "Priya Raman", T0 + DAY + i * MINUTE, f"chatter number {i} about books")
        for i in range(60)
    ]
    later = [
        message("t-priya", "Priya Raman", T0 + 30 * DAY, "we've just moved to Porto!"),
        message("t-priya", "Priya Raman", T0 + 30 * DAY + MINUTE, "welcome! coffee Friday?", True),
        message(
            "t-priya", "Priya Raman", T0 + 30 * DAY + 2 * MINUTE, "yes! Café Majestic at 10:00?"
        ),
    ]
    node.log.append([*early, *chatter, *later], now=0)


async def test_a_person_page_holds_dated_facts_from_the_whole_thread(node: Node) -> None:
    priya_life(node)
    await distil(node)
    body = page_of(node, "Priya Raman").body or ""
    who, rest = body.split(f"\n{READ}\n")
    read, threads = rest.split(f"\n{THREADS}\n")
    assert who.splitlines() == [
        WHO,
        "- Work: looking for a new job; as of 2 Mar 2026",  # newer than the card's employer
        "- Home: lives in Porto (moved); as of 1 Apr 2026",  # supersedes Lisbon
        "- Birthday: 3 August; from your contacts",
        "- Family: son Leo; as of 2 Mar 2026",  # said outside the newest forty messages
        # what she says of herself besides, once however often she says it
        "- Also: chatter number 59 about books; as of 3 Mar 2026",
    ]
    assert read.startswith(
        "- You write often: 40 messages from 3 Mar 2026 to 1 Apr 2026, mostly from them."
    )
    assert threads.splitlines() == [
        "- Plan: coffee Friday at Café Majestic at 10:00; as of 1 Apr 2026",
        "- They asked “Café Majestic at 10:00?” (1 Apr 2026); not answered yet.",
    ]

    # A new job, said on a call, lands on the page and supersedes the job hunt.
    call = "Me: how's it going?\nPriya: I got a new job at Helix Bio, I start Monday!"
    node.log.append(
        [NewEvent(EventKind.CALL, T0 + 40 * DAY, call, contact="Priya Raman", source="call:1")],
        now=0,
    )
    await distil(node)
    body = page_of(node, "Priya Raman").body or ""
    assert "- Work: works at Helix Bio (new job); as of 11 Apr 2026" in body
    assert "job hunting" not in body and "looking for a new job" not in body
    assert f"{READ}\n- You write often: 40 messages" in body  # the call kept the read

    # Idempotent; after the user's edit their words stay exactly as written
    # and later sources go to the page kept up to date beside it.
    assert (await distil(node)).written == 0
    page = page_of(node, "Priya Raman")
    node.notebook.edit(page.id, body="Priya: my own notes.")
    node.log.append(
        [message("t-priya", "Priya Raman", T0 + 50 * DAY, "I live in Paris now")], now=0
    )
    report = await distil(node)
    pages = {n.title: n for n in node.notebook.clear_notes(NoteKind.PERSON)}
    assert pages[page.title].body == "Priya: my own notes." and pages[page.title].user_edited
    beside = pages[kept_up_title(page.title)]
    assert beside.contact_id == page.contact_id and not beside.user_edited
    beside_body = beside.body or ""
    assert "lives in Paris" in beside_body
    assert report.notes[UpsertOutcome.KEPT_USER_EDIT] == 0
    assert (await distil(node)).written == 0


async def test_journal_and_calendar_reach_the_notebook_search(node: Node) -> None:
    node.log.append(
        [
            NewEvent(
                EventKind.JOURNAL,
                T0,
                "Busy week. I work at Northwind Labs. I'm allergic to peanuts.",
                from_me=True,
                source="journal:2026-03-02.md",
            ),
            NewEvent(
                EventKind.CALENDAR,
                T0 + 12 * DAY,
                "Dentist check-up\n2026-03-14 10:00–10:45\nLocation: Rua das Flores 12",
                source="ics:dentist-1",
                thread="cal:dentist-1",
            ),
        ],
        now=0,
    )
    report = await distil(node)
    assert report.as_json()["journals"] == 1 and report.as_json()["calendar"] == 1
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    assert about.body == (
        "- Work: works at Northwind Labs; as of 2 Mar 2026\n"
        "- Allergy: allergic to peanuts; as of 2 Mar 2026"
    )
    view = node.notebook.clear_view()
    (found, *_) = view.search_clear("when is my dentist appointment")
    assert found.note.title == "Dentist check-up — Saturday 14 March 2026, 10:00"
    assert {"appointment", "2026-03-14", "saturday", "march"} <= set(found.note.tags)
    assert "Where: Rua das Flores 12." in (found.note.body or "")
    assert found.note.about_date == T0 + 12 * DAY + MINUTE * 60  # 10:00 that day, UTC
    found_titles = [s.note.title for s in view.search_clear("journal monday")]
    assert found_titles == ["Journal, week of Monday 2 March 2026", "Journal, Monday 2 March 2026"]
    assert (await distil(node)).written == 0


async def test_a_week_of_very_many_entries_stays_within_its_note_and_counts_them(
    node: Node,
) -> None:
    """A prolific week shortens its lines, then leaves out its earliest ones,
    counted, rather than outgrow the Notebook (which would refuse every note of
    the entry that tipped it over)."""
    text = "Wrote a long careful entry about the garden, the allotment and the weather. " * 3
    per_pass = 150
    for part in range(3):
        node.log.append(
            [
                NewEvent(
                    EventKind.JOURNAL,
                    T0 + (part * per_pass + i) * (6 * DAY // (3 * per_pass)),  # Mon to Sun
                    f"{text} Entry {part * per_pass + i}.",
                    from_me=True,
                    source=f"journal:{part}-{i}.md",
                )
                for i in range(per_pass)
            ],
            now=0,
        )
        report = await distil(node)
        assert report.failed == 0
    (week,) = [
        n
        for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)
        if (n.identity_key or "").startswith("journal-week:")
    ]
    body = week.body or ""
    lines = body.splitlines()
    assert len(body) <= MAX_WEEK_BODY
    assert lines[0].endswith(f": {3 * per_pass} entries.")
    listed = [line for line in lines[1:] if line.startswith("- ") and line.endswith("]")]
    (counted,) = [line for line in lines[1:] if line.endswith("not listed")]
    left_out = int(counted.split()[1])
    assert left_out > 0 and left_out + len(listed) == 3 * per_pass
    # The latest days are listed, the earliest left out.
    assert "Entry 449." in body and "Entry 0." not in body
    assert (await distil(node)).written == 0


async def test_journal_entries_of_a_week_share_a_week_note(node: Node) -> None:
    def entry(day: int, text: str) -> NewEvent:
        at = T0 + day * DAY
        return NewEvent(EventKind.JOURNAL, at, text, from_me=True, source=f"journal:{day}.md")

    # Saturday first, then Monday, then the next Monday (another week).
    node.log.append([entry(5, "Hiked the coast with Zoë. I love long walks.")], now=0)
    await distil(node)
    node.log.append(
        [entry(0, "Long day. The sprint review went well."), entry(7, "Rainy. Read all day.")],
        now=0,
    )
    await distil(node)
    weeks = {
        n.identity_key: n
        for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)
        if (n.identity_key or "").startswith("journal-week:")
    }
    assert set(weeks) == {"journal-week:2026-W10", "journal-week:2026-W11"}
    week = weeks["journal-week:2026-W10"]
    assert week.title == "Journal, week of Monday 2 March 2026"
    lines = (week.body or "").splitlines()
    assert lines[0] == "Journal, week of Monday 2 March 2026: 2 entries."
    assert lines[1].startswith("- Monday 2026-03-02: ") and "sprint review" in lines[1]
    assert lines[2].startswith("- Saturday 2026-03-07: Wrote: Hiked the coast with Zoë.")
    assert "About you: loves long walks." in lines[2]
    assert {"journal", "week", "2026-w10", "monday", "saturday", "march", "weekend"} <= set(
        week.tags
    )
    assert week.about_date == T0 - T0 % DAY + 5 * DAY  # its newest day
    (found, *_) = node.notebook.clear_view().search_clear("weekend journal")
    assert found.note.identity_key == "journal-week:2026-W10"
    redo = await NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),))
    ).run_pass(everything=True)
    assert redo.written == 0


async def test_near_identical_posts_are_one_note(node: Node) -> None:
    posts = [
        NewEvent(EventKind.POST, T0 + i * DAY, text, from_me=True, source=f"post:{i}")
        for i, text in enumerate(
            ["Porto rain, day 3", "Sunset from the bridge", "Porto rain, day 5 #porto"]
        )
    ]
    node.log.append(posts, now=0)
    assert (
        post_gist("Porto rain, day 3") == post_gist("porto RAIN day 5 #porto") == "porto rain day"
    )
    await distil(node)
    notes = {n.title: n for n in node.notebook.clear_notes(NoteKind.POST_DIGEST)}
    assert set(notes) == {
        "You, 3 Mar 2026: Sunset from the bridge",
        "You, 4 Mar 2026: Porto rain, day 5 #porto",
    }
    rain = notes["You, 4 Mar 2026: Porto rain, day 5 #porto"]
    assert rain.source_ref == "post:2"  # the newest copy
    assert (
        rain.body == "You posted on 4 Mar 2026. Tagged #porto. No replies.\n"
        "Posted 2 times: 2 Mar 2026 and 4 Mar 2026."
    )
    assert all(n.title not in (n.body or "") for n in notes.values())
    before = sorted((n.id, n.body, n.updated_at) for n in node.notebook.clear_notes())
    redo = await NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),))
    ).run_pass(everything=True)
    assert redo.written == 0
    assert sorted((n.id, n.body, n.updated_at) for n in node.notebook.clear_notes()) == before


class Scripted:
    """A model that answers every request with the same canned JSON."""

    name = "scripted"

    def __init__(self, answer: dict[str, object]) -> None:
        self.answer_json = answer
        self.seen: list[DistillRequest] = []

    async def answer(self, request: DistillRequest) -> object:
        self.seen.append(request)
        return self.answer_json

    async def aclose(self) -> None:
        return None


async def test_a_models_answer_lands_in_the_same_sections_as_the_built_in_one(
    node: Node, tmp_path: object
) -> None:
    priya_life(node)
    model = Scripted(
        {
            "summary": "Priya moved to Porto and we are meeting for coffee.",
            "person": "Close friend; you talk every week, mostly about books.",
            "facts": [{"kind": "hobby", "text": "plays the cello", "date": "2026-03-20"}],
            "tags": ["friends"],
            "person_facts": [
                {"kind": "work", "text": "looking for a new job", "date": "2026-03-02"},
                {"kind": "home", "text": "lives in Porto (moved)", "date": "2026-04-01"},
                {"kind": "family", "text": "son Leo", "date": "2026-03-02"},
                {
                    "kind": "plan",
                    "text": "coffee Friday at Café Majestic at 10:00",
                    "date": "2026-04-01",
                },
            ],
            "open_threads": ["Ask how the job hunt is going."],
            "appointments": [],
        }
    )
    await distil(node, model)
    assert model.seen[0].details == (("org", "Old Team Ltd"), ("birthday", "--08-03"))
    assert any("son Leo" in line.text for line in model.seen[0].earlier)  # older, fact-stating
    by_model = page_of(node, "Priya Raman").body or ""
    assert by_model.splitlines() == [
        WHO,
        "- Work: looking for a new job; as of 2 Mar 2026",
        "- Home: lives in Porto (moved); as of 1 Apr 2026",
        "- Birthday: 3 August; from your contacts",
        "- Family: son Leo; as of 2 Mar 2026",
        READ,
        "- Close friend; you talk every week, mostly about books.",
        THREADS,
        "- Plan: coffee Friday at Café Majestic at 10:00; as of 1 Apr 2026",
        "- Ask how the job hunt is going.",
    ]
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    assert about.body == "- Hobby: plays the cello; as of 20 Mar 2026"

    # The built-in distiller on the same life: the same sections, the same facts.
    from pixie.device.node.keyed import Node as Keyed
    from pixie.device.store.provision import create_data_dir

    other = tmp_path / "offline"  # type: ignore[operator]
    create_data_dir(other, name="offline", role="device")
    with Keyed.open(other) as plain:
        priya_life(plain)
        await distil(plain)
        offline = page_of(plain, "Priya Raman").body or ""
    sections = [WHO, READ, THREADS]
    assert [x for x in offline.splitlines() if x in sections] == sections
    assert [x for x in by_model.splitlines() if x in sections] == sections
    facts = lambda body: body.split(f"\n{READ}\n")[0]  # noqa: E731
    # The same facts, and the built-in distiller keeps her own sentences too.
    pattern_read = [x for x in facts(offline).splitlines() if not x.startswith("- Also: ")]
    assert pattern_read == facts(by_model).splitlines()
    assert "- Also: chatter number 59 about books; as of 3 Mar 2026" in facts(offline)
    assert parse_person_page(offline).facts[-1] == parse_person_page(by_model).facts[-1]  # plan


async def test_a_model_answer_without_a_read_keeps_the_stored_one(node: Node) -> None:
    priya_life(node)
    base = {"summary": "s", "facts": [], "tags": [], "open_threads": []}
    await distil(node, Scripted({**base, "person": "Old friend; weekly calls."}))
    node.log.append(
        [message("t-priya", "Priya Raman", T0 + 60 * DAY, "my daughter Ana starts school")],
        now=0,
    )
    await distil(node, Scripted({**base, "person": None}))
    body = page_of(node, "Priya Raman").body or ""
    assert f"{READ}\n- Old friend; weekly calls.\n{THREADS}" in body
    assert "- Family: daughter Ana; as of" not in body  # a model's facts only, none given
