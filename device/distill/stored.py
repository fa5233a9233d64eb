"""The notes distillation has written, as a pass reads them back: one note by
identity, a person's page, with a group's own writes seen before the
database's (`GroupCache`); and the title, date and fact helpers every kind
of note shares."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pixie.device.distill.contract import (
    Fact,
    FactKind,
)
from pixie.device.distill.pages import (
    PersonPage,
    merge_about_you,
    parse_person_page,
    render_about_you,
)
from pixie.device.errors import BadInput
from pixie.device.notebook.clear import (
    Distilled,
    identity_for,
)
from pixie.device.store import distillreads
from pixie.device.store.db import driver_of
from pixie.device.store.notes import (
    MAX_BODY_CHARS,
    MAX_TITLE_CHARS,
    NoteKind,
    clean_tags,
    clean_text,
    clean_title,
    kept_up_identity,
    tags_json,
)

if TYPE_CHECKING:
    pass


MAX_TITLE_NAMES = 4


PAGE_TAGS = {
    FactKind.WORK: "work",
    FactKind.ROLE: "work",
    FactKind.HOME: "home",
    FactKind.FAMILY: "family",
    FactKind.BIRTHDAY: "birthdays",
    FactKind.PET: "pets",
    FactKind.PLAN: "plans",
}
WISH_TAGS = ("gift ideas", "presents")  # a page with a wish: the words people ask with
MAX_PAGE_TAGS = 12


@dataclass(frozen=True, slots=True)
class StoredNote:
    """What the merges need of a stored clear note (read without the ORM:
    a pass reads one per source)."""

    title: str | None
    body: str | None  # None when parked on the Homebase
    tags: str | None  # JSON
    contact_id: str | None
    source_ref: str | None
    about_date: int | None
    user_edited: bool


def stored_note(session: Session, kind: NoteKind, identity: str) -> StoredNote | None:
    group: GroupCache | None = session.info.get(GROUP_KEY)
    if group is not None:
        return group.stored(session, kind, identity)
    return stored_row(session, kind, identity)


def stored_row(session: Session, kind: NoteKind, identity: str) -> StoredNote | None:
    row = distillreads.stored_note(driver_of(session, flush=False), kind.value, identity)
    if row is None:
        return None
    title, body, tags, contact_id, source_ref, about_date, edited = row
    return StoredNote(title, body, tags, contact_id, source_ref, about_date, bool(edited))


def stored_page(session: Session, contact: str) -> StoredNote | None:
    return stored_note(session, NoteKind.PERSON, contact)


def page_base(session: Session, contact: str, stored: StoredNote | None) -> PersonPage:
    """What a pass merges its findings into: the stored page, or, when the
    user has edited it, distillation's own page beside it (the user's page is
    theirs; the upsert writes what it does not say to the page beside)."""
    if stored is not None and stored.user_edited:
        stored = stored_note(session, NoteKind.PERSON, kept_up_identity(contact))
        if stored is not None and stored.user_edited:
            return PersonPage()  # nothing distillation writes would land there
    if stored is None or stored.body is None:
        return PersonPage()
    return parse_person_page(stored.body)


def dated_facts(facts: Sequence[Fact], at: int) -> list[Fact]:
    """Facts an answer left undated, dated by the source's newest line."""
    return [f if f.at is not None else Fact(f.kind, f.text, at) for f in facts]


def merge_facts(body: str | None, facts: Sequence[Fact]) -> tuple[list[Fact], bool]:
    """The about_you facts after adding ``facts`` (see `pages.merge_about_you`),
    and whether that changed them."""
    merged = merge_about_you(body, facts)
    return merged, render_about_you(merged) != (body or "")


def iso_day(at: int) -> str:
    return dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).date().isoformat()


def names_phrase(names: Sequence[str]) -> str:
    shown = list(names[:MAX_TITLE_NAMES])
    if len(names) > MAX_TITLE_NAMES:
        shown.append(f"{len(names) - MAX_TITLE_NAMES} others")
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def fit_title(title: str) -> str:
    title = " ".join(title.split())
    limit = min(MAX_TITLE_CHARS, 120)
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"


class GroupConflict(Exception):
    """A source in a group transaction reads a note that a source before it
    in the group wrote in a way `GroupCache` does not follow: it waits for the
    next group, which starts with it."""


class GroupCache:
    """What the sources before this one in a group transaction wrote (see
    `NotetakingService.distill_group`), so that the merges of a source read
    the notes as those sources left them, exactly as if each had committed
    on its own.

    A note is worked out when a source reads it, from the stored row and the
    items written over it in turn, where the upsert's outcome is plain: the
    note was new, or distillation's own and resident, so it then holds the
    item as the Notebook cleans it. Anything else (the user's note, and so a
    page beside an edited one, a body parked on the Homebase, an item the
    Notebook would refuse) ends the group before the source that reads it
    (`GroupConflict`)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], list[Distilled]] = {}  # by (kind, identity)
        self.beside: dict[tuple[str, str], tuple[str, str]] = {}  # kept-up page -> page
        self.after: dict[tuple[str, str], tuple[int, StoredNote | None]] = {}  # items worked out

    def wrote(self, items: Sequence[Distilled]) -> None:
        for item in items:
            key = (item.kind.value, item.identity_key)
            self.items.setdefault(key, []).append(item)
            if item.kind is NoteKind.PERSON:
                self.beside[(key[0], kept_up_identity(item.identity_key))] = key

    def stored(self, session: Session, kind: NoteKind, identity: str) -> StoredNote | None:
        key = (kind.value, identity)
        page = self.beside.get(key)
        if page is not None:
            self._after(session, page)  # the page's own items all landed on it
        if key not in self.items:
            return stored_row(session, kind, identity)
        return self._after(session, key)

    def _after(self, session: Session, key: tuple[str, str]) -> StoredNote | None:
        items = self.items[key]
        done, row = self.after.get(key, (0, None))
        if done == len(items):
            return row
        if not done:
            row = stored_row(session, items[0].kind, items[0].identity_key)
        for item in items[done:]:
            if row is not None and (row.user_edited or row.body is None):
                raise GroupConflict
            try:
                title = clean_title(item.title)
                body = clean_text(item.body, "body", MAX_BODY_CHARS)
                tags = tags_json(clean_tags(item.tags))
                identity = identity_for(item.kind, item.identity_key, title)
            except BadInput:
                raise GroupConflict from None
            if identity != item.identity_key:
                raise GroupConflict
            row = StoredNote(
                title, body, tags, item.contact_id, item.source_ref, item.about_date, False
            )
        self.after[key] = (len(items), row)
        return row


GROUP_KEY = "pixie_distill_group"
