"""The built-in distiller on the generated sample life: every contact with
messages gets a person page, every thread a digest, every post and call its
digest, the user's facts land in about_you, the notes read like notes, and two
runs over the same life give the same Notebook."""

from __future__ import annotations

import io
from pathlib import Path

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.distill.llm import LLMSettings
from pixie.device.distill.service import NotetakingService, router_for
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.store.notes import ClearNote, NoteKind
from pixie.device.store.provision import create_data_dir
from pixie.sim import samplelife

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
            "SELECT kind, thread, contact_id, source FROM memory_event"
        )
        facts: dict[str, set[str]] = {"threads": set(), "talkers": set(), "posts": set()}
        facts["calls"] = set()
        for kind, thread, contact_id, source in rows:
            if kind == "message":
                facts["threads"].add(f"thread:{thread}")
                if contact_id:
                    facts["talkers"].add(contact_id)
            elif kind == "post":
                facts["posts"].add(source)
            elif kind in ("call", "voicemail"):
                facts["calls"].add(source)
    return facts


def notes(node: Node, kind: NoteKind) -> list[ClearNote]:
    return node.notebook.clear_notes(kind)


async def test_every_source_of_the_sample_life_gets_its_note(tmp_path: Path) -> None:
    node = samplewrite_life(tmp_path / "phone")
    try:
        sources, calls = await distil(node)
        want = log_facts(node)
        assert sources == calls == len(want["threads"]) + len(want["posts"]) + len(want["calls"])
        pages = {n.contact_id: n for n in notes(node, NoteKind.PERSON)}
        assert set(pages) == want["talkers"]  # every contact with messages, no one else
        digests = {n.identity_key for n in notes(node, NoteKind.CONVERSATION_DIGEST)}
        assert digests == want["threads"]
        assert {n.source_ref for n in notes(node, NoteKind.POST_DIGEST)} == want["posts"]
        assert {n.source_ref for n in notes(node, NoteKind.CALL_DIGEST)} == want["calls"]

        (about,) = notes(node, NoteKind.ABOUT_YOU)
        assert sorted((about.body or "").splitlines()) == [
            "- Allergic to peanuts",
            "- Birthday: 14 March",
            "- Has a cat called Miso",
            "- Lives in Porto",
            "- Plays the cello",
            "- Works at Northwind Labs",
        ]

        # Readable notes, not placeholders: names, topics, quoted lines, dates.
        names = node.contacts.names()
        for page in pages.values():
            body = page.body or ""
            assert body.startswith(f"{names[page.contact_id or '']}: last message from them on")
            assert "Lately: “" in body and len(body) > 120
            assert page.tags
        by_name = {names[cid or ""]: page.body or "" for cid, page in pages.items()}
        assert "marathon" in by_name["Ada Lovelace"]
        assert "job" in by_name["Priya Raman"]
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
        found = tool.call({"query": "Lately", "person": "Ada"})
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
