"""The built-in distiller on your own words: a journal entry's digest, what
it says about you (own statements, health), and calendar entries and series."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence

from pixie.device.distill.contract import (
    MAX_SUMMARY_CHARS,
    ME,
    Appointment,
    DistillRequest,
    Fact,
    FactKind,
)
from pixie.device.distill.extract import FIRST_PERSON, facts_in, quoted
from pixie.device.distill.offline_others import (
    _answer,
    _facts_of_me,
    _phrase,
    _retold,
    about_someone_else,
    others_in,
)
from pixie.device.distill.offline_words import (
    JOURNAL_WROTE_CHARS,
    MAX_ANSWER_FACTS,
    MAX_TAGS,
    _content,
    _first,
    _is_small_talk,
    _iso,
    _join,
    _journal_sentences,
    _most_within,
    _quote,
    _Said,
    _score,
    _topic_hits,
    _topics,
    _unique,
    _utterances,
    day_label,
)
from pixie.device.distill.pages import merge_facts
from pixie.device.distill.plans import appointment_in, birthday_in_calendar, date_words
from pixie.device.distill.series import (
    Series,
    dates_by_month,
    rhythm,
    series_of,
    short,
    skipped_words,
)


def _journal(request: DistillRequest) -> dict[str, object]:
    """A dated digest of a journal entry: what the day was about, its key
    sentences, and what it says about the user."""
    first = request.lines[0]
    weekday, _, long_day = date_words(_iso(first.at))
    said = [
        _Said(line.at, ME, True, t.strip(), _score(t.strip()), i)
        for line in request.lines
        for i, t in enumerate(_journal_sentences(line.text))
        if t.strip()
    ]
    head = [f"Journal, {long_day}."]
    topics = _topics((s.text for s in said), min_hits=1)
    if topics:
        head.append(f"About {_join(topics)}.")
    facts = _facts_of_me(request)
    facts += [f for f in own_statements(said) if f.text not in {g.text for g in facts}]
    tail: list[str] = []
    if facts:
        tail.append("About you: " + "; ".join(_phrase(f) for f in facts) + ".")
    if len(request.lines) > 1:
        tail.append(f"{len(request.lines)} entries, the last on {day_label(request.lines[-1].at)}.")
    # The entry's own sentences take what the rest leaves of the summary,
    # so that nothing is cut mid-word at its end.
    room = MAX_SUMMARY_CHARS - len(" ".join(head + tail)) - len(" Wrote: ") - 2
    key = _most_within(said, min(JOURNAL_WROTE_CHARS, room))
    parts = head + (["Wrote: " + " ".join(_quote(s.text) for s in key)] if key else []) + tail
    topical = _topics((s.text for s in said), min_hits=1)
    answer = _answer(
        " ".join(parts),
        said,
        request,
        min_hits=1,
        facts=merge_facts(facts, limit=MAX_ANSWER_FACTS),
    )
    natures = [n for n in (health_nature(s.text) for s in said) if n]
    answer["tags"] = _unique(["journal", weekday.casefold(), *natures, *topical])[: MAX_TAGS + 2]
    answer["others"] = others_in(request)
    return answer


# -- what your own words say about you ----------------------------------------------
#
# A journal is the user writing about themselves: beyond the patterns (where
# they live, work, what they are allergic to), its first-person sentences
# about their health, work, home, travels and plans are kept as facts about
# them, in their own words turned to "you" ("hurt your left ring finger
# climbing"), at most OWN_STATEMENTS an entry (health and plans first, then
# the ones that say most). They land in the about-you note with the day they
# were written, newest first, so a later entry ("the finger held up fine")
# sits above the older one.

OWN_STATEMENTS = 3
OWN_CHARS = 160
_FIRST_PERSON_WORD = re.compile(r"\b(?:i|i'm|i’m|i've|i’ve|i'd|i’d|i'll|i’ll|my|me|myself)\b", re.I)
_PLANNED = re.compile(
    r"\b(?:resolutions?|plan(?:ning)? to|want to|going to|hope to|intend to|goal|"
    r"this year i|next year|from now on|decided to)\b",
    re.I,
)
_SELF_TOPICS = {
    "health": FactKind.HEALTH,
    "running": FactKind.HEALTH,
    "work": FactKind.OTHER,
    "home": FactKind.OTHER,
    "travel": FactKind.OTHER,
    "money": FactKind.OTHER,
}
# What a health sentence is about, named in the fact (and as a tag of the
# entry), so that "an injury" or "symptoms" finds what the sentence only
# describes ("something in my finger went with a pop", "a pounding head").
_INJURY = re.compile(
    r"\b(?:injur\w*|sprain\w*|strain(?:ed)?|(?:went|go|goes) with a pop|(?:felt|heard) a pop|"
    r"(?:tore|torn) (?:my |a |the )?(?:ligament|muscle|meniscus|tendon|hamstring|calf|acl|"
    r"rotator cuff)|broke (?:my|his|her)|broken (?:arm|leg|wrist|ankle|toe|finger|rib|nose)|"
    r"fractur\w+|twisted|pulled (?:a|my) (?:muscle|hamstring|calf|back)|dislocat\w+|"
    r"bruised|concussion|whiplash|rolled (?:my|an) ankle)\b",
    re.I,
)
_SYMPTOM = re.compile(
    r"\b(?:headaches?|migraines?|pounding head|ringing in (?:my|the|both) ears|tinnitus|"
    r"dizz\w*|light-?headed|nause\w*|vomit\w*|fever|temperature of|cough\w*|rash|"
    r"itch\w*|swollen|swelling|puffiness|puffy|throbbing|numb\w*|tingl\w*|palpitations|"
    r"short of breath|breathless|insomnia|can['’]t sleep|chest pain|back pain|sore throat|"
    r"stomach ache|aches?|aching|dor de cabeça|tontura|febre|tosse)\b",
    re.I,
)
_HEALTH_WORDS = re.compile(
    r"\b(?:hurt|pain(?:s|ful|killers?)?|sore|physio\w*|doctor|gp|blood pressure|prescri\w+|"
    r"medication|tablets?|diagnos\w+|strain\w*|knee|finger|shoulder|ankle|tendon|pulley|"
    r"pressão|médic[oa]|dor)\b|" + _INJURY.pattern + "|" + _SYMPTOM.pattern,
    re.I,
)


# A dose: milligrams or micrograms of anything but food; millilitres and
# units only beside a word of medicine ("120 ml of formula" is no dose).
_DOSE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg)\b", re.I)
_LIQUID_DOSE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:ml|iu|units?)\b", re.I)
_MEDICINE = re.compile(
    r"\b(?:tablets?|pills?|capsules?|dose|doses|prescri\w+|medication|medicine|drops|"
    r"inhaler|injection|syrup|insulin)\b",
    re.I,
)
_NUTRIENT = re.compile(
    r"\b(?:sodium|salt|sugar|caffeine|protein|calories|fibre|fiber|fat|vanilla|milk|formula|"
    r"water|oil|extract)\b",
    re.I,
)
# Whose dose it is, in the writer's own journal: theirs when the sentence
# says me or my, or when it opens on whoever prescribes acting ("She
# increased amlodipine to 10 mg"); not Mum's ("Mum takes 5 mg of ...").
_PRESCRIBED = re.compile(
    r"^(?:she|he|they|the doctor|the gp|my doctor|my gp|dr\.? [A-Z][\w'-]+)\s+"
    r"(?:started|increased|doubled|put|switched|prescribed|upped|raised|lowered|reduced|"
    r"cut|halved|changed|stopped|added)\b",
    re.I,
)


@functools.lru_cache(maxsize=8192)
def medication(text: str) -> bool:
    """Whether a sentence gives a dose of a medicine."""
    if _NUTRIENT.search(text):
        return False
    return bool(_DOSE.search(text) or (_LIQUID_DOSE.search(text) and _MEDICINE.search(text)))


@functools.lru_cache(maxsize=8192)
def health_nature(text: str) -> str | None:
    """ "medication", "injury" or "symptoms" when a sentence tells of one,
    else None."""
    if medication(text):
        return "medication"
    if _INJURY.search(text):
        return "injury"
    if _SYMPTOM.search(text):
        return "symptoms"
    return None


def own_statements(sentences: Sequence[_Said]) -> list[Fact]:
    """Facts about the user from their own first-person sentences (see above)."""
    found: list[tuple[float, Fact]] = []
    for said in sentences:
        text = said.text.strip().lstrip("-•* ").strip()
        # A dose is the writer's with "me" or "my", or when it opens on whoever
        # prescribes acting ("She increased amlodipine to 10 mg every morning").
        dosed = medication(text) and bool(
            _FIRST_PERSON_WORD.search(text) or _PRESCRIBED.match(text)
        )
        if (
            text.endswith("?")
            or _content(text) < 4
            or _is_small_talk(text)
            or not (dosed or _FIRST_PERSON_WORD.search(text))
            or (about_someone_else(text) and not dosed)
            or quoted(text)
            or facts_in(text, None, FIRST_PERSON, loose=True)  # the patterns' own
        ):
            continue
        kinds = [_SELF_TOPICS[t] for t in _topic_hits(text) if t in _SELF_TOPICS]
        if dosed or _HEALTH_WORDS.search(text):
            kinds.insert(0, FactKind.HEALTH)
        if _PLANNED.search(text):
            kinds.insert(0, FactKind.PLAN)
        if not kinds:
            continue
        nature = health_nature(text) if kinds[0] is FactKind.HEALTH else None
        source = f"{nature}, your journal" if nature else "your journal"
        found.append((said.score, Fact(kinds[0], f"{_as_yours(text)} ({source})", said.at)))
    # Health and plans first (they change what the agent should bring up),
    # then what says most.
    found.sort(key=lambda t: (t[1].kind is FactKind.OTHER, -t[0]))
    return [f for _, f in found[:OWN_STATEMENTS]]


def _as_yours(sentence: str) -> str:
    """A sentence the user wrote of themselves, told to them: "I hurt my
    finger" -> "hurt your finger"; cut at a word within OWN_CHARS."""
    return _retold(sentence, "you", OWN_CHARS)


def _calendar(request: DistillRequest) -> dict[str, object]:
    """An appointment: what, which day, what time, where, with whom, and what
    its notes say; a repeating entry as one series (see `series`)."""
    repeating = series_of(request.lines[0].text, request.lines[0].at, request.occurrences)
    if repeating is not None:
        return _series(request, repeating)
    line = request.lines[-1]
    said = _utterances(request.lines)
    appointment = appointment_in(line.text, line.at)
    first_line = line.text.strip().splitlines()[0] if line.text.strip() else "(untitled)"
    parts: list[str] = []
    appointments: list[dict[str, object]] = []
    if appointment is not None:
        _, _, long_day = date_words(appointment.day)
        at_time = f" at {appointment.time}" if appointment.time else ""
        parts.append(f"Appointment: {appointment.what}, on {long_day}{at_time}.")
        people = _where_and_who(parts, appointment, request)
        appointments.append(appointment.as_json() | {"with": list(people)})
    else:
        # The event's own time is all a calendar entry says of its day: no
        # "since", which for an entry ahead would claim the future as past.
        parts.append(f"Calendar entry: {_quote(first_line, 300)}, {day_label(line.at)}.")
    notes = calendar_notes(line.text)
    if notes:
        parts.append(f"Notes: {_quote(notes, NOTES_CHARS)}")
    answer = _answer(" ".join(parts), said, request, min_hits=1)
    answer["appointments"] = appointments
    birthday = birthday_in_calendar(line.text)
    if birthday is not None and len(request.participants) == 1:
        whose, day = birthday
        name = request.participants[0]
        if whose.casefold() in (name.casefold(), _first(name).casefold()):
            answer["person_facts"] = [Fact(FactKind.BIRTHDAY, day, line.at).as_json()]
    return answer


NOTES_CHARS = 400  # of an event's description, in its note


def _where_and_who(
    parts: list[str], appointment: Appointment, request: DistillRequest
) -> tuple[str, ...]:
    """Add where an entry is and with whom to ``parts``; the people."""
    if appointment.place:
        parts.append(f"Where: {appointment.place}.")
    people = appointment.with_ or tuple(request.participants)
    if people:
        parts.append(f"With {_join(list(people))}.")
    return people


def calendar_notes(text: str) -> str:
    """An event's description: what the importer writes after its first
    blank line (confirmation numbers, what to bring, who referred you)."""
    _, blank, rest = text.partition("\n\n")
    return " ".join(rest.split()) if blank else ""


def _series(request: DistillRequest, series: Series) -> dict[str, object]:
    """One note for every occurrence of a repeating entry."""
    found = series.appointment
    count = len(series.days)
    skipped = skipped_words(series)
    parts = [
        f"Repeating: {found.what}, {rhythm(series)}, from {date_words(series.first.isoformat())[2]}"
        f" to {date_words(series.last.isoformat())[2]} ({count} times"
        f"{', ' + skipped if skipped else ''})."
    ]
    upcoming, past = series.around(request.now) if request.now else (None, None)
    if upcoming is not None:
        parts.append(f"Next: {_occasion(upcoming)}.")
    if past is not None:
        parts.append(f"Last: {_occasion(past)}.")
    _where_and_who(parts, found, request)
    for line in request.lines[1:]:  # an occurrence moved, retitled or re-noted
        changed = appointment_in(line.text, line.at)
        if changed is not None and changed.what != found.what:
            parts.append(f"On {short(dt.date.fromisoformat(changed.day))}: {changed.what}.")
    notes = calendar_notes(request.lines[0].text)
    if notes:
        parts.append(f"Notes: {_quote(notes, NOTES_CHARS)}")
    parts.append(f"Dates: {dates_by_month(series.days, SERIES_DATES_CHARS)}.")
    said = _utterances(request.lines[:1])
    answer = _answer(" ".join(parts), said, request, min_hits=1)
    answer["appointments"] = []
    return answer


SERIES_DATES_CHARS = 600  # of a series' list of dates (the newest months kept)


def _occasion(day: dt.date) -> str:
    """ "Sunday 6 December 2026 (2026-12-06)": the day in words and as a date."""
    return f"{date_words(day.isoformat())[2]} ({day.isoformat()})"
