"""From a loaded source to the request a model answers, and from its result
back to notes: a digest's title, its tags, its date facets. No I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pixie.device.distill.contract import (
    ME,
    DistillRequest,
    DistillResult,
    Line,
    SourceKind,
    make_request,
)
from pixie.device.distill.offline_mail import mail_subject
from pixie.device.distill.offline_words import day_label
from pixie.device.distill.plans import appointment_in, date_words, day_start_us
from pixie.device.distill.series import rhythm, series_of
from pixie.device.notebook.clear import (
    Distilled,
)
from pixie.device.store.contacts import name_tag
from pixie.device.store.notes import (
    MAX_TAG_CHARS,
    MAX_TAGS,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.posts import post_identity
from pixie.device.distill.sources import DIGEST_KIND, NOT_FOR_MODELS, Loaded, Row
from pixie.device.distill.stored import fit_title, iso_day, names_phrase

# -- from a source to a request and back to notes (no I/O) ------------------------------


def build_request(loaded: Loaded) -> DistillRequest:
    """What the model is shown: this source's own lines, nothing else."""
    src, names = loaded.source, loaded.names
    others = tuple(names.get(c, "someone") for c in loaded.participants)

    def line(row: Row) -> Line:
        _, kind, at, cid, me, text = row
        me = me or kind == "journal"  # a journal is the user's own, however it was filed
        return Line(at, ME if me else names.get(cid or "", "someone"), me, text, kind)

    lines = [line(r) for r in loaded.rows]
    person = names.get(loaded.one_to_one) if loaded.one_to_one else None
    if src.kind is SourceKind.CONVERSATION:
        title = (
            f"conversation with {person} (one-to-one)"
            if person
            else f"group conversation with {names_phrase(others) or 'nobody else'}"
        )
    elif src.kind is SourceKind.POST:
        first = loaded.rows[0]
        title = "a post by the user" if first[4] else f"a post by {lines[0].speaker}"
    elif src.kind is SourceKind.JOURNAL:
        title = "the user's journal"
    elif src.kind is SourceKind.CALENDAR:
        what = "a repeating calendar entry" if len(loaded.occurrences) > 1 else "a calendar entry"
        title = f"{what}{' with ' + names_phrase(others) if others else ''}"
    elif src.kind is SourceKind.MAIL:
        title = f"an email thread{' with ' + names_phrase(others) if others else ''}"
    else:
        what = "voicemail from" if loaded.rows[0][1] == "voicemail" else "call with"
        title = f"a {what} {names_phrase(others) or 'someone'}"
    earlier = [line(r) for r in loaded.earlier]
    # A card's numbers and address reach the person's page from the card
    # itself (`card_facts`); a model, perhaps a remote one, is not shown them.
    details = tuple((f, v) for f, v in loaded.details if f not in NOT_FOR_MODELS)
    return make_request(
        src.kind,
        title,
        person,
        others,
        lines,
        earlier,
        details,
        loaded.occurrences,
        loaded.now,
    )


def note_title(loaded: Loaded, request: DistillRequest) -> str:
    """A digest's title: made from the source, never from a model's answer."""
    src = loaded.source
    if src.kind is SourceKind.CONVERSATION:
        if request.person:
            return fit_title(request.person)
        return fit_title(f"{names_phrase(request.participants) or 'Just you'} (group)")
    first = request.lines[0]
    day = day_label(first.at)
    if src.kind is SourceKind.POST:
        who = "You" if first.from_me else first.speaker
        return fit_title(f"{who[:1].upper()}{who[1:]}, {day}: {' '.join(first.text.split())}")
    if src.kind is SourceKind.JOURNAL:
        newest = request.lines[-1].at
        return fit_title(f"Journal, {date_words(iso_day(newest))[2]}")
    if src.kind is SourceKind.CALENDAR:
        repeating = series_of(first.text, first.at, request.occurrences)
        if repeating is not None:
            return fit_title(f"{repeating.appointment.what} — {rhythm(repeating)}")
        return fit_title(_calendar_title(request.lines[-1]))
    if src.kind is SourceKind.MAIL:
        subject = mail_subject(first.text) or "(no subject)"
        who = names_phrase(request.participants)
        return fit_title(f"Email: {subject}{' — ' + who if who else ''}")
    if first.kind == "voicemail":
        return fit_title(f"Voicemail from {names_phrase(request.participants) or 'someone'}, {day}")
    # "Call with": the word a question about a call asks with, in the title.
    return fit_title(f"Call with {names_phrase(request.participants) or 'someone'}, {day}")


def _calendar_title(line: Line) -> str:
    """ "Dentist check-up — Saturday 14 March 2026, 10:00": what, and the day
    in words, so that a question naming the day or the month finds it."""
    found = appointment_in(line.text, line.at)
    if found is None:
        first = line.text.strip().splitlines()[0] if line.text.strip() else "(untitled)"
        return f"{first} — {day_label(line.at)}"
    when = date_words(found.day)[2] + (f", {found.time}" if found.time else "")
    return f"{found.what} — {when}"


def _date_facets(loaded: Loaded, request: DistillRequest) -> tuple[tuple[str, ...], int | None]:
    """Tags naming the day a journal entry or an appointment is about (its ISO
    date, weekday and month, lower case) and that day (with its start time)."""
    src = loaded.source
    if src.kind is SourceKind.JOURNAL:
        day = iso_day(request.lines[-1].at)
        weekday, month, _ = date_words(day)
        return ("journal", day, weekday.casefold(), month.casefold()), None
    if src.kind is SourceKind.CALENDAR:
        first = request.lines[0]
        repeating = series_of(first.text, first.at, request.occurrences)
        if repeating is not None:
            weekday = (repeating.weekday or "").casefold()
            facets = ("calendar", "series", repeating.cadence, weekday)
            # The series is about its next occurrence when the pass ran (a
            # search of the days ahead finds it), else its last one, on the
            # wall clock as a one-off appointment's day is.
            upcoming = [at for at in request.occurrences if at >= request.now]
            when = upcoming[0] if upcoming and request.now else request.occurrences[-1]
            return tuple(t for t in facets if t), repeating.local_start(when)
        line = request.lines[-1]
        found = appointment_in(line.text, line.at)
        if found is None:
            return ("calendar",), None
        weekday, month, _ = date_words(found.day)
        start = day_start_us(found.day)
        if found.time:
            hours, minutes = found.time.split(":")
            start += (int(hours) * 60 + int(minutes)) * 60_000_000
        return ("appointment", "calendar", found.day, weekday.casefold(), month.casefold()), start
    if src.kind is SourceKind.MAIL:
        return ("email",), None
    return (), None


def digest_items(loaded: Loaded, request: DistillRequest, result: DistillResult) -> list[Distilled]:
    """The digest of the source (the person page is `person_items`)."""
    src = loaded.source
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    contact = loaded.one_to_one
    if src.kind is not SourceKind.CONVERSATION and len(loaded.participants) == 1:
        contact = loaded.participants[0]
    facets, about = _date_facets(loaded, request)
    tags = tuple(dict.fromkeys((*facets, *result.tags, *_people_tags(loaded, contact))))
    tags = tags[:MAX_TAGS]
    identity = src.key
    if src.kind is SourceKind.POST:
        identity = post_identity(loaded.rows[0])
    return [
        Distilled(
            kind=DIGEST_KIND[src.kind],
            identity_key=identity,
            title=note_title(loaded, request),
            body=result.summary,
            contact_id=contact,
            tags=tags,
            source_ref=src.key,
            about_date=about if about is not None else newest,
        )
    ]


MAX_PEOPLE_TAGS = 4  # names tagged on a digest of several people's source


def _people_tags(loaded: Loaded, contact: str | None) -> list[str]:
    """The names of the people in a source with several (a group chat, a
    meeting, a mail to three people), as tags: a search filtered to one of
    them finds it although no single contact owns it. None when the source
    has more than MAX_PEOPLE_TAGS others (a mailing list, a big party)."""
    names = [loaded.names.get(c, "") for c in loaded.participants]
    if loaded.source.kind is SourceKind.CALENDAR and loaded.rows:
        # An event's contact is its first attendee; the rest are named on
        # its "With:" line.
        found = appointment_in(loaded.rows[0][5], loaded.rows[0][2])
        if found is not None:
            names = list(dict.fromkeys([*names, *found.with_]))
    if len(names) > MAX_PEOPLE_TAGS:
        return []
    own = name_tag(loaded.names.get(contact, "")) if contact else ""
    return [t for t in dict.fromkeys(name_tag(n)[:MAX_TAG_CHARS] for n in names) if t and t != own]
