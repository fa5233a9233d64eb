"""Person pages and the about-you note: their layout, read back and merged.

A person page has three sections, in this order, whatever backend wrote it:

    Who they are
    - Work: works at Helix Bio (new job); as of 2 Mar 2026
    - Birthday: 3 August; from your contacts
    Your read on the relationship
    - You write often: 40 messages from 1 Sep to 30 Nov 2026, ...
    Open threads
    - Plan: dinner Friday at Casa Lisa at 19:30; as of 28 Nov 2026
    - You asked “how did the interview go?” (29 Nov 2026); no answer yet.

Each fact line is a label (its `FactKind`), a short phrase and the day of the
source that said it, so the page can be read back (`parse_person_page`) and
merged with newer facts: a distillation pass sees only a source's newest
lines, and a fact said months ago must not fall off the page because the
last forty messages do not repeat it. `merge_facts` keeps, of each
single-valued kind (work, role, home, birthday), the newest fact only, so
"works at Helix Bio" supersedes "looking for a new job"; of the other kinds,
every distinct fact, each with the newest day it was said. Merging compares
days, not instants, and breaks ties by text, so the result does not depend on
the order in which sources were distilled.

The about-you note is a list of the same fact lines.

A pass reads the same pages and days back again and again (a contact's page
after each of their calls, the same day on many lines), so the readers and
writers of lines, days and pages here remember their recent answers: each is
a function of its argument alone (strings, and `Fact`s, which are frozen), its
answer immutable, and each memory bounded.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pixie.device.distill.contract import (
    MAX_OPEN_THREADS,
    MAX_PERSON_FACTS,
    SINGLE_VALUED,
    Fact,
    FactKind,
    fact_key,
)

WHO = "Who they are"
READ = "Your read on the relationship"
THREADS = "Open threads"
NOTHING_KNOWN = "Nothing noted yet."
NOTHING_OPEN = "Nothing open."
FROM_CARD = "from your contacts"
MAX_PLANS = 2  # the newest arrangements; older ones have happened or lapsed
MAX_ABOUT_FACTS = 100

LABELS: dict[FactKind, str] = {
    FactKind.WORK: "Work",
    FactKind.ROLE: "Role",
    FactKind.HOME: "Home",
    FactKind.BIRTHDAY: "Birthday",
    FactKind.FAMILY: "Family",
    FactKind.PET: "Pet",
    FactKind.PLAN: "Plan",
    FactKind.ALLERGY: "Allergy",
    FactKind.DIET: "Diet",
    FactKind.LIKES: "Likes",
    FactKind.DISLIKES: "Dislikes",
    FactKind.HOBBY: "Hobby",
    FactKind.HEALTH: "Health",
    FactKind.PHONE: "Phone",
    FactKind.EMAIL: "Email",
    FactKind.NOTE: "Note",
    FactKind.WISH: "Gift idea",
    FactKind.OTHER: "Also",
}
_BY_LABEL = {label.casefold(): kind for kind, label in LABELS.items()}
_ORDER = {kind: i for i, kind in enumerate(FactKind)}
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_FACT_LINE = re.compile(
    r"^([A-Z][A-Za-z]{1,20}(?: [a-z]{2,12})?): (.+?)"
    r"(?:; (?:as of (\d{1,2} [A-Z][a-z]{2} \d{4})|(from your contacts)))?$"
)
_DAY_US = 86_400_000_000


# -- one fact line -------------------------------------------------------------------


def day_of(at: int) -> int:
    """The start of ``at``'s UTC day: what facts are dated by."""
    return at - at % _DAY_US


@functools.lru_cache(maxsize=4096)
def short_day(at: int) -> str:
    day = dt.datetime.fromtimestamp(at / 1_000_000, tz=dt.UTC)
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


@functools.lru_cache(maxsize=4096)
def parse_day(text: str) -> int | None:
    """ "2 Mar 2026" (as `short_day` writes it) -> the start of that UTC day."""
    parts = text.split()
    if len(parts) != 3 or parts[1] not in _MONTHS or not (parts[0] + parts[2]).isdigit():
        return None
    day, month, year = parts
    try:
        moment = dt.datetime(int(year), _MONTHS.index(month) + 1, int(day), tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(moment.timestamp()) * 1_000_000


@functools.lru_cache(maxsize=8192)
def fact_line(fact: Fact) -> str:
    """ "Work: works at Helix Bio; as of 2 Mar 2026" (no bullet)."""
    text = " ".join(fact.text.split())
    when = FROM_CARD if fact.at is None else f"as of {short_day(fact.at)}"
    return f"{LABELS[fact.kind]}: {text}; {when}"


@functools.lru_cache(maxsize=8192)
def parse_fact_line(line: str) -> Fact | None:
    """A line `fact_line` wrote (bullet or not), or None."""
    line = line.strip()
    if line.startswith(("- ", "* ")):
        line = line[2:].strip()
    match = _FACT_LINE.match(line)
    if match is None:
        return None
    kind = _BY_LABEL.get(match.group(1).casefold())
    if kind is None:
        return None
    at = parse_day(match.group(3)) if match.group(3) else None
    return Fact(kind, match.group(2), at)


def guess_kind(text: str) -> FactKind:
    """The kind of a fact given as bare text ("Lives in Porto"), for answers
    that carry no kind."""
    lowered = text.casefold()
    for lead, kind in _LEADS:
        if lowered.startswith(lead):
            return kind
    return FactKind.OTHER


_LEADS: tuple[tuple[str, FactKind], ...] = (
    ("works at", FactKind.WORK),
    ("works for", FactKind.WORK),
    ("work:", FactKind.WORK),
    ("looking for a", FactKind.WORK),
    ("lives in", FactKind.HOME),
    ("moved to", FactKind.HOME),
    ("home:", FactKind.HOME),
    ("birthday", FactKind.BIRTHDAY),
    ("allergic", FactKind.ALLERGY),
    ("allergy", FactKind.ALLERGY),
    ("has a cat", FactKind.PET),
    ("has a dog", FactKind.PET),
    ("plays the", FactKind.HOBBY),
)


# -- merging ---------------------------------------------------------------------------


def _key(fact: Fact) -> tuple[str, str]:
    if fact.kind in SINGLE_VALUED:
        return fact.kind.value, ""
    return fact.kind.value, fact_key(fact.text)


def _rank(fact: Fact) -> tuple[int, str]:
    return (-1 if fact.at is None else fact.at, fact.text.casefold())


def merge_facts(facts: Iterable[Fact], limit: int = MAX_PERSON_FACTS) -> list[Fact]:
    """One fact per single-valued kind (the newest) and per distinct phrase of
    the others (with the newest day it was said); plans the newest MAX_PLANS.
    In page order: by kind, then newest first; at most ``limit`` besides plans."""
    best: dict[tuple[str, str], Fact] = {}
    for fact in facts:
        at = fact.at
        dated = fact if at is None or at % _DAY_US == 0 else Fact(fact.kind, fact.text, day_of(at))
        key = _key(dated)
        held = best.get(key)
        if held is None or _rank(dated) > _rank(held):
            best[key] = dated
    ordered = sorted(best.values(), key=lambda f: (_ORDER[f.kind], -_rank(f)[0], f.text))
    plans = sorted((f for f in ordered if f.kind is FactKind.PLAN), key=_rank, reverse=True)
    rest = [f for f in ordered if f.kind is not FactKind.PLAN]
    return rest[:limit] + plans[:MAX_PLANS]


# -- the person page ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PersonPage:
    facts: tuple[Fact, ...] = ()  # who they are, and plans (shown as open threads)
    read: tuple[str, ...] = ()
    threads: tuple[str, ...] = ()  # open threads other than plans


def render_person_page(page: PersonPage) -> str:
    who = [f for f in page.facts if f.kind is not FactKind.PLAN]
    plans = [f for f in page.facts if f.kind is FactKind.PLAN]
    lines = [WHO]
    lines += [f"- {fact_line(f)}" for f in who] or [f"- {NOTHING_KNOWN}"]
    lines.append(READ)
    lines += [f"- {_one_line(r)}" for r in page.read] or [f"- {NOTHING_KNOWN}"]
    lines.append(THREADS)
    opened = [f"- {fact_line(f)}" for f in plans]
    opened += [f"- {_one_line(t)}" for t in page.threads[:MAX_OPEN_THREADS]]
    lines += opened or [f"- {NOTHING_OPEN}"]
    return "\n".join(lines)


@functools.lru_cache(maxsize=256)
def parse_person_page(body: str | None) -> PersonPage:
    """What `render_person_page` wrote, read back; an older layout reads as
    its text under "your read" (nothing of it is lost)."""
    if not body:
        return PersonPage()
    section = None
    facts: list[Fact] = []
    read: list[str] = []
    threads: list[str] = []
    for raw in body.splitlines():
        line = raw.strip()
        if line in (WHO, READ, THREADS):
            section = line
            continue
        if not line:
            continue
        item = line[2:].strip() if line.startswith(("- ", "* ")) else line
        if item in (NOTHING_KNOWN, NOTHING_OPEN):
            continue
        if section == WHO or (section == THREADS and item.startswith(LABELS[FactKind.PLAN])):
            fact = parse_fact_line(item)
            if fact is not None:
                facts.append(fact)
                continue
        if section == THREADS:
            threads.append(item)
        else:
            read.append(item)
    return PersonPage(tuple(facts), tuple(read), tuple(threads))


def merge_page(
    stored: PersonPage,
    facts: Sequence[Fact],
    read: Sequence[str] | None = None,
    threads: Sequence[str] | None = None,
) -> PersonPage:
    """``stored`` with ``facts`` merged in; ``read`` and ``threads`` replace
    the stored ones when given (a one-to-one thread's answer), and are kept
    otherwise (a call or a calendar entry adds facts only)."""
    return PersonPage(
        tuple(merge_facts((*stored.facts, *facts))),
        tuple(read) if read is not None else stored.read,
        tuple(threads) if threads is not None else stored.threads,
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- about you ---------------------------------------------------------------------------


def parse_about_you(body: str | None) -> list[Fact]:
    """The facts of an about-you body; a bare line (an older layout, or one
    the user typed) is kept as a fact of its guessed kind, undated."""
    return list(_about_you_facts(body))


@functools.lru_cache(maxsize=256)
def _about_you_facts(body: str | None) -> tuple[Fact, ...]:
    out = []
    for raw in (body or "").splitlines():
        line = raw.strip()
        if line.startswith(("- ", "* ")):
            line = line[2:].strip()
        if not line:
            continue
        fact = parse_fact_line(line)
        out.append(fact if fact is not None else Fact(guess_kind(line), line))
    return tuple(out)


def render_about_you(facts: Sequence[Fact]) -> str:
    return "\n".join(f"- {fact_line(f)}" for f in facts)


def merge_about_you(body: str | None, facts: Sequence[Fact]) -> list[Fact]:
    """The about-you facts after adding ``facts``: newest of each single-valued
    kind, every distinct other fact; at most MAX_ABOUT_FACTS."""
    return merge_facts((*parse_about_you(body), *facts), limit=MAX_ABOUT_FACTS)


__all__ = [
    "FROM_CARD",
    "LABELS",
    "READ",
    "THREADS",
    "WHO",
    "PersonPage",
    "day_of",
    "fact_line",
    "guess_kind",
    "merge_about_you",
    "merge_facts",
    "merge_page",
    "parse_about_you",
    "parse_day",
    "parse_fact_line",
    "parse_person_page",
    "render_about_you",
    "render_person_page",
    "short_day",
]
