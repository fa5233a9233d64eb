"""check_notebook, grep_memory in the tool shape, and the guards every call passes.

`CheckNotebookTool` is checked for what the model reads (labels by kind, the
person filter, the days_back window, the exact answer for an unknown person)
and for what it refuses. `ToolBox` with `TurnGuards` is checked with a fake
tool that counts its calls, so "not run again" is observed, not inferred.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.device.agent.grep import EMPTY_MEMORY, MAX_QUERY_CHARS, GrepMemoryTool
from pixie.device.agent.limits import MAX_DAYS_BACK
from pixie.device.agent.tools import (
    DEFAULT_BUDGETS,
    CheckNotebookTool,
    GrepMemory,
    ToolBox,
    ToolEvent,
    TurnGuards,
)
from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from pixie.protocol.timestamps import now_us

DAY_US = 86_400_000_000


@dataclass
class Book:
    """A small Notebook with one note of every kind, and a tool over it."""

    node: Node
    tool: CheckNotebookTool
    now: int
    ada: str
    priya: str
    zoe: str


@pytest.fixture
def book(node: Node) -> Book:
    start = now_us()
    ada, _ = node.contacts.add("Ada Lovelace", ["Countess"], now=0)
    priya, _ = node.contacts.add("Priya Raman", [], now=0)
    zoe, _ = node.contacts.add("Zoë Martin", [], now=0)
    node.contacts.add("Jimmy Page", [], now=0)
    node.contacts.add("Jimmy Carter", [], now=0)
    nb = node.notebook
    nb.upsert_clear(
        Distilled(
            NoteKind.PERSON, ada, "Ada Lovelace", "Runs marathons. Loves Lyon.", ada, ("sport",)
        )
    )
    nb.upsert_clear(
        Distilled(
            NoteKind.CONVERSATION_DIGEST,
            "thread:lyon",
            "Lyon trip planning",
            "Ada and you settled on Lyon in May.",
            ada,
            ("travel",),
            about_date=start - 2 * DAY_US,
        )
    )
    nb.upsert_clear(
        Distilled(
            NoteKind.POST_DIGEST,
            "post:1",
            "Marathon photos",
            "Priya posted her finish line photos.",
            priya,
            ("sport",),
            about_date=start - 40 * DAY_US,
        )
    )
    nb.upsert_clear(
        Distilled(
            NoteKind.CALL_DIGEST,
            "call:1",
            "Call with Priya",
            "Talked about the new job.",
            priya,
            ("work",),
            about_date=start - 10 * DAY_US,
        )
    )
    nb.add_user_note(NoteKind.ABOUT_YOU, "About me", "Vegetarian; lives in Porto.")
    nb.add_user_note(NoteKind.GUIDANCE, "Be brief", "Keep answers short.", ["style"])
    event = node.log.append(
        [NewEvent(EventKind.MESSAGE, start, "Zoë's birthday is on 3 May", contact="Zoë Martin")],
        now=start,
    ).ids[0]
    nb.pin_spark(event, ["family"])
    now = now_us()
    tool = CheckNotebookTool(nb.clear_view(), node.contacts, now=lambda: now)
    return Book(node, tool, now, ada, priya, zoe)


def labels(answer: str) -> list[str]:
    """The label of each numbered result line, without the date and tags."""
    line = re.compile(r"^\d+\. (.*) \(\d{4}-\d\d-\d\d(?:; tags: [^)]*)?\)$", re.M)
    return [m[1] for m in line.finditer(answer)]


ALL_LABELS = {
    "Person · Ada Lovelace",
    "Conversation · Lyon trip planning",
    "Post · Marathon photos",
    "Call · Call with Priya",
    "About you",
    "Guidance · Be brief",
    "Sparked by the user (remember this) · Zoë's birthday is on 3 May",
}


# -- check_notebook ---------------------------------------------------------------


def test_every_kind_is_labelled(book: Book) -> None:
    answer = book.tool.call({})
    assert answer.splitlines()[0] == "7 notes:"
    assert set(labels(answer)) == ALL_LABELS
    assert len(labels(answer)) == 7
    # dates and tags ride along; bodies follow on an indented line
    assert "Person · Ada Lovelace (" in answer and "; tags: sport)" in answer
    assert "\n   Runs marathons. Loves Lyon." in answer


def test_a_query_ranks_title_over_tags_over_body(book: Book) -> None:
    answer = book.tool.call({"query": "lyon"})
    assert answer.splitlines()[0] == '2 notes matching "lyon":'
    assert labels(answer) == ["Conversation · Lyon trip planning", "Person · Ada Lovelace"]
    assert book.tool.call({"query": "  sport  "}).splitlines()[0] == ('2 notes matching "sport":')


@pytest.mark.parametrize(
    "person",
    [
        "Ada Lovelace",
        "ada lovelace",
        "  ADA   Lovelace ",
        "Countess",
        "countess",
        "Ada",  # the only contact whose first name is Ada
        "aDa",
        "Lovelace",  # the only contact whose name holds Lovelace
        "Dr. Lovelace",  # titles are left out
        "Mrs Ada Lovelace",
    ],
)
def test_person_resolves_by_name_alias_or_unique_first_name(book: Book, person: str) -> None:
    answer = book.tool.call({"person": person})
    # an empty query lists the person's own page first, then the rest newest
    # first (the digest was written after the page)
    assert labels(answer) == ["Person · Ada Lovelace", "Conversation · Lyon trip planning"]
    assert answer.splitlines()[0].endswith(f" about {person.strip()}:")


def test_person_filter_combines_with_query_and_topic(book: Book) -> None:
    assert labels(book.tool.call({"person": "Priya", "query": "photos"})) == [
        "Post · Marathon photos"
    ]
    assert labels(book.tool.call({"person": "priya raman", "topic": "WORK"})) == [
        "Call · Call with Priya"
    ]
    assert labels(book.tool.call({"person": "Zoë"})) == [
        "Sparked by the user (remember this) · Zoë's birthday is on 3 May"
    ]


@pytest.mark.parametrize(
    "person", ["Bob", "  Bob ", "Jimmy", "Ada Byron", "Zoe", "Dr.", "Ada Martin"]
)
def test_unresolved_person_gets_the_exact_answer(book: Book, person: str) -> None:
    # "Jimmy" names two contacts, so it resolves to neither; "Zoe" is not "Zoë";
    # a title alone names nobody; no one name holds both "Ada" and "Martin".
    assert book.tool.call({"person": person, "query": "anything"}) == (
        f'No notes are filed under that person ("{person.strip()}").'
    )


def test_a_unique_surname_with_or_without_a_title_resolves(book: Book) -> None:
    assert book.tool.call({"person": "Mr Page"}) == "No notes in the Notebook about Mr Page."
    assert labels(book.tool.call({"person": "Raman"})) == [
        "Call · Call with Priya",
        "Post · Marathon photos",
    ]


def test_a_name_only_a_person_page_is_tagged_with_resolves_to_that_page(book: Book) -> None:
    # A name the log gives someone (see distill.service.alias_tags) is a tag
    # of their page; the contact book does not know it.
    book.node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, book.priya, "Priya Raman", "Who they are", book.priya, ("dr p",))
    )
    assert labels(book.tool.call({"person": "Dr. P"}))[0] == "Person · Priya Raman"
    # The same tag on two people's pages names neither.
    book.node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, book.zoe, "Zoë Martin", "Who they are", book.zoe, ("dr p",))
    )
    assert book.tool.call({"person": "Dr P"}) == 'No notes are filed under that person ("Dr P").'


def test_a_known_person_without_notes_is_not_the_unknown_answer(book: Book) -> None:
    assert book.tool.call({"person": "Jimmy Page"}) == (
        "No notes in the Notebook about Jimmy Page."
    )


def test_days_back_window_uses_the_injected_now(book: Book) -> None:
    recent = labels(book.tool.call({"days_back": 5}))
    assert set(recent) == ALL_LABELS - {"Post · Marathon photos", "Call · Call with Priya"}
    assert set(labels(book.tool.call({"days_back": 11}))) == ALL_LABELS - {"Post · Marathon photos"}
    assert set(labels(book.tool.call({"days_back": MAX_DAYS_BACK}))) == ALL_LABELS
    answer = book.tool.call({"days_back": 1, "person": "Ada"})
    assert labels(answer) == ["Person · Ada Lovelace"]
    assert answer.splitlines()[0] == "1 note about Ada from the last day:"
    # the same window seen from 30 days later holds nothing
    later = CheckNotebookTool(
        book.node.notebook.clear_view(), book.node.contacts, now=lambda: book.now + 30 * DAY_US
    )
    assert later.call({"days_back": 5}) == ("No notes in the Notebook from the last 5 days.")


def test_days_ahead_finds_what_is_coming(book: Book) -> None:
    nb = book.node.notebook
    for days, title in ((3, "Dentist check-up"), (10, "Flight to Lisbon"), (40, "Wedding")):
        nb.upsert_clear(
            Distilled(
                NoteKind.CONVERSATION_DIGEST,
                f"cal:{days}",
                title,
                "Appointment.",
                about_date=book.now + days * DAY_US,
            )
        )
    week = set(labels(book.tool.call({"days_ahead": 7})))
    assert "Conversation · Dentist check-up" in week
    assert not week & {"Conversation · Flight to Lisbon", "Conversation · Wedding"}
    assert book.tool.call({"days_ahead": 7}).splitlines()[0].endswith(" in the next 7 days:")
    fortnight = set(labels(book.tool.call({"days_ahead": 14})))
    assert {"Conversation · Flight to Lisbon", "Conversation · Dentist check-up"} <= fortnight
    assert "Conversation · Wedding" not in fortnight
    # Both windows together: from N days back to M days ahead.
    both = set(labels(book.tool.call({"days_back": 5, "days_ahead": 7})))
    assert "Conversation · Dentist check-up" in both and "Conversation · Wedding" not in both


def test_days_ahead_reads_appointments_on_the_wall_clock(
    book: Book, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20:00 in New York is 01:00 UTC the next day; an appointment at 21:30
    # that evening is kept as 21:30 on its own day. It is still ahead.
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        evening = int(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC).timestamp()) * 1_000_000
        wall = int(dt.datetime(2026, 11, 29, 21, 30, tzinfo=dt.UTC).timestamp()) * 1_000_000
        book.node.notebook.upsert_clear(
            Distilled(
                NoteKind.CONVERSATION_DIGEST, "cal:x", "Book club", "At Ada's.", about_date=wall
            )
        )
        view = book.node.notebook.clear_view()
        tool = CheckNotebookTool(view, book.node.contacts, now=lambda: evening)
        assert "Conversation · Book club" in labels(tool.call({"days_ahead": 1}))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_long_bodies_are_clipped_and_offloaded_ones_say_so(book: Book) -> None:
    nb = book.node.notebook
    words = " ".join(f"word{i}\n" for i in range(200))
    nb.upsert_clear(Distilled(NoteKind.CALL_DIGEST, "call:long", "Long call", words))
    answer = book.tool.call({"query": "long call"})
    body = answer.splitlines()[2].removeprefix("   ")
    assert len(body) == 600 and body.endswith("…")
    assert body[:-1] == " ".join(words.split())[:599]
    offloaded = nb.upsert_clear(
        Distilled(NoteKind.POST_DIGEST, "post:old", "Old holiday post", "Beach.")
    ).note_id
    with book.node.db.writing() as session:  # what offloading leaves behind
        session.connection().exec_driver_sql(
            "UPDATE note SET body = NULL, holder = ? WHERE id = ?", ("ab" * 32, offloaded)
        )
    answer = book.tool.call({"query": "holiday"})
    assert labels(answer) == ["Post · Old holiday post"]
    assert answer.splitlines()[2:] == ["   Offloaded — opens from your Homebase."]


def test_at_most_eight_notes_come_back(book: Book) -> None:
    for i in range(12):
        book.node.notebook.upsert_clear(
            Distilled(NoteKind.POST_DIGEST, f"post:{i}", f"Climbing day {i}", "Climbing.")
        )
    answer = book.tool.call({"query": "climbing"})
    assert answer.splitlines()[0] == '8 notes matching "climbing":'
    assert labels(answer) == [f"Post · Climbing day {i}" for i in range(11, 3, -1)]


def test_blank_strings_mean_no_filter(book: Book) -> None:
    assert book.tool.call({"query": "  ", "person": "", "topic": " "}) == book.tool.call({})
    assert book.tool.call({"query": None, "days_back": None}) == book.tool.call({})


@pytest.mark.parametrize(
    "arguments",
    [
        {"bogus": 1},
        {"query": "x", "limit": 3},
        {"query": 5},
        {"query": ["lyon"]},
        {"person": 3},
        {"person": {"name": "Ada"}},
        {"topic": True},
        {"days_back": 0},
        {"days_back": -1},
        {"days_back": True},
        {"days_back": False},
        {"days_back": 1.0},
        {"days_back": "3"},
        {"days_back": MAX_DAYS_BACK + 1},
        {"days_back": 10**100},
        {"days_ahead": 0},
        {"days_ahead": "7"},
        {"days_ahead": MAX_DAYS_BACK + 1},
        {"query": "x" * (MAX_QUERY_CHARS + 1)},
        {"person": "A" * 201},
        {"topic": "t" * 41},
        {"person": "Ada\x07"},
    ],
)
def test_bad_arguments_raise_bad_input(book: Book, arguments: dict[str, Any]) -> None:
    with pytest.raises(BadInput):
        book.tool.call(arguments)


@pytest.mark.parametrize("arguments", [None, "lyon", ["lyon"], 3])
def test_arguments_must_be_an_object(book: Book, arguments: Any) -> None:
    with pytest.raises(BadInput):
        book.tool.call(arguments)


@pytest.mark.parametrize(
    ("at_limit", "past_it"),
    [
        ({"query": "x" * MAX_QUERY_CHARS}, {"query": "x" * (MAX_QUERY_CHARS + 1)}),
        ({"days_back": 1}, {"days_back": 0}),
        ({"days_back": MAX_DAYS_BACK}, {"days_back": MAX_DAYS_BACK + 1}),
        ({"topic": "t" * 40}, {"topic": "t" * 41}),
        ({"person": "A" * 200}, {"person": "A" * 201}),
    ],
)
def test_limits_are_inclusive(
    book: Book, at_limit: dict[str, Any], past_it: dict[str, Any]
) -> None:
    """A value at a limit is answered (with words for the model); one past it is refused."""
    answer = book.tool.call(at_limit)
    assert isinstance(answer, str) and answer.strip()
    with pytest.raises(BadInput):
        book.tool.call(past_it)


# -- ToolBox and TurnGuards with a fake tool ----------------------------------------


class FakeTool:
    description = "A tool that counts its calls."
    pill = "Did the fake thing"
    repeat_refusal = "You already did that fake thing."

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "additionalProperties": False,
        }
        self.calls: list[dict[str, Any]] = []

    def call(self, arguments: Mapping[str, Any]) -> str:
        self.calls.append(dict(arguments))
        if arguments.get("bad"):
            raise BadInput("that is not how to call me")
        return f"{self.name} answer {len(self.calls)}"


def fake_box(budget: int = 10, **budgets: int) -> tuple[ToolBox, FakeTool, list[ToolEvent]]:
    tool = FakeTool()
    events: list[ToolEvent] = []
    box = ToolBox([tool], guards=TurnGuards({"fake": budget, **budgets}), on_call=events.append)
    return box, tool, events


@pytest.mark.parametrize(
    "again",
    [
        {"q": "Ada Lovelace"},
        {"q": "ada lovelace"},
        {"q": "  ADA   LOVELACE\t"},
        {"q": "Ada\nLovelace"},
        {"q": "Ada Lovelace", "person": None},
        {"q": "Ada Lovelace", "topic": ""},
    ],
)
def test_an_identical_repeat_is_refused_and_not_run(again: dict[str, Any]) -> None:
    box, tool, events = fake_box()
    first = box.call("fake", {"q": "Ada Lovelace"})
    assert (first.text, first.stop_turn) == ("fake answer 1", False)
    reply = box.call("fake", again)
    assert (reply.text, reply.stop_turn) == (FakeTool.repeat_refusal, False)
    assert len(tool.calls) == 1
    assert [e.outcome for e in events] == ["ran", "refused_repeat"]


def test_key_order_does_not_make_a_new_call() -> None:
    box, tool, _ = fake_box()
    box.call("fake", {"q": "x", "n": 1})
    assert box.call("fake", {"n": 1, "q": "x"}).text == FakeTool.repeat_refusal
    assert len(tool.calls) == 1


@pytest.mark.parametrize(
    "other",
    [{"q": "Ada Lovelac"}, {"q": "AdaLovelace"}, {"q": "Ada Lovelace", "n": 1}, {}],
)
def test_a_different_call_runs(other: dict[str, Any]) -> None:
    box, tool, _ = fake_box()
    box.call("fake", {"q": "Ada Lovelace"})
    assert box.call("fake", other).text == "fake answer 2"
    assert len(tool.calls) == 2


def test_budget_spent_stops_the_turn_and_new_turn_resets() -> None:
    box, tool, events = fake_box(budget=2)
    assert not box.call("fake", {"q": "a"}).stop_turn
    assert box.call("fake", {"q": "a"}).text == FakeTool.repeat_refusal  # refused: costs nothing
    assert not box.call("fake", {"q": "b"}).stop_turn
    for args in ({"q": "c"}, {"q": "a"}, {"q": "d"}):
        reply = box.call("fake", args)
        assert reply.stop_turn
        assert "budget" in reply.text
    assert len(tool.calls) == 2
    assert [e.outcome for e in events] == [
        "ran",
        "refused_repeat",
        "ran",
        "budget_spent",
        "budget_spent",
        "budget_spent",
    ]
    box.new_turn()
    reply = box.call("fake", {"q": "a"})  # the same call is fresh in a new turn
    assert (reply.text, reply.stop_turn) == ("fake answer 3", False)
    assert len(tool.calls) == 3


def test_budgets_are_per_tool_and_default_to_one() -> None:
    one, two = FakeTool("one"), FakeTool("two")
    box = ToolBox([one, two], guards=TurnGuards({"one": 3}))
    for q in "abc":
        assert not box.call("one", {"q": q}).stop_turn
    assert box.call("one", {"q": "d"}).stop_turn
    assert not box.call("two", {"q": "a"}).stop_turn  # not in the budgets: one call
    assert box.call("two", {"q": "b"}).stop_turn
    assert (len(one.calls), len(two.calls)) == (3, 1)
    assert dict(DEFAULT_BUDGETS) == {"check_notebook": 4, "grep_memory": 3}


def test_without_guards_repeats_run_and_nothing_stops() -> None:
    tool = FakeTool()
    events: list[ToolEvent] = []
    box = ToolBox([tool], guards=None, on_call=events.append)
    for i in range(25):
        reply = box.call("fake", {"q": "same"})
        assert (reply.text, reply.stop_turn) == (f"fake answer {i + 1}", False)
    box.new_turn()  # harmless without guards
    assert len(tool.calls) == 25
    assert [e.outcome for e in events] == ["ran"] * 25


def test_bad_arguments_come_back_as_text_and_fire_the_hook() -> None:
    box, tool, events = fake_box()
    reply = box.call("fake", {"bad": True})
    assert (reply.text, reply.stop_turn) == ("fake: that is not how to call me", False)
    assert events == [ToolEvent("fake", "Did the fake thing", {"bad": True}, "bad_arguments")]
    assert len(tool.calls) == 1


def test_unknown_tool_is_an_answer() -> None:
    box, tool, _ = fake_box()
    reply = box.call("nope", {"q": "x"})
    assert (reply.text, reply.stop_turn) == ("There is no tool named 'nope'.", False)
    assert tool.calls == []


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["fake", "other"]),
            st.fixed_dictionaries({}, optional={"q": st.sampled_from(["a", "A ", "b", " B", ""])}),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_the_hook_fires_once_per_call_with_its_outcome(
    calls: list[tuple[str, dict[str, Any]]], guarded: bool
) -> None:
    fake, other = FakeTool(), FakeTool("other")
    events: list[ToolEvent] = []
    box = ToolBox(
        [fake, other],
        guards=TurnGuards({"fake": 2, "other": 3}) if guarded else None,
        on_call=events.append,
    )
    # an independent model of the guards
    seen: set[tuple[str, str]] = set()
    used = {"fake": 0, "other": 0}
    budgets = {"fake": 2, "other": 3}
    for name, args in calls:
        reply = box.call(name, args)
        key = (name, " ".join(str(args.get("q") or "").casefold().split()))
        if not guarded:
            expected = "ran"
        elif used[name] >= budgets[name]:
            expected = "budget_spent"
        elif key in seen:
            expected = "refused_repeat"
        else:
            expected = "ran"
            seen.add(key)
            used[name] += 1
        assert events[-1] == ToolEvent(name, "Did the fake thing", args, expected)
        assert reply.stop_turn is (expected == "budget_spent")
    assert len(events) == len(calls)
    assert len(fake.calls) + len(other.calls) == [e.outcome for e in events].count("ran")


# -- the real tools in the box ------------------------------------------------------


def real_box(book: Book, events: list[ToolEvent]) -> ToolBox:
    # CheckNotebookTool declares `parameters` as a ClassVar, which mypy --strict
    # says does not satisfy the Tool protocol (see the report); it works at run time.
    tools: list[Any] = [book.tool, GrepMemory(GrepMemoryTool(book.node.mirror))]
    return ToolBox(tools, guards=TurnGuards(), on_call=events.append)


def test_real_tools_fire_their_pills(book: Book) -> None:
    events: list[ToolEvent] = []
    box = real_box(book, events)
    assert box.call("check_notebook", {"query": "lyon"}).text == book.tool.call({"query": "lyon"})
    assert box.call("grep_memory", {"query": "birthday"}).text == (
        GrepMemoryTool(book.node.mirror).run("birthday").render()
    )
    box.call("check_notebook", {"query": "LYON "})
    box.call("check_notebook", {"days_back": 0})
    assert [(e.tool, e.pill, e.outcome) for e in events] == [
        ("check_notebook", "Checked your notebook", "ran"),
        ("grep_memory", "Searched your memory", "ran"),
        ("check_notebook", "Checked your notebook", "refused_repeat"),
        ("check_notebook", "Checked your notebook", "bad_arguments"),
    ]


def test_check_notebook_budget_through_the_box(book: Book) -> None:
    box = real_box(book, [])
    for query in ("lyon", "sport", "may", "photos"):
        assert not box.call("check_notebook", {"query": query}).stop_turn
    reply = box.call("check_notebook", {"query": "porto"})
    assert reply.stop_turn
    assert (
        reply.text == "The check_notebook budget for this turn is spent. Answer with what you have."
    )
    assert not box.call("grep_memory", {"query": "porto"}).stop_turn  # a separate budget


def test_grep_memory_through_the_box(book: Book) -> None:
    events: list[ToolEvent] = []
    box = real_box(book, events)
    tool = GrepMemory(GrepMemoryTool(book.node.mirror))
    first = box.call("grep_memory", {"query": "Zoë"})
    # the message and the spark event the pin filed
    assert first.text.startswith('2 most recent memories matching "Zoë"')
    assert "· spark · Zoë Martin: Zoë's birthday is on 3 May" in first.text
    again = box.call("grep_memory", {"query": " zoë"})
    assert again.text == tool.repeat_refusal
    assert box.call("grep_memory", {}).text == "grep_memory: query is required"
    assert box.call("grep_memory", {"query": "x", "n": 3}).text.startswith(
        "grep_memory: unknown argument"
    )
    # three calls have run (two of them bad), so the budget of three is spent
    spent = box.call("grep_memory", {"query": "Ada"})
    assert spent.stop_turn
    assert [e.outcome for e in events] == [
        "ran",
        "refused_repeat",
        "bad_arguments",
        "bad_arguments",
        "budget_spent",
    ]
    box.new_turn()
    assert box.call("grep_memory", {"query": 7}).text == "grep_memory: the query must be a string"


def test_grep_memory_on_an_empty_log(node: Node) -> None:
    box = ToolBox([GrepMemory(GrepMemoryTool(node.mirror))], guards=None)
    assert box.call("grep_memory", {"query": "anything"}).text == EMPTY_MEMORY


# -- schemas ------------------------------------------------------------------------

_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_KEYWORDS = {
    "object": {"type", "description", "properties", "required", "additionalProperties"},
    "string": {"type", "description", "minLength", "maxLength", "enum", "pattern"},
    "integer": {"type", "description", "minimum", "maximum", "enum"},
    "number": {"type", "description", "minimum", "maximum"},
    "boolean": {"type", "description"},
}


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_schema(schema: object, path: str = "$") -> None:
    """The subset of JSON Schema (draft 2020-12) a function definition may use."""
    assert isinstance(schema, dict), path
    kind = schema.get("type")
    assert kind in _TYPES, f"{path}: type {kind!r}"
    assert set(schema) <= _KEYWORDS[kind], f"{path}: {set(schema) - _KEYWORDS[kind]}"
    if "description" in schema:
        assert isinstance(schema["description"], str) and schema["description"].strip(), path
    if kind == "object":
        props = schema.get("properties", {})
        assert isinstance(props, dict), path
        for name, sub in props.items():
            assert isinstance(name, str) and name, path
            check_schema(sub, f"{path}.{name}")
        required = schema.get("required", [])
        assert isinstance(required, list), path
        assert len(set(required)) == len(required), path
        assert set(required) <= set(props), path
        assert isinstance(schema.get("additionalProperties", True), bool | dict), path
    if kind == "string":
        for key in ("minLength", "maxLength"):
            assert key not in schema or _count(schema[key]), f"{path}.{key}"
        assert schema.get("minLength", 0) <= schema.get("maxLength", 10**9), path
        if "pattern" in schema:
            re.compile(schema["pattern"])
    if kind in ("integer", "number"):
        for key in ("minimum", "maximum"):
            value = schema.get(key, 0)
            assert isinstance(value, int | float) and not isinstance(value, bool), f"{path}.{key}"
        assert schema.get("minimum", -(10**18)) <= schema.get("maximum", 10**18), path


def test_schemas_are_openai_function_definitions(book: Book) -> None:
    box = real_box(book, [])
    schemas = box.schemas()
    assert json.loads(json.dumps(schemas)) == schemas  # plain JSON, nothing else
    assert [s["function"]["name"] for s in schemas] == ["check_notebook", "grep_memory"]
    for item in schemas:
        assert set(item) == {"type", "function"} and item["type"] == "function"
        fn = item["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", fn["name"])
        assert isinstance(fn["description"], str) and 20 <= len(fn["description"]) <= 1024
        check_schema(fn["parameters"])
        assert fn["parameters"]["type"] == "object"
        assert fn["parameters"]["additionalProperties"] is False
    notebook = schemas[0]["function"]["parameters"]
    assert set(notebook["properties"]) == {"query", "person", "topic", "days_back", "days_ahead"}
    assert notebook["properties"]["days_back"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_DAYS_BACK,
        "description": "only notes about the last N days",
    }
    assert schemas[1]["function"]["parameters"]["required"] == ["query"]


def test_check_schema_rejects_broken_schemas() -> None:
    good: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    check_schema(good)
    for bad in (
        {"type": "object", "properties": {"q": {"type": "str"}}},
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["x"]},
        {"type": "object", "properties": {"q": {"type": "string", "maxLength": -1}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": True}}},
        {"type": "object", "properties": {"q": {"type": "string", "minLenght": 1}}},
        ["not", "an", "object"],
    ):
        with pytest.raises(AssertionError):
            check_schema(bad)


def schema_accepts(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """A tiny validator for the keywords check_schema allows (enough for these tools)."""
    props = schema["properties"]
    if not schema.get("additionalProperties", True) and set(arguments) - set(props):
        return False
    if set(schema.get("required", [])) - set(arguments):
        return False
    for key, value in arguments.items():
        sub = props.get(key)
        if sub is None:
            continue
        if sub["type"] == "string":
            if not isinstance(value, str):
                return False
            if not sub.get("minLength", 0) <= len(value) <= sub.get("maxLength", 10**9):
                return False
        elif sub["type"] == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                return False
            if not sub.get("minimum", -(10**18)) <= value <= sub.get("maximum", 10**18):
                return False
    return True


argument_values = st.one_of(
    st.text(max_size=5),
    st.text(min_size=MAX_QUERY_CHARS - 1, max_size=MAX_QUERY_CHARS + 1, alphabet="ab ").filter(
        str.strip
    ),
    st.integers(-2, 3),
    st.integers(MAX_DAYS_BACK - 1, MAX_DAYS_BACK + 1),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
)


@given(
    st.dictionaries(
        st.sampled_from(["query", "person", "topic", "days_back", "extra"]),
        argument_values,
        max_size=4,
    )
)
def test_what_the_schema_rejects_the_tool_rejects(arguments: dict[str, Any]) -> None:
    # No database is touched: every call here either fails validation or
    # resolves a person against an empty contact book (the stub below).
    tool = CheckNotebookTool(_NoNotebook(), _NoContacts(), now=lambda: 0)  # type: ignore[arg-type]
    schema = CheckNotebookTool.parameters
    if schema_accepts(schema, arguments):
        return
    with pytest.raises(BadInput):
        tool.call(arguments)


class _NoNotebook:
    def search_clear(self, *args: object) -> list[object]:
        return []


class _NoContacts:
    def resolve(self, name: str) -> str:
        raise NotFound(name)


# -- once bugs, now fixed (kept as regressions) -------------------------------------


@pytest.mark.parametrize("arguments", [["query"], "lyon", 3])
def test_non_object_arguments_are_a_bad_arguments_reply(book: Book, arguments: Any) -> None:
    events: list[ToolEvent] = []
    box = real_box(book, events)
    reply = box.call("check_notebook", arguments)
    assert reply.text.startswith("check_notebook: arguments must be a JSON object")
    assert [e.outcome for e in events] == ["bad_arguments"]


def test_a_whitespace_only_argument_repeats_an_empty_one() -> None:
    box, tool, _ = fake_box()
    box.call("fake", {"q": ""})
    assert box.call("fake", {"q": "   "}).text == FakeTool.repeat_refusal
    assert len(tool.calls) == 1


def test_what_the_schema_accepts_the_tool_accepts(book: Book) -> None:
    """The JSON schema the model is shown and the tool's own checks agree on bounds."""
    for arguments in ({"person": "A" * 201}, {"topic": "t" * 41}):
        assert not schema_accepts(CheckNotebookTool.parameters, arguments)
        with pytest.raises(BadInput):
            book.tool.call(arguments)
    for arguments in ({"person": "A" * 200}, {"topic": "t" * 40}):
        assert schema_accepts(CheckNotebookTool.parameters, arguments)
        book.tool.call(arguments)
