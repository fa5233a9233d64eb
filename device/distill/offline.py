"""The built-in distiller: the embedded default, and the last resort behind a model.

Deterministic, offline and dependency-free: the same request always gives the
same answer, on every machine, so a pass that re-derives a note re-derives it
word for word and the Notebook's no-op rule keeps it untouched. It answers in
the same JSON a model would and goes through the same validation.

What it writes is extractive rather than invented:

* a summary picks the most informative lines (content words, topic words,
  names, numbers; greetings, sign-offs and one-word replies score nothing),
  shows them in order with who said them and when, and notes a question left
  hanging or a plan in the air;
* a person summary does the same for the other person's own lines, with the
  topics they bring up;
* facts about the user come only from the user's own lines, by simple fixed
  patterns ("I live in", "I work at", "my birthday is", ...);
* tags come from a small topic lexicon, plus any hashtags the user wrote.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import (
    MAX_FACTS,
    MAX_PERSON_CHARS,
    MAX_SUMMARY_CHARS,
    ME,
    DistillRequest,
    Line,
    SourceKind,
    fact_key,
)

HIGHLIGHTS = 4  # lines quoted in a conversation summary
PERSON_QUOTES = 3  # the other person's lines quoted on their page
QUOTE_CHARS = 180
MAX_TAGS = 4
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class OfflineDistiller:
    """The `Backend` that needs nothing: no network, no model, no randomness."""

    name = "offline"

    async def answer(self, request: DistillRequest) -> object:
        return distill(request)

    async def aclose(self) -> None:
        return None


def distill(request: DistillRequest) -> dict[str, object]:
    """The answer a model would give, as a JSON-ready object."""
    if request.kind is SourceKind.CONVERSATION:
        return _conversation(request)
    if request.kind is SourceKind.POST:
        return _post(request)
    return _call(request)


# -- the three kinds of source -----------------------------------------------------


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
    span = (
        f"on {day_label(first)}"
        if day_label(first) == day_label(last)
        else f"from {day_label(first)} to {day_label(last)}"
    )
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
    plan = _plan(said)
    if plan is not None and plan not in highlights:
        parts.append(f"Plans: “{_quote(plan.text)}” ({_when(plan.at, last)}).")
    person = _person(request, said) if request.person else None
    return _answer("\n".join(parts), person, said, request, min_hits=2)


def _person(request: DistillRequest, said: Sequence[_Said]) -> str:
    name = request.person or ""
    theirs = [s for s in said if not s.from_me]
    mine = [s for s in said if s.from_me]
    last = request.lines[-1].at
    if theirs:
        parts = [f"{name}: last message from them on {day_label(theirs[-1].at)}."]
        if said[-1].from_me and day_label(said[-1].at) != day_label(theirs[-1].at):
            parts[0] += f" You wrote last, on {day_label(said[-1].at)}."
    else:
        parts = [f"{name}: no reply yet to your messages (the last on {day_label(said[-1].at)})."]
    topics = _topics(s.text for s in theirs)
    if topics:
        parts.append(f"Talks about {_join(topics)}.")
    quotes = _best(theirs, PERSON_QUOTES)
    if quotes:
        parts.append(
            "Lately: "
            + "; ".join(f"“{_quote(s.text)}” ({_when(s.at, last)})" for s in quotes)
            + "."
        )
    asked = _distinct(
        s for s in reversed(mine) if s.text.rstrip().endswith("?") and _words(s.text) >= 3
    )
    asked = sorted(asked[:2], key=lambda s: s.n)
    if asked:
        parts.append("You asked: " + "; ".join(f"“{_quote(s.text)}”" for s in asked) + ".")
    plan = _plan(said)
    if plan is not None:
        parts.append(f"Plans: “{_quote(plan.text)}” ({_when(plan.at, last)}).")
    return _fit("\n".join(parts), MAX_PERSON_CHARS)


def person_in_group(request: DistillRequest, name: str) -> str | None:
    """A page for someone met only in a group conversation: when they last
    wrote, what they talk about, and a few of their own lines (never anyone
    else's). None if the request holds nothing they said."""
    theirs = tuple(line for line in request.lines if line.speaker == name and not line.from_me)
    if not theirs:
        return None
    alone = DistillRequest(request.kind, request.title, name, (name,), theirs)
    page = _person(alone, _utterances(theirs))
    return _fit(f"Seen in the {request.title}.\n{page}", MAX_PERSON_CHARS)


def _post(request: DistillRequest) -> dict[str, object]:
    root, replies = request.lines[0], request.lines[1:]
    author = "You" if root.from_me else root.speaker
    parts = [f"{author} posted on {day_label(root.at)}: “{_quote(root.text, 400)}”"]
    if replies:
        latest = replies[-1]
        noun = "reply" if len(replies) == 1 else "replies"
        who = "you" if latest.from_me else latest.speaker
        parts.append(
            f"{len(replies)} {noun}; the latest from {who} on {_when(latest.at, root.at)}: "
            f"“{_quote(latest.text)}”"
        )
    said = _utterances(request.lines)
    return _answer("\n".join(parts), None, said, request, min_hits=1)


def _call(request: DistillRequest) -> dict[str, object]:
    said = _utterances(request.lines)
    first = request.lines[0]
    who = _names(request.participants) or "someone"
    parts: list[str] = []
    if first.kind == "voicemail":
        core = [s for s in said if s.score > 0] or said[:1]
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
    return _answer("\n".join(parts), None, said, request, min_hits=1)


def _answer(
    summary: str, person: str | None, said: Sequence[_Said], request: DistillRequest, min_hits: int
) -> dict[str, object]:
    tags = _topics((s.text for s in said), min_hits=min_hits)
    tags += [t for t in _hashtags(request.lines) if t not in tags]
    return {
        "summary": _fit(summary, MAX_SUMMARY_CHARS),
        "person": person,
        "facts": _facts(s.text for s in said if s.from_me)[:MAX_FACTS],
        "tags": tags[:MAX_TAGS],
    }


# -- lines and how much they say ---------------------------------------------------

_SPEAKER_LINE = re.compile(r"^([^:\n]{1,60}):\s+(.+)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_][\w'’-]*")


def _utterances(lines: Sequence[Line]) -> list[_Said]:
    """What was said, one entry per message, or per turn of a call transcript,
    or per sentence of a voicemail, each scored for how much it says."""
    out: list[_Said] = []
    for line in lines:
        if line.kind == "call":
            turns = [_turn(t, line) for t in line.text.splitlines() if t.strip()]
        elif line.kind == "voicemail":
            turns = [(line.speaker, False, t) for t in _SENTENCE_END.split(line.text) if t.strip()]
        else:
            turns = [(line.speaker, line.from_me, " ".join(line.text.split()))]
        for speaker, from_me, said in turns:
            text = _trim(said)
            out.append(_Said(line.at, speaker, from_me, text, _score(text), len(out)))
    return out


def _trim(text: str) -> str:
    """The line without the small talk around what it says ("Of course. Long
    run today, 32 km." keeps its second sentence). Unchanged if nothing is left."""
    sentences = _SENTENCE_END.split(text)
    if len(sentences) < 2:
        return text
    kept = [t for t in sentences if _content(t) >= 2 and not _is_small_talk(t)]
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
    return any(p.search(lowered) for p in _SMALL_TALK)


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


def _best(said: Sequence[_Said], k: int) -> list[_Said]:
    """The k lines that say most (ties go to the newer), back in order."""
    ranked = sorted((s for s in said if s.score > 0), key=lambda s: (-s.score, -s.n))
    return sorted(_distinct(ranked)[:k], key=lambda s: s.n)


def _distinct(said: Iterable[_Said]) -> list[_Said]:
    """``said`` without lines that repeat an earlier one in other words (the
    same reminder with another date, "haha" or "lol" in front)."""
    out: list[_Said] = []
    seen: list[set[str]] = []
    for s in said:
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


_PLAN = re.compile(
    r"\b(today|tonight|tomorrow|this weekend|next week|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|\d{1,2}:\d{2}|\d{1,2} ?(am|pm))\b",
    re.IGNORECASE,
)


def _plan(said: Sequence[_Said]) -> _Said | None:
    """The latest line among the last ten that names a day or a time."""
    for s in reversed(said[-10:]):
        if s.score > 0 and _words(s.text) >= 3 and _PLAN.search(s.text):
            return s
    return None


# -- facts about the user ------------------------------------------------------------

_MONTH_NAMES = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
)
_NAME = r"[A-Z][\w'’&.-]*(?:[ -](?:de |da |do |van |von |of )?[A-Z][\w'’&.-]*)*"
_FACTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"\b(?i:i live in) ({_NAME})"), "Lives in {0}"),
    (re.compile(rf"\b(?i:i(?:'ve| have)? moved to) ({_NAME})"), "Lives in {0}"),
    (re.compile(rf"\b(?i:i work (?:at|for)) ({_NAME})"), "Works at {0}"),
    (re.compile(rf"\b(?i:i(?:'m| am) from) ({_NAME})"), "Is from {0}"),
    (
        re.compile(
            rf"\bmy birthday is (?:on )?(\d{{1,2}}(?:st|nd|rd|th)? (?:{_MONTH_NAMES})"
            rf"|(?:{_MONTH_NAMES}) \d{{1,2}}(?:st|nd|rd|th)?)\b",
            re.IGNORECASE,
        ),
        "Birthday: {0}",
    ),
    (
        re.compile(
            r"\b(?i:i(?:'m|’m| am) allergic to) ([a-z]{2,30}(?: (?:and|or) [a-z]{2,30})?)\b"
        ),
        "Allergic to {0}",
    ),
    (re.compile(r"\b(?i:i play the) ([a-z]+)\b"), "Plays the {0}"),
    (
        re.compile(
            r"\b(?i:i have an?) (cat|dog|puppy|kitten|rabbit|bunny|parrot|hamster|tortoise|horse)"
            r" (?:called|named) ([A-Z][\w'’-]*)"
        ),
        "Has a {0} called {1}",
    ),
)


def _facts(texts: Iterable[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for text in texts:
        for pattern, template in _FACTS:
            for match in pattern.finditer(text):
                fact = template.format(*(_tidy(g) for g in match.groups()))
                key = fact_key(fact)
                if key not in seen:
                    seen.add(key)
                    out.append(fact)
    return out


def _tidy(value: str) -> str:
    value = " ".join(value.split()).strip(" .,'’-")
    if value[:1].isdigit() or value[:1].isupper():
        return value
    return value.casefold()


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
    "books": "book books reading novel library author chapter".split(),
    "money": (
        "rent taxes tax money save saving savings budget bill bills salary invoice bank"
    ).split(),
    "kids": "kids kid school baby toddler twins son daughter nursery homework tooth".split(),
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
        for word in _WORD.findall(text.casefold()):
            for topic in _LEXICON.get(word, ()):
                counts[topic] += 1
    ranked = sorted((t for t, c in counts.items() if c >= min_hits), key=lambda t: (-counts[t], t))
    return ranked[:MAX_TAGS]


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
