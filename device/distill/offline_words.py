"""Lines and how much they say, topics and wording: the small helpers every
kind of source shares in the built-in distiller."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import (
    ME,
    Line,
)
from pixie.device.distill.extract import EMAIL, sentences

HIGHLIGHTS = 4  # lines quoted in a conversation summary
JOURNAL_WROTE_CHARS = 800  # of a journal entry's own sentences kept in its digest
QUOTE_CHARS = 180
MAX_TAGS = 4
MAX_ANSWER_FACTS = 10  # MAX_FACTS, the bound on an answer
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# -- the kinds of source -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Said:
    at: int
    speaker: str
    from_me: bool
    text: str
    score: float
    n: int  # position, for stable ordering


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


def _turn_pronouns(text: str, who: str) -> str:
    """The first-person pronouns of ``text`` told of ``who`` ("they" or
    "you"); a letter the table does not know (a Turkish "İ", which matches
    "i" but folds to another string) stays as written."""
    turned = _TURNED[who]
    return _PRONOUN[who].sub(lambda m: turned.get(m.group(0).casefold(), m.group(0)), text)


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


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit``, cut at a word, with "…"."""
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


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
