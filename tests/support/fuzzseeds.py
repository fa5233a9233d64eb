"""Valid peer and sync bodies to mutate, and the mutation that deepens or swaps their values."""

from __future__ import annotations

import copy
from typing import Any

import msgpack
from hypothesis import strategies as st

from pixie.protocol import peerwire, syncwire
from pixie.protocol.hlc import Stamp
from pixie.protocol.reconcile import CELL_BYTES, TAG_BYTES, Part, Range

# Packed as a binary string, then swapped for raw bytes of deep nesting (the
# packer itself refuses to pack nesting past a few hundred levels).
DEEP_MARK = b"\x00deep-nesting-goes-here\x00"


# Around the bound, where Python's recursion limit (1000) bites, and past
# msgpack's own stack (1024).
DEPTHS = st.sampled_from([1000, 8, 9, 998, 999, 1022, 1023, 1024, 1100])


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.text(max_size=40)
    | st.binary(max_size=40)
    | st.sampled_from(
        [0, 1, -1, (1 << 63) - 1, 1 << 62, "", b"", bytes(8), bytes(16), bytes(32), "a1b2"]
    )
    | st.sampled_from(["x" * 70_000, b"\x00" * 300_000, "0" * 64, b"\xff" * 17])
)


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


REPLACEMENTS = (
    VALUES
    | st.just(DEEP_MARK)
    | st.builds(lambda: [DEEP_MARK])  # built afresh: a mutation may change it in place
    | st.builds(lambda: {"k": DEEP_MARK})
)


def _pack(tree: Any, depth: int) -> bytes:
    packed: bytes = msgpack.packb(tree, use_bin_type=True)
    mark = msgpack.packb(DEEP_MARK, use_bin_type=True)
    return packed.replace(mark, b"\x91" * depth + b"\x01")


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a tree (ours: a few levels deep, so recursion is fine here)."""
    found = [path]
    if isinstance(node, list):
        for i, item in enumerate(node):
            found += _paths(item, (*path, i))
    elif isinstance(node, dict):
        for key in sorted(node, key=repr):
            found += _paths(node[key], (*path, key))
    return found


def _mutate_once(data: st.DataObject, root: Any) -> Any:
    """``root`` with one node changed (chosen evenly among all of them): replaced,
    or an item dropped from it, repeated in it or added to it."""
    path = data.draw(st.sampled_from(_paths(root)))
    parent: Any = None
    node = root
    for key in path:
        parent, node = node, node[key]
    op = data.draw(st.sampled_from(["replace", "replace", "replace", "drop", "repeat", "add"]))
    if op in ("drop", "repeat") and isinstance(node, list) and node:
        at = data.draw(st.integers(0, len(node) - 1))
        if op == "drop":
            del node[at]
        else:
            node.insert(at, copy.deepcopy(node[at]))
        return root
    if op == "add" and isinstance(node, list):
        node.append(data.draw(REPLACEMENTS))
        return root
    new = data.draw(REPLACEMENTS)
    if parent is None:
        return new
    parent[path[-1]] = new
    return root


def mutated(data: st.DataObject, packed: bytes) -> bytes:
    """A valid message's bytes, mutated as a tree one to three times and packed again."""
    tree = msgpack.unpackb(packed, raw=False, strict_map_key=False)
    for _ in range(data.draw(st.integers(1, 3))):
        tree = _mutate_once(data, tree)
    return _pack(tree, data.draw(DEPTHS))


ID = "0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10"


HASH = bytes(range(32))


def _peer_seeds() -> list[bytes]:
    request = bytes(range(16))
    messages: list[peerwire.PeerMessage] = [
        peerwire.PairRequest("phone", "device", bytes(32)),
        peerwire.PairAccept("mac", "homebase", bytes(32)),
        peerwire.PairReject("no"),
        peerwire.Ping(7),
        peerwire.Pong(7),
        peerwire.SyncData(syncwire.encode(syncwire.Ack(bytes(8), 3))),
        peerwire.OffloadRequest(request, ID, HASH, b"a body"),
        peerwire.OffloadAck(request, ID, HASH),
        peerwire.HolderRefusal(request, "no"),
        peerwire.FetchRequest(request, ID, HASH),
        peerwire.FetchPart(request, ID, HASH, 10, 4, b"body"),
        peerwire.Release(request, ID, HASH),
        peerwire.Released(request, ID, HASH),
    ]
    return [peerwire.encode_body(m, i + 1) for i, m in enumerate(messages)]


def _sync_seeds() -> list[bytes]:
    session = bytes(range(8))
    stamp = Stamp(1_700_000_000_000, 3, "a1b2").encode()
    events = [
        syncwire.LogEvent(
            f"0b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e1{i}",
            "a1b2" if i % 2 else "c3d4",
            i + 1,
            "message",
            1_700_000_000_000_000 + i,
            None if i % 2 else "ab" * 16,
            "t1",
            None,
            bool(i % 2),
            f"hello {i}",
        )
        for i in range(3)
    ]
    clear = syncwire.ClearFields(
        "person", "ada", "Ada", "Likes mornings.", "cd" * 16, ("friend", "cello"), None, None, 5
    )
    notes = (
        syncwire.NoteVersion(ID, stamp, "ab" * 32, True, False, clear=clear),
        syncwire.NoteVersion(
            "1b9c6a53-3d9f-4a5e-9c61-4f1f0d2b7e10",
            stamp,
            "cd" * 32,
            False,
            True,
            nonce=bytes(12),
            ciphertext=b"sealed",
        ),
    )
    contacts = (syncwire.ContactEntry("ab" * 16, "Ada Lovelace", ("Ada", "Countess")),)
    marks = syncwire.Marks((("a1b2", 4), ("c3d4", 2)), (("a1b2", stamp),), bytes(16))
    tag = b"\x01" * TAG_BYTES
    ranges = (
        Range(Part.SPLIT, 0, 0, bytes(16 * CELL_BYTES)),
        Range(Part.ITEMS, 4, 3, tag * 2),
        Range(Part.WANT, 8, 200, tag),
    )
    messages: list[syncwire.SyncMessage] = [
        syncwire.Hello(session, False, bytes(32), 12, marks),
        syncwire.Hello(session, True, bytes(32), 12, marks, streaming=False),
        syncwire.Batch(session, 0, True, syncwire.Records(contacts, events, notes)),
        syncwire.Check(session, bytes(32), 12),
        syncwire.Repair(session, ranges, (tag,)),
        syncwire.Abort(session, "no"),
        syncwire.Ack(session, 3),
        syncwire.Hello(session, True, bytes(32), 12, marks, False, ranges[:1]),
    ]
    return [syncwire.encode(m) for m in messages]


PEER_SEEDS = _peer_seeds()


SYNC_SEEDS = _sync_seeds()
