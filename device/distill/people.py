"""Person pages: the page a one-to-one thread writes, the facts other sources
add to a page that exists, the pages of a group's people, and the About you
note."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pixie.device.distill.contract import (
    DistillRequest,
    DistillResult,
    Fact,
    FactKind,
    SourceKind,
)
from pixie.device.distill.extract import card_facts
from pixie.device.distill.offline_talk import person_in_group
from pixie.device.distill.pages import (
    PersonPage,
    merge_page,
    render_about_you,
    render_person_page,
)
from pixie.device.distill.prompt import parse_result
from pixie.device.errors import BadInput
from pixie.device.notebook.clear import (
    Distilled,
)
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.notes import (
    ABOUT_YOU_KEY,
    NoteKind,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.agentsaid import (
    GOES_BY,
    IN_CALLS,
    alias_tags,
    call_names,
    cap_agent_facts,
)
from pixie.device.distill.sources import ABOUT_YOU_TITLE, Loaded, log
from pixie.device.distill.stored import (
    MAX_PAGE_TAGS,
    PAGE_TAGS,
    WISH_TAGS,
    dated_facts,
    fit_title,
    merge_facts,
    page_base,
    stored_note,
    stored_page,
)


def person_items(
    session: Session, loaded: Loaded, request: DistillRequest, result: DistillResult
) -> list[Distilled]:
    """The person page a result writes or adds to, read and merged under the
    write lock: for a one-to-one thread its contact's page (created if need
    be), for any other source with one other person the facts it states, added
    to that person's page if they have one."""
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    facts = dated_facts(result.person_facts, newest)
    if loaded.one_to_one and request.person:
        facts = [*card_facts(loaded.details), *facts]
        contact = loaded.one_to_one
        stored = stored_page(session, contact)
        page = merge_page(
            page_base(session, contact, stored),
            facts,
            # An answer without a read keeps the stored one.
            read=[result.person] if result.person else None,
            threads=result.open_threads,
        )
        return [page_item(contact, request.person, page, result.tags)]
    if loaded.source.kind is SourceKind.CALL and len(loaded.participants) == 1:
        name = loaded.names.get(loaded.participants[0], "")
        facts += [
            Fact(FactKind.NOTE, f"{GOES_BY}{label}{IN_CALLS}", newest)
            for label in call_names(loaded.rows, name)
        ]
    if not facts or loaded.source.kind is SourceKind.CONVERSATION or len(loaded.participants) != 1:
        return []
    added = _added_to_page(session, loaded, loaded.participants[0], facts)
    return [added] if added is not None else []


def _added_to_page(
    session: Session, loaded: Loaded, contact: str, facts: Sequence[Fact]
) -> Distilled | None:
    """``facts`` merged into the page ``contact`` already has (its title, tags
    and source kept); None when they have none, or its body is parked on the
    Homebase: a source about someone does not make them a page."""
    stored = stored_page(session, contact)
    if stored is None or stored.body is None:
        return None
    page = cap_agent_facts(merge_page(page_base(session, contact, stored), facts))
    return page_item(
        contact,
        stored.title or loaded.names.get(contact, "someone"),
        page,
        tuple(json.loads(stored.tags)) if stored.tags else (),
        stored.source_ref,
        keep_tags=True,
    )


def other_pages(
    session: Session, loaded: Loaded, result: DistillResult, written: Sequence[Distilled]
) -> list[Distilled]:
    """What a source says about people it names besides its own (the
    answer's ``others``), added to the page of the contact each name
    resolves to, when they have one; never to the source's own people, whose
    pages the source writes in its own right."""
    by_contact: dict[str, list[Fact]] = {}
    own = {*loaded.participants, *(p.identity_key for p in written)}
    newest = max(r[2] for r in loaded.rows)
    for name, said in result.others:
        (fact,) = dated_facts([said], newest)  # an undated fact is the source's, not the card's
        try:
            contact = ContactBook.resolve_in(session, name, loose=True)
        except BadInput:
            contact = None
        if contact is None or contact in own:
            continue
        by_contact.setdefault(contact, []).append(fact)
    added = (_added_to_page(session, loaded, c, facts) for c, facts in by_contact.items())
    return [item for item in added if item is not None]


def page_item(
    contact: str,
    name: str,
    page: PersonPage,
    tags: Sequence[str],
    source_ref: str | None = None,
    *,
    keep_tags: bool = False,
) -> Distilled:
    kinds = () if keep_tags else tuple(PAGE_TAGS[f.kind] for f in page.facts if f.kind in PAGE_TAGS)
    # A gift idea tags the page whoever's source it came from (a page kept
    # as it was still gains them), ahead of the topics: "present ideas for
    # Callum" should find it among a dozen other tags.
    gifts = WISH_TAGS if any(f.kind is FactKind.WISH for f in page.facts) else ()
    aliases = alias_tags(page, name)
    return Distilled(
        kind=NoteKind.PERSON,
        identity_key=contact,
        title=fit_title(name),
        body=render_person_page(page),
        contact_id=contact,
        tags=tuple(dict.fromkeys((*aliases, *gifts, *tags, *kinds)))[:MAX_PAGE_TAGS],
        source_ref=source_ref,
    )


def group_pages(session: Session, loaded: Loaded, request: DistillRequest) -> list[Distilled]:
    """Person pages for the people of a group conversation who have none from
    a one-to-one thread: every contact who writes gets a page. Built by the
    offline distiller from each person's own lines in the group (a model's
    summary of a group is about the group, not about one member), and marked
    with the group as its source, so that a page from a one-to-one thread,
    which carries none, always takes precedence and is never written over."""
    if loaded.source.kind is not SourceKind.CONVERSATION or loaded.one_to_one is not None:
        return []
    pages = []
    for contact_id in loaded.participants:
        stored = stored_page(session, contact_id)
        if stored is not None and stored.source_ref is None:
            continue  # a page from a one-to-one thread
        name = loaded.names.get(contact_id)
        answer = person_in_group(request, name) if name else None
        if not name or answer is None:
            continue
        # The same validation a model's answer gets.
        fields = parse_result({"summary": "-", "facts": [], "tags": [], **answer})
        page = merge_page(
            page_base(session, contact_id, stored),
            fields.person_facts,
            read=[fields.person] if fields.person else [],
            threads=[],
        )
        pages.append(page_item(contact_id, name, page, (), loaded.source.key))
    return pages


def about_you_item(session: Session, facts: Sequence[Fact]) -> Distilled | None:
    """The about_you note with ``facts`` merged in, read and written under the
    same write lock. None when nothing can be merged: the note is the user's
    (their edit wins), or its body is parked on the Homebase."""
    row = stored_note(session, NoteKind.ABOUT_YOU, ABOUT_YOU_KEY)
    if row is not None and row.body is None and not row.user_edited:
        log.info("about_you is offloaded; facts from this source are not merged")
        return None
    # A note the user edited (or deleted) goes to the upsert all the same: it
    # reports the note kept and writes nothing.
    merged, _ = merge_facts(row.body if row is not None else None, facts)
    # Tagged with what it covers, so that "where do I work" finds the note by
    # its label and not only by a word of its body.
    tags = tuple(dict.fromkeys(_ABOUT_TAGS.get(f.kind, f.kind.value) for f in merged))
    return Distilled(
        NoteKind.ABOUT_YOU,
        ABOUT_YOU_KEY,
        ABOUT_YOU_TITLE,
        render_about_you(merged),
        tags=tags[:MAX_PAGE_TAGS],
    )


_ABOUT_TAGS = {
    FactKind.WISH: "wishes",
    FactKind.BIRTHDAY: "birthday",
    FactKind.PET: "pets",
    FactKind.ALLERGY: "allergies",
    FactKind.LIKES: "likes",
    FactKind.FAMILY: "family",
    FactKind.OTHER: "about",
}
