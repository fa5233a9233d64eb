"""Facts about the people a source names: who a sentence is about, what it
says of them, and the answer's shape."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pixie.device.distill.contract import (
    MAX_FACT_CHARS,
    MAX_OTHERS,
    MAX_SUMMARY_CHARS,
    ME,
    DistillRequest,
    Fact,
    FactKind,
    Line,
)
from pixie.device.distill.extract import FIRST_PERSON, MONTHS, WEEKDAYS, facts_in, sentences
from pixie.device.distill.offline_words import (
    _OPENERS,
    _STOP,
    MAX_ANSWER_FACTS,
    MAX_TAGS,
    _call_turns,
    _content,
    _cut,
    _first,
    _fit,
    _hashtags,
    _is_small_talk,
    _journal_sentences,
    _Said,
    _score,
    _topics,
    _turn_pronouns,
)
from pixie.device.distill.pages import merge_facts
from pixie.device.distill.plans import arranges

SAID_CHARS = 140


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
