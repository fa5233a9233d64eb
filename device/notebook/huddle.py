"""Huddles and nudges: the only code that reads the sealed zone.

A huddle is a session between the user's agent and a friend's agent. What the
agent prepares and brings back is its private workspace; what it learned from
the other agent is second-hand context about a friend's life, shared in
confidence, and is sealed whatever the caller asks, so it can never render on
the user's screen.

The nudge pass reads both zones (the sealed one through
`NotebookStore.sealed_notes_for_huddle_reasoning`) and emits finished nudges:
a person and an action. It never quotes or paraphrases sealed text, and
nothing converses with it, so there is no one to talk it out of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.store import Distilled, NotebookStore
from pixie.device.store.contactbook import Contact, ContactBook
from pixie.device.store.contacts import clean_name
from pixie.device.store.memlog import EventKind, MemoryEvent
from pixie.device.store.notes import MAX_BODY_CHARS, NoteKind, SealedKind, Zone, clean_text
from pixie.device.store.strictjson import loads_strict
from pixie.protocol.timestamps import format_date

MAX_HUDDLE_ITEMS = 50
MAX_HUDDLE_BYTES = 1_048_576
QUIET_AFTER_DAYS = 30
MIN_MESSAGES_FOR_QUIET = 5
FRESH_HUDDLE_DAYS = 14
UPCOMING_DAYS = 7
_DAY_US = 86_400_000_000


@dataclass(frozen=True, slots=True)
class HuddleRecord:
    contact: str
    prep: tuple[str, ...]
    takeaways: tuple[str, ...]
    from_other_agents: tuple[str, ...]


def read_huddle_file(path: Path) -> HuddleRecord:
    try:
        with path.open("rb") as stream:
            # Bounded: the path may name a device or a pipe that never ends.
            raw = stream.read(MAX_HUDDLE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_HUDDLE_BYTES:
        raise BadInput(f"{path} is larger than 1 MiB")
    try:
        obj = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not valid UTF-8") from None
    except BadInput as exc:
        raise BadInput(f"{path}: {exc}") from None
    return parse_huddle(obj)


def parse_huddle(obj: Any) -> HuddleRecord:
    if not isinstance(obj, dict):
        raise BadInput("a huddle record must be a JSON object")
    allowed = {"contact", "prep", "takeaways", "from_other_agents"}
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r:.40}")
    if "contact" not in obj:
        raise BadInput("missing field 'contact'")

    def texts(key: str) -> tuple[str, ...]:
        values = obj.get(key, [])
        if not isinstance(values, list) or len(values) > MAX_HUDDLE_ITEMS:
            raise BadInput(f"{key} must be a list of at most {MAX_HUDDLE_ITEMS} texts")
        return tuple(clean_text(v, f"an item of {key}", MAX_BODY_CHARS) for v in values)

    record = HuddleRecord(
        clean_name(obj["contact"]), texts("prep"), texts("takeaways"), texts("from_other_agents")
    )
    if not (record.prep or record.takeaways or record.from_other_agents):
        raise BadInput(
            "a huddle record needs at least one prep, takeaway or from_other_agents text"
        )
    return record


def record_huddle(
    store: NotebookStore,
    contacts: ContactBook,
    record: HuddleRecord,
    *,
    zone: Zone = Zone.SEALED,
) -> list[str]:
    """File a huddle's material; returns the new note ids.

    ``zone`` applies to prep and takeaways only. Material from other agents is
    sealed unconditionally. The contact is looked up, never created: a contact
    that exists only because of a huddle would let the chat side learn that a
    huddle happened.
    """
    try:
        contact_id: str | None = contacts.resolve(record.contact)
    except NotFound:
        contact_id = None
    ids: list[str] = []
    own = [(SealedKind.HUDDLE_PREP, t) for t in record.prep]
    own += [(SealedKind.HUDDLE_TAKEAWAY, t) for t in record.takeaways]
    if zone is Zone.CLEAR and own:
        if contact_id is None:
            raise BadInput(f"no contact named {record.contact!r} to file clear huddle notes under")
        lines = [f"Prep: {t}" for t in record.prep] + [f"Takeaway: {t}" for t in record.takeaways]
        result = store.upsert_clear(
            Distilled(
                kind=NoteKind.CONVERSATION_DIGEST,
                identity_key=f"huddle:{contact_id}",
                title=f"Huddle with {record.contact}",
                body="\n".join(lines),
                contact_id=contact_id,
                tags=("huddle",),
                source_ref=f"huddle:{contact_id}",
            )
        )
        ids.append(result.note_id)
        own = []
    for kind, text in own:
        ids.append(
            store.record_sealed(
                kind,
                title=f"Huddle with {record.contact}",
                body=text,
                contact_id=contact_id,
                contact_name=record.contact,
            )
        )
    for text in record.from_other_agents:
        ids.append(
            store.record_sealed(
                SealedKind.FROM_OTHER_AGENTS,
                title=f"From {record.contact}'s agent",
                body=text,
                contact_id=contact_id,
                contact_name=record.contact,
                from_other_agents=True,
            )
        )
    return ids


@dataclass(frozen=True, slots=True)
class Nudge:
    person: str
    action: str

    def as_json(self) -> dict[str, str]:
        return {"person": self.person, "action": self.action}


def nudges(store: NotebookStore, now: int) -> list[Nudge]:
    """The built-in rules: upcoming plans, threads gone quiet, fresh huddle context."""
    out: list[Nudge] = []
    with store.database.reading() as session:
        names: dict[str | None, str] = dict(session.execute(select(Contact.id, Contact.name)).all())
        upcoming = session.execute(
            select(MemoryEvent.contact_id, MemoryEvent.at)
            .where(
                MemoryEvent.kind == EventKind.CALENDAR.value,
                MemoryEvent.contact_id.is_not(None),
                MemoryEvent.at >= now,
                MemoryEvent.at < now + UPCOMING_DAYS * _DAY_US,
            )
            .order_by(MemoryEvent.at)
        ).all()
        last_talk = session.execute(
            select(MemoryEvent.contact_id, func.max(MemoryEvent.at), func.count())
            .where(
                MemoryEvent.kind.in_([EventKind.MESSAGE.value, EventKind.CALL.value]),
                MemoryEvent.contact_id.is_not(None),
            )
            .group_by(MemoryEvent.contact_id)
        ).all()
    seen: set[tuple[str, str]] = set()

    def add(person: str, action: str, rule: str) -> None:
        if (person, rule) not in seen:
            seen.add((person, rule))
            out.append(Nudge(person, action))

    for contact_id, at in upcoming:
        name = names.get(contact_id)
        if name:
            add(name, f"You have plans with {name} on {format_date(at)}: confirm them.", "plans")
    for contact_id, last, count in sorted(last_talk, key=lambda r: r[1]):
        name = names.get(contact_id)
        quiet_days = (now - last) // _DAY_US
        if name and count >= MIN_MESSAGES_FOR_QUIET and quiet_days >= QUIET_AFTER_DAYS:
            add(name, f"Check in with {name}: you last talked {quiet_days} days ago.", "quiet")
    # Sealed material decides *who* deserves a check-in; the text says nothing
    # of it. The name comes from the contact book alone: the name a huddle was
    # filed under is sealed text too, and for someone the book does not know
    # it would say who the huddle was with (so such a huddle nudges no one).
    for note in store.sealed_notes_for_huddle_reasoning():
        if now - note.created_at <= FRESH_HUDDLE_DAYS * _DAY_US:
            person = names.get(note.contact_id) if note.contact_id else None
            if person:
                add(
                    person,
                    f"Check in with {person}: a recent huddle is worth following up.",
                    "huddle",
                )
    return out
