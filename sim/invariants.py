"""The invariants, each checked from the stores themselves, never from what the
code under test says about them.

After every step (`check_all`):

1. No note exists nowhere: each live clear note has its body here, or points at
   a holding the Homebase has committed, under the same id and hash, owned by
   this device, whose bytes re-hash to it.
2. No body was cleared without a valid ack: every pointer names a (note, hash)
   that the simulator itself saw the holder acknowledge. (The fetch half, a
   body accepted only if it re-hashes, is checked where a fetch is accepted.)
4. A user edit is never overwritten: once a replica holds a user's version of
   a note, it never again holds a distilled one.
6. The relay never carries plaintext: checked as each envelope is handed over.
7. No sealed plaintext on the clear side: no clear row or log text holds a
   sealed canary (every step), nor does any clear note, `search_clear` answer
   or `grep_memory` answer (every `FULL_EVERY` steps and at the end); both
   from the first sealed canary the world mints, as none can be found before.
8. A removed device stays out (worlds of three peers or more): a peer whose
   book says a device was removed takes in no envelope of it (checked as each
   is admitted); at the end every member holds each removal and each removed
   device was told at its next sync (`pixie.sim.account.check_removed`).

Every `FULL_EVERY` steps and at the end: each replica's maintained digest
equals the digest recomputed from its rows (a digest that drifts would make
invariant 5 meaningless), rebuilt here from one read of the rows, and at the
end by `Node.recompute_digest` as well. Invariant 5's first half (a no-op upsert leaves the digest
alone) is checked around each distillation; its second half and invariant 3
are checked at the end (`check_converged`, `check_digest_only`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NoReturn, Protocol

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store import itemindex
from pixie.device.store.db import peek
from pixie.device.store.notes import (
    NoteKind,
    clean_tags,
    content_hash,
    is_kept_up_identity,
    kept_up_identity,
    kept_up_title,
    tags_json,
    unsaid,
)
from pixie.device.store.replica import NodeReplica
from pixie.protocol.clock import SeededEntropy
from pixie.protocol.digest import (
    Fingerprint,
    alias_item,
    contact_item,
    detail_item,
    event_item,
    item_hash,
    note_item,
)
from pixie.protocol.offload import body_hash
from pixie.protocol.sync import Loopback, SyncSession
from pixie.sim.network import SEALED_CANARY

NAMES = {
    0: "no error escapes the real code",
    1: "no note exists nowhere",
    2: "no clear without a valid ack, no fetch without a re-hash",
    3: "after faults stop and a final sync: equal digests, logs and Notebooks",
    4: "a user edit is never overwritten by a distillation result",
    5: "no-op writes never change a digest; converged peers exchange only digests",
    6: "the relay never carries a byte of plaintext",
    7: "no sealed plaintext reaches a clear-side API or tool output",
    8: "a removed device stays out: refused by every member that holds its removal",
}

_POINTERS = (
    "SELECT id, content_hash, holder FROM note "
    "WHERE zone = 'clear' AND deleted = 0 AND holder IS NOT NULL ORDER BY id"
)
_BODILESS = (
    "SELECT id FROM note WHERE zone = 'clear' AND deleted = 0 "
    "AND body IS NULL AND holder IS NULL ORDER BY id"
)
# The holding's body and, if the device (``?3``) is among its owners, its key.
_HOLDING = (
    "SELECT body, (SELECT owner FROM holding_owner o WHERE o.note_id = holding.note_id "
    "AND o.content_hash = holding.content_hash AND o.owner = ?3) "
    "FROM holding WHERE note_id = ?1 AND content_hash = ?2"
)
_UPSERT_ROW = (
    "SELECT title, body, holder, content_hash, tags, contact_id, source_ref, about_date, "
    "user_edited, deleted FROM note WHERE zone = 'clear' AND kind = ? AND identity_key = ?"
)


class InvariantViolated(Exception):
    """An invariant does not hold; ``number`` is its place in `NAMES`."""

    def __init__(self, number: int, detail: str) -> None:
        super().__init__(f"invariant {number} ({NAMES[number]}): {detail}")
        self.number = number
        self.detail = detail


class Peer(Protocol):
    """What the invariants read of one simulated peer."""

    @property
    def name(self) -> str: ...

    @property
    def node(self) -> Node: ...

    @property
    def key(self) -> bytes: ...

    def new_replica(self) -> NodeReplica: ...


class World(Protocol):
    """What the invariants read of a run (`pixie.sim.world.World` is one):
    they see its state, and never drive it."""

    @property
    def peers(self) -> Mapping[str, Peer]: ...

    @property
    def device(self) -> Peer: ...

    @property
    def homebase(self) -> Peer: ...

    @property
    def entropy(self) -> SeededEntropy: ...

    @property
    def tick(self) -> int: ...

    @property
    def sealed_minted(self) -> bool: ...

    @property
    def acked(self) -> set[tuple[str, str]]: ...

    @property
    def edited(self) -> dict[str, set[str]]: ...

    @property
    def revoked(self) -> set[str]: ...


def _fail(number: int, detail: str) -> NoReturn:
    raise InvariantViolated(number, detail)


FULL_EVERY = 10  # steps between the costlier checks (every clear-side API, digest rebuilds)
_SEALED_IN_CLEAR = (
    "SELECT (SELECT count(*) FROM note WHERE zone = 'clear' AND "
    "(instr(title, ?) OR instr(body, ?) OR instr(tags, ?))), "
    "(SELECT count(*) FROM memory_event WHERE instr(text, ?))"
)


# Skip work whose outcome is known, never a check that could fail:
# invariant 7 looks for a sealed canary, and the world mints each one itself
# (`World.canary`), so until it has minted one no store, reader or tool can
# hold one and those checks wait for the first; a digest is read around a
# distillation only when invariant 5 compares it (the upsert is a no-op).
# (`scripts/simulate --baseline` turns this off, to time the old way.)
SKIP_FOREGONE = True


# Read each peer's rows for the per-step checks in one statement instead of
# one per check (the checks then run on what was read, in the same order and
# with the same outcome: nothing writes between them), and rebuild a digest
# for invariant 5 from one read of the rows (`rebuilt_digest`) rather than
# through ORM objects. Off with `--baseline`.
ONE_READ = True

# The per-step reads of one peer, each row tagged: bodiless live clear notes
# (1), user-edited notes (4), on the device the live clear notes that point at
# a holder (1, 2), and once a sealed canary exists the clear rows and log texts
# that hold one (7). Ordered by tag, then id.
_BODILESS_ROWS, _EDITED_ROWS, _POINTER_ROWS, _SEALED_ROWS = range(4)
_STEP_BASE = (
    f"SELECT {_BODILESS_ROWS}, id, NULL, NULL FROM note WHERE zone = 'clear' AND deleted = 0 "
    "AND body IS NULL AND holder IS NULL "
    f"UNION ALL SELECT {_EDITED_ROWS}, id, NULL, NULL FROM note WHERE user_edited = 1"
)
_STEP_POINTERS = (
    f" UNION ALL SELECT {_POINTER_ROWS}, id, content_hash, holder FROM note "
    "WHERE zone = 'clear' AND deleted = 0 AND holder IS NOT NULL"
)
_STEP_SEALED = (
    f" UNION ALL SELECT {_SEALED_ROWS}, "
    "(SELECT count(*) FROM note WHERE zone = 'clear' AND "
    "(instr(title, ?) OR instr(body, ?) OR instr(tags, ?))), "
    "(SELECT count(*) FROM memory_event WHERE instr(text, ?)), NULL"
)
_STEP_SQL = {
    (device, sealed): _STEP_BASE
    + (_STEP_POINTERS if device else "")
    + (_STEP_SEALED if sealed else "")
    + " ORDER BY 1, 2"
    for device in (False, True)
    for sealed in (False, True)
}
_HOLDINGS = (
    "SELECT note_id, content_hash, body, (SELECT owner FROM holding_owner o "
    "WHERE o.note_id = holding.note_id AND o.content_hash = holding.content_hash "
    "AND o.owner = ?) FROM holding WHERE (note_id, content_hash) IN (VALUES {})"
)


def check_all(world: World, *, full: bool = False) -> None:
    """The per-step checks; ``full`` adds the costlier ones (done every
    `FULL_EVERY` steps and at the end)."""
    sealed = world.sealed_minted or not SKIP_FOREGONE
    if ONE_READ:
        _check_step(world, sealed=sealed)
    else:
        check_bodies(world)
        check_edits(world)
        if sealed:
            check_sealed_rows(world)
    if full or world.tick % FULL_EVERY == 0:
        if sealed:
            check_sealed(world)
        check_digests(world, full=full)


def _check_step(world: World, *, sealed: bool) -> None:
    """`check_bodies`, `check_edits` and (with ``sealed``) `check_sealed_rows`,
    from one read of each peer's rows and one of the holdings the device's
    pointers name: the same checks in the same order, failing alike."""
    canary = SEALED_CANARY.decode()
    params = (canary,) * 4 if sealed else ()
    rows: dict[str, dict[int, list[tuple[Any, ...]]]] = {}
    for peer in world.peers.values():
        tagged: dict[int, list[tuple[Any, ...]]] = {tag: [] for tag in range(4)}
        sql = _STEP_SQL[(peer is world.device, sealed)]
        for tag, *values in peek(peer.node.db, sql, params):
            tagged[tag].append(tuple(values))
        rows[peer.name] = tagged
    pointers = rows[world.device.name][_POINTER_ROWS]
    held: dict[tuple[str, str], tuple[Any, Any]] = {}
    if pointers:
        pairs = [v for note_id, chash, _ in pointers for v in (note_id, chash)]
        sql = _HOLDINGS.format(", ".join(["(?, ?)"] * len(pointers)))
        mine = [world.device.key.hex(), *pairs]  # the owner asked about, then the pairs
        for note_id, chash, body, owner in peek(world.homebase.node.db, sql, mine):
            held[(note_id, chash)] = (body, owner)
    # Invariants 1 and 2, as `check_bodies`.
    for peer in world.peers.values():
        for note_id, *_ in rows[peer.name][_BODILESS_ROWS]:
            _fail(1, f"{peer.name}: note {note_id} has no body and no holder")
    _check_pointers(world, pointers, held)
    # Invariant 4, as `check_edits`.
    for peer in world.peers.values():
        now = {r[0] for r in rows[peer.name][_EDITED_ROWS]}
        _check_edited(world, peer.name, now)
    # Invariant 7 at the source, as `check_sealed_rows`.
    if sealed:
        for peer in world.peers.values():
            notes, events, _ = rows[peer.name][_SEALED_ROWS][0]
            _check_sealed_counts(peer.name, notes, events)


def _check_pointers(
    world: World,
    pointers: list[tuple[Any, ...]],
    held: dict[tuple[str, str], tuple[Any, Any]],
) -> None:
    """Invariants 1 and 2 for each of the device's pointers (note id, hash,
    holder, in id order), given the holdings found at the Homebase."""
    device_key = world.device.key.hex()
    for note_id, chash, holder in pointers:
        if (note_id, chash) not in world.acked:
            _fail(2, f"note {note_id}'s body was cleared without a valid ack")
        if holder != world.homebase.key.hex():
            _fail(1, f"note {note_id} points at a holder that is not the Homebase")
        found = held.get((note_id, chash))
        if found is None:
            _fail(1, f"note {note_id}'s body is cleared here and not held by its holder")
        body, owner = found
        if body_hash(bytes(body)).hex() != chash:
            _fail(1, f"the holding of note {note_id} does not re-hash to its pointer")
        if owner != device_key:
            _fail(1, f"the holding of note {note_id} belongs to another device")


def _check_edited(world: World, name: str, now: set[str]) -> None:
    lost = world.edited[name] - now
    if lost:
        _fail(4, f"{name}: the user's version of {sorted(lost)[0]} was overwritten")
    world.edited[name] = now


def _check_sealed_counts(name: str, notes: int, events: int) -> None:
    if notes or events:
        _fail(7, f"{name}: sealed plaintext in {notes} clear notes, {events} events")


def check_bodies(world: World) -> None:
    """Invariants 1 and 2."""
    for peer in world.peers.values():
        for (note_id,) in peek(peer.node.db, _BODILESS):
            _fail(1, f"{peer.name}: note {note_id} has no body and no holder")
    pointers = peek(world.device.node.db, _POINTERS)
    held: dict[tuple[str, str], tuple[Any, Any]] = {}
    for note_id, chash, _ in pointers:
        found = peek(world.homebase.node.db, _HOLDING, (note_id, chash, world.device.key.hex()))
        if found:
            held[(note_id, chash)] = found[0]
    _check_pointers(world, pointers, held)


def check_edits(world: World) -> None:
    """Invariant 4: user-edited versions only ever give way to user-edited ones."""
    for peer in world.peers.values():
        now = {r[0] for r in peek(peer.node.db, "SELECT id FROM note WHERE user_edited = 1")}
        _check_edited(world, peer.name, now)


def check_sealed_rows(world: World) -> None:
    """Invariant 7 at the source every clear-side reader draws from: no clear
    row and no log text holds a sealed canary."""
    canary = SEALED_CANARY.decode()
    for peer in world.peers.values():
        notes, events = peek(peer.node.db, _SEALED_IN_CLEAR, (canary,) * 4)[0]
        _check_sealed_counts(peer.name, notes, events)


def check_sealed(world: World) -> None:
    """Invariant 7, through every clear-side reader a tool or display uses."""
    canary = SEALED_CANARY.decode()
    for peer in world.peers.values():
        view = peer.node.notebook.clear_view()
        for note in view.clear_notes():
            text = " ".join([note.title, note.body or "", *note.tags])
            if canary in text:
                _fail(7, f"{peer.name}: clear note {note.id} holds sealed plaintext")
        # With search by meaning on, the nearest clear notes fill places no
        # term match took (score 0, ``by_meaning``): being near the canary's
        # made-up word is no leak (their texts were read just above), a term
        # match is.
        if any(not found.by_meaning for found in view.search_clear(canary)):
            _fail(7, f"{peer.name}: search_clear finds sealed plaintext")
        if GrepMemoryTool(peer.node.mirror).run(canary).hits:
            _fail(7, f"{peer.name}: grep_memory finds sealed plaintext")


# Every row a state digest has an item for, tagged with the item's kind.
_EVENT, _NOTE, _CONTACT, _ALIAS, _DETAIL = range(5)
_DIGEST_ROWS = (
    f"SELECT {_EVENT}, id, NULL, NULL, NULL, NULL FROM memory_event "
    f"UNION ALL SELECT {_NOTE}, id, updated_at, content_hash, user_edited, deleted FROM note "
    f"UNION ALL SELECT {_CONTACT}, id, name, NULL, NULL, NULL FROM contact "
    f"UNION ALL SELECT {_ALIAS}, alias_key, contact_id, alias, NULL, NULL FROM contact_alias "
    f"UNION ALL SELECT {_DETAIL}, contact_id, field, value, at, NULL FROM contact_detail"
)


def rebuilt_digest(node: Node) -> Fingerprint:
    """The state digest rebuilt from the store's rows (one read), as
    `Node.recompute_digest` rebuilds it: an item per event, note version,
    contact, alias and contact detail."""
    return Fingerprint.of(rebuilt_items(node))


def rebuilt_items(node: Node) -> list[bytes]:
    """Every item of the state digest, read from the store's rows (one read)."""
    items: list[bytes] = []
    for tag, a, b, c, d, e in peek(node.db, _DIGEST_ROWS):
        if tag == _EVENT:
            items.append(event_item(a))
        elif tag == _NOTE:
            items.append(note_item(a, b, c, bool(d), bool(e)))
        elif tag == _CONTACT:
            items.append(contact_item(a, b))
        elif tag == _ALIAS:
            items.append(alias_item(a, b, c))
        else:
            items.append(detail_item(a, b, c, d))
    return items


def check_digests(world: World, *, full: bool = False) -> None:
    """Each replica's maintained digest equals the one rebuilt from its rows:
    rebuilt here with one read (`rebuilt_digest`), and with ``full`` (the end
    of a run) by `Node.recompute_digest` too; with `ONE_READ` off, by
    `Node.recompute_digest` alone each time, as before."""
    for peer in world.peers.values():
        maintained = peer.node.digest()
        if ONE_READ:
            drifted = maintained != rebuilt_digest(peer.node) or (
                full and maintained != peer.node.recompute_digest()
            )
        else:
            drifted = maintained != peer.node.recompute_digest()
        if drifted:
            _fail(5, f"{peer.name}: the maintained digest drifted from its rows")
        if full and not index_is_maintained(peer.node):
            _fail(5, f"{peer.name}: the item index drifted from its rows")


def index_is_maintained(node: Node) -> bool:
    """Whether the item index repair reads (see `itemindex`) holds exactly the
    digest's items, and each of its cells what its items sum to."""
    if not itemindex.is_built(node.db):
        return True  # built by the first repair, from the rows
    wanted = {itemindex.parts(i[:17], item_hash(i)) for i in rebuilt_items(node)}
    return itemindex.stored(node.db) == wanted and itemindex.cells_agree(node.db)


def upsert_is_noop(node: Node, item: Distilled) -> bool:
    """Whether upserting ``item`` must leave everything as it is: the stored
    note is the user's, or already says exactly this."""
    rows = peek(node.db, _UPSERT_ROW, (item.kind.value, item.identity_key))
    if not rows:
        return False
    title, body, holder, chash, tags, contact_id, source_ref, about_date, edited, deleted = rows[0]
    if edited:
        # The user's text wins. A live, resident person page (not distillation's
        # own page beside one) sends what it does not say to the page beside.
        if (
            item.kind is not NoteKind.PERSON
            or deleted
            or body is None
            or holder is not None
            or is_kept_up_identity(item.identity_key)
        ):
            return True
        section = unsaid(body, item.body)
        if not section:
            return True
        assert item.identity_key is not None
        beside = replace(
            item,
            identity_key=kept_up_identity(item.identity_key),
            title=kept_up_title(item.title),
            body=section,
            contact_id=item.contact_id or contact_id,
        )
        return upsert_is_noop(node, beside)
    same_body = body == item.body if holder is None else chash == content_hash(item.body)
    return bool(
        same_body
        and title == item.title
        and tags == tags_json(clean_tags(list(item.tags)))
        and contact_id == item.contact_id
        and source_ref == item.source_ref
        and about_date == item.about_date
    )


def _dump(node: Node) -> dict[str, list[tuple[Any, ...]]]:
    """What converges, comparably: bodies apart (an offloaded note has none here)."""
    db = node.db
    return {
        # Not (origin, seq): an event imported on both peers under one id is one
        # event, filed by each under its own origin before they met.
        "events": peek(
            db,
            "SELECT id, kind, at, contact_id, thread, source, from_me, text "
            "FROM memory_event ORDER BY id",
        ),
        "notes": peek(
            db,
            "SELECT id, zone, updated_at, content_hash, deleted, user_edited, kind, "
            "identity_key, title, contact_id, tags, source_ref, about_date, created_at, "
            "nonce, ciphertext FROM note ORDER BY id",
        ),
        "bodies": peek(db, "SELECT id, body FROM note WHERE body IS NOT NULL ORDER BY id"),
        "contacts": peek(db, "SELECT id, name, name_key FROM contact ORDER BY id"),
        "aliases": peek(
            db, "SELECT alias_key, contact_id, alias FROM contact_alias ORDER BY alias_key"
        ),
    }


def check_converged(world: World) -> None:
    """Invariant 3: every replica still in the account holds the same log,
    Notebook and contacts (each compared with the device's)."""
    a = world.device.node
    da = _dump(a)
    for peer in world.peers.values():
        if peer is world.device or peer.name in world.revoked:
            continue
        b = peer.node
        if a.digest() != b.digest():
            _fail(
                3,
                f"digests of device and {peer.name} differ after the final sync "
                f"({a.digest().count} vs {b.digest().count})",
            )
        db = _dump(b)
        for what in ("events", "notes", "contacts", "aliases"):
            if da[what] != db[what]:
                only = sorted(set(map(str, da[what])) ^ set(map(str, db[what])))
                _fail(3, f"the {what} differ after the final sync: {only[0][:120]}")
        bodies_b = dict(db["bodies"])
        for note_id, body in da["bodies"]:
            if note_id in bodies_b and bodies_b[note_id] != body:
                _fail(3, f"note {note_id} has two different bodies")


def check_digest_only(world: World) -> None:
    """Invariant 5, second half: a session between converged peers is one Hello each way."""
    a, b = world.device, world.homebase
    loop = Loopback(
        SyncSession(a.new_replica(), opener=True, entropy=world.entropy),
        SyncSession(b.new_replica(), opener=False),
    )
    loop.run()
    if loop.log != [("a", "Hello"), ("b", "Hello")]:
        said = ", ".join(f"{who}:{what}" for who, what in loop.log[:6])
        _fail(5, f"converged peers exchanged more than digests: {said}")


__all__ = [
    "NAMES",
    "InvariantViolated",
    "World",
    "check_all",
    "check_converged",
    "check_digest_only",
    "upsert_is_noop",
]
