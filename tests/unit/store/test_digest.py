"""The state digest is kept current by every write, and no-ops leave no trace."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.errors import DeviceError
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind
from pixie.device.store.provision import create_data_dir

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("upsert"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"])),
        st.tuples(st.just("edit"), st.integers(0, 5), st.sampled_from(["x", "z"])),
        st.tuples(st.just("delete"), st.integers(0, 5)),
        st.tuples(st.just("pin"), st.integers(0, 5)),
        st.tuples(st.just("sealed"), st.text("abc", min_size=1, max_size=5)),
        st.tuples(st.just("guidance"), st.sampled_from(["Tone", "Boundaries"])),
    ),
    max_size=25,
)


@settings(max_examples=30)
@given(ops)
def test_incremental_digest_equals_recomputation(steps: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d"
        create_data_dir(path, name="t", role="device")
        with Node.open(path) as node:
            events: list[str] = []
            for step in steps:
                kind, *args = step
                notes = node.notebook.clear_notes()
                try:
                    if kind == "append":
                        batch = [NewEvent(EventKind.JOURNAL, i, f"e{i}") for i in range(args[0])]
                        events += node.log.append(batch, now=0).ids
                    elif kind == "upsert":
                        node.notebook.upsert_clear(
                            Distilled(NoteKind.PERSON, str(args[0]), str(args[0]), str(args[1]))
                        )
                    elif kind == "edit" and notes:
                        node.notebook.edit(notes[int(args[0]) % len(notes)].id, body=str(args[1]))
                    elif kind == "delete" and notes:
                        node.notebook.delete(notes[int(args[0]) % len(notes)].id)
                    elif kind == "pin" and events:
                        node.notebook.pin_spark(events[int(args[0]) % len(events)])
                    elif kind == "sealed":
                        node.notebook.record_sealed(
                            SealedKind.HUDDLE_PREP, title="t", body=str(args[0])
                        )
                    elif kind == "guidance":
                        node.notebook.add_user_note(NoteKind.GUIDANCE, str(args[0]), "b")
                except DeviceError:
                    pass  # refused writes (a duplicate guidance note) change nothing
                assert node.digest() == node.recompute_digest(), step


def test_no_op_writes_leave_the_digest_alone(node: Node) -> None:
    item = Distilled(NoteKind.PERSON, "ada", "Ada", "Runs.")
    node.notebook.upsert_clear(item)
    (event_id,) = node.log.append([NewEvent(EventKind.JOURNAL, 1, "x", id=None)], now=0).ids
    before = node.digest()
    node.notebook.upsert_clear(item)  # identical content
    node.log.append([NewEvent(EventKind.JOURNAL, 1, "x", id=event_id)], now=0)  # already there
    note_id = node.notebook.clear_notes()[0].id
    node.notebook.edit(note_id, body="Runs.")  # changes nothing
    assert node.digest() == before
    node.notebook.edit(note_id, body="Runs ultras.")
    assert node.digest() != before
    assert node.digest() == node.recompute_digest()
