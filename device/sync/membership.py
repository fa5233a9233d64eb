"""The account's members on this peer: the records it writes when it admits a
new peer or removes one, and its sibling book kept in step with the records
it holds (`pixie.protocol.membership` says what they mean).

Pairing is between two peers; when the account grows past two, the inviter
then writes an "add" record for the joiner into its memory log (and, the
first time, records for itself and for every sibling paired before records
existed). The log carries it to
every sibling at its next sync, and `reconcile`, run after every session
that took anything in, adds the new peer to each sibling book: a laptop
paired with the phone is then synced with the Homebase too, directly.

`remove` writes a "remove" record; each peer that holds it drops the peer
from its siblings and keeps its key in `removed_sibling`, whose envelopes its
`Admission` answers with a notice (`PeerLink`) and never takes in. What the
removed peer already holds stays with it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pixie.device.errors import BadInput, NotFound
from pixie.device.node.keyed import Node
from pixie.device.store.db import put_meta
from pixie.device.store.memlog import EventKind, NewEvent, account_records
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.protocol import membership
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.membership import ADD, REMOVE, Members, Record

log = logging.getLogger("pixie.membership")

MIN_FINGERPRINT_CHARS = 6  # of a fingerprint that names a device on the command line
# The meta row that says this peer was removed from the account: by whom, when.
REMOVED_META = "account_removed"


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What `reconcile` changed: siblings added and removed here, and this
    peer's own removal if the records say so."""

    added: tuple[SiblingInfo, ...] = ()
    removed: tuple[bytes, ...] = ()
    out: Record | None = None


def _records(node: Node) -> list[Record]:
    """The records in this peer's log that decode (one that does not counts
    for nothing, and is logged)."""
    records = []
    for text in account_records(node.db):
        try:
            records.append(membership.decode(text))
        except ProtocolError as exc:
            log.warning("membership record set aside: %s", exc)
    return records


def account(node: Node) -> Members:
    """The account's members as the records in this peer's log say (a record
    that does not decode or verify counts for nothing)."""
    return membership.members(_records(node))


def _signed(node: Node, wanted: list[tuple[str, SiblingInfo]]) -> list[Record]:
    """``wanted`` (action, peer) as records signed by this peer, each a
    microsecond after the one before: their order is the order given.

    They are dated after every record this peer holds, whatever its clock
    says. Records count in the order of their times, so a removal written
    by a phone whose clock runs behind the Homebase's must not come before
    the records that made the phone and the removed device members: it
    would count for nothing (its signer not yet a member), and the device
    stay in the account."""
    identity = node.identity()
    held = [r.at for r in _records(node)]
    start = max(node.clock.now_us(), max(held, default=0) + 1)
    return [
        membership.sign(
            identity,
            action,
            info.key,
            name=info.name,
            role=info.role,
            relay=info.relay,
            at=start + i,
        )
        for i, (action, info) in enumerate(wanted)
    ]


def _write(node: Node, records: list[Record]) -> None:
    if records:
        node.log.append([NewEvent(EventKind.MEMBERSHIP, r.at, r.text(), id=r.id) for r in records])


def _founding(node: Node, held: Members, relay: str) -> list[tuple[str, SiblingInfo]]:
    """ "add" for this peer and for each sibling paired before records
    existed (none that the log already holds or removed)."""
    out: list[tuple[str, SiblingInfo]] = []
    me = node.public_key()
    if me not in held.members:
        out.append((ADD, SiblingInfo(me, node.name, node.role, relay, 0)))
    for sibling in node.siblings.all():
        if sibling.key not in held.members and sibling.key not in held.removed:
            out.append((ADD, sibling))
    return out


def welcome(node: Node, joiner: SiblingInfo) -> Reconciled:
    """After pairing with ``joiner`` as the inviter: write its "add" record
    (with this account's founding records, the first time), for every
    sibling to learn of it at its next sync."""
    held = account(node)
    others = [s for s in node.siblings.all() if s.key != joiner.key]
    if not others and not held.members:
        # Two peers that know each other need no record; the first one
        # comes with a third peer, founding records with it.
        return Reconciled()
    wanted = _founding(node, held, joiner.relay)
    if joiner.key not in held.members and not any(i.key == joiner.key for _, i in wanted):
        wanted.append((ADD, joiner))
    records = _signed(node, wanted)
    _write(node, records)
    log.info("wrote %d membership record(s) for %s", len(records), fingerprint(joiner.key))
    return reconcile(node)


def find(node: Node, which: str) -> SiblingInfo:
    """The sibling ``which`` names: its name (any case) or the start of its
    fingerprint (at least `MIN_FINGERPRINT_CHARS` characters)."""
    wanted = which.strip()
    if not wanted:
        raise BadInput("name the device: its name or the start of its fingerprint")
    siblings = node.siblings.all()
    named = [s for s in siblings if s.name.casefold() == wanted.casefold()]
    if not named and len(wanted) >= MIN_FINGERPRINT_CHARS:
        prefix = wanted.replace(":", "").replace(" ", "").lower()
        named = [
            s
            for s in siblings
            if fingerprint(s.key).replace(":", "").replace(" ", "").lower().startswith(prefix)
        ]
    if not named:
        raise NotFound(f"no device of this account is named {wanted!r} (see `pixie devices`)")
    if len(named) > 1:
        raise BadInput(
            f"{len(named)} devices match {wanted!r}; name one by its fingerprint "
            "(see `pixie devices`)"
        )
    return named[0]


def remove(node: Node, which: str) -> SiblingInfo:
    """Remove the device ``which`` names from the account: a signed "remove"
    record (after this account's founding records, the first time), applied
    here at once and at each sibling's next sync."""
    target = find(node, which)
    held = account(node)
    _write(node, _signed(node, [*_founding(node, held, target.relay), (REMOVE, target)]))
    reconcile(node)
    log.info("removed %s (%s) from the account", target.name, fingerprint(target.key))
    return target


def reconcile(node: Node) -> Reconciled:
    """Bring the sibling book in step with the records: add each member this
    peer does not know yet, drop each one removed. Siblings paired before
    records existed, and so named by none, stay as they are."""
    held = account(node)
    me = node.public_key()
    known = {s.key for s in node.siblings.all()}
    gone = node.siblings.removed()
    added: list[SiblingInfo] = []
    removed: list[bytes] = []
    for key, record in held.members.items():
        if key == me or key in known or key in gone:
            continue
        info = SiblingInfo(key, record.name, record.role, record.relay, record.at)
        node.siblings.add(info)
        added.append(info)
        log.info("%s (%s) joined the account", record.name, fingerprint(key))
    for key, record in held.removed.items():
        if key == me or key in gone:
            continue
        node.siblings.remove(key, name=record.name, at=record.at, by=record.signer)
        removed.append(key)
        log.info("%s (%s) was removed from the account", record.name, fingerprint(key))
    out = held.removed.get(me)
    if out is not None and removed_from(node) is None:
        note_removed(node, out.signer, at=out.at)
    return Reconciled(tuple(added), tuple(removed), out)


def note_removed(node: Node, by: bytes, *, at: int | None = None) -> None:
    """Remember that sibling ``by`` says this peer was removed from the account."""
    when = node.clock.now_us() if at is None else at
    put_meta(node.db, REMOVED_META, json.dumps({"by": by.hex(), "at": when}))


def removed_from(node: Node) -> tuple[str, int] | None:
    """(who, when in microseconds) if this peer was told it was removed from
    the account; who is the remover's name if it is known here, else its
    fingerprint."""
    value = node.db.meta().get(REMOVED_META)
    if value is None:
        return None
    try:
        data = json.loads(value)
        by, at = bytes.fromhex(data["by"]), int(data["at"])
    except (ValueError, KeyError, TypeError):
        return None
    sibling = node.siblings.get(by)
    return (sibling.name if sibling is not None else fingerprint(by)), at


__all__ = [
    "REMOVED_META",
    "Reconciled",
    "account",
    "find",
    "note_removed",
    "reconcile",
    "remove",
    "removed_from",
    "welcome",
]
