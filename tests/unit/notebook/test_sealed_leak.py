"""The worst bug this project can have: sealed plaintext reaching a clear-side path.

Random clear and sealed notes, each sealed one carrying a canary string, then
every clear-side read, tool call and CLI command: no canary may appear in any
output, in the database files, or in an export. And the chat side must not be
able to tell whether sealed notes exist: every clear-side output is compared
before and after the sealed writes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.tools import CheckNotebookTool, GrepMemory, ToolBox, TurnGuards
from pixie.device.node.keyed import Node
from pixie.device.notebook.huddle import HuddleRecord, record_huddle
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind, Zone
from pixie.device.store.provision import create_data_dir
from tests.support.cli import run_cli

NAMES = ["Ada Lovelace", "Priya Raman", "Jimmy Okafor", "Zoë Martin"]
SEALED_ONLY = ["Marco Bianchi", "Léa Dubois"]  # people who appear only in sealed notes
WORDS = ["lyon", "marathon", "job", "dinner", "knee", "porto", "cello", "secret", "divorce"]

canaries = st.text(alphabet="ABCDEFGHJKMNPQRSTVWXYZ23456789", min_size=10, max_size=14).map(
    lambda s: "ZQX" + s
)
clear_items = st.lists(
    st.tuples(
        st.sampled_from([NoteKind.PERSON, NoteKind.CONVERSATION_DIGEST, NoteKind.CALL_DIGEST]),
        st.sampled_from(NAMES),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        st.lists(st.sampled_from(["travel", "health", "work"]), max_size=2),
    ),
    max_size=8,
)
sealed_items = st.lists(
    st.tuples(
        st.sampled_from(list(SealedKind)),
        st.sampled_from(NAMES + SEALED_ONLY),
        st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
        canaries,
    ),
    min_size=1,
    max_size=6,
)
queries = st.lists(
    st.tuples(
        st.sampled_from(["", *WORDS, "secret divorce"]),
        st.sampled_from([None, *NAMES, *SEALED_ONLY, "marco", "lea"]),
        st.sampled_from([None, "travel", "huddle"]),
    ),
    min_size=1,
    max_size=6,
)


def clear_side_outputs(node: Node, qs: list[tuple[str, str | None, str | None]]) -> list[str]:
    """Everything a user or the chat model can see of the Notebook and the log."""
    d = str(node.data.path)
    out: list[str] = []
    view = node.notebook.clear_view()
    out.append(repr(view.clear_notes()))
    box = ToolBox(
        [CheckNotebookTool(view, node.contacts), GrepMemory(GrepMemoryTool(node.mirror))],
        guards=TurnGuards(),
    )
    for query, person, topic in qs:
        out.append(repr(view.search_clear(query, topic=topic)))
        args = {"query": query, "person": person, "topic": topic}
        out.append(box.call("check_notebook", args).text)
        box.new_turn()
        grep_query = query or person or "lyon"
        out.append(box.call("grep_memory", {"query": grep_query}).text)
        box.new_turn()
        argv = ["--data", d, "notebook", "search", query]
        if person:
            argv += ["--person", person]
        if topic:
            argv += ["--topic", topic]
        out.append(run_cli(*argv).out)
        out.append(run_cli(*argv, "--json").out)
        out.append(run_cli("--data", d, "grep", grep_query, "--json").out)
    out.append(run_cli("--data", d, "notebook", "list", "--json").out)
    out.append(run_cli("--data", d, "notebook", "list").out)
    out.append(run_cli("--data", d, "contacts", "list", "--json").out)
    out.append(run_cli("--data", d, "log", "show").out)
    for note in view.clear_notes():
        out.append(run_cli("--data", d, "notebook", "show", note.id).out)
    return out


@pytest.mark.slow
@settings(max_examples=20)
@given(clear=clear_items, sealed=sealed_items, qs=queries)
def test_no_sealed_canary_reaches_any_clear_side_output(
    clear: list[tuple[NoteKind, str, str, list[str]]],
    sealed: list[tuple[SealedKind, str, str, str]],
    qs: list[tuple[str, str | None, str | None]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d"
        create_data_dir(path, name="t", role="device")
        with Node.open(path) as node:
            for name in NAMES:
                node.contacts.add(name, [], now=0)
            event_ids = node.log.append(
                [
                    NewEvent(EventKind.MESSAGE, 1_700_000_000_000_000 + i, f"{w} news", contact=n)
                    for i, (n, w) in enumerate(zip(NAMES, WORDS, strict=False))
                ],
                now=0,
            ).ids
            for kind, name, body, tags in clear:
                cid = node.contacts.resolve(name)
                node.notebook.upsert_clear(
                    Distilled(
                        kind, f"{kind}:{name}", f"{name} {kind.value}", body, cid, tuple(tags)
                    )
                )
            node.notebook.pin_spark(event_ids[0], ["travel"])

            before = clear_side_outputs(node, qs)
            sealed_ids = []
            for kind, name, words, canary in sealed:
                body = f"{words} {canary} {name}"
                if kind is SealedKind.FROM_OTHER_AGENTS:
                    record_huddle(
                        node.notebook,
                        node.contacts,
                        HuddleRecord(name, (), (), (body,)),
                        zone=Zone.CLEAR,
                    )
                else:
                    cid = None
                    if name in NAMES:
                        cid = node.contacts.resolve(name)
                    sealed_ids.append(
                        node.notebook.record_sealed(
                            kind,
                            title=f"{canary} title",
                            body=body,
                            contact_id=cid,
                            contact_name=name,
                            tags=["secret"],
                        )
                    )
            after = clear_side_outputs(node, qs)

            # The chat side cannot tell that anything sealed exists.
            assert after == before
            # Asking for a sealed note by id looks exactly like asking for nothing.
            for note_id in sealed_ids:
                shown = run_cli("--data", str(path), "notebook", "show", note_id)
                assert shown.code == 2
                assert shown.err == f"pixie: error: no note with id {note_id}\n"

            nudge_text = run_cli("--data", str(path), "nudges", "--json").out
            export_dir = Path(tmp) / "export"
            assert run_cli("--data", str(path), "notebook", "export", str(export_dir)).code == 0
            exported = "".join(p.read_text() for p in export_dir.iterdir())
            tokens = {canary for *_, canary in sealed}
            haystacks = [*after, nudge_text, exported]
            for canary in tokens:
                assert not any(canary in h for h in haystacks), canary
            # Only ciphertext touched the disk: the database, its WAL and shm,
            # the log's text mirror.
            for f in (f for f in path.rglob("*") if f.is_file()):
                data = f.read_bytes()
                for canary in tokens:
                    assert canary.encode() not in data, (f.name, canary)
            # ...and the huddle pass really holds them (the test is not vacuous).
            held = " ".join(s.body for s in node.notebook.sealed_notes_for_huddle_reasoning())
            assert all(canary in held for canary in tokens)
