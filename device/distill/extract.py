"""Durable facts, plans and appointments, read out of text by fixed patterns.

Deterministic and English-only. Each pattern table is a tuple of rules that
can be extended in place: a rule is a compiled expression and what its match
means (a `FactKind` and a template filled with the match's groups). Three
tables, by who speaks and about whom:

* `FIRST_PERSON`: someone about themselves ("I work at Helix Bio", "my son
  Leo"). Read on the user's own lines it gives facts about the user; read on
  another person's lines, facts about that person. Rules marked ``loose``
  lean on context ("the new job at X", "another interview today") and are
  used only on the other person's own lines: the user says such things about
  other people too.
* `SECOND_PERSON`: the user about the person they are talking to ("your new
  job at X", "your son Leo").
* appointments: a calendar entry's text in the iCalendar importer's layout
  (summary, then "2026-03-14 15:00–16:00", "Location: ...", "With: ...") or
  a one-line "Dentist check-up, Fri 14 Mar 10:00".

A question states nothing ("is the flat in Hackney still cold?"), so a
sentence ending in "?" gives no fact.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import Fact, FactKind

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_RE = "|".join(MONTHS)
_MONTH_INDEX = {m[:3].casefold(): i + 1 for i, m in enumerate(MONTHS)}

# A proper name: capitalised words, with the small joining words of place
# and company names ("Rio de Janeiro", "Bank of Portugal").
NAME = r"[A-Z][\w'’&.-]*(?:[ -](?:de |da |do |van |von |of |la |le )?[A-Z][\w'’&.-]*)*"
_DAY_MONTH = (
    rf"(?:\d{{1,2}}(?:st|nd|rd|th)?(?: of)? (?:{_MONTH_RE})"
    rf"|(?:{_MONTH_RE}) \d{{1,2}}(?:st|nd|rd|th)?)"
)
_RELATIVE = (
    r"son|daughter|wife|husband|partner|boyfriend|girlfriend|fiancée|fiance|fiancé|sister|"
    r"brother|mum|mom|mother|dad|father|grandma|grandmother|grandpa|grandfather|niece|nephew|"
    r"cousin|aunt|uncle|best friend|twins|kids|children|baby|stepson|stepdaughter"
)
# An email address as people write one (no quoted local parts, no IP hosts).
EMAIL = r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})+"
EMAIL_ADDRESS = re.compile(EMAIL)
_ANIMAL = r"cat|dog|puppy|kitten|rabbit|bunny|parrot|hamster|tortoise|horse|guinea pig"
# "I love it", "I hate that": a pronoun or article is not a liking.
_NOT_PRONOUN = r"(?!(?:it|you|that|this|them|him|her|the|my|your|a|an|how|when|what|being)\b)"


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern and what it means: the fact's kind and a template of its
    text, filled with the match's groups ({0}, {1}, ...)."""

    pattern: re.Pattern[str]
    kind: FactKind
    template: str
    loose: bool = False


def _rule(pattern: str, kind: FactKind, template: str, *, loose: bool = False) -> Rule:
    return Rule(re.compile(pattern), kind, template, loose)


def _lead(words: str) -> str:
    """Case-insensitive lead words (an apostrophe matches ’ too) before a
    case-sensitive name."""
    return "(?i:" + words.replace("'", "[’']") + ")"


def _named(words: str, kind: FactKind, template: str, *, loose: bool = False) -> Rule:
    """Lead words, then a proper name: "i work at" + "Helix Bio"."""
    return _rule(r"\b" + _lead(words) + f" ({NAME})", kind, template, loose=loose)


FIRST_PERSON: tuple[Rule, ...] = (
    # work and role
    _named("i work (?:at|for)", FactKind.WORK, "works at {0}"),
    _rule(
        r"\b" + _lead("i'm (?:an?|the) |i am (?:an?|the) ") + r"([a-z][a-z -]{2,40}?) (?:at|for) "
        f"({NAME})",
        FactKind.WORK,
        "works at {1} as a {0}",
    ),
    _rule(r"\b(?i:i work as an?) ([a-z][a-z -]{2,40}[a-z])", FactKind.ROLE, "{0}"),
    # a new role told as news: "I got head of geography!", "I've been
    # promoted to senior engineer", "I'm the new deputy head" (a role word is
    # needed: "I got the bread" is no job)
    _rule(
        r"\b"
        + _lead(
            "i(?:'ve| have)? (?:just )?got|i(?:'ve| have) been (?:promoted to|made)|"
            "i'm now|i am now|i'm the new|i am the new"
        )
        + r" (?:the )?((?i:head|deputy head|director|manager|lead|chief|principal) of "
        r"[a-z]+(?: (?!(?:at|in|for|with|on|from|and|to)\b)[a-z]+)?|"
        r"(?i:senior|lead|principal|staff) [a-z]+(?: (?!(?:at|in|for|with|on|from|and|to)\b)"
        r"[a-z]+)?|(?i:deputy head|head teacher|headteacher)|"
        r"[a-z]+ (?i:manager|lead|director|supervisor))\b",
        FactKind.ROLE,
        "{0}",
    ),
    # a role at an organisation, told in passing ("head of chemistry at St
    # Werburgh's Academy"): loose, the other person's own lines only
    _rule(
        r"\b((?i:head|deputy head|director|manager|lead|chief|principal) of [a-z]+"
        r"(?: [a-z]+)?) at " + f"({NAME})",
        FactKind.WORK,
        "works at {1} as {0}",
        loose=True,
    ),
    _named(
        "(?:i've got|i have got|i got|i started|i'm starting|i am starting)"
        " (?:a|the|my) new job at",
        FactKind.WORK,
        "works at {0} (new job)",
    ),
    _named(
        "i(?:'ve| have)? (?:just )?(?:accepted|taken|landed) (?:a|the) (?:new )?"
        "(?:job|position|post|role) (?:at|with)",
        FactKind.WORK,
        "works at {0} (new job)",
    ),
    _named("my new job at", FactKind.WORK, "works at {0} (new job)"),
    _named("the new job at", FactKind.WORK, "works at {0} (new job)", loose=True),
    _named(
        "my (?:new )?(?:manager|boss|team|office|colleagues?) at", FactKind.WORK, "works at {0}"
    ),
    _rule(
        r"\b"
        + _lead(
            "i've (?:started|been) job hunting|i have (?:started|been) job hunting|"
            "i'm (?:job hunting|looking for a (?:new )?job|between jobs)|"
            "i am (?:job hunting|looking for a (?:new )?job|between jobs)|"
            "i (?:got laid off|quit my job|lost my job)"
        ),
        FactKind.WORK,
        "looking for a new job",
    ),
    _rule(
        r"\b(?i:(?:another|second|final|third) (?:round|interview)|job hunting|recruiters?)\b",
        FactKind.WORK,
        "looking for a new job",
        loose=True,
    ),
    # home
    _named("i live in", FactKind.HOME, "lives in {0}"),
    _named("(?:i|we)(?:'ve| have)? (?:just )?moved to", FactKind.HOME, "lives in {0} (moved)"),
    _named(
        "(?:i'm|i am|we're|we are) moving to(?: a (?:[a-z]+ )?(?:flat|house|place|apartment) in)?",
        FactKind.HOME,
        "moving to {0}",
    ),
    _named("my (?:new )?(?:flat|apartment|house|place|home) in", FactKind.HOME, "lives in {0}"),
    _named(
        "the new (?:flat|apartment|house|place) in",
        FactKind.HOME,
        "lives in a new place in {0}",
        loose=True,
    ),
    _named("(?:i'm|i am) from", FactKind.OTHER, "is from {0}"),
    # phone
    _rule(
        r"\b(?i:my (?:new )?(?:phone |mobile )?number is|my new number(?:'s)?:?|"
        r"(?:this is )?my new (?:phone|mobile):?)\s*(\+?\d[\d \-().]{5,}\d)",
        FactKind.PHONE,
        "{0}",
    ),
    _rule(
        r"\b(?i:my (?:new )?e-?mail(?: address)? is|my new e-?mail(?:'s)?:?)\s*" + f"({EMAIL})",
        FactKind.EMAIL,
        "{0}",
    ),
    # birthday, family, pets
    _rule(rf"\b(?i:my birthday is (?:on )?(?:the )?({_DAY_MONTH}))\b", FactKind.BIRTHDAY, "{0}"),
    _rule(
        rf"\b(?i:my ({_RELATIVE}))(?:,)? ({NAME})(?: (?i:and) ({NAME}))?",
        FactKind.FAMILY,
        "{0} {1}",
    ),
    _rule(
        rf"\b(?i:i (?:have|had) an?) ({_ANIMAL}) (?i:called|named) ({NAME})",
        FactKind.PET,
        "a {0} called {1}",
    ),
    _rule(rf"\b(?i:my) ({_ANIMAL}) ({NAME})", FactKind.PET, "a {0} called {1}"),
    # health, food, likes
    _rule(
        r"\b"
        + _lead("i'm allergic to|i am allergic to")
        + r" ([a-z]{2,30}(?: (?:and|or) [a-z]{2,30})?)\b",
        FactKind.ALLERGY,
        "allergic to {0}",
    ),
    _rule(
        r"\b" + _lead("i'm (?:a )?|i am (?:a )?") + r"(vegetarian|vegan|pescatarian|teetotal|"
        r"gluten-free|lactose intolerant|diabetic)\b",
        FactKind.DIET,
        "{0}",
    ),
    _rule(
        r"\b" + _lead("i (?:don't|do not|can't|cannot) eat") + r" ([a-z][a-z -]{1,30}[a-z])\b",
        FactKind.DIET,
        "doesn't eat {0}",
    ),
    _rule(
        r"\b(?i:my favou?rite) ([a-z]+) (?i:is) ([\w][\w'’ -]{1,30}?)(?=[.,!;]|$)",
        FactKind.LIKES,
        "favourite {0}: {1}",
    ),
    _rule(
        r"\b(?i:i prefer) ([a-z][a-z -]{2,30}?) (?:to|over) ([a-z][a-z -]{2,30}?)(?=[.,!;]|$)",
        FactKind.LIKES,
        "prefers {0} to {1}",
    ),
    _rule(
        r"\b(?i:i (?:really )?(?:love|adore)) "
        + _NOT_PRONOUN
        + r"([a-z][a-z -]{2,30}[a-z])(?=[.,!;]|$)",
        FactKind.LIKES,
        "loves {0}",
    ),
    _rule(
        r"\b"
        + _lead("i (?:really )?(?:hate|can't stand)")
        + " "
        + _NOT_PRONOUN
        + r"([a-z][a-z -]{2,30}[a-z])(?=[.,!;]|$)",
        FactKind.DISLIKES,
        "dislikes {0}",
    ),
    _rule(r"\b(?i:i play the) ([a-z]+)\b", FactKind.HOBBY, "plays the {0}"),
    # a wish: a gift idea ("I'd love a proper pour-over kettle", "I've always
    # wanted to learn the cello"); not the social kind ("I'd love to catch up")
    _rule(
        r"\b"
        + _lead(
            "i'd (?:really |so )?love|i would (?:really |so )?love|i(?:'ve| have) always wanted|"
            "i really want|i'm dying to|i am dying to"
        )
        + r" ((?!(?i:to (?:see|catch up|hear|meet|help|come|join|chat|talk|know|have you|go)\b"
        r"|(?:a|an|some|the) (?:lift|hand|help|chat|coffee|call|break|nap|recipe)\b"
        r"|more time\b))"
        r"(?:(?i:a|an|the|that|those|one of|some|to|more) )"
        r"(?![^.!?;]*\b(?i:today|tomorrow|tonight|this (?:week|weekend|evening|morning))\b)"
        r"[^.!?;]{3,90}?)(?=[.!?;]|$)",
        FactKind.WISH,
        "would love {0}",
    ),
)

SECOND_PERSON: tuple[Rule, ...] = (
    _named("you work (?:at|for)", FactKind.WORK, "works at {0}"),
    _named("your new job at", FactKind.WORK, "works at {0} (new job)"),
    _named("you live in", FactKind.HOME, "lives in {0}"),
    _named(
        "(?:you(?:'ve| have)? moved to|your (?:new )?(?:flat|place|house) in)",
        FactKind.HOME,
        "lives in {0}",
    ),
    _rule(
        rf"\b(?i:your ({_RELATIVE}))(?:,)? ({NAME})(?: (?i:and) ({NAME}))?",
        FactKind.FAMILY,
        "{0} {1}",
    ),
    _rule(rf"\b(?i:your) ({_ANIMAL}) ({NAME})", FactKind.PET, "a {0} called {1}"),
    _rule(rf"\b(?i:your birthday is (?:on )?(?:the )?({_DAY_MONTH}))\b", FactKind.BIRTHDAY, "{0}"),
)

_NAME_STOP = frozenset(
    "I I'm I’m The A An And But So Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
)


def facts_in(
    text: str, at: int | None, rules: Sequence[Rule] = FIRST_PERSON, *, loose: bool = False
) -> list[Fact]:
    """The facts ``text`` states by ``rules`` (``loose``: the loose rules too),
    in order of appearance, one per kind and phrase."""
    if (rules is not FIRST_PERSON and rules is not SECOND_PERSON) or len(text) > _SAID_CHARS:
        return [Fact(f.kind, f.text, at) for f in _facts_in(text, rules, loose)]
    # A pass asks about the same line several times (the distiller, the
    # person page, the older lines of a thread), with the same rules: what
    # a line says is kept for the next time (at most _SAID_MAX short lines).
    key = (text, rules is SECOND_PERSON, loose)
    found = _SAID.get(key)
    if found is None:
        if len(_SAID) >= _SAID_MAX:
            _SAID.clear()
        found = _SAID[key] = _facts_in(text, rules, loose)
    return [Fact(f.kind, f.text, at) for f in found]


_SAID: dict[tuple[str, bool, bool], tuple[Fact, ...]] = {}
_SAID_MAX = 8192
_SAID_CHARS = 2000


def _facts_in(text: str, rules: Sequence[Rule], loose: bool) -> tuple[Fact, ...]:
    at = None
    out: list[Fact] = []
    seen: set[tuple[FactKind, str]] = set()
    anything = _any_rule(rules, loose)
    for sentence in (s for line in text.splitlines() for s in sentences(line)):
        if (
            not sentence
            or sentence.endswith("?")
            or quoted(sentence)
            or anything.search(sentence) is None
        ):
            continue
        for rule in rules:
            if rule.loose and not loose:
                continue
            for match in rule.pattern.finditer(sentence):
                groups = [_tidy(g) for g in match.groups()]
                if any(g in _NAME_STOP for g in groups if g):
                    continue
                filled = rule.template.format(*(g or "" for g in groups))
                if match.lastindex and match.lastindex >= 3 and groups[2]:
                    filled += f" and {groups[2]}"
                fact = Fact(rule.kind, " ".join(filled.split()), at)
                if rule.kind is FactKind.BIRTHDAY:
                    fact = Fact(rule.kind, day_month(filled) or filled, at)
                key = (fact.kind, fact.text.casefold())
                if key not in seen:
                    seen.add(key)
                    out.append(fact)
    return tuple(out)


def _any_rule(rules: Sequence[Rule], loose: bool) -> re.Pattern[str]:
    """One pattern made of the patterns of ``rules`` that apply (``loose``:
    the loose ones too): a sentence matches it if and only if one of them
    matches, so a sentence that states nothing is passed over in one scan."""
    key = (id(rules), loose)
    found = _ANY_RULE.get(key)
    if found is None or found[0] is not rules:
        used = [r.pattern for r in rules if loose or not r.loose]
        if any(p.flags != _PLAIN for p in used):
            anything = re.compile("")  # flags of their own: each pattern is tried
        else:
            anything = re.compile("|".join(f"(?:{p.pattern})" for p in used))
        found = _ANY_RULE[key] = (rules, anything)
    return found[1]


_ANY_RULE: dict[tuple[int, bool], tuple[Sequence[Rule], re.Pattern[str]]] = {}
_PLAIN = re.compile("").flags


def _tidy(value: str | None) -> str | None:
    if value is None:
        return None
    value = " ".join(value.split()).strip(" .,;:!'’-")
    if value[:1].isdigit() or value[:1].isupper():
        return value
    return value.casefold()


def day_month(text: str) -> str | None:
    """ "14th of March", "March 14" -> "14 March"; None if there is no date."""
    match = re.search(r"(\d{1,2})(?:st|nd|rd|th)?(?: of)? ([A-Za-z]+)", text)
    if match and match.group(2)[:3].casefold() in _MONTH_INDEX:
        return f"{int(match.group(1))} {MONTHS[_MONTH_INDEX[match.group(2)[:3].casefold()] - 1]}"
    match = re.search(r"([A-Za-z]+) (\d{1,2})(?:st|nd|rd|th)?", text)
    if match and match.group(1)[:3].casefold() in _MONTH_INDEX:
        return f"{int(match.group(2))} {MONTHS[_MONTH_INDEX[match.group(1)[:3].casefold()] - 1]}"
    return None


def card_facts(details: Iterable[tuple[str, str]]) -> list[Fact]:
    """A contact card's details (org, title, birthday, phone, email, address, note)
    as undated facts: a dated one of the same kind, said later in a message
    ("my new number is ...", "we've moved to ..."), supersedes them."""
    out = []
    for field, value in details:
        if field == "org":
            out.append(Fact(FactKind.WORK, f"works at {value}"))
        elif field == "title":
            out.append(Fact(FactKind.ROLE, value))
        elif field == "birthday":
            out.append(Fact(FactKind.BIRTHDAY, card_birthday(value)))
        elif field == "note":
            out.append(Fact(FactKind.NOTE, value))
        elif field == "phone":
            out.append(Fact(FactKind.PHONE, value))
        elif field == "email":
            out.append(Fact(FactKind.EMAIL, value))
        elif field == "address":
            out.append(Fact(FactKind.HOME, f"lives at {value}"))
    return out


def card_birthday(value: str) -> str:
    """A card's "YYYY-MM-DD" or "--MM-DD" as "3 August 1990" or "3 August"."""
    match = re.fullmatch(r"(\d{4}|-)-?(\d{2})-(\d{2})", value.strip())
    if match is None or not 1 <= int(match.group(2)) <= 12:
        return value
    text = f"{int(match.group(3))} {MONTHS[int(match.group(2)) - 1]}"
    return f"{text} {match.group(1)}" if match.group(1) != "-" else text


# -- who someone is, as the agent once put it ------------------------------------------

# A full stop, "!" or "?" (and any closing quote or bracket) before a space.
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”’)]))\s+")
# A title or an initial with its full stop ("Ms. Okafor", "Dr. Kwan", "J. R.
# Smith") ends no sentence. Named rather than guessed from its shape: "Yes.",
# "Ok." and "Hi." are short capitalised words that do end one.
_TITLES = frozenset(
    "Mr Mrs Ms Mx Dr Prof St Sr Sra Jr Mt Rev Fr Sgt Capt Lt Col Gen Hon Dra Srta Mme Mlle "
    "approx vs".split()
)
_IDENTITY = re.compile(r"^([^\s,;:!?“”\"()][^,;:!?“”\"()]{0,59}?) is (.+)$")
MAX_STATEMENT_CHARS = 300


def _ends_in_title(part: str) -> bool:
    """Whether ``part`` ends on a title or an initial with its full stop."""
    if not part.endswith("."):
        return False
    word = part[part.rfind(" ") + 1 : -1].lstrip('(“"')
    return word in _TITLES or (len(word) == 1 and word.isupper())


def quoted(sentence: str) -> bool:
    """Whether a sentence is someone's words quoted ("“I'd love to learn
    that one day.”"): whose they are, the sentence does not say, so no
    pattern reads it as its writer's."""
    return sentence[:1] in _OPENING_QUOTES


_OPENING_QUOTES = frozenset('"“‘„«')


def sentences(text: str) -> tuple[str, ...]:
    """``text`` cut into sentences at a full stop, "!" or "?" (and any
    closing quote or bracket) and the space after it, runs of whitespace
    folded to one space, a title or an initial ("Ms. Okafor", "Dr. Kwan",
    "L. Souza") not ending one (so "I got an A. Then I left." stays one
    sentence: the price of keeping "J. R. Smith" whole). A line break does
    not end a sentence here: callers that read lines split them first.
    Cached for a line's length: a pass reads the same line for its digest,
    its facts and whom it is about; a long mail body or transcript is cut
    afresh rather than held."""
    if len(text) > _CACHED_CHARS:
        return _sentences(text)
    return _cached_sentences(text)


_CACHED_CHARS = 2000


@functools.lru_cache(maxsize=8192)
def _cached_sentences(text: str) -> tuple[str, ...]:
    return _sentences(text)


def _sentences(text: str) -> tuple[str, ...]:
    out: list[str] = []
    pending: list[str] = []  # the pieces of a sentence a title has not ended
    for part in _SENTENCE_BREAK.split(" ".join(text.split())):
        if not part:
            continue
        pending.append(part)
        if not _ends_in_title(part):
            out.append(" ".join(pending))
            pending = []
    if pending:
        out.append(" ".join(pending))
    return tuple(out)


def identity_statements(text: str) -> list[tuple[str, str]]:
    """The sentences of ``text`` shaped "<name> is <what>" ("Mum is Maria
    Silva, your mother in Coimbra."), as (name, what), the final full stop
    dropped. Questions, quotes and sentences over MAX_STATEMENT_CHARS are
    skipped; ``what`` must run to three words at least."""
    out: list[tuple[str, str]] = []
    for sentence in sentences(text):
        if sentence.endswith("?") or len(sentence) > MAX_STATEMENT_CHARS:
            continue
        match = _IDENTITY.match(sentence.rstrip(".!"))
        if match is None:
            continue
        name, what = match.group(1).strip(), match.group(2).strip()
        if len(what.split()) >= 3 and not any(q in what for q in '“”"'):
            out.append((name, what))
    return out


__all__ = [
    "EMAIL",
    "EMAIL_ADDRESS",
    "FIRST_PERSON",
    "MONTHS",
    "NAME",
    "SECOND_PERSON",
    "WEEKDAYS",
    "Rule",
    "card_birthday",
    "card_facts",
    "day_month",
    "facts_in",
    "quoted",
    "sentences",
]
