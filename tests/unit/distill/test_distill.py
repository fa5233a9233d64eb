"""NotetakingService: what a pass sends a model, what it writes, and what it
leaves alone. The model is the scripted server of `tests.support.llmserver` on
loopback, or the built-in distiller."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pixie.device.distill.contract import Fact, FactKind
from pixie.device.distill.http import ChatCompletionsBackend
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.pages import render_about_you
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.distill.sources import ABOUT_YOU_TITLE, SCAN_KEY
from pixie.device.distill.stored import merge_facts
from pixie.device.node.keyed import Node
from pixie.device.notebook import store as notebook_module
from pixie.device.notebook.seal import NotebookSeal
from pixie.device.notebook.store import Distilled, UpsertOutcome
from pixie.device.store.marks import DistillMark
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import (
    ClearNote,
    NoteKind,
    SealedKind,
    kept_up_title,
)
from pixie.device.store.provision import create_data_dir
from tests.support.distillfaults import POWER_CUT, cut_power_in_write
from tests.support.llmserver import Recorded, Reply, ScriptedLLMServer, good_answer

MINUTE = 60_000_000
START = 1_750_000_000_000_000


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as s:
        yield s


def service(node: Node, server: ScriptedLLMServer | None = None) -> NotetakingService:
    backends: list[object] = []
    if server is not None:
        backends.append(ChatCompletionsBackend(server.url, "m", timeout=10, backoff=0))
    backends.append(OfflineDistiller())
    return NotetakingService(node.db, node.notebook, LLMRouter(tuple(backends)))  # type: ignore[arg-type]


async def distil(node: Node, server: ScriptedLLMServer | None = None) -> PassReport:
    return await service(node, server).run_pass()


def message(
    thread: str | None, contact: str | None, i: int, text: str, *, me: bool = False
) -> NewEvent:
    return NewEvent(
        EventKind.MESSAGE,
        START + i * MINUTE,
        text,
        contact=contact,
        thread=thread,
        from_me=me,
    )


def chat(node: Node, thread: str, contact: str, texts: list[str], first: int = 0) -> None:
    node.log.append(
        [message(thread, contact, first + i, t, me=i % 2 == 1) for i, t in enumerate(texts)],
        now=0,
    )


def snapshot(node: Node) -> tuple[object, ...]:
    """Every note row (stamps included), every watermark, and the digest."""
    con = sqlite3.connect(node.db.path)
    try:
        notes = con.execute("SELECT * FROM note ORDER BY n").fetchall()
        marks = con.execute("SELECT * FROM distill_mark ORDER BY source").fetchall()
    finally:
        con.close()
    return notes, marks, node.digest().digest()


def content(node: Node) -> list[tuple[object, ...]]:
    """What the clear notes say, stamps aside: equal on two data dirs that
    distilled the same log, however their passes went."""
    return sorted(
        (
            n.id,
            n.kind.value,
            n.identity_key,
            n.title,
            n.body,
            n.tags,
            n.contact_id,
            n.source_ref,
            n.about_date,
            n.user_edited,
        )
        for n in node.notebook.clear_notes()
    )


def by_kind(node: Node, kind: NoteKind) -> dict[str | None, str | None]:
    return {n.identity_key: n.body for n in node.notebook.clear_notes(kind)}


def pages(node: Node) -> dict[str | None, ClearNote]:
    return {n.identity_key: n for n in node.notebook.clear_notes(NoteKind.PERSON)}


# -- what a model is sent --------------------------------------------------------------


async def test_a_thread_of_100_messages_sends_only_its_40_newest(
    node: Node, server: ScriptedLLMServer
) -> None:
    order = list(range(100))
    random.Random(5).shuffle(order)  # written out of order: "newest" is by time
    node.log.append([message("t-ada", "Ada", i, f"msg{i:03d} about Lyon") for i in order], now=0)
    report = await distil(node, server)
    assert report.as_json()["threads"] == 1 and report.model_calls == {"http": 1}
    (request,) = server.requests
    user = request.message("user")
    sent = [line for line in user.splitlines() if line.startswith("[")]
    assert len(sent) == 40
    assert [line.split(": ", 1)[1] for line in sent] == [
        f"msg{i:03d} about Lyon" for i in range(60, 100)
    ]
    for i in range(60):
        assert f"msg{i:03d}" not in request.prompt
    assert "The 40 most recent messages, oldest first:" in user


async def test_the_prompt_carries_nothing_from_the_notebook_or_other_sources(
    node: Node, server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat(node, "t-ada", "Ada", ["ADAONE marathon in May", "ADATWO is it hilly?"])
    chat(node, "t-sam", "Sam", ["SAMONE the boiler is fixed"], first=10)
    node.log.append(
        [
            NewEvent(EventKind.JOURNAL, START, "JOURNALONE I live in Lisbon"),
            NewEvent(EventKind.CALENDAR, START, "CALENDARONE dentist", source="cal:1"),
            NewEvent(EventKind.AGENT_CHAT_USER, START, "CHATCANARY what did Ada say?"),
            NewEvent(EventKind.POST, START, "POSTONE sunset", source="post:1", from_me=True),
        ],
        now=0,
    )
    ada = node.contacts.resolve("Ada")
    node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, ada, "Ada", "NOTECANARY runs marathons", ada)
    )
    node.notebook.add_user_note(NoteKind.GUIDANCE, "Tone", "GUIDECANARY keep it short")
    node.notebook.add_user_note(NoteKind.ABOUT_YOU, "Me", "ABOUTCANARY I live in Porto")
    node.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="SEALEDCANARY", body="SEALEDBODY")

    # Distillation never opens the sealed zone: make sure it could not.
    def refuse(*_: object) -> None:
        raise AssertionError("distillation touched the sealed zone")

    monkeypatch.setattr(NotebookSeal, "open", refuse)
    monkeypatch.setattr(notebook_module.NotebookStore, "sealed_notes_for_huddle_reasoning", refuse)

    report = await distil(node, server)
    assert report.as_json()["distilled"] == 5 and len(server.requests) == 5
    own = {
        "Ada": ("ADAONE", "ADATWO"),
        "Sam": ("SAMONE",),
        "post": ("POSTONE",),
        "journal": ("JOURNALONE",),
        "calendar": ("CALENDARONE",),
    }
    everything = {word for words in own.values() for word in words}
    forbidden = ("CANARY", "SEALED", "ABOUTCANARY", "NOTECANARY", "GUIDECANARY")
    for request in server.requests:
        prompt = request.prompt
        assert not any(word in prompt for word in forbidden), prompt
        mine = [w for w in everything if w in prompt]
        assert mine, prompt
        group = next(words for words in own.values() if mine[0] in words)
        assert sorted(mine) == sorted(group), prompt  # its own source, all of it, nothing else


# -- what a pass writes ------------------------------------------------------------------


async def test_a_pass_files_digests_person_pages_and_facts(
    node: Node, server: ScriptedLLMServer
) -> None:
    chat(node, "t-ada", "Ada Lovelace", ["long run today, 18 km", "I live in Porto now!"])
    chat(node, "g-club", "Ines", ["who is climbing Friday?"], first=5)
    node.log.append(
        [
            message("g-club", "Jimmy", 6, "me! the purple problem again"),
            message(None, "Sam", 7, "the plumber comes Saturday"),
            NewEvent(
                EventKind.CALL, START, "Me: hi\nAda: hi", contact="Ada Lovelace", source="call:9"
            ),
            NewEvent(EventKind.VOICEMAIL, START + MINUTE, "Hi, Sam here.", contact="Sam"),
        ],
        now=0,
    )
    report = await distil(node, server)
    counts = report.as_json()
    assert (counts["threads"], counts["posts"], counts["calls"]) == (3, 0, 2)
    ada, sam = node.contacts.resolve("Ada Lovelace"), node.contacts.resolve("Sam")
    digests = {n.identity_key: n for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)}
    assert set(digests) == {"thread:t-ada", "thread:g-club", f"contact:{sam}"}
    assert digests["thread:t-ada"].title == "Ada Lovelace"
    assert digests["thread:t-ada"].contact_id == ada
    assert digests["thread:t-ada"].source_ref == "thread:t-ada"
    assert digests["thread:t-ada"].about_date == START + MINUTE
    assert digests["thread:g-club"].title == "Ines and Jimmy (group)"
    assert digests["thread:g-club"].contact_id is None
    assert digests["thread:t-ada"].body == "A scripted summary."
    assert digests["thread:t-ada"].tags == ("scripted",)
    people = pages(node)
    ines, jimmy = node.contacts.resolve("Ines"), node.contacts.resolve("Jimmy")
    assert set(people) == {ada, sam, ines, jimmy}  # everyone who writes has a page
    assert people[ada].source_ref is None
    assert people[ada].body == (
        "Who they are\n- Nothing noted yet.\n"
        "Your read on the relationship\n- A scripted person summary.\n"
        "Open threads\n- Nothing open."
    )
    # Met only in the group: a page from their own lines, built offline.
    assert people[jimmy].source_ref == "thread:g-club"
    body = people[jimmy].body or ""
    assert "- Seen in the group conversation with Ines and Jimmy: 1 message of theirs" in body
    assert "the purple problem again" in body
    assert "climbing" not in body  # Ines's words stay on Ines's page
    calls = {n.source_ref: n for n in node.notebook.clear_notes(NoteKind.CALL_DIGEST)}
    assert set(calls) == {"call:9", next(k for k in calls if k.startswith("event:"))}
    assert calls["call:9"].contact_id == ada and calls["call:9"].title.startswith(
        "Call with Ada Lovelace, "
    )
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    # A bare-text fact from a model, dated by the newest line of its source.
    assert (
        about.title == ABOUT_YOU_TITLE and about.body == "- Also: Scripted fact; as of 15 Jun 2025"
    )
    assert report.notes[UpsertOutcome.CREATED] == 3 + 2 + 4 + 1
    assert all(r.path == "/v1/chat/completions" for r in server.requests)


async def test_a_page_from_a_one_to_one_thread_outranks_one_from_a_group(node: Node) -> None:
    club = [
        message("g-club", "Ines", 0, "who is climbing Friday?"),
        message("g-club", "Jo", 1, "me!"),
    ]
    node.log.append(club, now=0)
    await distil(node)
    ines = node.contacts.resolve("Ines")
    assert pages(node)[ines].source_ref == "thread:g-club"

    chat(node, "t-ines", "Ines", ["I work at Vertical Porto now", "great!"], first=10)
    await distil(node)
    page = pages(node)[ines]
    assert page.source_ref is None and "Work: works at Vertical Porto" in (page.body or "")

    node.log.append([message("g-club", "Ines", 20, "new route set on the left wall")], now=0)
    report = await distil(node)
    assert report.sources == 1  # the group again: its digest, not Ines's page
    assert pages(node)[ines] == page
    before = snapshot(node)
    again = await distil(node)
    assert (again.sources, again.written) == (0, 0) and snapshot(node) == before


async def test_a_second_pass_with_nothing_new_calls_no_model_and_writes_nothing(
    node: Node, server: ScriptedLLMServer
) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "I work at Northwind Labs"])
    first = await distil(node, server)
    assert first.calls == 1 and first.written > 0
    before = snapshot(node)
    again = await distil(node, server)
    assert (again.calls, again.written, again.sources, again.skipped) == (0, 0, 0, 0)
    assert len(server.requests) == 1
    assert snapshot(node) == before  # not a byte: stamps, digest and watermarks included
    assert again.render() == "nothing new to distill (0 model calls, 0 notes written)"


async def test_re_deriving_identical_content_leaves_stamps_and_digest_alone(node: Node) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "I work at Northwind Labs", "see you!"])
    await distil(node)
    before = snapshot(node)
    redo = await service(node).run_pass(everything=True)
    assert redo.calls == 1 and redo.written == 0
    assert redo.notes[UpsertOutcome.UNCHANGED] == 3
    assert snapshot(node) == before


async def test_new_material_redistils_only_its_own_source(node: Node) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "how is the knee?"])
    chat(node, "t-sam", "Sam", ["boiler fixed", "thanks!"], first=5)
    await distil(node)
    sam_before = [n for n in node.notebook.clear_notes() if "Sam" in n.title]
    chat(node, "t-ada", "Ada", ["I finished the Lyon marathon in 3:58!!"], first=10)
    report = await distil(node)
    assert (report.sources, report.calls) == (1, 1)
    assert [n for n in node.notebook.clear_notes() if "Sam" in n.title] == sam_before
    assert "3:58" in (by_kind(node, NoteKind.CONVERSATION_DIGEST)["thread:t-ada"] or "")


async def test_the_users_edits_are_never_overwritten(node: Node) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "I live in Porto now!"])
    await distil(node)
    ada = node.contacts.resolve("Ada")
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    node.notebook.edit(page.id, body="My own words about Ada.")
    node.notebook.edit(about.id, body="- Lives in Porto, near the river")
    mine = {n.id: n for n in node.notebook.clear_notes() if n.user_edited}
    chat(node, "t-ada", "Ada", ["new job!", "I work at Northwind Labs"], first=10)
    report = await distil(node)
    assert report.notes[UpsertOutcome.KEPT_USER_EDIT] == 1  # about_you: the user's
    # The digest, which nobody edited, is updated; the person page is left as
    # the user wrote it and what is new goes to a page beside it.
    assert report.notes[UpsertOutcome.UPDATED] == 1
    assert report.notes[UpsertOutcome.CREATED] == 1
    assert node.notebook.get_clear(about.id) == mine[about.id]
    assert node.notebook.get_clear(page.id) == mine[page.id]
    (beside,) = [n for n in node.notebook.clear_notes(NoteKind.PERSON) if n.id != page.id]
    assert beside.body is not None and not beside.user_edited
    assert "4 messages" in beside.body  # the read, from the newer lines
    assert "My own words" not in beside.body
    assert (beside.title, beside.contact_id) == (kept_up_title(mine[page.id].title), ada)
    # Nothing new: nothing written, both pages as they were.
    again = await distil(node)
    assert again.written == 0 and node.notebook.get_clear(beside.id) == beside


async def test_a_deleted_person_page_stays_deleted(node: Node) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "I live in Porto now!"])
    await distil(node)
    (page,) = node.notebook.clear_notes(NoteKind.PERSON)
    node.notebook.delete(page.id)
    chat(node, "t-ada", "Ada", ["new job!", "I work at Northwind Labs"], first=10)
    report = await distil(node)
    assert report.notes[UpsertOutcome.KEPT_USER_EDIT] >= 1
    assert node.notebook.clear_notes(NoteKind.PERSON) == []


async def test_facts_merge_into_about_you_without_duplicates(node: Node) -> None:
    chat(node, "t-ada", "Ada", ["hi", "I live in Porto now", "ok", "my birthday is on 14 March"])
    chat(node, "t-sam", "Sam", ["hello", "I live in Porto, remember"], first=10)
    await distil(node)
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    assert about.body == (
        "- Home: lives in Porto; as of 15 Jun 2025\n- Birthday: 14 March; as of 15 Jun 2025"
    )
    cello = Fact(FactKind.HOBBY, "plays the cello", START)
    again = Fact(FactKind.HOME, "Lives in Porto", START)
    merged, changed = merge_facts(about.body, [again, cello])
    assert [f.text for f in merged] == ["lives in Porto", "14 March", "plays the cello"]
    assert changed and merge_facts(render_about_you(merged), [cello]) == (merged, False)


# -- watermarks and interruptions ----------------------------------------------------------


def write_life(node: Node) -> None:
    for k, who in enumerate(("Ada", "Ben", "Cleo", "Dev", "Eve")):
        chat(
            node,
            f"t-{who.lower()}",
            who,
            [f"{who} says the marathon is in May", f"I live in City{k}", f"{who} got a new job"],
            first=10 * k,
        )
    node.log.append(
        [
            NewEvent(EventKind.POST, START + i * MINUTE, f"post {i}: ran 10 km", source=f"post:{i}")
            for i in range(4)
        ],
        now=0,
    )


async def test_a_pass_interrupted_between_sources_resumes_without_skipping_or_redoing(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    create_data_dir(tmp_path / "calm", name="calm", role="device")
    with Node.open(tmp_path / "calm") as calm:
        write_life(calm)
        whole = await distil(calm)
        expected = content(calm)
    write_life(node)
    assert whole.sources == 9

    # The fourth source's upsert fails inside its transaction: it rolls back,
    # and the pass stops there.
    with monkeypatch.context() as m:
        cut_power_in_write(m, 4)
        with pytest.raises(RuntimeError, match=POWER_CUT):
            await distil(node)
    with node.db.reading() as session:
        marks = {m.source: m.seen_n for m in session.query(DistillMark)}
    assert len(marks) == 3 and SCAN_KEY not in marks  # three sources done, no scan mark yet

    resumed = await distil(node)
    assert resumed.sources == whole.sources - 3  # the failed one again, and the rest
    assert resumed.skipped == 3  # the three done before, seen and passed over
    assert content(node) == expected
    assert (await distil(node)).calls == 0


# -- the built-in distiller on its own -------------------------------------------------


async def test_the_offline_distiller_is_stable_and_readable(node: Node) -> None:
    chat(
        node,
        "t-ada",
        "Ada Lovelace",
        [
            "hey!",
            "how's the marathon training going?",
            "long run today, 18 km, legs are dead",
            "haha",
            "I finished the Lyon marathon in 3:58!!",
            "careful, I'm allergic to peanuts, so no satay for me",
            "want to grab dinner Friday at 19:30?",
        ],
    )
    report = await distil(node)
    assert report.model_calls == {"offline": 1}
    page = by_kind(node, NoteKind.PERSON)[node.contacts.resolve("Ada Lovelace")] or ""
    digest = by_kind(node, NoteKind.CONVERSATION_DIGEST)["thread:t-ada"] or ""
    assert page.splitlines()[0] == "Who they are"
    assert "Your read on the relationship\n- You write now and then: 7 messages on " in page
    assert "Ada talks about running" in page
    assert "Open threads\n- Plan: dinner Friday at 19:30; as of 15 Jun 2025" in page
    assert "“" not in page.split("Open threads")[0]  # facts and a read, not quotes
    assert "7 messages with Ada Lovelace on " in digest and "Highlights:" in digest
    assert "“haha”" not in digest and "“hey!”" not in digest  # small talk is left out
    assert "Still open: Ada Lovelace asked “want to grab dinner Friday at 19:30?”" in digest
    (about,) = node.notebook.clear_notes(NoteKind.ABOUT_YOU)
    assert about.body == "- Allergy: allergic to peanuts; as of 15 Jun 2025"
    before = content(node)
    await service(node).run_pass(everything=True)
    assert content(node) == before


async def test_a_model_that_fails_mid_pass_hands_over_to_the_offline_distiller(
    node: Node, server: ScriptedLLMServer
) -> None:
    chat(node, "t-ada", "Ada", ["marathon in May", "is it hilly?"])
    chat(node, "t-ben", "Ben", ["new job!", "congrats"], first=5)
    chat(node, "t-cleo", "Cleo", ["flat viewing today", "good luck"], first=9)

    def script(request: Recorded) -> Reply:
        return Reply.text("not json") if "Ben" in request.prompt else good_answer(request)

    server.default = script
    report = await distil(node, server)
    assert report.model_calls == {"http": 3, "offline": 1}
    assert report.fallbacks == 1 and report.failed == 0
    bodies = by_kind(node, NoteKind.CONVERSATION_DIGEST)
    assert bodies["thread:t-ada"] == bodies["thread:t-cleo"] == "A scripted summary."
    assert (bodies["thread:t-ben"] or "").startswith("2 messages with Ben on ")
