"""Labelled memory questions, derived from what the sample life planted.

A retrieval benchmark needs questions whose right answers are known without
asking the system under test. The sample life (`tests.testkit.samplelife`) writes
every fact through fixed phrasings: the user's facts, each contact's `Fact`
templates (some true only for part of the timeline), calendar titles, the
agent's scripted answers. So the events that state a fact can be recomputed by
matching those same phrasings against the generated events, and that is what
this module does: it reads the generator's tables and its output, never
anything the system derived from them.

Five kinds of question, in the style of LongMemEval:

* ``single``: one fact, stated in one or more events ("Where does Priya live?");
* ``multi``: the answer needs several events, usually from several sources or
  people ("Which of my contacts have pets?");
* ``update``: a fact that changed; the answer is the newest value and the gold
  events are those stating it, not the superseded ones;
* ``temporal``: anchored in time relative to the life's last day ("When did I
  last hear from Ada by phone?", "What did I do last weekend?");
* ``abstention``: about something never planted; the right answer is none and
  there are no gold events.

Each question carries a `Query`, what a person would type or a model would
send to a memory tool: plain words, a ``person`` filter when the question is
about one person, and ``days_back`` when it is about a recent window.

The set is split for good by a hash of the question text into a tuning half
and a held-out half. `load` returns the tuning half; the held-out half comes
back only with ``held_out=True``, so tuning code cannot read it by accident.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from tests.testkit.samplelife import (
    _JOURNAL_ABOUT,
    _MONTHS,
    _PLAN_LOCAL,
    _PLAN_REMOTE,
    _SLOT_VALUES,
    CONTACTS,
    DEFAULT_END,
    Contact,
    Event,
    Fact,
    generate,
)

__all__ = ["KINDS", "Query", "Question", "all_questions", "load"]

KINDS: Final = ("single", "multi", "update", "temporal", "abstention")


@dataclass(frozen=True, slots=True)
class Query:
    """What is sent to a memory tool for a question."""

    text: str  # plain words
    person: str | None = None  # a contact's name, when the question is about one person
    days_back: int | None = None  # only the last N days, when the question says so

    def as_json(self) -> dict[str, object]:
        return {"text": self.text, "person": self.person, "days_back": self.days_back}


@dataclass(frozen=True, slots=True)
class Question:
    """One labelled question."""

    qid: str  # stable: a hash of kind and question text
    kind: str  # one of KINDS
    question: str
    query: Query
    gold_event_ids: tuple[str, ...]  # events stating the answer, oldest first; () for abstention
    answer: str  # the expected answer, for reference
    evidence: tuple[str, ...]  # words each gold event states (in its text or contact name)

    @property
    def held_out(self) -> bool:
        return _held_out(self.question)

    def as_json(self) -> dict[str, object]:
        return {
            "qid": self.qid,
            "kind": self.kind,
            "question": self.question,
            "query": self.query.as_json(),
            "gold_event_ids": list(self.gold_event_ids),
            "answer": self.answer,
            "evidence": list(self.evidence),
        }


def _held_out(question: str) -> bool:
    return hashlib.sha256(question.encode("utf-8")).digest()[0] & 1 == 1


def load(
    seed: int = 7,
    events: int = 5000,
    *,
    end: dt.date | None = None,
    years: float = 3.0,
    held_out: bool = False,
) -> list[Question]:
    """The tuning half of the question set, or with ``held_out=True`` the held-out half."""
    return [q for q in all_questions(seed, events, end=end, years=years) if q.held_out is held_out]


# -- matching the generator's phrasings ------------------------------------------------

_SLOTS: Final[dict[str, tuple[str, ...]]] = {
    **_SLOT_VALUES,
    "short": tuple(c.short for c in CONTACTS),
    "city": tuple(c.city for c in CONTACTS),
}
_SLOT_RE: Final = re.compile(r"\{(\w+)\}")


def _template_re(template: str) -> str:
    """A template as a regular expression: each slot any of its values."""
    parts = _SLOT_RE.split(template)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        else:
            out.append("(?:" + "|".join(re.escape(v) for v in _SLOTS[part]) + ")")
    return "".join(out)


def _phrases(*templates: str) -> re.Pattern[str]:
    """Any of the templates, anywhere in a text, case aside (speech capitalises)."""
    return re.compile("|".join(_template_re(t) for t in templates), re.IGNORECASE)


def _words(*words: str) -> re.Pattern[str]:
    return re.compile("|".join(rf"\b{re.escape(w)}\b" for w in words), re.IGNORECASE)


_BY_SHORT: Final = {c.short: c for c in CONTACTS}


def _contact(short: str) -> Contact:
    return _BY_SHORT[short]


def _fact(short: str, about: str, newest: bool = True) -> Fact:
    facts = [f for f in _contact(short).facts if f.about == about]
    facts.sort(key=lambda f: f.start)
    return facts[-1] if newest else facts[0]


def _about(short: str, about: str) -> list[str]:
    """The journal's phrasings that name a contact's fact ("Talked to Ada about ...")."""
    return [t.format(short=short, about=about) for t in _JOURNAL_ABOUT]


# -- building the set --------------------------------------------------------------------


class _Life:
    """The generated events with the lookups the question builders need."""

    def __init__(self, events: list[Event], end: dt.date) -> None:
        self.events = events
        self.end = end

    def find(
        self,
        pattern: re.Pattern[str],
        *,
        contacts: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None,
        where: Callable[[Event], bool] | None = None,
    ) -> list[Event]:
        names = None if contacts is None else {_contact(s).name for s in contacts}
        wanted = None if kinds is None else set(kinds)
        found = []
        for event in self.events:
            if wanted is not None and event["kind"] not in wanted:
                continue
            if names is not None and event.get("contact") not in names:
                continue
            if where is not None and not where(event):
                continue
            if pattern.search(event["text"]):
                found.append(event)
        return found

    def text_has(self, pattern: re.Pattern[str]) -> bool:
        return any(pattern.search(e["text"]) for e in self.events)


def _day(event: Event) -> dt.date:
    return dt.date.fromisoformat(event["at"][:10])


def _date_label(day: dt.date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


class _Builder:
    def __init__(self, life: _Life) -> None:
        self.life = life
        self.out: list[Question] = []

    def add(
        self,
        kind: str,
        question: str,
        query: Query,
        gold: Sequence[Event],
        answer: str,
        evidence: Sequence[str] = (),
    ) -> None:
        if kind != "abstention" and not gold:
            return  # never planted in this run: not a fair question
        if kind == "multi" and len(gold) < 2:
            return
        ids = tuple(e["id"] for e in sorted(gold, key=lambda e: (e["at"], e["id"])))
        qid = hashlib.sha256(f"{kind}|{question}".encode()).hexdigest()[:12]
        self.out.append(Question(qid, kind, question, query, ids, answer, tuple(evidence)))


def all_questions(
    seed: int = 7, events: int = 5000, *, end: dt.date | None = None, years: float = 3.0
) -> list[Question]:
    """Both halves, in a fixed order. Benchmarks should use `load` instead."""
    life = _Life(list(generate(seed, events, end, years)), end or DEFAULT_END)
    b = _Builder(life)
    _single(b)
    _multi(b)
    _update(b)
    _temporal(b)
    _abstention(b)
    seen: set[str] = set()
    unique = []
    for q in b.out:
        if q.question not in seen:
            seen.add(q.question)
            unique.append(q)
    return unique


def _single(b: _Builder) -> None:
    life = b.life
    for c in CONTACTS:
        said = _phrases(f"is {c.name}, your {c.relationship} in {c.city}")
        b.add(
            "single",
            f"Who is {c.short} again?",
            Query(c.short, person=c.short),
            life.find(said, kinds=["agent_chat_agent"]),
            f"{c.name}, your {c.relationship} in {c.city}",
            (c.relationship,),
        )
        if c.birthday is not None:
            said = _phrases(f"{c.short}'s birthday ({c.birthday})", f"birthday is on {c.birthday}")
            b.add(
                "single",
                f"When is {c.short}'s birthday?",
                Query(f"{c.short} birthday", person=c.short),
                life.find(said, where=_says(c.short)),
                c.birthday,
                (c.birthday,),
            )
    user = (
        ("Where do I live?", "live home city", "Porto", ("live in Porto",)),
        ("Where do I work?", "work job", "Northwind Labs", ("work at Northwind Labs",)),
        ("When is my birthday?", "my birthday", "14 March", ("birthday is on 14 March",)),
        ("Am I allergic to anything?", "allergic", "peanuts", ("allergic to peanuts",)),
        ("Which instrument do I play?", "instrument play", "the cello", ("play the cello",)),
        ("What's my cat called?", "cat name", "Miso", ("cat called Miso", "cat is called Miso")),
    )
    for question, words, answer, phrases in user:
        b.add(
            "single",
            question,
            Query(words),
            life.find(_phrases(*phrases), where=_not_asked),
            answer,
            (answer.removeprefix("the "),),
        )
    facts = (
        ("What's Jimmy's dog called?", "Jimmy dog", "Jimmy", "Biscuit", _words("Biscuit")),
        ("What's Zoë's son called?", "Zoë son", "Zoë", "Leo", _words("Leo")),
        (
            "What are Léa's twins called?",
            "Léa twins",
            "Léa",
            "Jules and Camille",
            _words("Jules", "Camille"),
        ),
        ("What's Léa's cat called?", "Léa cat", "Léa", "Mochi", _words("Mochi")),
        (
            "What's Marco's band called?",
            "Marco band",
            "Marco",
            "The Late Trains",
            _words("Late Trains"),
        ),
        (
            "Where does Marco's band play?",
            "Marco band gig",
            "Marco",
            "Maus Hábitos",
            _words("Maus Hábitos"),
        ),
        (
            "Which part of London does Priya live in?",
            "Priya flat",
            "Priya",
            "Hackney",
            _words("Hackney"),
        ),
        (
            "Where does Inés go bouldering?",
            "Inés bouldering",
            "Inés",
            "Vertical Porto",
            _words("Vertical Porto"),
        ),
        (
            "How long does Kenji's ramen broth take?",
            "Kenji ramen",
            "Kenji",
            "12 hours",
            _phrases("the broth took 12 hours"),
        ),
        (
            "What does Mum cook for Sunday lunch?",
            "Mum Sunday lunch",
            "Mum",
            "arroz de pato",
            _words("arroz de pato"),
        ),
        (
            "What is Ada learning?",
            "Ada lessons",
            "Ada",
            "Portuguese",
            _phrases("Portuguese lessons", "Portuguese exam", "Portuguese teacher"),
        ),
        (
            "What is Priya's first project at Helix Bio?",
            "Priya project",
            "Priya",
            "the lab data pipeline",
            _words("lab data pipeline"),
        ),
        (
            "Which composer is the orchestra playing?",
            "orchestra concert",
            None,
            "Dvořák",
            _words("Dvořák"),
        ),
        (
            "When is my lease renewal?",
            "lease renewal",
            "Sam",
            "September",
            _phrases("in September"),
        ),
        ("How much is my rent going up?", "rent", "Sam", "2%", _phrases("Rent goes up by 2%")),
        (
            "Which tooth is the crown for?",
            "crown",
            "Dr. Nowak",
            "lower molar",
            _words("lower molar"),
        ),
        (
            "What is Hannah writing?",
            "Hannah writing",
            "Hannah",
            "a novel",
            _phrases("the novel", "her novel", "novel's"),
        ),
    )
    for question, words, person, answer, pattern in facts:
        b.add(
            "single",
            question,
            Query(words, person=person),
            life.find(pattern),
            answer,
            tuple(re.sub(r"^(?:the|a) ", "", answer, flags=re.IGNORECASE).split(" and ")),
        )


def _says(words: str) -> Callable[[Event], bool]:
    return lambda event: words in event["text"]


def _in_thread(thread: str) -> Callable[[Event], bool]:
    return lambda event: event.get("thread") == thread


def _not_asked(event: Event) -> bool:
    """Not the user's question to the agent (it asks, it does not state)."""
    return event["kind"] != "agent_chat_user"


def _multi(b: _Builder) -> None:
    life = b.life
    porto = [c for c in CONTACTS if c.city == "Porto"]
    said = _phrases(*(f"is {c.name}, your {c.relationship} in Porto" for c in porto))
    b.add(
        "multi",
        "Which of my contacts live in Porto?",
        Query("live Porto"),
        life.find(said, kinds=["agent_chat_agent"]),
        ", ".join(c.short for c in porto),
        ("Porto",),
    )
    kids = _words("Leo", "twins", "Jules", "Camille")
    b.add(
        "multi",
        "Which of my friends have kids?",
        Query("kids children son twins"),
        life.find(kids),
        "Zoë (Leo) and Léa (the twins Jules and Camille)",
        ("Leo", "twins", "Jules", "Camille"),
    )
    pets = _words("Biscuit", "Mochi")
    b.add(
        "multi",
        "Which of my friends have pets?",
        Query("dog cat pet"),
        life.find(pets),
        "Jimmy (his dog Biscuit) and Léa (her cat Mochi)",
        ("Biscuit", "Mochi"),
    )
    knee = _words("knee")
    b.add(
        "multi",
        "Who has had knee trouble?",
        Query("knee"),
        life.find(knee, contacts=["Ada", "Mum"]) + life.find(_phrases("her knee surgery")),
        "Ada (her knee during marathon training) and Mum (knee surgery)",
        ("knee",),
    )
    music = _phrases("Late Trains", "band practice", *_fact("Kenji", "the spring concert").says)
    b.add(
        "multi",
        "Which of my friends make music?",
        Query("band orchestra music rehearsal"),
        life.find(music, contacts=["Marco", "Kenji"]),
        "Marco (his band The Late Trains) and Kenji (the community orchestra)",
        ("Marco", "Kenji"),
    )
    book = _phrases("book club picked {book}")
    b.add(
        "multi",
        "Which books has Hannah's book club read?",
        Query("Hannah book club", person="Hannah"),
        life.find(book, contacts=["Hannah"]),
        "the books named in Hannah's book club messages",
        _SLOT_VALUES["book"],
    )
    trips = _phrases("Weekend in {trip}, highly recommend", "Flight to {trip}")
    b.add(
        "multi",
        "Which trips have I taken?",
        Query("trip weekend flight"),
        life.find(trips, where=lambda e: e.get("from_me", True) and "contact" not in e),
        "the places in my own weekend posts and flight entries",
        _SLOT_VALUES["trip"],
    )
    for c in CONTACTS:
        if not c.casual or c.family:
            continue
        steps: tuple[str, ...]
        if c.local:
            steps = (*_PLAN_LOCAL[0], *_PLAN_LOCAL[2])
            question = f"What plans have I made with {c.short}?"
            words = f"{c.short} plans dinner lunch coffee drinks"
        else:
            steps = (*_PLAN_REMOTE[0], *_PLAN_REMOTE[2])
            question = f"When have {c.short} and I planned to talk?"
            words = f"{c.short} call talk"
        in_thread = life.find(_phrases(*steps), where=_in_thread(c.thread))
        booked = life.find(
            _phrases(*c.calendar, "with {short} at {place}"),
            contacts=[c.short],
            kinds=["calendar"],
            where=lambda e: "birthday" not in e["text"],
        )
        b.add(
            "multi",
            question,
            Query(words, person=c.short),
            in_thread + booked,
            f"the plans in my thread and calendar with {c.short}",
            (c.short,),
        )


def _update(b: _Builder) -> None:
    life = b.life
    helix = _fact("Priya", "her new job")
    stating = [t for t in (*helix.says, *helix.asks) if "Helix Bio" in t]
    b.add(
        "update",
        "Where does Priya work now?",
        Query("Priya work job", person="Priya"),
        life.find(_phrases(*stating), contacts=["Priya"]),
        "Helix Bio (she left her old team after a job search)",
        ("Helix Bio",),
    )
    b.add(
        "update",
        "Is Priya still looking for a job?",
        Query("Priya job", person="Priya"),
        life.find(_phrases(*helix.says, *helix.asks), contacts=["Priya"]),
        "No: she started a new job at Helix Bio",
        ("new job", "Helix Bio", "new manager"),
    )
    done = _fact("Ada", "the Lyon marathon")
    b.add(
        "update",
        "Is Ada still training for the Lyon marathon?",
        Query("Ada marathon", person="Ada"),
        life.find(_phrases(*done.says, *done.asks), contacts=["Ada"]),
        "No: she ran it (3:58) and is thinking about another one",
        ("marathon",),
    )
    b.add(
        "update",
        "What was Ada's Lyon marathon time?",
        Query("Ada marathon time", person="Ada"),
        life.find(_phrases(done.says[0]), contacts=["Ada"]),
        "3:58",
        ("3:58",),
    )
    flat = _fact("Zoë", "the new flat")
    b.add(
        "update",
        "Where does Zoë live now?",
        Query("Zoë flat", person="Zoë"),
        life.find(_phrases(*flat.says, *flat.asks), contacts=["Zoë"]),
        "in a new, bigger flat in Bordeaux with a tiny garden",
        ("new flat",),
    )
    atlas = _fact("Marco", "the Atlas migration")
    b.add(
        "update",
        "Is the Atlas migration finished?",
        Query("Atlas migration"),
        life.find(_phrases(*atlas.says, *atlas.asks), contacts=["Marco"]),
        "Yes: Marco switched off the last Atlas server",
        ("Atlas",),
    )
    b.add(
        "update",
        "Did Priya get the job at Helix Bio?",
        Query("Priya Helix Bio", person="Priya"),
        life.find(_phrases(*stating), contacts=["Priya"]),
        "Yes: she works there now",
        ("Helix Bio",),
    )
    b.add(
        "update",
        "How does Priya get to work these days?",
        Query("Priya commute", person="Priya"),
        life.find(_phrases("commute to King's Cross"), contacts=["Priya"]),
        "she commutes to King's Cross every day for the new job",
        ("King's Cross",),
    )
    b.add(
        "update",
        "Is Ada planning another marathon?",
        Query("Ada another marathon", person="Ada"),
        life.find(_phrases(done.says[2], done.asks[1]), contacts=["Ada"]),
        "She is thinking about another one next year",
        ("another marathon",),
    )
    b.add(
        "update",
        "Is Zoë still packing for the move?",
        Query("Zoë move packing", person="Zoë"),
        life.find(_phrases(*flat.says, *flat.asks), contacts=["Zoë"]),
        "No: the move is done and she is in the new flat",
        ("new flat",),
    )
    b.add(
        "update",
        "Is Marco still busy with the Atlas cutover?",
        Query("Marco Atlas cutover", person="Marco"),
        life.find(_phrases(*atlas.says, *atlas.asks), contacts=["Marco"]),
        "No: the last Atlas server is switched off",
        ("Atlas",),
    )
    b.add(
        "update",
        "Has Ada run the Lyon marathon yet?",
        Query("Ada Lyon marathon", person="Ada"),
        life.find(_phrases(done.says[0], done.says[1], done.asks[0]), contacts=["Ada"]),
        "Yes: she finished it in 3:58",
        ("marathon",),
    )
    b.add(
        "update",
        "What is Zoë's new flat like?",
        Query("Zoë new flat", person="Zoë"),
        life.find(_phrases(flat.says[0]), contacts=["Zoë"]),
        "bigger, in Bordeaux, with a tiny garden Leo is obsessed with",
        ("tiny garden",),
    )
    b.add(
        "update",
        "Are there still Atlas servers running?",
        Query("Atlas servers"),
        life.find(_phrases(*atlas.says), contacts=["Marco"]),
        "No: Marco switched off the last one",
        ("Atlas server",),
    )
    b.add(
        "update",
        "How is Mum's knee after the surgery?",
        Query("Mum knee", person="Mum"),
        life.find(_phrases("the knee is getting better"), contacts=["Mum"]),
        "getting better, with physio",
        ("getting better",),
    )


def _temporal(b: _Builder) -> None:
    life = b.life
    for c in CONTACTS:
        calls = [e for e in life.events if e["kind"] in ("call", "voicemail")]
        calls = [e for e in calls if e.get("contact") == c.name]
        if calls:
            last = calls[-1]
            b.add(
                "temporal",
                f"When did I last hear from {c.short} by phone?",
                Query(f"{c.short} call", person=c.short),
                [last],
                f"{_date_label(_day(last))} ({last['kind']})",
                (c.short,),
            )
        entries = life.find(
            _phrases(*c.calendar, "with {short} at {place}"),
            contacts=[c.short],
            kinds=["calendar"],
            where=lambda e: "birthday" not in e["text"],
        )
        if entries:
            b.add(
                "temporal",
                f"What's the latest thing in my calendar with {c.short}?",
                Query(c.short, person=c.short),
                entries[-1:],
                entries[-1]["text"],
                (c.short,),
            )
    solo = (
        ("When was my most recent haircut booked for?", "haircut", "Haircut", "Haircut"),
        (
            "When was my most recent cello lesson booked for?",
            "cello lesson",
            "Cello lesson",
            "Cello",
        ),
        ("When was my most recent yoga class booked for?", "yoga", "Yoga", "Yoga"),
        (
            "When was Miso's most recent vet visit booked for?",
            "Miso vet",
            "Vet: Miso's vaccinations",
            "Miso",
        ),
        (
            "When was the most recent team offsite booked for?",
            "team offsite",
            "Team offsite",
            "offsite",
        ),
        (
            "When was my most recent dentist appointment booked for?",
            "dentist appointment",
            "Dentist: check-up with Dr. Nowak",
            "Dentist",
        ),
        ("When was my most recent flight booked for?", "flight", "Flight to {trip}", "Flight"),
    )
    for question, words, title, evidence in solo:
        entries = life.find(_phrases(title + ", "), kinds=["calendar"])
        if entries:
            b.add(
                "temporal", question, Query(words), entries[-1:], entries[-1]["text"], (evidence,)
            )
    firsts = (
        ("When did Priya start at Helix Bio?", "Priya Helix Bio new job", "Priya", "her new job"),
        ("When did Ada run the Lyon marathon?", "Ada marathon", "Ada", "the Lyon marathon"),
        ("When did Zoë move into her new flat?", "Zoë new flat", "Zoë", "the new flat"),
        ("When was the Atlas migration finished?", "Atlas", "Marco", "the Atlas migration"),
    )
    for question, words, short, about in firsts:
        fact = _fact(short, about)
        found = life.find(_phrases(*fact.says), contacts=[short], where=_not_from_me)
        if found:
            b.add(
                "temporal",
                question,
                Query(words, person=short),
                found[:1],
                f"around {_date_label(_day(found[0]))}",
                (short,),
            )
    # Relative to the life's last day: the weekend before it and the week up to it.
    end = life.end
    saturday = end - dt.timedelta(days=(end.weekday() - 5) % 7 or 7)
    weekend = {saturday, saturday + dt.timedelta(days=1)}
    did = [
        e
        for e in life.events
        if _day(e) in weekend
        and (e["kind"] in ("journal", "call") or (e["kind"] == "post" and e.get("from_me")))
    ]
    b.add(
        "temporal",
        "What did I do last weekend?",
        Query("weekend", days_back=(end - saturday).days + 1),
        did,
        "what my journal, calls and own posts of that weekend say",
    )
    week = [e for e in life.events if e["kind"] == "call" and (end - _day(e)).days < 7]
    b.add(
        "temporal",
        "Who did I talk to on the phone this past week?",
        Query("call", days_back=7),
        week,
        ", ".join(sorted({e.get("contact", "") for e in week})),
    )
    journal = [e for e in life.events if e["kind"] == "journal"]
    b.add(
        "temporal",
        "What did I write in my journal most recently?",
        Query("journal diary", days_back=7),
        journal[-1:],
        journal[-1]["text"] if journal else "",
    )


def _not_from_me(event: Event) -> bool:
    return not event.get("from_me", False)


# Never planted: each has a word or phrase that appears nowhere in the life,
# checked when the set is built.
_ABSENT: Final = (
    ("What's my dog called?", "my dog name", None, "my dog"),
    ("When is my piano recital?", "piano recital", None, "piano"),
    ("When did I last go skiing?", "skiing", None, "ski"),
    ("When is my flight to Tokyo?", "flight Tokyo", None, "Tokyo"),
    ("What's Kenji's wife called?", "Kenji wife", "Kenji", "wife"),
    ("When is my driving test?", "driving test", None, "driving"),
    ("What's my passport number?", "passport number", None, "passport"),
    ("Who is Carlos?", "Carlos", None, "Carlos"),
    ("What's Marco's daughter called?", "Marco daughter", "Marco", "daughter"),
    ("When is my appointment with the accountant?", "accountant appointment", None, "accountant"),
    ("What car do I drive?", "car drive", None, "drive"),
    ("What's my blood type?", "blood type", None, "blood"),
    ("When is Léa's wedding?", "Léa wedding", "Léa", "wedding"),
    ("How much did I pay for the guitar?", "guitar price", None, "guitar"),
    ("What's Hannah's phone number?", "Hannah phone number", "Hannah", "phone number"),
    ("When is my yoga retreat in Bali?", "yoga retreat Bali", None, "Bali"),
    ("What did Sam say about the parking space?", "Sam parking", "Sam", "parking"),
    ("Which hospital was Priya in?", "Priya hospital", "Priya", "hospital"),
    ("What's the wifi password?", "wifi password", None, "wifi"),
    ("When is Jimmy's wedding anniversary?", "Jimmy anniversary", "Jimmy", "anniversary"),
    ("When is the mortgage payment due?", "mortgage payment", None, "mortgage"),
    ("Which marathon is Priya training for?", "Priya marathon", "Priya", "Priya's marathon"),
    ("What's Ada's husband called?", "Ada husband", "Ada", "husband"),
    ("When is my tennis match?", "tennis match", None, "tennis"),
)


def _abstention(b: _Builder) -> None:
    for question, words, person, absent in _ABSENT:
        if b.life.text_has(_words(absent)):
            continue  # planted after all: not an abstention question
        b.add(
            "abstention",
            question,
            Query(words, person=person),
            [],
            "none: this was never mentioned",
            (absent,),
        )
