"""The built-in distiller: the embedded default, and the last resort behind a model.

Deterministic, offline and dependency-free: the same request always gives the
same answer, on every machine, so a pass that re-derives a note re-derives it
word for word and the Notebook's no-op rule keeps it untouched. It answers in
the same JSON a model would and goes through the same validation.

It writes what the source means rather than copies of it:

* a conversation digest says who talked, when, about what, and what is still
  open or arranged, with the few lines that say most;
* the person of a one-to-one thread (or the one other person of a call, a
  post or a calendar entry) gets facts, each with the day it was said: work,
  home, family, birthday, pets, plans (`extract.FIRST_PERSON` on their own
  lines, `extract.SECOND_PERSON` on the user's lines to them), a read on the
  relationship (how often, who writes, what about, how recently), and open
  threads (unanswered questions, the latest plan);
* facts about the user come only from the user's own lines, by the same
  first-person patterns (where they live and work, allergies, diet, likes,
  people close to them, ...);
* a post digest describes the post (who, when, what about, replies) and never
  repeats the post, whose text is the note's title already;
* a journal entry gets a dated digest of what the day was about, and a
  calendar entry an appointment (what, which day, what time, where, with whom);
* tags come from a small topic lexicon, plus any hashtags the user wrote.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import cast

from pixie.device.distill.contract import (
    MAX_FACT_CHARS,
    MAX_OPEN_THREADS,
    MAX_OTHERS,
    MAX_PERSON_CHARS,
    MAX_PERSON_FACTS,
    MAX_SUMMARY_CHARS,
    ME,
    Appointment,
    BackendFailure,
    DistillRequest,
    Fact,
    FactKind,
    Failure,
    Line,
    SourceKind,
    fact_key,
)
from pixie.device.distill.extract import (
    EMAIL,
    FIRST_PERSON,
    MONTHS,
    SECOND_PERSON,
    WEEKDAYS,
    Said,
    appointment_in,
    arranges,
    birthday_in_calendar,
    date_words,
    facts_in,
    plan_in,
    quoted,
    sentences,
)
from pixie.device.distill.pages import merge_facts
from pixie.device.distill.series import (
    Series,
    dates_by_month,
    rhythm,
    series_of,
    short,
    skipped_words,
)
from pixie.device.store.memlog import MAIL_AUTOMATED_MARK

HIGHLIGHTS = 4  # lines quoted in a conversation summary
JOURNAL_WROTE_CHARS = 800  # of a journal entry's own sentences kept in its digest
QUOTE_CHARS = 180
MAX_TAGS = 4
MAX_ANSWER_FACTS = 10  # MAX_FACTS, the bound on an answer
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class OfflineDistiller:
    """The `Backend` that needs nothing: no network, no model, no randomness."""

    name = "offline"

    async def answer(self, request: DistillRequest) -> object:
        return self.answer_now(request)

    def answer_now(self, request: DistillRequest) -> object:
        """The same answer, without a checkpoint: it waits on nothing, so a
        pass may ask for it on the worker thread that reads and writes the
        source (`LLMRouter.distill_now`).

        It reads whatever people wrote; should a source it cannot read
        raise, that source fails (and is tried again next pass) and the pass
        goes on: one odd message must not stop every other source, or a
        daemon that restarts into the same source. Only the error's type is
        said, never the text that caused it."""
        try:
            return distill(request)
        except Exception as exc:  # any bug on any text: this source fails, not the pass
            raise BackendFailure(Failure.BROKEN, type(exc).__name__) from None

    async def aclose(self) -> None:
        return None


def distill(request: DistillRequest) -> dict[str, object]:
    """The answer a model would give, as a JSON-ready object."""
    request = without_media(request)
    if request.kind is SourceKind.CONVERSATION:
        return _conversation(request)
    if request.kind is SourceKind.POST:
        return _post(request)
    if request.kind is SourceKind.JOURNAL:
        return _journal(request)
    if request.kind is SourceKind.CALENDAR:
        return _calendar(request)
    if request.kind is SourceKind.MAIL:
        return _mail(request)
    return _call(request)


# -- the kinds of source -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Said:
    at: int
    speaker: str
    from_me: bool
    text: str
    score: float
    n: int  # position, for stable ordering


def _conversation(request: DistillRequest) -> dict[str, object]:
    said = _utterances(request.lines)
    who = request.person or _names(request.participants)
    first, last = request.lines[0].at, request.lines[-1].at
    count = len(request.lines)
    noun = "message" if count == 1 else "messages"
    span = _span(first, last)
    parts = [f"{count} {noun} with {who} {span}." if who else f"{count} {noun}, all yours, {span}."]
    topics = _topics(s.text for s in said)
    if topics:
        parts.append(f"Mostly about {_join(topics)}.")
    highlights = _best(said, HIGHLIGHTS)
    if highlights:
        parts.append("Highlights:")
        parts.extend(f"- {_when(s.at, last)}, {_who(s)}: “{_quote(s.text)}”" for s in highlights)
    hanging = _hanging_question(said)
    if hanging is not None:
        parts.append(f"Still open: {_who(hanging)} asked “{_quote(hanging.text)}”")
    plan = plan_in([Said(s.at, s.text) for s in said])
    if plan is not None:
        parts.append(f"Plans: {plan.text} (arranged {_when(plan.at or last, last)}).")
    numbers = _numbers_said(request.lines, "\n".join(parts), last, _NUMBERS)
    if numbers:
        parts.append("Numbers: " + "; ".join(numbers) + ".")
    emails = _numbers_said(request.lines, "\n".join(parts), last, (_EMAIL,))
    if emails:
        parts.append("Emails: " + "; ".join(emails) + ".")
    answer = _answer("\n".join(parts), said, request, min_hits=2)
    if request.person:
        page = person_page(request, said, request.person)
        answer.update(page)
    answer["others"] = others_in(request)
    return answer


CHAT_NUMBERS = 6  # numbers (and emails) listed in a conversation summary


def _numbers_said(
    lines: Sequence[Line], shown: str, last: int, patterns: Sequence[re.Pattern[str]]
) -> list[str]:
    """What the lines give by ``patterns`` (phone numbers, codes and amounts;
    email addresses) that the summary does not already quote, each with who
    gave it and when ("0113 496 0324 (Priya Shah, 24 Jan)"), the newest
    CHAT_NUMBERS in the order said: a number given in passing is what is
    asked for later, and a highlight rarely holds it."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for line in lines:
        if line.kind not in ("message", "call", "voicemail"):
            continue
        if not (_HAS_DIGIT.search(line.text) or "@" in line.text):
            continue  # every pattern needs one or the other
        # A call's turns each have their speaker: a number you gave is yours.
        turns = (
            [(who, mine, text) for who, mine, text in _call_turns(line)]
            if line.kind == "call"
            else [(line.speaker, line.from_me, line.text)]
        )
        for speaker, mine, text in turns:
            for number in _numbers_in(text, patterns):
                if number in seen or number in shown:
                    continue
                seen.add(number)
                who = "you" if mine else speaker
                found.append((number, f"{number} ({who}, {_when(line.at, last)})"))
    # A code inside a phone number listed too is the same number ("900318"
    # in "+44 7700 900318"); "£15" beside "£150" is not.
    kept = [
        text
        for number, text in found
        if not any(o != number and _within(number, o) for o, _ in found)
    ]
    return kept[-CHAT_NUMBERS:]


def _numbers_in(text: str, patterns: Sequence[re.Pattern[str]]) -> Iterator[str]:
    """What ``patterns`` find in ``text``, pattern by pattern, in order; a
    phone number only with eight digits or more (so no date or amount)."""
    for pattern in patterns:
        for match in pattern.finditer(text):
            found = match.group(0).strip()
            if pattern is not _PHONE_NUMBER or sum(c.isdigit() for c in found) >= 8:
                yield found


def _within(number: str, other: str) -> bool:
    """Whether ``number`` is in ``other`` as a whole: no digit or letter
    against either end."""
    return re.search(rf"(?<![\w]){re.escape(number)}(?![\w])", other) is not None


def person_page(request: DistillRequest, said: Sequence[_Said], name: str) -> dict[str, object]:
    """The person fields of an answer for ``name``: "person" (the read on the
    relationship), "person_facts" and "open_threads"."""
    theirs = [s for s in said if not s.from_me and s.speaker == name]
    mine = [s for s in said if s.from_me]
    facts = _their_facts(request, name)
    plan = plan_in([Said(s.at, s.text) for s in said])
    if plan is not None:
        facts.append(plan)
    return {
        "person": _read(request, said, theirs, name),
        "person_facts": _page_facts(facts, _their_statements(request, name)),
        "open_threads": _open_threads(said, theirs, mine),
    }


SAID_FACTS = 4  # a person's own salient sentences kept as facts, per answer
SAID_CHARS = 140


def _page_facts(facts: Sequence[Fact], said: Sequence[Fact]) -> list[dict[str, object]]:
    """An answer's person facts: those the patterns found (and the plan) first,
    then the person's own salient sentences, within MAX_PERSON_FACTS."""
    found = merge_facts(facts)
    known = {fact_key(f.text) for f in found}
    extra = [f for f in said if fact_key(f.text) not in known]
    room = max(MAX_PERSON_FACTS - len(found), 0)
    return [f.as_json() for f in [*found, *extra[: min(room, SAID_FACTS)]]]


def _their_statements(request: DistillRequest, name: str) -> list[Fact]:
    """What ``name`` said about their own life in this source, in their words:
    the sentences of their own lines (call turns, voicemails, posts, messages,
    earlier ones too) that state something, not a question, a greeting or a
    stock reply. The SAID_FACTS that say most, each dated by its line and
    quoted, at most SAID_CHARS long; repeats of one another kept once."""
    said: list[_Said] = []
    for line in (*request.earlier, *request.lines):
        if line.kind == "call":
            texts = [
                text
                for speaker, from_me, text in _call_turns(line)
                if not from_me and (speaker == name or _first(speaker) == _first(name))
            ]
        elif not line.from_me and line.speaker == name:
            texts = [line.text]
        else:
            continue
        for text in texts:
            for part in sentences(text):
                sentence = part.strip()
                if _states(sentence):
                    said.append(_Said(line.at, name, False, sentence, _score(sentence), len(said)))
    ranked = sorted(said, key=lambda s: (-s.score, -s.at, s.n))
    out: list[Fact] = []
    for s in _distinct(ranked, SAID_FACTS):
        out.append(Fact(FactKind.OTHER, _as_theirs(s.text), s.at))
    return out


# Their own words, told of them: "I finished the marathon" -> "finished the
# marathon", "my flat" -> "their flat"; or told to the user: "my finger" ->
# "your finger". The leading pronoun goes; the others turn.
_LEAD_I = (
    re.compile(r"^(?:i'm|i’m|i am)\s+", re.IGNORECASE),
    re.compile(r"^(?:i've|i’ve|i have)\s+", re.IGNORECASE),
    re.compile(r"^(?:i'll|i’ll|i will)\s+", re.IGNORECASE),
    re.compile(r"^(?:i'd|i’d)\s+", re.IGNORECASE),
    re.compile(r"^i\s+", re.IGNORECASE),
)
_LEADS = {
    "they": ("is ", "has ", "will ", "would ", ""),
    "you": ("you're ", "you've ", "you'll ", "you'd ", ""),
}
_TURNED = {
    "they": {
        "i": "they",
        "i'm": "they're",
        "i’m": "they’re",
        "i've": "they've",
        "i’ve": "they’ve",
        "me": "them",
        "my": "their",
        "mine": "theirs",
        "myself": "themselves",
    },
    "you": {
        "i": "you",
        "i'm": "you're",
        "i’m": "you’re",
        "i've": "you've",
        "i’ve": "you’ve",
        "i'd": "you'd",
        "i’d": "you’d",
        "i'll": "you'll",
        "i’ll": "you’ll",
        "me": "you",
        "my": "your",
        "mine": "yours",
        "myself": "yourself",
    },
}
_PRONOUN = {
    who: re.compile(
        r"(?<![\w'’])(?:" + "|".join(sorted(words, key=len, reverse=True)) + r")(?![\w'’])", re.I
    )
    for who, words in _TURNED.items()
}
_YOU_VERBS = {"am": "you are", "was": "you were", "wasn't": "you weren't"}
_YOU_VERB = re.compile(r"\byou (am|was|wasn't)\b", re.IGNORECASE)


def _retold(sentence: str, who: str, limit: int) -> str:
    """A first-person sentence told of ``who`` ("they" or "you"): pronouns
    turned, end punctuation and quote marks gone, cut at a word within
    ``limit``."""
    text = " ".join(sentence.split()).strip().rstrip(".!…")
    text = text.replace("“", "").replace("”", "").replace('"', "")
    for pattern, lead in zip(_LEAD_I, _LEADS[who], strict=True):
        if pattern.match(text):
            text = pattern.sub(lead, text, count=1)
            break
    text = _turn_pronouns(text, who)
    if who == "you":
        text = _YOU_VERB.sub(lambda m: _YOU_VERBS[m.group(1).casefold()], text)
        if sentence.strip()[:1].isupper():
            text = text[:1].upper() + text[1:]
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return text.replace("; ", ", ")


def _turn_pronouns(text: str, who: str) -> str:
    """The first-person pronouns of ``text`` told of ``who`` ("they" or
    "you"); a letter the table does not know (a Turkish "İ", which matches
    "i" but folds to another string) stays as written."""
    turned = _TURNED[who]
    return _PRONOUN[who].sub(lambda m: turned.get(m.group(0).casefold(), m.group(0)), text)


def _as_theirs(sentence: str) -> str:
    """A sentence someone said of themselves, as a short fact about them."""
    return _retold(sentence, "they", SAID_CHARS)


def _states(sentence: str) -> bool:
    """Whether a sentence states something worth keeping about its speaker
    besides what the patterns read: three content words or more; no
    question, small talk, link or arrangement (plans are read as plans);
    not about someone else ("She kept talking about that teapot" tells of
    her, not of whoever said it); nothing a pattern already turned into a
    fact (a later fact of its kind may supersede it)."""
    return (
        not sentence.rstrip().endswith("?")
        and not about_someone_else(sentence)
        and _content(sentence) >= 3
        and _score(sentence) > 0
        and "://" not in sentence
        and not arranges(sentence)
        and not facts_in(sentence, None, FIRST_PERSON, loose=True)
    )


# Whose a sentence is: one that opens on a third person ("She", "his sister",
# "Maria", "Tom's new job") tells of them, not of its speaker. A capitalised
# first word is a name unless it is a word any sentence may start with.
_THIRD_PERSON = re.compile(
    r"^(?:she|he|they|her|his|their|hers|him|them)(?:['’](?:s|d|ll|re|ve))?\b", re.IGNORECASE
)
_OPENERS = frozenset(
    """
    a an the this that these those it it's its there there's here what when where why how who
    which i i'm i've i'd i'll we we're we've my our you your yes no not so and but or if then
    just also still maybe perhaps anyway well oh ok okay sure thanks thank sorry please hope
    good great nice lovely really actually honestly finally today tonight tomorrow yesterday
    last next after before since on in at for from with by to of all some any every one two
    got had have has was were is are will would could should can did do does been being let
    """.split()
)
_LEAD_NAME = re.compile(r"^([A-ZÀ-Þ][\w'’-]+)")


def about_someone_else(sentence: str) -> bool:
    """Whether a sentence opens on someone other than its speaker: a third
    person's pronoun, or a name's possessive ("Tom's new job"). A bare
    capitalised first word is not taken for a name: every sentence opens on
    one ("Made ramen", "Conductor wants ...")."""
    text = sentence.lstrip(" \"'“‘(-–—")
    if _THIRD_PERSON.match(text):
        return True
    lead = _LEAD_NAME.match(text)
    if lead is None:
        return False
    word = lead.group(1).casefold()
    bare = _POSSESSIVE_END.sub("", word)
    return bare != word and bare not in _OPENERS


_POSSESSIVE_END = re.compile(r"['’]s$")

# What a message carried besides words ("[attached: IMG_0042.jpg]", "[media
# omitted]", "[photo]", "[sticker 👍]", "[voice message]") and lines quoting
# another message ("> see you at 8"): neither says anything of its own, so
# the built-in distiller reads neither, and a line with nothing else is left
# out of its reading.
_MEDIA_MARK = re.compile(
    r"\[(?:attached|attachments?|media omitted|photo|sticker|voice message|video message|"
    r"video|GIF|audio|file|contact|location|poll)\b[^\]\n]{0,300}\]",
    re.IGNORECASE,
)
_QUOTE_LINE = re.compile(r"^\s*>.*$", re.MULTILINE)


def without_media(request: DistillRequest) -> DistillRequest:
    """``request`` with media marks and quoted lines taken out of its lines,
    and lines with nothing else left dropped (a request keeps one line)."""

    def clean(lines: Sequence[Line]) -> list[Line]:
        out = []
        for line in lines:
            if line.kind not in ("message", "post"):
                out.append(line)
                continue
            text = _QUOTE_LINE.sub("", _MEDIA_MARK.sub("", line.text)).strip()
            if text == line.text:
                out.append(line)
            elif text:
                out.append(Line(line.at, line.speaker, line.from_me, text, line.kind))
        return out

    lines = tuple(clean(request.lines) or request.lines[:1])
    earlier = tuple(clean(request.earlier))
    if lines == request.lines and earlier == request.earlier:
        return request
    return replace(request, lines=lines, earlier=earlier)


def _their_facts(request: DistillRequest, name: str) -> list[Fact]:
    """Facts about ``name``: from their own lines (earlier ones too), and in a
    one-to-one thread from the user's lines to them."""
    out: list[Fact] = []
    for line in (*request.earlier, *request.lines):
        if line.kind == "call":
            for speaker, from_me, text in _call_turns(line):
                if speaker == name or (not from_me and _first(speaker) == _first(name)):
                    out += facts_in(text, line.at, FIRST_PERSON, loose=True)
                elif from_me and request.person == name:
                    out += facts_in(text, line.at, SECOND_PERSON)
        elif not line.from_me and line.speaker == name:
            out += facts_in(line.text, line.at, FIRST_PERSON, loose=True)
        elif line.from_me and (request.person == name or len(request.participants) == 1):
            out += facts_in(line.text, line.at, SECOND_PERSON)
    return out


def _read(
    request: DistillRequest, said: Sequence[_Said], theirs: Sequence[_Said], name: str
) -> str:
    """How the relationship looks from this source: how much and how recently
    you talk, who writes more, what about."""
    lines = request.lines
    first, last = lines[0].at, lines[-1].at
    days = max((last - first) / 86_400_000_000, 1.0)
    count = len(lines)
    mine = sum(1 for line in lines if line.from_me)
    if count >= 20 and days <= 60:
        pace = "You write often"
    elif count >= 8:
        pace = "You keep in touch"
    else:
        pace = "You write now and then"
    span = _span(first, last)
    noun = "message" if count == 1 else "messages"
    if mine * 3 > count * 2:
        balance = "mostly from you"
    elif mine * 3 < count:
        balance = "mostly from them"
    else:
        balance = "from both sides"
    parts = [f"{pace}: {count} {noun} {span}, {balance}."]
    topics = _topics(s.text for s in theirs)
    if topics:
        parts.append(f"{_first(name)} talks about {_join(topics)}.")
    if theirs:
        parts.append(f"Last heard from them on {day_label(theirs[-1].at)}.")
    else:
        parts.append("No reply from them yet.")
    older = [x.text for x in request.earlier if x.speaker == name and not x.from_me]
    subjects = _subjects([*(s.text for s in theirs), *older])
    if subjects:
        parts.append(f"Often mentions: {', '.join(subjects)}.")
    return _fit(" ".join(parts), MAX_PERSON_CHARS)


SUBJECTS = 8  # words a person keeps coming back to, on their page


def _subjects(texts: Sequence[str]) -> list[str]:
    """The words someone keeps using (in two or more lines, small words and
    numbers aside), most used first, as they first wrote them: what their
    life is about lately, in the words a question about them would use."""
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for text in texts:
        for word in {w for w in _WORD.findall(text) if len(w) > 3 and w.isalpha()}:
            key = word.casefold()
            if key in _STOP or key in _CHATTER:
                continue
            counts[key] += 1
            shown.setdefault(key, word if word[:1].isupper() and word != text[: len(word)] else key)
    ranked = sorted((k for k, c in counts.items() if c >= 2), key=lambda k: (-counts[k], k))
    return [shown[k] for k in ranked[:SUBJECTS]]


# Words that fill chat without saying what it is about.
_CHATTER = frozenset(
    "haha hahaha yesss yeah okay thanks thank sounds maybe actually literally finally "
    "again always never someone something anything everything there here these those "
    "would could should will with from your about have that this what when where which "
    "just like really very much more less still even also only over into than then them "
    "they their were been being does done doing make made makes come came going want "
    "wants need needs today tonight tomorrow week weekend morning evening night time "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)


def _open_threads(
    said: Sequence[_Said], theirs: Sequence[_Said], mine: Sequence[_Said]
) -> list[str]:
    """Questions left hanging: theirs if you have not written since, yours
    if they have not."""
    out: list[str] = []
    last_theirs = theirs[-1].n if theirs else -1
    last_mine = mine[-1].n if mine else -1
    for s in _distinct(
        (
            s
            for s in reversed(theirs)
            if s.n > last_mine and s.text.rstrip().endswith("?") and _words(s.text) >= 2
        ),
        2,
    ):
        out.append(f"They asked “{_quote(s.text)}” ({day_label(s.at)}); not answered yet.")
    for s in _distinct(
        (
            s
            for s in reversed(mine)
            if s.n > last_theirs and s.text.rstrip().endswith("?") and _words(s.text) >= 2
        ),
        2,
    ):
        out.append(f"You asked “{_quote(s.text)}” ({day_label(s.at)}); no answer yet.")
    return out[:MAX_OPEN_THREADS]


def person_in_group(request: DistillRequest, name: str) -> dict[str, object] | None:
    """The person fields for someone met only in a group conversation, from
    their own lines (never anyone else's). None if they said nothing here."""
    theirs = tuple(line for line in request.lines if line.speaker == name and not line.from_me)
    if not theirs:
        return None
    said = _utterances(theirs)
    facts = [f for line in theirs for f in facts_in(line.text, line.at, FIRST_PERSON, loose=True)]
    first, last = theirs[0].at, theirs[-1].at
    noun = "message" if len(theirs) == 1 else "messages"
    span = _span(first, last)
    read = [f"Seen in the {request.title}: {len(theirs)} {noun} of theirs {span}."]
    topics = _topics(s.text for s in said)
    if topics:
        read.append(f"{_first(name)} talks about {_join(topics)}.")
    best = _best(said, 2)
    if best:
        read.append("Lately: " + "; ".join(f"“{_quote(s.text)}”" for s in best) + ".")
    return {
        "person": _fit(" ".join(read), MAX_PERSON_CHARS),
        "person_facts": _page_facts(facts, _their_statements(request, name)),
        "open_threads": [],
    }


def _post(request: DistillRequest) -> dict[str, object]:
    """Describes the post; its text is the note's title, so it is not repeated."""
    root, replies = request.lines[0], request.lines[1:]
    author = "You" if root.from_me else root.speaker
    said = _utterances(request.lines)
    topics = _topics((s.text for s in said[:1]), min_hits=1)
    about = f" about {_join(topics)}" if topics else ""
    tags = [t for t in _hashtags(request.lines[:1]) if t not in topics]
    parts = [f"{author} posted{about} on {day_label(root.at)}."]
    if tags:
        parts.append("Tagged " + ", ".join(f"#{t}" for t in tags) + ".")
    if replies:
        latest = replies[-1]
        noun = "reply" if len(replies) == 1 else "replies"
        who = "you" if latest.from_me else latest.speaker
        parts.append(
            f"{len(replies)} {noun}; the latest from {who} on {_when(latest.at, root.at)}: "
            f"“{_quote(latest.text)}”"
        )
    else:
        parts.append("No replies.")
    answer = _answer(" ".join(parts), said, request, min_hits=1)
    if not root.from_me:
        facts = facts_in(root.text, root.at, loose=True)
        answer["person_facts"] = _page_facts(facts, _their_statements(request, root.speaker))
    return answer


def _call(request: DistillRequest) -> dict[str, object]:
    said = _utterances(request.lines)
    first = request.lines[0]
    who = _names(request.participants) or "someone"
    parts: list[str] = []
    if first.kind == "voicemail":
        core = [s for s in said if s.score > 0 and not _is_small_talk(s.text)] or said[:1]
        text = " ".join(s.text for s in core)
        parts.append(f"Voicemail from {who} on {day_label(first.at)}: “{_quote(text, 400)}”")
    else:
        parts.append(f"Call with {who} on {day_label(first.at)}.")
        topics = _topics(s.text for s in said)
        if topics:
            parts.append(f"Talked about {_join(topics)}.")
        highlights = _best(said, HIGHLIGHTS)
        parts.extend(f"- {_who(s)}: “{_quote(s.text)}”" for s in highlights)
    for later in request.lines[1:]:  # more events under the same source
        parts.append(f"Also on {day_label(later.at)}: “{_quote(later.text)}”")
    answer = _answer("\n".join(parts), said, request, min_hits=1)
    if len(request.participants) == 1:
        name = request.participants[0]
        facts = _their_facts(request, name)
        answer["person_facts"] = _page_facts(facts, _their_statements(request, name))
    answer["others"] = others_in(request)
    return answer


# -- mail ---------------------------------------------------------------------------
#
# A mail thread's digest says who wrote, about what (the subject), and the
# sentences that carry what was agreed and the numbers a person later looks
# for: booking references, amounts, dates and times. The importer has already
# cut quoted replies and signatures, so nothing is distilled twice; it marks
# mail that no person wrote (a mailing list, bulk mail, a no-reply sender) on
# the line after the subject, and such mail gets a digest but never adds to
# anyone's person page.

MAIL_KEY_LINES = 4
_SUBJECT = re.compile(r"^Subject: (.*)$", re.MULTILINE)
_ATTACHED = re.compile(r"^\[attachments?: .*\]$", re.MULTILINE)
# A code a person quotes back (booking reference, order number): letters and
# digits together, at least five, or a long run of digits; an amount of money.
# Each tried only where a run of its characters starts, and bounded, so that
# a long run of digits and commas or of letters and dashes costs a line's
# length, not its square.
_CODE = re.compile(
    r"(?<![A-Z0-9-])\b(?=[A-Z0-9-]{0,40}\d)(?=[A-Z0-9-]{0,40}[A-Z])[A-Z0-9][A-Z0-9-]{4,40}\b"
    r"|(?<!\d)\b\d{6,40}\b"
)
_MONEY = re.compile(
    r"(?:[£€$¥]|R\$|CA\$|US\$)\s?\d(?:[\d,.]{0,30}\d)?"
    r"|(?<![\d,.])\b\d(?:[\d,.]{0,30}\d)?\s?(?:GBP|EUR|USD|CAD|BRL|euros?|pounds?|dollars?|reais)\b"
    r"|\b(?:GBP|EUR|USD|CAD|BRL|AUD)\s?\d(?:[\d,.]{0,30}\d)?",
    re.IGNORECASE,
)
# A phone number as people write one: "416-555-0177", "+44 7700 900123",
# "(416) 555 0177"; at least eight digits, so that dates and amounts are not.
_PHONE_NUMBER = re.compile(
    r"(?<![\w+,.])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,5}\)[ .-]?)?\d{2,6}(?:[ .-]\d{2,6}){1,3}"
    r"(?![\w,.]\d)(?<!\d{4}-\d{2}-\d{2})"
)
_NUMBERS = (_PHONE_NUMBER, _CODE, _MONEY)
_HAS_DIGIT = re.compile(r"\d")
_EMAIL = re.compile(rf"(?<![\w.+-]){EMAIL}(?![\w-])")
_AGREED = re.compile(
    r"\b(confirm\w*|agreed?|booked|booking|reservation|reference|scheduled|deadline|due|"
    r"refund\w*|deposit|invoice|receipt|order\w*|delivery|deliver\w*|appointment|"
    r"move[- ]out|move[- ]in|start date|starts?|quote|total)\b",
    re.IGNORECASE,
)


def mail_subject(text: str) -> str:
    """The subject line the importer wrote first, or ""."""
    found = _SUBJECT.match(text)
    return found.group(1).strip() if found else ""


def is_automated(text: str) -> bool:
    """Whether the importer marked this mail as sent by no person."""
    return automated_reason(text) is not None


def _mail_body(text: str) -> str:
    """The mail's own words: no subject, marker or attachment lines, and no
    greeting or sign-off line ("Hi Hannah,", "Best wishes,")."""
    lines = text.split("\n")
    start = 2 if is_automated(text) else 1
    kept = [
        line
        for line in lines[start:]
        if not _ATTACHED.match(line) and not _SALUTATION.match(line.strip())
    ]
    return "\n".join(kept).strip()


def automated_reason(text: str) -> str | None:
    """What the importer's marker says ("mailing list"), or None."""
    lines = text.split("\n", 2)
    if len(lines) < 2 or not lines[1].startswith(MAIL_AUTOMATED_MARK):
        return None
    return lines[1][len(MAIL_AUTOMATED_MARK) :].strip(" ()") or "automated"


_SALUTATION = re.compile(
    r"^(?:(?:hi|hello|hey|dear|hiya|morning|good (?:morning|afternoon|evening)|ol[áa]|oi|"
    r"querid[oa]|prezad[oa])\b[^.!?\n]{0,40}|(?:best|best wishes|kind regards|regards|"
    r"many thanks|thanks|thank you|cheers|all the best|love|warmly|sincerely|yours|"
    r"abra[çc]os?|beijos?|atenciosamente)[ ,!.]*(?:\w+[ ,!.]*){0,2})[,!.]?$",
    re.IGNORECASE,
)


def _mail(request: DistillRequest) -> dict[str, object]:
    """A digest of a mail thread: who, about what, what was agreed, numbers."""
    first = request.lines[0]
    subject = mail_subject(first.text) or "(no subject)"
    automated = all(is_automated(line.text) for line in request.lines)
    said: list[_Said] = []
    for line in request.lines:
        body = " ".join(_mail_body(line.text).split())
        for i, piece in enumerate(sentences(body)):
            part = piece.strip()
            if not part or _is_small_talk(part):
                continue
            bonus = 3.0 * bool(_CODE.search(part) or _MONEY.search(part))
            bonus += 2.0 * bool(_AGREED.search(part))
            said.append(_Said(line.at, line.speaker, line.from_me, part, _score(part) + bonus, i))
    who = _names(request.participants)
    count = len(request.lines)
    span = _span(first.at, request.lines[-1].at)
    if automated:
        parts = [f"Automated email from {who or 'a sender'} {span}: “{_quote(subject, 200)}”."]
    else:
        noun = "email" if count == 1 else "emails"
        mine = sum(line.from_me for line in request.lines)
        by = f", {mine} of them yours" if mine and mine < count else ""
        by = ", sent by you" if mine == count else by
        parts = [
            f"Email thread “{_quote(subject, 200)}” with {who or 'nobody else'}: "
            f"{count} {noun}{by}, {span}."
        ]
    key = _distinct((s for s in sorted(said, key=lambda s: -s.score) if s.score > 0), 99)
    key = key[:MAIL_KEY_LINES]
    key.sort(key=lambda s: (s.at, s.n))
    parts.extend(f"- {_who(s)}: “{_quote(s.text, 240)}”" for s in key)
    numbers = _unique(
        number
        for line in request.lines
        for number in _numbers_in(_mail_body(line.text), (_CODE, _MONEY, _PHONE_NUMBER))
    )
    if numbers:
        parts.append("Numbers: " + ", ".join(numbers[:8]) + ".")
    answer = _answer("\n".join(parts), said, request, min_hits=1)
    reasons = {automated_reason(line.text) for line in request.lines}
    kind = "newsletter" if "mailing list" in reasons else "automated" if automated else ""
    topical = cast(list[str], answer["tags"])
    answer["tags"] = _unique(t for t in ("email", kind, *topical) if t)[: MAX_TAGS + 1]
    if not automated and len(request.participants) == 1:
        name = request.participants[0]
        # Facts by the patterns only: a mail's sentences are the digest's.
        answer["person_facts"] = _page_facts(_their_facts(request, name), [])
    if not automated:
        answer["others"] = others_in(request)
    return answer


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


_HEADING = re.compile(r"^\s*#{1,6}\s")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")


def _journal_sentences(text: str) -> list[str]:
    """A journal entry's sentences: headings left out (a Markdown "# Finger"
    is a title, not something said), each list item a sentence of its own."""
    out: list[str] = []
    for raw in text.splitlines():
        if not raw.strip() or _HEADING.match(raw) or raw.strip().startswith("Tags:"):
            continue
        line = _BULLET.sub("", raw).strip()
        out += sentences(line)
    return out


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


# -- facts about people the source names -----------------------------------------------
#
# "Saw Maria at the market. She kept talking about that teal Le Creuset
# teapot", said by Tom, is about Maria. A sentence that opens on a name's
# possessive ("Maria's new job starts Monday") is about that name; one that
# opens on a third person's pronoun (she, he, they) is about the last name
# the same message named before it, or failing that whom a question of the
# previous message asked about, or failing that its last name; a quoted wish
# is the wish of whom the sentence before it was about. A name is a
# capitalised word (or two) that does not open its sentence, follows no
# "the" and is no common word, month or weekday; the people of the request
# themselves and the user are no third person. Journals are read the same
# way. The fact keeps the sentence less its subject, and says who said it;
# the service files it on the page of the contact the name resolves to, if
# they have one.

OTHERS_CHARS = 160
_NAME_WORD = re.compile(r"(?<![\w'’])([A-ZÀ-Þ][a-zà-ÿ]+)(?![\w'’])")
_LEAD_PRONOUN = re.compile(
    r"^(?:(she|he|they)(?:['’](s|re|d|ll|ve))?|(her|his|their))\b\s*", re.IGNORECASE
)
_LEAD_POSSESSIVE = re.compile(r"^([A-ZÀ-Þ][a-zà-ÿ]+)['’]s\s+")
_CONTRACTED = {"s": "is ", "re": "are ", "d": "would ", "ll": "will ", "ve": "have "}
_PERFECT = re.compile(r"(?:been|got|gone|had)\b", re.IGNORECASE)
# "She's moving", "He's been": a pronoun's "'s" is a verb, not whose.
_NOT_OWNERS = _OPENERS | {"she", "he", "who", "let"}
_NOT_NAMES = frozenset(
    w.casefold()
    for w in (*WEEKDAYS, *MONTHS, "I", "Mum", "Mom", "Dad", "God", "Christmas", "Easter")
)


def _after_the(text: str, at: int) -> bool:
    """Whether ``text`` has the word "the" and one space just before ``at``."""
    return (
        at >= 4
        and text[at - 4 : at].lower() == "the "
        and (at == 4 or not (text[at - 5].isalnum() or text[at - 5] == "_"))
    )


def _names_in(sentence: str) -> list[str]:
    """The names a sentence mentions past its first word (see above): runs of
    up to two capitalised words one space apart ("Le Creuset", "Maria")."""
    found: list[str] = []
    run: list[str] = []
    end = -2
    placed = False  # the current run of capitalised words follows "the"
    for match in _NAME_WORD.finditer(sentence):
        word = match.group(1)
        folded = word.casefold()
        usable = match.start() > 0 and not (
            folded in _NOT_NAMES or folded in _OPENERS or folded in _STOP
        )
        # "at the Depot", "the Shore": a name after "the" is a place or a
        # thing, never whom a later "she" means.
        adjacent = match.start() == end + 1
        continues = bool(run) and adjacent and len(run) < 2
        if not continues and not (placed and adjacent):
            placed = _after_the(sentence, match.start())
        if placed:  # "the Blue Door", "the Red Lion Inn": every word of it
            usable = False
        if usable and continues:
            run.append(word)
        else:
            if run:
                found.append(" ".join(run))
            run = [word] if usable else []
        end = match.end()
    if run:
        found.append(" ".join(run))
    return found


def others_in(request: DistillRequest) -> list[dict[str, object]]:
    """Facts the request's lines state about other people they name."""
    own = {n.casefold() for n in request.participants} | {ME.casefold()}
    own |= {_first(n).casefold() for n in request.participants}
    if request.person:
        own |= {request.person.casefold(), _first(request.person).casefold()}
    out: list[dict[str, object]] = []
    last: str | None = None  # the last name named, in this message or the one before
    asked: str | None = None  # the name a question of the message before asked about
    for line in request.lines:
        if line.kind not in ("message", "email", "call", "voicemail", "journal"):
            continue
        named_here: str | None = None
        asked_here: str | None = None
        before: tuple[str, str] | None = None  # the sentence before: (whom, what of them)
        parts = _journal_sentences(line.text) if line.kind == "journal" else sentences(line.text)
        for sentence in parts:
            text = sentence.strip().lstrip("-•* ").strip()
            if not text:
                continue
            # An answer's pronoun is whom the question asked about ("Any
            # ideas for Callum?" "He keeps sending me links to ...").
            about = _about_whom(text, before, named_here or asked or last)
            names = [
                n
                for n in _names_in(text)
                if n.casefold() not in own and _first(n).casefold() not in own
            ]
            if names:
                named_here = names[-1]
                if text.endswith("?") and asked_here is None:
                    asked_here = names[0]
            before = None
            if about is None:
                continue
            whom, rest, kind, owned = about
            if whom.casefold() in own or _first(whom).casefold() in own:
                continue
            rest = rest.strip().rstrip(".!…")
            if text.endswith("?") or _content(rest) < 3 or _is_small_talk(rest):
                continue
            before = (whom, rest)
            for fact in _said_of(rest, kind, owned, line):
                out.append({"name": whom, **fact.as_json()})
                if len(out) >= MAX_OTHERS:
                    return out
        last = named_here
        asked = asked_here
    return out


def _about_whom(
    text: str, before: tuple[str, str] | None, referent: str | None
) -> tuple[str, str, FactKind, bool] | None:
    """Whom a sentence is about and what it says of them: (whom, the rest,
    its kind, whether the rest follows a possessive); None when it opens on
    no one else. ``before`` is the sentence before (whom, what of them) and
    ``referent`` whom a pronoun would mean."""
    wished = _quoted_wish(text)
    if wished is not None and before is not None:
        # “I'd love to learn that one day.” after a sentence about someone:
        # their words, and what "that" was.
        rest = f"{wished} ({before[1]})" if _POINTS_BACK.search(wished) else wished
        return before[0], rest, FactKind.WISH, False
    possessive = _LEAD_POSSESSIVE.match(text)
    if possessive is not None and possessive.group(1).casefold() not in _NOT_OWNERS:
        return possessive.group(1), text[possessive.end() :], FactKind.OTHER, True
    pronoun = _LEAD_PRONOUN.match(text)
    if pronoun is None or referent is None:
        return None
    verb = _CONTRACTED.get((pronoun.group(2) or "").casefold(), "")
    if verb == "is " and _PERFECT.match(text, pronoun.end()):
        verb = "has "  # "She's been eyeing": she has been
    owned = bool(pronoun.group(3))
    rest = ("their " if owned else verb) + text[pronoun.end() :]
    return referent, rest, FactKind.OTHER, owned


def _said_of(rest: str, kind: FactKind, owned: bool, line: Line) -> list[Fact]:
    """The facts a sentence gives of someone: the sentence (a wish when it
    reads as one), and what the patterns read in it, as if they had said it
    of themselves ("is moving to Bristol" -> moving to Bristol: a newer home
    or job than their card's takes its place)."""
    if kind is FactKind.OTHER and _WISH.search(rest):
        kind = FactKind.WISH
    typed = [] if kind is FactKind.WISH else _typed(rest, owned)
    who = "you" if line.from_me else _first(line.speaker)
    if line.from_me:  # "sending me links" is sending you links
        rest = _turn_pronouns(rest, "you")
    facts = [Fact(kind, _cut(f"{rest} (said by {who})", _OTHERS_LIMIT[kind]), line.at)]
    return facts + [Fact(f.kind, f.text, line.at) for f in typed]


_WRITER_OR_READER = re.compile(
    r"(?<![\w'’])(?:i|i'm|i’m|i've|i’ve|i'd|i’d|i'll|i’ll|me|my|mine|we|our|us|you|your)(?![\w'’])",
    re.IGNORECASE,
)
_THIRD_VERB = re.compile(r"^(is|are|was|has|have|had|\w+s)\b\s*", re.IGNORECASE)
_AS_FIRST = {"is": "I am", "are": "I am", "was": "I was", "has": "I have", "have": "I have"}


def _typed(rest: str, possessive: bool) -> list[Fact]:
    """The typed facts (home, work, role...) the patterns read in what a
    sentence says of someone, told back in their own words: after a
    possessive ("Tom's new job at X": "my new job at X"), or after a
    pronoun ("is moving to Bristol": "I am moving to Bristol"; "works at
    X": "I work at X"). Nothing when the sentence has its writer or its
    reader in it ("He knows I work at Google now" says nothing of his job)."""
    if _WRITER_OR_READER.search(rest):
        return []
    if possessive:
        said = "my " + (rest[len("their ") :] if rest.startswith("their ") else rest)
    else:
        verb = _THIRD_VERB.match(rest)
        if verb is None:
            return []
        word = verb.group(1).casefold()
        lead = _AS_FIRST.get(word) or ("I " + (word[:-1] if word.endswith("s") else word))
        said = f"{lead} {rest[verb.end() :]}"
    return [f for f in facts_in(said, None, FIRST_PERSON, loose=True) if f.kind in _TYPED]


# What a sentence about someone may tell of them beyond "Also": the kinds
# their page keeps one value of, or that a search asks for by name.
_TYPED = frozenset(
    {FactKind.WORK, FactKind.ROLE, FactKind.HOME, FactKind.FAMILY, FactKind.PET, FactKind.HOBBY}
)


# Something a person would love, said of them: "keeps sending me links to
# that kettle", "has been eyeing the red one", "would love a ...". What they
# are told to want by someone else is not a wish of theirs, but the memory
# cannot tell; a wish is only ever offered as a gift idea.
_WISH = re.compile(
    # would love something, not a favour or company ("would love a lift",
    # "would love to see you")
    r"\b(?:(?:would|['’]d) (?:really |so )?love(?! (?:to (?:see|catch up|hear|meet|help|come|"
    r"join|chat|talk|know|go)|a (?:lift|hand|chat|coffee|call|break|nap)|some help|more time)\b)|"
    r"always wanted|"
    # links and pictures of a thing, or "that" thing talked about
    r"(?:keeps?|kept) (?:sending|showing|texting|forwarding) (?:me |you |us |him |her )?"
    r"(?:links?|pictures?|photos?|screenshots?|ads?)|"
    r"(?:keeps?|kept) (?:talking about|mentioning|going on about|looking at|pointing at) "
    r"(?:that|those|this|these)|"
    r"(?:has|have|had) been (?:eyeing|hinting)|eyeing up|dropping hints|hinting at|"
    r"wish ?list|dreams? of|(?:his|her|their) eye on|"
    r"adoraria|gostaria muito|queria muito|sonha com)\b",
    re.IGNORECASE,
)
# “I'd love to learn that one day.”: someone's wish quoted in another's words.
_QUOTED_WISH = re.compile(r"^[\"“‘']\s*(.+?)[\"”’']?$")
# A wish that points back at the sentence before it ("that", "one of those").
_POINTS_BACK = re.compile(r"\b(?:that|this|those|these|it|one)\b", re.IGNORECASE)
_OTHERS_LIMIT = {FactKind.OTHER: OTHERS_CHARS, FactKind.WISH: MAX_FACT_CHARS}


def _quoted_wish(text: str) -> str | None:
    """A quoted first-person wish, told of its speaker ("would love to learn
    that one day"), or None."""
    found = _QUOTED_WISH.match(text)
    if found is None:
        return None
    wishes = [f for f in facts_in(found.group(1), None) if f.kind is FactKind.WISH]
    return wishes[0].text if wishes else None


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit``, cut at a word, with "…"."""
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _answer(
    summary: str,
    said: Sequence[_Said],
    request: DistillRequest,
    min_hits: int,
    facts: Sequence[Fact] | None = None,
) -> dict[str, object]:
    tags = _topics((s.text for s in said), min_hits=min_hits)
    tags += [t for t in _hashtags(request.lines) if t not in tags]
    return {
        "summary": _fit(summary, MAX_SUMMARY_CHARS),
        "person": None,
        "facts": [f.as_json() for f in (_facts_of_me(request) if facts is None else facts)][
            :MAX_ANSWER_FACTS
        ],
        "tags": tags[:MAX_TAGS],
        "person_facts": [],
        "open_threads": [],
        "appointments": [],
        "others": [],
    }


def _facts_of_me(request: DistillRequest) -> list[Fact]:
    """What the user's own lines state about the user: the newest of each
    single-valued kind, every distinct other fact."""
    out: list[Fact] = []
    for line in (*request.earlier, *request.lines):
        if line.kind == "call":
            texts = [text for _, mine, text in _call_turns(line) if mine]
        elif line.from_me:
            texts = [line.text]
        else:
            continue
        for text in texts:
            out += facts_in(text, line.at, FIRST_PERSON)
    return [f for f in merge_facts(out, limit=MAX_ANSWER_FACTS) if f.kind is not FactKind.PLAN]


def _phrase(fact: Fact) -> str:
    """A fact as words in a sentence: "birthday on 14 March", "lives in Porto"."""
    lead = {FactKind.BIRTHDAY: "birthday on ", FactKind.ROLE: "works as ", FactKind.NOTE: ""}
    return lead.get(fact.kind, "") + fact.text


def _call_turns(line: Line) -> list[tuple[str, bool, str]]:
    return [_turn(t, line) for t in line.text.splitlines() if t.strip()]


def _first(name: str) -> str:
    """How a page names someone in passing: the first name, or the whole
    name when it starts with a title ("Dr. Tomasz Nowak")."""
    words = name.split()
    if not words:
        return name
    return name if words[0].rstrip(".").casefold() in _TITLES else words[0]


_TITLES = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "sir", "dame", "rev", "fr"})


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _iso(at: int) -> str:
    return dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC).date().isoformat()


# -- lines and how much they say ---------------------------------------------------

_SPEAKER_LINE = re.compile(r"^([^:\n]{1,60}):\s+(.+)$")
_WORD = re.compile(r"[^\W_][\w'’-]*")


def _utterances(lines: Sequence[Line]) -> list[_Said]:
    """What was said, one entry per message, or per turn of a call transcript,
    or per sentence of a voicemail, each scored for how much it says."""
    out: list[_Said] = []
    for line in lines:
        if line.kind == "call":
            turns = [_turn(t, line) for t in line.text.splitlines() if t.strip()]
        elif line.kind == "voicemail":
            turns = [(line.speaker, False, t) for t in sentences(line.text)]
        else:
            turns = [(line.speaker, line.from_me, " ".join(line.text.split()))]
        for speaker, from_me, said in turns:
            text = _trim(said)
            out.append(_Said(line.at, speaker, from_me, text, _score(text), len(out)))
    return out


def _trim(text: str) -> str:
    """The line without the small talk around what it says ("Of course. Long
    run today, 32 km." keeps its second sentence). Unchanged if nothing is left."""
    parts = sentences(text)
    if len(parts) < 2:
        return text
    kept = [t for t in parts if _content(t) >= 2 and not _is_small_talk(t)]
    return " ".join(kept) if kept else text


def _content(text: str) -> int:
    return len({w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1})


def _words(text: str) -> int:
    """Content words that are words, not numbers or times."""
    return len(
        {w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1 and w.isalpha()}
    )


def _turn(text: str, line: Line) -> tuple[str, bool, str]:
    """A transcript line "Name: words"; "Me:" is the user."""
    match = _SPEAKER_LINE.match(text.strip())
    if match is None:
        return line.speaker, False, " ".join(text.split())
    speaker = match.group(1).strip()
    mine = speaker.casefold() in ("me", "you", "i")
    return (ME if mine else speaker), mine, " ".join(match.group(2).split())


@functools.lru_cache(maxsize=8192)
def _score(text: str) -> float:
    """How much a line says. Zero for small talk, however long."""
    words = _WORD.findall(text)
    lower = [w.casefold() for w in words]
    content = {w for w in lower if w not in _STOP and len(w) > 1}
    if len(content) < 2 or _is_small_talk(text):
        return 0.0
    topical = sum(1 for w in lower if w in _LEXICON)
    named = sum(1 for w in words[1:] if w[0].isupper() and w.casefold() not in _STOP)
    score = float(min(len(content), 10) + 2 * min(topical, 3) + min(named, 3))
    if any(ch.isdigit() for ch in text):
        score += 1
    if text.rstrip().endswith("?"):
        score += 0.5
    return score


def _is_small_talk(text: str) -> bool:
    lowered = " ".join(text.casefold().split())
    return (
        _SMALL_TALK_AT_START.match(lowered) is not None
        or _SMALL_TALK_ANYWHERE.search(lowered) is not None
    )


# Greetings, sign-offs and stock replies: they fill conversations and calls
# and say nothing a note should keep.
_SMALL_TALK = tuple(
    re.compile(p)
    for p in (
        r"^(hi|hey|hello|hallo|hola|coucou|ciao|olá|yo)\b[^a-z]*([a-zà-ÿ.]+[^a-z]*){0,2}$",
        r"^(bye|goodbye|see you|talk soon|take care|thanks|thank you|cheers)\b",
        r"\bbye\W*$",
        r"^((hi|hey|hello|hallo|hola|coucou|olá),? )?(it's|it is|this is)"
        r" [a-zà-ÿ.]+( [a-zà-ÿ.]+)?\W*$",
        r"^[a-zà-ÿ.]+ here\W*$",
        r"\bcall me back\b",
        r"\btext me when\b",
        r"\bno rush\b",
        r"\bmissed your call\b",
        r"\bis this a good time\b",
        r"\bwas just thinking about you\b",
        r"\btalk (again )?(soon|next week|later|then)\b",
        r"\b(i|we) have to (run|go)\b",
        r"\bsee you (there|then|soon)\b",
        r"\b(tell me more|sounds good|fair enough|wait,? really)\b",
        r"^(ok|okay|yes|yep|no|nope|nice|true|cool|great|perfect|deal|sure|wow|lol|haha|omg)\b\W*$",
        r"\bat your convenience\b",
        r"\bif you have any questions\b",
    )
)


# All of them as two patterns: a line is small talk if and only if it matches
# one of them. Those anchored at the start are tried there only (`match`);
# in one `search` with the rest they would be tried at every position too,
# which made the check several times slower on an ordinary line.
_SMALL_TALK_AT_START = re.compile(
    "|".join(f"(?:{p.pattern[1:]})" for p in _SMALL_TALK if p.pattern.startswith("^"))
)
_SMALL_TALK_ANYWHERE = re.compile(
    "|".join(f"(?:{p.pattern})" for p in _SMALL_TALK if not p.pattern.startswith("^"))
)


def _best(said: Sequence[_Said], k: int) -> list[_Said]:
    """The k lines that say most (ties go to the newer), back in order."""
    ranked = sorted((s for s in said if s.score > 0), key=lambda s: (-s.score, -s.n))
    return sorted(_distinct(ranked, k), key=lambda s: s.n)


def _most_within(said: Sequence[_Said], chars: int) -> list[_Said]:
    """The lines that say most, as many as fit in ``chars`` quoted, back in
    order: a journal entry is the user's own words, short as a rule, and
    what they will ask about is rarely its one most telling sentence."""
    ranked = sorted((s for s in said if s.score > 0), key=lambda s: (-s.score, -s.n))
    out: list[_Said] = []
    used = 0
    for s in _distinct(ranked, len(ranked)):
        size = len(_quote(s.text)) + 1
        if used + size > chars:
            continue
        out.append(s)
        used += size
    return sorted(out, key=lambda s: s.n)


def _distinct(said: Iterable[_Said], limit: int) -> list[_Said]:
    """The first ``limit`` lines of ``said`` that do not repeat an earlier one
    in other words (the same reminder with another date, "haha" or "lol" in
    front). Stops there: the lines after those are never looked at."""
    out: list[_Said] = []
    seen: list[set[str]] = []
    for s in said:
        if len(out) >= limit:
            break
        words = {w for w in _WORD.findall(s.text.casefold()) if w not in _STOP and not w.isdigit()}
        if any(len(words & w) >= 0.6 * max(len(words | w), 1) for w in seen):
            continue
        seen.append(words)
        out.append(s)
    return out


def _hanging_question(said: Sequence[_Said]) -> _Said | None:
    """The last line, if it is a question nobody has answered yet."""
    if said and said[-1].text.rstrip().endswith("?") and said[-1].score > 0:
        return said[-1]
    return None


# -- topics ----------------------------------------------------------------------------

_TOPIC_WORDS: dict[str, list[str]] = {
    "travel": (
        "travel trip trips flight flights airport holiday holidays vacation train packing "
        "hotel booked passport abroad suitcase"
    ).split(),
    "running": "run ran running runs marathon km race jog jogging foam roller".split(),
    "climbing": "climb climbing climbed boulder bouldering crimp crimps pulley belay".split(),
    "work": (
        "work job meeting meetings sprint standup deadline promotion intern office boss "
        "client project release interview interviews migration cutover colleague colleagues "
        "team recruiter offer"
    ).split(),
    "health": (
        "sick doctor dentist physio sore pain injury knee slept sleep appointment clinic "
        "checkup check-up hospital medicine stretch headache flu fever cleaning filling"
    ).split(),
    "family": (
        "mum mom dad mother father family sister brother grandma grandpa auntie aunt uncle "
        "cousin parents nephew niece christmas"
    ).split(),
    "food": (
        "dinner lunch breakfast brunch food cook cooked cooking recipe restaurant ramen pizza "
        "tapas sushi soup dumplings bake baking craving"
    ).split(),
    "music": (
        "music concert gig band album song songs listening playlist orchestra cello piano "
        "guitar rehearsal"
    ).split(),
    # Not "book": far more often a verb ("book the physio") than a thing read.
    "books": "reading novel novels library author chapter paperback bookshop".split(),
    "money": (
        "rent taxes tax money save saving savings budget bill bills salary invoice bank"
    ).split(),
    "kids": "kids kid school baby toddler twins son daughter nursery homework".split(),
    "pets": "cat cats dog dogs vet puppy kitten pet pets".split(),
    "garden": "garden gardening plants basil tomatoes lettuce seeds snails compost".split(),
    "birthdays": "birthday birthdays party present gift".split(),
    "home": (
        "flat apartment moving boxes viewing viewings landlord lease boiler plumber repair estate"
    ).split(),
    "football": "football match goal league stadium".split(),
}
_LEXICON: dict[str, tuple[str, ...]] = {}
for _topic, _members in _TOPIC_WORDS.items():
    for _member in _members:
        _LEXICON[_member] = (*_LEXICON.get(_member, ()), _topic)


def _topics(texts: Iterable[str], min_hits: int = 2) -> list[str]:
    """Topics of the lexicon that come up at least ``min_hits`` times, most first."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_topic_hits(text))
    ranked = sorted((t for t, c in counts.items() if c >= min_hits), key=lambda t: (-counts[t], t))
    return ranked[:MAX_TAGS]


@functools.lru_cache(maxsize=8192)
def _topic_hits(text: str) -> tuple[str, ...]:
    """Each lexicon topic a word of ``text`` belongs to, once per word."""
    words = _WORD.findall(text.casefold())
    return tuple(topic for word in words for topic in _LEXICON.get(word, ()))


_HASHTAG = re.compile(r"(?<![\w#])#([^\W_][\w-]{0,38})")


def _hashtags(lines: Sequence[Line]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if line.from_me:
            for tag in _HASHTAG.findall(line.text):
                if tag.casefold() not in out:
                    out.append(tag.casefold())
    return out


# -- wording ---------------------------------------------------------------------------


def _who(s: _Said) -> str:
    return "you" if s.from_me else s.speaker


def _names(names: Sequence[str]) -> str:
    return _join(list(names))


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _quote(text: str, limit: int = QUOTE_CHARS) -> str:
    text = " ".join(text.split()).replace("“", "‘").replace("”", "’")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fit(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    while lines and len("\n".join(lines)) > limit - 2:
        lines.pop()
    return "\n".join(lines) + "\n…" if lines else text[: limit - 1] + "…"


def _span(first: int, last: int) -> str:
    """ "on 3 May 2026", or "from 3 May 2026 to 9 Jun 2026"."""
    if day_label(first) == day_label(last):
        return f"on {day_label(first)}"
    return f"from {day_label(first)} to {day_label(last)}"


def _when(at: int, ref: int) -> str:
    """A day, with its year only when that differs from ``ref``'s."""
    return day_label(at, year=day_label(at)[-4:] != day_label(ref)[-4:])


def day_label(at: int, *, year: bool = True) -> str:
    """A UTC calendar day in words, from our own month table (no locale)."""
    day = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC)
    text = f"{day.day} {_MONTHS[day.month - 1]}"
    return f"{text} {day.year}" if year else text


_STOP = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves just really so ok okay oh yes yeah yep no nope hi hey
    hello bye lol haha omg haha hmm ugh wow well still got get gets going go goes went now
    today one thing things much many way lot bit like know think want need sure right time
    back good great nice love
    """.split()
)
