"""grep_memory and the text mirror, checked against a brute-force reference."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.agent.grep import (
    EMPTY_MEMORY,
    MAX_HITS,
    SNIPPET_CHARS,
    GrepMemoryTool,
    clip,
)
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import SEARCHABLE_KINDS, EventKind, NewEvent
from pixie.device.store.mirror import MemoryTextMirror
from pixie.device.store.provision import create_data_dir

WORDS = [
    "ada",
    "Priya",
    "lyon",
    "marathon",
    "dinner",
    "Zoë",
    "café",
    "(a",
    "b)",
    "x+y",
    "[tag]",
    "aaa",
    "train",
    "Porto",
    "mañana",
    "the",
    "a",
    "",
]
NAMES = [None, "Ada Lovelace", "Priya Raman", "Zoë", "Jimmy"]
KINDS = list(EventKind)
# What grep never returns: the agent chat, the account's membership records.
UNSEARCHED = frozenset(EventKind) - SEARCHABLE_KINDS

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join).filter(
    lambda t: t.strip()
) | st.text(alphabet="ab \n\réé()xyz", min_size=1, max_size=20).filter(lambda t: t.strip())
long_texts = st.builds(lambda w, k: (w + " ") * k, st.sampled_from(WORDS[:16]), st.integers(1, 90))
events = st.builds(
    lambda kind, at, text, contact: NewEvent(kind=kind, at=at, text=text, contact=contact),
    st.sampled_from(KINDS),
    st.integers(0, 40).map(lambda d: 1_700_000_000_000_000 + d * 3_600_000_000),
    texts | long_texts,
    st.sampled_from(NAMES),
)
batches = st.lists(st.lists(events, min_size=1, max_size=25), min_size=1, max_size=5)

# A pattern grammar on which Python's re and RE2 agree (no \b: RE2's is ASCII-only).
atoms = st.sampled_from(["ada", "lyon", "zoë", "café", "a", "aa", "é", "x", "the", "ñ", "o"])


def _combine(draw_parts: list[str], op: str) -> str:
    if op == "alt":
        return "|".join(draw_parts)
    if op == "dot":
        return ".".join(draw_parts)
    if op == "star":
        return "(?:" + draw_parts[0] + ")+" + "".join(draw_parts[1:])
    if op == "class":
        return "[ay]" + "".join(draw_parts)
    if op == "anchor":
        return "^" + draw_parts[0]
    if op == "end":
        return draw_parts[0] + "$"
    return "".join(draw_parts)


patterns = st.builds(
    _combine,
    st.lists(atoms, min_size=1, max_size=3),
    st.sampled_from(["plain", "alt", "dot", "star", "class", "anchor", "end"]),
) | st.sampled_from(["(a", "b)", "x+y", "[tag", "a{2,1}", "(a+)+$", "ada|", "*lyon"])


def fresh_node(tmp: str) -> Node:
    path = Path(tmp) / "d"
    create_data_dir(path, name="t", role="device")
    return Node.open(path)


def reference(node: Node, query: str) -> list[tuple[str, str]]:
    """Brute force: every event of a searchable kind, Python's re, sorted newest first."""
    try:
        rx = re.compile(query, re.IGNORECASE)
        import re2

        opts = re2.Options()
        opts.log_errors = False
        re2.compile(query, opts)  # what RE2 refuses runs literally, here too
    except Exception:
        rx = re.compile(re.escape(query), re.IGNORECASE)
    names = node.contacts.names()
    records = node.log.all_records()
    # The user's own words name no contact: those of a contact an identity
    # event says is the user carry no name.
    mine = {r.contact_id for r in records if r.kind == EventKind.IDENTITY and r.contact_id}
    hits = []
    for rec in records:
        if rec.kind in UNSEARCHED:
            continue
        body = rec.text.replace("\n", " ").replace("\r", " ")
        named = rec.contact_id and rec.contact_id not in mine
        prefix = f"{names[rec.contact_id]}: " if named else ""
        m = rx.search(prefix + body)
        if m:
            s = max(0, m.start() - len(prefix))
            e = max(s, m.end() - len(prefix))
            hits.append(((rec.at, rec.id), rec.id, clip(body, s, e)))
    hits.sort(reverse=True)
    return [(eid, snip) for _, eid, snip in hits[:MAX_HITS]]


@pytest.mark.slow
@settings(max_examples=60)
@given(batches=batches, queries=st.lists(patterns, min_size=1, max_size=4))
def test_grep_equals_brute_force_reference(
    batches: list[list[NewEvent]], queries: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, fresh_node(tmp) as node:
        for i, batch in enumerate(batches):
            node.log.append(batch, now=0)
            if i == 0:
                node.mirror.ensure_current()  # later batches arrive through the listener
        for q in queries:
            result = GrepMemoryTool(node.mirror).run(q)
            got = [(h.event_id, h.snippet) for h in result.hits]
            assert got == reference(node, q), q
            assert len(result.hits) <= MAX_HITS
            assert all(len(h.snippet) <= SNIPPET_CHARS for h in result.hits)
            assert not {h.kind for h in result.hits} & UNSEARCHED


@settings(max_examples=40)
@given(batches=batches, load_after=st.integers(0, 5))
def test_incremental_mirror_equals_rebuilt(batches: list[list[NewEvent]], load_after: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, fresh_node(tmp) as node:
        for i, batch in enumerate(batches):
            if i == load_after:
                node.mirror.ensure_current()
            node.log.append(batch, now=0)
        incremental = node.mirror.lines()
        rebuilt = MemoryTextMirror(node.db)
        rebuilt.rebuild()
        assert incremental == rebuilt.lines()
        searchable = [r for r in node.log.all_records() if r.kind not in UNSEARCHED]
        assert len(incremental) == len(searchable)


@settings(max_examples=25)
@given(batches=batches)
def test_cold_start_and_other_writers_never_miss(batches: list[list[NewEvent]]) -> None:
    """A mirror built earlier still sees rows another process wrote since."""
    with tempfile.TemporaryDirectory() as tmp, fresh_node(tmp) as reader:
        reader.mirror.ensure_current()
        with Node.open(reader.data.path) as writer:  # a second, independent opener
            for batch in batches:
                writer.log.append(batch, now=0)
                assert len(reader.mirror) <= sum(1 for _ in writer.log.all_records())
        expected = {r.id for r in reader.log.all_records() if r.kind not in UNSEARCHED}
        assert {eid for eid, _ in reader.mirror.lines()} == expected
        cold = MemoryTextMirror(reader.db)  # empty: rebuilt on first use
        assert {eid for eid, _ in cold.lines()} == expected


def test_empty_memory_is_terminal(node: Node) -> None:
    assert GrepMemoryTool(node.mirror).run("anything").render() == EMPTY_MEMORY
    # only chat turns: still nothing to search
    node.log.append([NewEvent(kind=EventKind.AGENT_CHAT_USER, at=0, text="what about ada?")], now=0)
    assert GrepMemoryTool(node.mirror).run("ada").message == EMPTY_MEMORY


def test_chat_turns_are_never_returned(node: Node) -> None:
    node.log.append(
        [
            NewEvent(kind=EventKind.AGENT_CHAT_USER, at=1, text="what did ada say about lyon?"),
            NewEvent(kind=EventKind.AGENT_CHAT_AGENT, at=2, text="ada is running in lyon"),
            NewEvent(kind=EventKind.MESSAGE, at=0, text="lyon marathon!", contact="Ada"),
        ],
        now=0,
    )
    result = GrepMemoryTool(node.mirror).run("lyon")
    assert [h.kind for h in result.hits] == [EventKind.MESSAGE]
    assert result.message == '1 memory matches "lyon":'


def test_twelve_newest_of_many_and_clipping(node: Node) -> None:
    filler = "word " * 200
    node.log.append(
        [
            NewEvent(kind=EventKind.JOURNAL, at=i, text=f"{filler} needle{i} {filler}")
            for i in range(50)
        ],
        now=0,
    )
    result = GrepMemoryTool(node.mirror).run("needle")
    assert len(result.hits) == MAX_HITS
    assert [h.snippet.count("needle") for h in result.hits] == [1] * MAX_HITS
    assert [int(h.snippet.split("needle")[1].split()[0]) for h in result.hits] == list(
        range(49, 37, -1)
    )
    assert all(len(h.snippet) == SNIPPET_CHARS for h in result.hits)
    assert all(h.snippet.startswith("…") and h.snippet.endswith("…") for h in result.hits)


def test_invalid_patterns_fall_back_to_literal(node: Node) -> None:
    node.log.append([NewEvent(kind=EventKind.JOURNAL, at=0, text="call mom (urgent")], now=0)
    result = GrepMemoryTool(node.mirror).run("(urgent")
    assert result.literal and len(result.hits) == 1
    assert "plain text" in result.message
    # a backreference is not RE2 syntax: it is searched literally, not as a backref
    assert GrepMemoryTool(node.mirror).run(r"(m)o\1").hits == ()


def test_pathological_pattern_is_linear(node: Node) -> None:
    node.log.append([NewEvent(kind=EventKind.JOURNAL, at=0, text="a" * 30_000 + "!")], now=0)
    assert GrepMemoryTool(node.mirror).run("(a+)+$").hits == ()
    assert len(GrepMemoryTool(node.mirror).run("(a+)+!").hits) == 1


@given(
    body=st.text(min_size=0, max_size=900),
    data=st.data(),
)
def test_clip_bounds(body: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(body)))
    end = data.draw(st.integers(start, len(body)))
    out = clip(body, start, end)
    assert len(out) <= SNIPPET_CHARS
    if len(body) <= SNIPPET_CHARS:
        assert out == body
    elif end - start <= SNIPPET_CHARS - 2:
        assert body[start:end] in out


def test_tool_schema_is_json_schema(node: Node) -> None:
    tool = GrepMemoryTool(node.mirror)
    assert tool.name == "grep_memory"
    assert tool.parameters["required"] == ["query"]


def test_whose_words_a_hit_shows(node: Node) -> None:
    node.log.append(
        [
            NewEvent(
                kind=EventKind.MESSAGE,
                at=1,
                text="I live in Porto now",
                contact="Inés",
                from_me=True,
            ),
            NewEvent(kind=EventKind.MESSAGE, at=2, text="Porto! jealous", contact="Inés"),
            NewEvent(kind=EventKind.JOURNAL, at=3, text="Porto again", from_me=True),
        ],
        now=0,
    )
    lines = GrepMemoryTool(node.mirror).run("porto").render().splitlines()[1:]
    assert [line.split(": ", 1)[0].split(" · ", 1)[1] for line in lines] == [
        "journal · you",
        "message · Inés",
        "message · you → Inés",
    ]
