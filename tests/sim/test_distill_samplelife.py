"""The built-in distiller on the generated sample life: every contact with
messages gets a person page, every thread a digest, every post (near-identical
ones together), call, journal entry and calendar entry its note, the user's
facts land in about_you, the notes read like notes, and two runs over the same
life give the same Notebook."""

from __future__ import annotations

import datetime as dt
import io
from collections import Counter
from pathlib import Path

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.distill.contract import MAX_LINES
from pixie.device.distill.factory import router_for
from pixie.device.distill.loading import MIN_MONTH_MESSAGES
from pixie.device.distill.pages import READ, THREADS, WHO
from pixie.device.distill.posts import post_identity
from pixie.device.distill.service import NotetakingService
from pixie.device.distill.settings import LLMSettings
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.notes import ClearNote, NoteKind
from pixie.device.store.provision import create_data_dir
from tests.testkit import samplelife

EVENTS = 1500


def samplewrite_life(path: Path) -> Node:
    create_data_dir(path, name=path.name, role="device")
    node = Node.open(path)
    text = io.StringIO()
    samplelife.write_jsonl(text, seed=7, events=EVENTS)
    node.log.append(read_events(io.BytesIO(text.getvalue().encode())), now=0)
    return node


async def distil(node: Node) -> tuple[int, int]:
    service = NotetakingService(node.db, node.notebook, router_for(LLMSettings()))
    report = await service.run_pass()
    return report.sources, report.calls


def log_facts(node: Node) -> dict[str, set[str]]:
    with node.db.reading() as session:
        rows = session.connection().exec_driver_sql(
            "SELECT n, id, kind, thread, contact_id, source, from_me, text, at FROM memory_event"
        )
        facts: dict[str, set[str]] = {"threads": set(), "talkers": set(), "posts": set()}
        facts["calls"], facts["post_notes"] = set(), set()
        facts["journals"], facts["calendar"] = set(), set()
        per_month: Counter[tuple[str, str]] = Counter()
        per_thread: Counter[str] = Counter()
        for n, event_id, kind, thread, contact_id, source, me, text, at in rows:
            if kind == "message":
                facts["threads"].add(f"thread:{thread}")
                per_thread[thread] += 1
                day = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC)
                per_month[(thread, f"{day.year:04d}-{day.month:02d}")] += 1
                if contact_id:
                    facts["talkers"].add(contact_id)
            elif kind == "post":
                facts["posts"].add(source)
                facts["post_notes"].add(post_identity((n, kind, 0, contact_id, bool(me), text)))
            elif kind in ("call", "voicemail"):
                facts["calls"].add(source)
            elif kind == "journal":
                facts["journals"].add(source or f"event:{event_id}")
            elif kind == "calendar":
                # Every occurrence of a repeating entry shares its thread: one note.
                facts["calendar"].add(
                    f"series:{thread}" if thread else source or f"event:{event_id}"
                )
    # A thread longer than one request has a digest per month of five
    # messages or more besides its own.
    facts["months"] = {
        f"thread:{thread}@{month}"
        for (thread, month), count in per_month.items()
        if per_thread[thread] > MAX_LINES and count >= MIN_MONTH_MESSAGES
    }
    return facts


def notes(node: Node, kind: NoteKind) -> list[ClearNote]:
    return node.notebook.clear_notes(kind)


async def test_every_source_of_the_sample_life_gets_its_note(tmp_path: Path) -> None:
    node = samplewrite_life(tmp_path / "phone")
    try:
        sources, calls = await distil(node)
        want = log_facts(node)
        kinds = ("threads", "posts", "calls", "journals", "calendar")
        assert sources == calls == sum(len(want[k]) for k in kinds)
        pages = {n.contact_id: n for n in notes(node, NoteKind.PERSON)}
        assert set(pages) == want["talkers"]  # every contact with messages, no one else
        digests = {n.identity_key or "" for n in notes(node, NoteKind.CONVERSATION_DIGEST)}
        weeks = {k for k in digests if k.startswith("journal-week:")}
        assert weeks and digests - weeks == (
            want["threads"] | want["months"] | want["journals"] | want["calendar"]
        )
        # Near-identical posts share one note, filed under their gist.
        posts = notes(node, NoteKind.POST_DIGEST)
        assert {n.identity_key for n in posts} == want["post_notes"]
        assert {n.source_ref for n in posts} <= want["posts"]
        assert all(n.title.split(": ", 1)[1] not in (n.body or "") for n in posts)
        assert {n.source_ref for n in notes(node, NoteKind.CALL_DIGEST)} == want["calls"]

        (about,) = notes(node, NoteKind.ABOUT_YOU)
        assert sorted(line.split(";")[0] for line in (about.body or "").splitlines()) == [
            "- Allergy: allergic to peanuts",
            "- Birthday: 14 March",
            # Whole sentences: "Dr." ends none ("Talked to Dr. Nowak about ...").
            "- Health: Talked to Dr. Nowak about your check-up today (your journal)",
            "- Health: Thinking about Dr. Nowak and your check-up (your journal)",
            "- Hobby: plays the cello",
            "- Home: lives in Porto",
            "- Pet: a cat called Miso",
            "- Work: works at Northwind Labs",
        ]

        # Readable notes, not placeholders: three sections, a read, dates.
        names = node.contacts.names()
        for page in pages.values():
            body = page.body or ""
            assert body.startswith(f"{WHO}\n") and f"\n{READ}\n" in body
            assert f"\n{THREADS}\n" in body and len(body) > 120
            assert page.tags
        by_name = {names[cid or ""]: page.body or "" for cid, page in pages.items()}
        assert "running" in by_name["Ada Lovelace"]
        assert "Work: works at Helix Bio" in by_name["Priya Raman"]
        for note in node.notebook.clear_notes():
            body = note.body or ""
            assert len(body) >= 30, note
            assert not any(w in body.casefold() for w in ("todo", "placeholder", "lorem", "tbd"))
        climbing = next(
            n
            for n in notes(node, NoteKind.CONVERSATION_DIGEST)
            if n.identity_key == "thread:g-climbing"
        )
        assert climbing.title == "Inés García, Jimmy Okafor and Marco Bianchi (group)"
        assert climbing.body and climbing.body.startswith("40 messages with Inés García, ")

        # What the chat agent then finds with check_notebook.
        tool = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
        found = tool.call({"query": "marathon", "person": "Ada"})
        assert found.startswith('8 notes matching "marathon" about Ada:')
        found = tool.call({"query": "read relationship", "person": "Ada"})
        assert found.splitlines()[1].startswith("1. Person · Ada Lovelace")
        assert (await distil(node)) == (0, 0)
    finally:
        node.close()


async def test_the_sample_life_distils_the_same_every_time(tmp_path: Path) -> None:
    one, two = samplewrite_life(tmp_path / "one"), samplewrite_life(tmp_path / "two")
    try:
        await distil(one)
        await distil(two)

        def shown(node: Node) -> list[tuple[object, ...]]:
            return sorted(
                (n.id, n.kind, n.title, n.body, n.tags, n.contact_id, n.source_ref, n.about_date)
                for n in node.notebook.clear_notes()
            )

        assert shown(one) == shown(two)
        assert len(shown(one)) > 100
    finally:
        one.close()
        two.close()
