"""Bad input from a sibling: a clear error, a FAILED session with an Abort
queued, and nothing of what it sent half-applied.

The codec is fuzzed (garbage, and valid messages mutated byte by byte or field
by field, must raise `ProtocolError` and nothing else). Then each kind of lie a
sibling can tell in a well-formed message is delivered to a real replica in
the middle of a session, bundled with good records, and the replica must
refuse the whole batch: its dump, digest and marks stay exactly as they were.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled, sealed_hash
from pixie.device.store import replica as syncstore
from pixie.device.store import replicarows
from pixie.device.store.contacts import contact_id_for
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, SealedKind, content_hash
from pixie.device.store.provision import create_data_dir
from pixie.protocol.errors import ProtocolError
from pixie.protocol.hlc import MAX_FORWARD_MS, ClockSkewError, Stamp
from pixie.protocol.reconcile import CELL_BYTES, MAX_DEPTH, TAG_BYTES, Part, Range
from pixie.protocol.sync import Phase, SyncSession
from pixie.protocol.syncmessages import (
    MAX_BODY_CHARS,
    MAX_CIPHERTEXT,
    MAX_MESSAGE_BYTES,
    MAX_NEED,
    MAX_RECORDS,
    MAX_SEQ,
    MAX_SHORT_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    Abort,
    Ack,
    Batch,
    Check,
    ClearFields,
    ContactEntry,
    Hello,
    LogEvent,
    Marks,
    NoteVersion,
    Records,
    Repair,
    SyncMessage,
)
from pixie.protocol.syncwire import decode, encode
from tests.support.synchelp import dump, open_pair, replica, say, sync

SESSION = b"\x01" * 8


# -- the codec ---------------------------------------------------------------------------


def _sample_records() -> Records:
    stamp = Stamp(1_700_000_000_000, 3, "a1b2").encode()
    clear = ClearFields(
        kind="person",
        identity_key="ada",
        title="Ada",
        body="Runs marathons.",
        contact_id="ab" * 16,
        tags=("sport", "family"),
        source_ref="event:x",
        about_date=12,
        created_at=34,
    )
    return Records(
        contacts=(ContactEntry("cd" * 16, "Ada Lovelace", ("Ada", "Countess")),),
        events=(
            LogEvent(str(uuid.uuid4()), "a1b2", 1, "message", 5, None, "t1", None, True, "hi"),
            LogEvent(str(uuid.uuid4()), "a1b2", 2, "journal", 6, "ef" * 16, None, "s", None, "x"),
        ),
        notes=(
            NoteVersion(str(uuid.uuid4()), stamp, "00" * 32, True, False, clear=clear),
            NoteVersion(
                str(uuid.uuid4()), stamp, "11" * 32, False, True, nonce=b"n" * 12, ciphertext=b"c"
            ),
        ),
    )


def _sample_messages() -> list[SyncMessage]:
    marks = Marks(
        log=(("a1b2", 7), ("c3d4", 1)),
        notes=(("a1b2", Stamp(1_700_000_000_000, 0, "a1b2").encode()),),
        contacts=b"\x05" * 16,
    )
    tag = bytes(range(TAG_BYTES))
    split = Range(Part.SPLIT, 0, 0, b"\x06" * (16 * CELL_BYTES))
    return [
        Hello(SESSION, False, b"\x02" * 32, 10, marks),
        Hello(SESSION, True, b"\x03" * 32, 0, Marks(), False),
        Hello(SESSION, True, b"\x03" * 32, 0, Marks(), False, (split,)),
        Batch(SESSION, 0, False, _sample_records()),
        Batch(SESSION, 3, True, Records()),
        Check(SESSION, b"\x04" * 32, 99),
        Repair(
            SESSION,
            (
                split,
                Range(Part.ITEMS, 4, 15, b"\x07" * TAG_BYTES * 3),
                Range(Part.WANT, 60, 1 << 59, tag),
            ),
            (tag,),
        ),
        Abort(SESSION, "no thanks"),
        Ack(SESSION, 5),
    ]


VALID = [encode(m) for m in _sample_messages()]


def test_sample_messages_round_trip() -> None:
    for message in _sample_messages():
        assert decode(encode(message)) == message


def _decodes_or_refuses(data: bytes) -> None:
    """`decode` either returns a message that survives a round trip, or raises
    `ProtocolError`; any other exception fails the test."""
    try:
        message = decode(data)
    except ProtocolError:
        return
    assert decode(encode(message)) == message


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_garbage_is_refused_cleanly(data: bytes) -> None:
    _decodes_or_refuses(data)


@settings(max_examples=300)
@given(
    which=st.sampled_from(VALID),
    edits=st.lists(
        st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]), st.integers(0, 1 << 16)),
        min_size=1,
        max_size=6,
    ),
    junk=st.binary(min_size=1, max_size=8),
)
def test_mutated_bytes_are_refused_cleanly(
    which: bytes, edits: list[tuple[str, int]], junk: bytes
) -> None:
    data = bytearray(which)
    for op, at in edits:
        if not data:
            break
        i = at % len(data)
        if op == "flip":
            data[i] ^= 1 << (at >> 8) % 8
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = junk
        else:
            del data[i : i + 1 + at % 4]
    _decodes_or_refuses(bytes(data))


MSGPACK_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=6,
)


def _paths(value: Any, here: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    yield here
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*here, i))


def _replace(value: Any, path: tuple[int, ...], new: Any) -> Any:
    if not path:
        return new
    out = list(value)
    out[path[0]] = _replace(out[path[0]], path[1:], new)
    return out


@settings(max_examples=400)
@given(which=st.sampled_from(VALID), pick=st.integers(0, 10_000), new=MSGPACK_VALUES)
def test_a_field_replaced_by_anything_is_refused_cleanly(which: bytes, pick: int, new: Any) -> None:
    tree = msgpack.unpackb(which, raw=False)
    paths = list(_paths(tree))
    mutated = _replace(tree, paths[pick % len(paths)], new)
    _decodes_or_refuses(msgpack.packb(mutated, use_bin_type=True))


def _tree(message: SyncMessage) -> Any:
    return msgpack.unpackb(encode(message), raw=False)


def _refused(tree: Any, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode(msgpack.packb(tree, use_bin_type=True))


def _batch_tree() -> Any:
    return _tree(Batch(SESSION, 0, False, _sample_records()))


# Paths into a Batch tree: [code, session, number, last, [contacts, events, notes]].
NOTE = (4, 2, 0)
SEALED = (4, 2, 1)
CONTACT = (4, 0, 0)
# The events are columns (see syncwire.EventColumns); the sample has two.
EVENTS = (4, 1)
(
    IDS,
    ORIGINS,
    ORIGIN_OF,
    SEQS,
    KINDS,
    KIND_OF,
    ATS,
    CONTACTS,
    CONTACT_OF,
    THREADS,
    THREAD_OF,
    SOURCES,
    FROM_ME,
    TEXTS,
) = range(14)


def _col(*path: int) -> tuple[int, ...]:
    return (*EVENTS, *path)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ((*NOTE, 6, 3), "b" * (MAX_BODY_CHARS + 1), "body"),
        ((*NOTE, 6, 2), "t" * (MAX_SHORT_CHARS + 1), "title"),
        ((*NOTE, 6, 5), ["tag"] * (MAX_TAGS + 1), "tags"),
        ((*NOTE, 6, 1), "i" * (MAX_SHORT_CHARS + 1), "identity key"),
        ((*SEALED, 8), b"c" * (MAX_CIPHERTEXT + 1), "ciphertext"),
        ((*SEALED, 7), b"n" * 13, "nonce"),
        ((*CONTACT, 1), "n" * (MAX_SHORT_CHARS + 1), "contact name"),
        ((*CONTACT, 2), ["a"] * 65, "aliases"),
        ((*NOTE, 4), b"h" * 33, "content hash"),
        ((*NOTE, 3), "x" * 65, "origin"),
        ((*NOTE, 1), 10**15, "stamp wall"),
        ((1,), b"s" * 9, "session id"),
        ((2,), -1, "batch number"),
        ((2,), True, "batch number"),
        ((0,), 99, "unknown sync message type"),
    ],
)
def test_oversized_or_malformed_fields_are_refused(
    path: tuple[int, ...], value: Any, match: str
) -> None:
    _refused(_replace(_batch_tree(), path, value), match)


EVENT_CASES: list[tuple[str, tuple[int, ...], Any, str]] = [
    # Every bound of a single event's fields, on one item of its column.
    ("text too long", _col(TEXTS, 0), "x" * (MAX_TEXT_CHARS + 1), "event text"),
    ("thread too long", _col(THREADS, 0), "t" * (MAX_SHORT_CHARS + 1), "thread"),
    ("source too long", _col(SOURCES, 1), "s" * (MAX_SHORT_CHARS + 1), "source"),
    ("kind too long", _col(KINDS, 0), "k" * 25, "event kind"),
    ("origin too long", _col(ORIGINS, 0), "a" * 65, "origin"),
    ("origin not lowercase hex", _col(ORIGINS, 0), "A1B2", "origin"),
    # At SQLite's top, this replica's next append would overflow.
    ("seq at the top", _col(SEQS, 0), (1 << 63) - 1, "seq"),
    ("seq above MAX_SEQ", _col(SEQS, 1), MAX_SEQ + 1, "seq"),
    ("seq zero", _col(SEQS, 0), 0, "seq"),
    ("time out of range", _col(ATS, 1), (1 << 62) + 1, "event time"),
    ("time far negative", _col(ATS, 0), -(1 << 62) - 1, "event time"),
    # Wrong types, in a plain column and in a table.
    ("seq a float", _col(SEQS, 1), 2.0, "seq"),
    ("seq a boolean", _col(SEQS, 1), True, "seq"),
    ("time as text", _col(ATS, 0), "5", "event time"),
    ("text missing", _col(TEXTS, 1), None, "event text"),
    ("text as bytes", _col(TEXTS, 1), b"x", "event text"),
    ("from_me an integer", _col(FROM_ME, 0), 1, "from_me"),
    ("source an integer", _col(SOURCES, 0), 7, "source"),
    ("thread as bytes", _col(THREADS, 0), b"t1", "thread"),
    ("kind missing", _col(KINDS, 1), None, "event kind"),
    ("origin missing", _col(ORIGINS, 0), None, "origin"),
    ("contact id as hex text", _col(CONTACTS, 1), "ef" * 16, "contact id"),
    ("contact id short", _col(CONTACTS, 1), b"\xef" * 15, "contact id"),
    ("ids not bytes", _col(IDS), "ids", "event ids"),
    ("texts not a list", _col(TEXTS), "hi", "event text"),
    ("events not a list", EVENTS, b"events", "events"),
    ("a column missing", EVENTS, [b""] + [[]] * 12, "events"),
    # Columns of the wrong length: every column has one item per id.
    ("a text too few", _col(TEXTS), ["hi"], "event text"),
    ("a seq too many", _col(SEQS), [1, 2, 3], "seq"),
    ("no from_me", _col(FROM_ME), [], "from_me"),
    ("a kind index too few", _col(KIND_OF), [0], "event kind index"),
    ("an id too few", _col(IDS), bytes(16), "one per event"),
    ("ids not in 16s", _col(IDS), bytes(31), "16 bytes each"),
    # Tables: every index names an entry, every entry is used, none twice.
    ("origin index past the table", _col(ORIGIN_OF, 1), 1, "origin index"),
    ("origin index negative", _col(ORIGIN_OF, 0), -1, "origin index"),
    ("contact index past the table", _col(CONTACT_OF, 1), 5, "contact id index"),
    ("thread index a boolean", _col(THREAD_OF, 0), True, "thread index"),
    ("thread index a float", _col(THREAD_OF, 1), 1.0, "thread index"),
    ("a kind entry unused", _col(KIND_OF), [1, 1], "event kind index"),
    ("a thread entry unused", _col(THREADS), ["t1", None, "t9"], "thread index"),
    ("a kind entry twice", _col(KINDS), ["message", "message"], "twice"),
    ("a contact entry twice", _col(CONTACTS), [None, None], "twice"),
    ("origin table not a list", _col(ORIGINS), "a1b2", "origin table"),
]


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [case[1:] for case in EVENT_CASES],
    ids=[case[0] for case in EVENT_CASES],
)
def test_bad_event_columns_are_refused(path: tuple[int, ...], value: Any, match: str) -> None:
    tree = _batch_tree()
    _decodes_or_refuses(msgpack.packb(tree, use_bin_type=True))  # the sample itself is fine
    _refused(_replace(tree, path, value), match)


def test_an_event_id_twice_in_one_batch_is_refused() -> None:
    tree = _batch_tree()
    ids = tree[4][1][IDS]
    _refused(_replace(tree, _col(IDS), ids[:16] * 2), "twice")


def test_too_many_records_are_refused() -> None:
    # Refused before any item is looked at (msgpack's own array and binary bounds).
    _refused(_replace(_batch_tree(), (4, 1), [None] * (MAX_RECORDS + 1)), "malformed|events")
    _refused(_replace(_batch_tree(), _col(SEQS), [1] * (MAX_RECORDS + 1)), "malformed")
    _refused(_replace(_batch_tree(), _col(IDS), bytes(16 * (MAX_RECORDS + 1))), "malformed")


def test_a_batch_of_the_most_events_a_message_takes_round_trips() -> None:
    events = tuple(
        LogEvent(str(uuid.UUID(int=i)), "a1b2", i + 1, "message", i, None, None, None, None, "")
        for i in range(MAX_RECORDS)
    )
    batch = Batch(SESSION, 0, False, Records(events=events))
    assert decode(encode(batch)) == batch


def test_too_many_needed_tags_are_refused() -> None:
    tree = _tree(Repair(SESSION, (), ()))
    _refused(_replace(tree, (3,), b"E" * TAG_BYTES * (MAX_NEED + 1)), "need")
    _refused(_replace(tree, (3,), b"E" * (TAG_BYTES + 1)), "need")


def test_an_oversized_message_is_refused_whole() -> None:
    with pytest.raises(ProtocolError, match="over"):
        decode(b"\x00" * (MAX_MESSAGE_BYTES + 1))
    text = "y" * 60_000
    events = tuple(
        LogEvent(str(uuid.uuid4()), "a1b2", i + 1, "message", 0, None, None, None, None, text)
        for i in range(20)
    )
    with pytest.raises(ProtocolError, match="over"):
        encode(Batch(SESSION, 0, False, Records(events=events)))


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (Range(Part.SPLIT, 0, 0, bytes(3 * CELL_BYTES)), "power of two"),
        (Range(Part.SPLIT, 0, 0, bytes(CELL_BYTES)), "power of two"),
        (Range(Part.SPLIT, 0, 0, bytes(512 * CELL_BYTES)), "power of two"),
        (Range(Part.SPLIT, 0, 0, bytes(2 * CELL_BYTES + 1)), "power of two"),
        (Range(Part.SPLIT, MAX_DEPTH - 1, 0, bytes(4 * CELL_BYTES)), "below depth"),
        (Range(Part.ITEMS, 3, 8, b""), "prefix"),
        (Range(Part.ITEMS, MAX_DEPTH + 1, 0, b""), "depth"),
        (Range(Part.ITEMS, 0, 0, bytes(TAG_BYTES + 1)), "tags"),
        (Range(Part.WANT, 0, 0, bytes(TAG_BYTES - 1)), "tag"),
    ],
)
def test_a_range_out_of_bounds_is_refused(bad: Range, words: str) -> None:
    _refused(_tree(Repair(SESSION, (bad,), ())), words)


def test_a_range_of_an_unknown_part_is_refused() -> None:
    tree = _tree(Repair(SESSION, (Range(Part.WANT, 0, 0, bytes(TAG_BYTES)),), ()))
    _refused(_replace(tree, (2, 0, 0), 3), "part")


def test_repair_ranges_ride_only_on_a_hello_reply_that_streams_nothing() -> None:
    split = (Range(Part.SPLIT, 0, 0, bytes(2 * CELL_BYTES)),)
    _refused(_tree(Hello(SESSION, False, bytes(32), 0, Marks(), True, split)), "repair ranges")
    _refused(_tree(Hello(SESSION, True, bytes(32), 0, Marks(), True, split)), "repair ranges")


# -- a replica under a lying sibling ---------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    """``a`` (the sibling that lies) and ``b`` (the replica under test), in sync
    on a little of everything, then ``a`` with more that ``b`` lacks."""
    a, b = open_pair(tmp_path)
    try:
        cid = a.contacts.add("Ada Lovelace", ["Ada"], now=0)[0]
        for i in range(3):
            say(a, f"before {i}")
        a.notebook.upsert_clear(Distilled(NoteKind.PERSON, cid, "Ada", "Runs.", cid, ("sport",)))
        a.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="prep", body="sealed words")
        _, opener, _ = sync(a, b)
        assert opener.phase is Phase.DONE, opener.error
        a.contacts.add("Grace Hopper", ["Amazing Grace"], now=0)
        for i in range(3):
            say(a, f"after {i}", contact="Grace Hopper")
        a.notebook.upsert_clear(Distilled(NoteKind.PERSON, cid, "Ada", "Runs fast.", cid))
        a.notebook.add_user_note(NoteKind.GUIDANCE, "Be brief", "Short answers.")
        a.notebook.record_sealed(SealedKind.HUDDLE_TAKEAWAY, title="t", body="more sealed")
        yield a, b
    finally:
        a.close()
        b.close()


def _missing(a: Node, marks: Marks) -> Records:
    """What ``a`` streams to a sibling with these marks, in one Records."""
    chunks = list(replica(a).missing(marks))
    return Records(
        contacts=tuple(c for r in chunks for c in r.contacts),
        events=tuple(e for r in chunks for e in r.events),
        notes=tuple(n for r in chunks for n in r.notes),
    )


def _good(a: Node, b: Node) -> Records:
    """Everything ``a`` holds that ``b`` lacks."""
    out = _missing(a, replica(b).marks())
    assert out.contacts and len(out.events) == 3 and len(out.notes) == 3
    return out


def _snapshot(node: Node) -> tuple[object, ...]:
    return dump(node), node.digest(), replica(node).marks()


def _streaming(a: Node, b: Node) -> SyncSession:
    """``b``'s session, answering ``a``'s Hello: streaming, waiting for batches.

    ``b``'s own messages go nowhere: the sibling below is played by the test."""
    opener = SyncSession(replica(a), opener=True)
    opener.start()
    hello = opener.next_message()
    assert hello is not None
    session = SyncSession(replica(b), opener=False)
    session.receive(decode(encode(hello)))
    assert session.phase is Phase.STREAMING
    while session.next_message() is not None:
        pass
    return session


def _assert_refused(
    session: SyncSession, node: Node, before: tuple[object, ...], match: str
) -> None:
    assert session.phase is Phase.FAILED
    assert session.error is not None
    assert match in session.error, session.error
    abort = session.next_message()
    assert isinstance(abort, Abort)
    assert abort.reason == session.error[: len(abort.reason)]
    assert _snapshot(node) == before
    assert node.digest() == node.recompute_digest()


def _deliver(session: SyncSession, message: SyncMessage) -> None:
    session.receive(decode(encode(message)))


Lie = Callable[[Records, Node], Records]


def _event_reusing_a_seq(good: Records, a: Node) -> Records:
    held = next(e for e in a.log.all_records() if e.seq == 3)
    forged = LogEvent(
        str(uuid.uuid4()), held.origin, 3, "message", 1, None, None, None, None, "forged"
    )
    return dataclasses.replace(good, events=(forged, *good.events))


def _events_skipping_a_seq(good: Records, a: Node) -> Records:
    return dataclasses.replace(good, events=(good.events[0], *good.events[2:]))


def _events_starting_beyond_what_is_held(good: Records, a: Node) -> Records:
    return dataclasses.replace(good, events=good.events[1:])


def _body_not_matching_its_hash(good: Records, a: Node) -> Records:
    note = next(n for n in good.notes if n.clear is not None)
    assert note.clear is not None
    bad = dataclasses.replace(
        note, clear=dataclasses.replace(note.clear, body="not what was hashed")
    )
    return dataclasses.replace(good, notes=(*good.notes, bad))


def _ciphertext_not_matching_its_hash(good: Records, a: Node) -> Records:
    note = next(n for n in good.notes if n.clear is None)
    assert note.ciphertext is not None
    flipped = bytes([note.ciphertext[0] ^ 1]) + note.ciphertext[1:]
    bad = dataclasses.replace(note, ciphertext=flipped)
    return dataclasses.replace(good, notes=tuple(bad if n is note else n for n in good.notes))


def _stamp_from_the_future(good: Records, a: Node) -> Records:
    note = good.notes[0]
    ahead = time.time_ns() // 1_000_000 + MAX_FORWARD_MS + 60_000
    stamp = Stamp(ahead, 0, Stamp.decode(note.stamp).origin).encode()
    return dataclasses.replace(good, notes=(*good.notes, dataclasses.replace(note, stamp=stamp)))


def _contact_not_matching_its_name(good: Records, a: Node) -> Records:
    forged = ContactEntry(contact_id_for("Someone Else"), "Ada Lovelace", ())
    return dataclasses.replace(good, contacts=(*good.contacts, forged))


def _unknown_event_kind(good: Records, a: Node) -> Records:
    bad = dataclasses.replace(good.events[-1], kind="telepathy")
    return dataclasses.replace(good, events=(*good.events[:-1], bad))


def _last_event_with(good: Records, **fields: Any) -> Records:
    bad = dataclasses.replace(good.events[-1], **fields)
    return dataclasses.replace(good, events=(*good.events[:-1], bad))


def _blank_event_text(good: Records, a: Node) -> Records:
    return _last_event_with(good, text=" \n ")


def _event_text_with_a_nul(good: Records, a: Node) -> Records:
    return _last_event_with(good, text="a\x00b")


def _thread_with_a_line_break(good: Records, a: Node) -> Records:
    return _last_event_with(good, thread="t\n1")


def _empty_source(good: Records, a: Node) -> Records:
    return _last_event_with(good, source=" ")


def _source_with_a_nul(good: Records, a: Node) -> Records:
    return _last_event_with(good, source="s\x00")


def _note_changing_zone(good: Records, a: Node) -> Records:
    # The person note b already holds, sent again as if it were sealed.
    clear = next(n for n in good.notes if n.clear is not None and n.clear.kind == "person")
    nonce, ciphertext = b"n" * 12, b"ciphertext"
    bad = NoteVersion(
        clear.id,
        clear.stamp,
        sealed_hash(nonce, ciphertext),
        False,
        False,
        nonce=nonce,
        ciphertext=ciphertext,
    )
    return dataclasses.replace(good, notes=(*good.notes, bad))


def _two_notes_sharing_a_stamp(good: Records, a: Node) -> Records:
    note = next(n for n in good.notes if n.clear is not None)
    assert note.clear is not None
    body = "a different body"
    twin = dataclasses.replace(
        note, content_hash=content_hash(body), clear=dataclasses.replace(note.clear, body=body)
    )
    return dataclasses.replace(good, notes=(*good.notes, twin))


LIES: list[tuple[Lie, str]] = [
    (_event_reusing_a_seq, "contradicts"),
    (_events_skipping_a_seq, "sequence order"),
    (_events_starting_beyond_what_is_held, "start at"),
    (_body_not_matching_its_hash, "content hash"),
    (_ciphertext_not_matching_its_hash, "does not match its hash"),
    (_stamp_from_the_future, "ahead"),
    (_contact_not_matching_its_name, "does not match its name"),
    (_unknown_event_kind, "unknown kind"),
    (_blank_event_text, "text is empty"),
    (_event_text_with_a_nul, "NUL"),
    (_thread_with_a_line_break, "thread must be one line"),
    (_empty_source, "source must be a non-empty string"),
    (_source_with_a_nul, "source must be one line"),
    (_note_changing_zone, "changed zone"),
    (_two_notes_sharing_a_stamp, "share one stamp"),
]


@pytest.mark.parametrize(("lie", "match"), LIES, ids=[f.__name__.strip("_") for f, _ in LIES])
def test_a_batch_with_one_lie_among_good_records_leaves_nothing(
    pair: tuple[Node, Node], lie: Lie, match: str
) -> None:
    a, b = pair
    good = _good(a, b)
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Batch(session.session_id, 0, True, lie(good, a)))
    _assert_refused(session, b, before, match)


def test_the_good_records_alone_are_taken(pair: tuple[Node, Node]) -> None:
    """The control for the test above: without the lie, the batch applies."""
    a, b = pair
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Batch(session.session_id, 0, True, _good(a, b)))
    assert session.phase is not Phase.FAILED, session.error
    assert _snapshot(b) != before
    assert b.digest() == b.recompute_digest()


def test_a_stamp_from_the_future_raises_clock_skew(pair: tuple[Node, Node]) -> None:
    a, b = pair
    before = _snapshot(b)
    with pytest.raises(ClockSkewError):
        replica(b).apply(_stamp_from_the_future(_good(a, b), a), in_order=True)
    assert _snapshot(b) == before
    # Within the bound is believed.
    note = _good(a, b).notes[0]
    near = time.time_ns() // 1_000_000 + MAX_FORWARD_MS - 60_000
    stamp = Stamp(near, 0, Stamp.decode(note.stamp).origin).encode()
    assert replica(b).apply(Records(notes=(dataclasses.replace(note, stamp=stamp),)), in_order=True)


def test_batch_one_before_batch_zero_is_refused(
    pair: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    monkeypatch.setattr(replicarows, "BATCH_RECORDS", 2)
    chunks = list(replica(a).missing(replica(b).marks()))
    assert len(chunks) >= 3
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Batch(session.session_id, 1, False, chunks[1]))
    _assert_refused(session, b, before, "batch 1 arrived before batch 0")
    # Later messages of the dead session change nothing either.
    _deliver(session, Batch(session.session_id, 0, False, chunks[0]))
    assert _snapshot(b) == before


def test_a_gap_in_batch_numbers_keeps_what_came_before(
    pair: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are committed on arrival: after a gap, what landed stays, and
    the session fails without touching anything else."""
    a, b = pair
    monkeypatch.setattr(replicarows, "BATCH_RECORDS", 2)
    chunks = list(replica(a).missing(replica(b).marks()))
    session = _streaming(a, b)
    _deliver(session, Batch(session.session_id, 0, False, chunks[0]))
    assert session.phase is Phase.STREAMING, session.error
    after_first = _snapshot(b)
    _deliver(session, Batch(session.session_id, 2, False, chunks[2]))
    _assert_refused(session, b, after_first, "batch 2 arrived before batch 1")
    # The next session picks up where the marks say.
    _, opener, _ = sync(a, b)
    assert opener.phase is Phase.DONE, opener.error
    assert dump(a) == dump(b)


def test_a_gap_in_the_senders_copy_of_a_log_does_not_block_its_siblings(
    tmp_path: Path,
) -> None:
    """Events that came by repair can leave a gap in a replica's copy of another
    origin's log (a repair session cut between its batches: they go by id, not
    by seq). A stream past that gap is what the test above refuses, so a
    Homebase that sent it would fail with every other device, session after
    session, until the device that wrote the log came back. The stream must
    stop at the gap and leave the rest to repair."""
    phone, homebase = open_pair(tmp_path)
    create_data_dir(tmp_path / "tablet", name="tablet", role="device")
    tablet = Node.open(tmp_path / "tablet")
    try:
        for i in range(5):
            say(phone, f"message {i}")
        events = _missing(phone, Marks()).events
        replica(homebase).apply(Records(events=events[:3]), in_order=True)
        replica(homebase).apply(Records(events=events[4:]), in_order=False)  # no 4
        _, opener, _ = sync(tablet, homebase)
        assert opener.phase is Phase.DONE, opener.error
        assert dump(tablet) == dump(homebase)
        _, opener, _ = sync(homebase, phone)
        assert opener.phase is Phase.DONE, opener.error
        assert dump(homebase) == dump(phone)
    finally:
        for node in (phone, homebase, tablet):
            node.close()


def test_a_check_before_the_hello_reply_is_refused(pair: tuple[Node, Node]) -> None:
    _, b = pair
    session = SyncSession(replica(b), opener=True)
    session.start()
    assert session.next_message() is not None
    before = _snapshot(b)
    _deliver(session, Check(session.session_id, b"\x00" * 32, 0))
    _assert_refused(session, b, before, "can't handle Check in state hello sent")


def test_a_repair_while_streaming_is_refused(pair: tuple[Node, Node]) -> None:
    a, b = pair
    session = _streaming(a, b)
    before = _snapshot(b)
    tag = bytes(TAG_BYTES)
    _deliver(session, Repair(session.session_id, (Range(Part.ITEMS, 0, 0),), (tag,)))
    _assert_refused(session, b, before, "can't handle Repair in state streaming")


def test_a_second_hello_is_refused(pair: tuple[Node, Node]) -> None:
    a, b = pair
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Hello(session.session_id, False, b"\x00" * 32, 0, Marks()))
    _assert_refused(session, b, before, "can't handle Hello in state streaming")


def test_a_batch_after_the_stream_ended_is_refused(pair: tuple[Node, Node]) -> None:
    a, b = pair
    good = _good(a, b)
    session = _streaming(a, b)
    _deliver(session, Batch(session.session_id, 0, True, Records(events=good.events[:1])))
    after_first = _snapshot(b)
    _deliver(session, Batch(session.session_id, 1, True, Records(events=good.events[1:])))
    _assert_refused(session, b, after_first, "after the sibling's stream had ended")


def test_an_abort_ends_the_session_without_a_reply(pair: tuple[Node, Node]) -> None:
    a, b = pair
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Abort(session.session_id, "bye"))
    assert session.phase is Phase.FAILED
    assert session.error is not None and "bye" in session.error
    assert session.next_message() is None
    assert _snapshot(b) == before


def test_messages_of_another_session_are_ignored(pair: tuple[Node, Node]) -> None:
    a, b = pair
    good = _good(a, b)
    session = _streaming(a, b)
    before = _snapshot(b)
    _deliver(session, Batch(b"\x09" * 8, 0, True, good))
    _deliver(session, Check(b"\x09" * 8, b"\x00" * 32, 0))
    assert session.phase is Phase.STREAMING
    assert session.stats.ignored == 2
    assert _snapshot(b) == before


class _Liar(syncstore.NodeReplica):
    """Claims to hold far more of every log than it does: the stream skips the
    events, the digests differ, and the session goes to repair."""

    def marks(self) -> Marks:
        m = super().marks()
        return Marks(tuple((o, s + 1000) for o, s in m.log), m.notes, m.contacts)


def _in_state(state: str, a: Node, b: Node) -> tuple[SyncSession, SyncMessage]:
    """``b``'s session in ``state``, and a message it could expect there."""
    if state == "idle":
        session = SyncSession(replica(b), opener=False)
        return session, Hello(SESSION, False, b"\x00" * 32, 0, Marks())
    if state == "hello sent":
        session = SyncSession(replica(b), opener=True, session_id=SESSION)
        session.start()
        session.next_message()
        return session, Hello(SESSION, True, b"\x00" * 32, 0, Marks(), True)
    if state == "streaming":
        session = SyncSession(replica(b), opener=False)
        _deliver(session, Hello(SESSION, False, b"\x00" * 32, 0, Marks()))
        return session, Batch(SESSION, 0, True, _missing(a, Marks()))
    # Repairing: b answers a's session through a liar, until a opens the repair.
    opener = SyncSession(replica(a), opener=True, session_id=SESSION)
    session = SyncSession(_Liar(b.db, b.log, b.origin), opener=False)
    opener.start()
    for _ in range(100):
        message = opener.next_message()
        if isinstance(message, Repair):
            assert session.phase is Phase.REPAIRING
            return session, message
        if message is not None:
            _deliver(session, message)
        reply = session.next_message()
        if reply is not None:
            _deliver(opener, reply)
    raise AssertionError("the session never reached repair")


def _near(value: Any) -> st.SearchStrategy[Any]:
    """Values like ``value``: mostly of its type, so the result often decodes."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.sampled_from([value - 1, value + 1, 0, -1]) | st.integers(0, 1 << 63)
    if isinstance(value, bytes):
        return st.binary(min_size=len(value), max_size=len(value)) | st.binary(max_size=40)
    if isinstance(value, str):
        return st.text(max_size=len(value) + 3) | st.just(value[::-1])
    if isinstance(value, list) and value:
        return st.sampled_from([value[1:], value[:-1], value + value[-1:], value[::-1]])
    return MSGPACK_VALUES


@settings(max_examples=60)
@given(own=st.booleans(), which=st.integers(0, 100), edits=st.integers(1, 3), data=st.data())
@pytest.mark.parametrize("state", ["idle", "hello sent", "streaming", "repairing"])
def test_a_mutated_message_in_any_state_fails_cleanly(
    pair: tuple[Node, Node], state: str, own: bool, which: int, edits: int, data: st.DataObject
) -> None:
    """Whatever arrives, in whatever state: the session either goes on or fails
    with a reason (never raises), and what it refuses leaves nothing behind."""
    a, b = pair
    session, expected = _in_state(state, a, b)
    base = expected if own else _sample_messages()[which % len(VALID)]
    tree = _tree(base)
    tree[1] = SESSION
    for _ in range(edits):
        paths = [p for p in _paths(tree) if p and p[0] != 1]  # keep the session id
        path = data.draw(st.sampled_from(paths))
        old = tree
        for i in path:
            old = old[i]
        tree = _replace(tree, path, data.draw(_near(old)))
    try:
        message = decode(msgpack.packb(tree))
    except ProtocolError:
        event("refused by the codec")
        return
    before = _snapshot(b)
    session.receive(message)
    event(f"{type(message).__name__}: {session.phase.value}")
    if session.phase is Phase.FAILED:
        assert session.error
        assert _snapshot(b) == before
    assert b.digest() == b.recompute_digest()


# -- long records from an honest sibling ---------------------------------------------------


def _encoded_batches(node: Node) -> list[int]:
    """The size of every batch ``node`` streams to an empty sibling."""
    return [len(encode(Batch(SESSION, 0, False, r))) for r in replica(node).missing(Marks())]


def test_long_events_still_fit_in_a_message(tmp_path: Path) -> None:
    """Short texts with the longest thread and source a log accepts: the batch
    cutter must count every field, or a batch outgrows a message and the
    sibling can never sync."""
    a, b = open_pair(tmp_path)
    try:
        thread, source = "ť" * MAX_SHORT_CHARS, "ş" * MAX_SHORT_CHARS
        a.log.append(
            [
                NewEvent(EventKind.MESSAGE, i, "k", thread=thread, source=source)
                for i in range(4000)
            ],
            now=0,
        )
        assert max(_encoded_batches(a)) <= MAX_MESSAGE_BYTES
        _, opener, _ = sync(a, b)
        assert opener.phase is Phase.DONE, opener.error
        assert dump(a) == dump(b)
    finally:
        a.close()
        b.close()


def _assert_cut_by_true_size(node: Node) -> None:
    """Every batch is at most BATCH_BYTES plus its largest record, encoded: what
    the cutter promises, whatever mix of fields the records carry."""
    for records in replica(node).missing(Marks()):
        singles = [
            *(Records(contacts=(c,)) for c in records.contacts),
            *(Records(events=(e,)) for e in records.events),
            *(Records(notes=(n,)) for n in records.notes),
        ]
        largest = max(len(encode(Batch(SESSION, 0, False, r))) for r in singles)
        size = len(encode(Batch(SESSION, 0, False, records)))
        assert size <= replicarows.BATCH_BYTES + largest, (size, replicarows.BATCH_BYTES, largest)


def test_batches_are_cut_by_their_true_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notes with short bodies but long identities, sources and tags, a contact
    with long aliases, events with long threads (at a small BATCH_BYTES, so a
    few hundred records show what thousands would)."""
    monkeypatch.setattr(replicarows, "BATCH_BYTES", 16 * 1024)
    a, b = open_pair(tmp_path)
    try:
        tags = tuple(f"{i:02d}" + "ţ" * 38 for i in range(16))
        a.notebook.upsert_many(
            [
                Distilled(
                    NoteKind.CONVERSATION_DIGEST,
                    f"{i:04d}" + "ĸ" * 196,
                    "t",
                    "b",
                    "ab" * 16,
                    tags,
                    "ŝ" * MAX_SHORT_CHARS,
                )
                for i in range(120)
            ]
        )
        a.contacts.add("Ada Lovelace", ["Ада " + "ж" * 190 + f" {i}" for i in range(70)], now=0)
        a.log.append(
            [NewEvent(EventKind.MESSAGE, i, "k", thread="ť" * 200, source="s") for i in range(200)],
            now=0,
        )
        _assert_cut_by_true_size(a)
        _, opener, _ = sync(a, b)
        assert opener.phase is Phase.DONE, opener.error
        assert dump(a) == dump(b)
    finally:
        a.close()
        b.close()


def test_a_contact_with_many_aliases_still_syncs(tmp_path: Path) -> None:
    """The codec takes at most 64 aliases per contact entry; the book has no
    such bound, so the sender must split, not send what the sibling refuses."""
    a, b = open_pair(tmp_path)
    try:
        a.contacts.add("Ada Lovelace", [f"Ada {i}" for i in range(150)], now=0)
        _, opener, _ = sync(a, b)
        assert opener.phase is Phase.DONE, opener.error
        assert dump(a) == dump(b)
    finally:
        a.close()
        b.close()
