"""A deterministic "sample life": years of plausible personal events as JSON lines.

The log, the grep tools and the distiller all need realistic input long before a
real phone has produced any, and demos, benchmarks and regression tests only
compare if that input is byte-for-byte the same on every machine and every run.
So everything here is driven by one `random.Random(seed)`: no clock, no hash
ordering, no locale (weekday and month names come from our own tables).

The life is built for the later stages rather than for realism at any cost:

* a dozen contacts, each with a relationship, a home city, favourite topics and
  personal facts that recur in what they write (some facts hold only for part of
  the timeline, e.g. Priya's job hunt and then her new job, so a distiller has
  something to get right about time);
* the user's own durable facts (`USER_FACTS`) written in fixed phrasings, so a
  simple extractor, or a grep demo, can find them;
* messages in bursts inside threads, plus calls, voicemails, posts, journal
  entries, calendar entries and agent-chat turns in roughly real-life shares.

Output is streamed in time order without sorting: gaps are drawn forward from
the start, and each gap is sized from the time and events still left, so a run
of any length lands inside its window and memory stays flat.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import io
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from random import Random
from typing import Final, NotRequired, TextIO, TypedDict

__all__ = [
    "CONTACTS",
    "DEFAULT_END",
    "KINDS",
    "MAX_TEXT_CHARS",
    "USER_FACTS",
    "Contact",
    "Event",
    "Fact",
    "generate",
    "main",
    "write_jsonl",
]


class Event(TypedDict):
    """One JSON-ready event (a plain dict at run time); optional keys are left out, never None."""

    id: str  # UUID version 7, its time part the event's millisecond
    kind: str  # one of KINDS
    at: str  # UTC, seconds precision, "Z" suffix
    text: str
    contact: NotRequired[str]  # a display name from CONTACTS
    thread: NotRequired[str]  # messages only: "t-ada" (1:1) or "g-climbing" (group)
    source: NotRequired[str]  # "call:<n>", "voicemail:<n>", "post:<n>", "cal:<n>"
    from_me: NotRequired[bool]  # messages and posts


# A fixed default end rather than "today", so that the default output never changes.
DEFAULT_END: Final = dt.date(2026, 11, 30)
MAX_TEXT_CHARS: Final = 1500
KINDS: Final = (
    "message",
    "call",
    "voicemail",
    "post",
    "journal",
    "calendar",
    "agent_chat_user",
    "agent_chat_agent",
)

# The user's durable facts, exactly as they are phrased wherever they occur.
USER_FACTS: Final = (
    "I live in Porto",
    "I work at Northwind Labs",
    "my birthday is on 14 March",
    "I'm allergic to peanuts",
    "I play the cello",
    "I have a cat called Miso",
)


@dataclass(frozen=True, slots=True)
class Fact:
    """Something recurring in one contact's life.

    `start` and `stop` are fractions of the generated time span (0 = first day,
    1 = last), so a fact can begin or end part-way through, which is what makes
    "what is true *now*" a real question for the distiller.
    """

    about: str  # how the user would refer to it: "her new job"
    says: tuple[str, ...]  # what the contact writes about it
    asks: tuple[str, ...]  # what the user writes to them about it
    start: float = 0.0
    stop: float = 1.0


@dataclass(frozen=True, slots=True)
class Contact:
    """One person in the sample life, with everything the generator draws on."""

    name: str  # display name, the `contact` field of events
    aliases: tuple[str, ...]
    short: str  # how the user names them in speech and in transcripts
    relationship: str
    city: str
    topics: tuple[str, ...]  # keys of the topic lexicon
    birthday: str | None
    thread: str  # id of the 1:1 message thread
    facts: tuple[Fact, ...]
    calendar: tuple[str, ...]  # calendar titles specific to them
    greeting: str  # how a voicemail or call from them opens
    weight: float  # how often they turn up, relative to the others
    casual: bool = True  # False for the dentist and the landlord: no banter, no plans
    family: bool = False  # they know the user's basics, so the user doesn't tell them

    @property
    def local(self) -> bool:
        """Whether plans with them happen in person (they live where the user does)."""
        return self.city == "Porto"


CONTACTS: Final[tuple[Contact, ...]] = (
    Contact(
        name="Ada Lovelace",
        aliases=("Ada", "Ada L."),
        short="Ada",
        relationship="old friend from university",
        city="Lyon",
        topics=("running", "travel", "books", "food"),
        birthday="10 December",
        thread="t-ada",
        facts=(
            Fact(
                "the Lyon marathon",
                (
                    "long run today, {km} km, legs are dead",
                    "Lyon marathon training is going ok, {n} weeks to go",
                    "had to cut the long run short, my knee is complaining again",
                    "new running shoes! training for the marathon in Lyon is getting serious",
                    "marathon plan says intervals tonight, send help",
                ),
                (
                    "how's the marathon training going?",
                    "how many weeks until the Lyon marathon?",
                    "is your knee ok after the long run?",
                ),
                stop=0.7,
            ),
            Fact(
                "the Lyon marathon",
                (
                    "I finished the Lyon marathon in 3:58!! still can't walk down stairs",
                    "the marathon medal lives on the fridge now",
                    "thinking about another marathon next year, is that insane?",
                ),
                (
                    "congrats again on the marathon! how are the legs?",
                    "are you really signing up for another marathon?",
                ),
                start=0.7,
            ),
            Fact(
                "her Portuguese lessons",
                (
                    "obrigada! my Portuguese lessons are paying off",
                    "I have a Portuguese exam next month, help",
                    "my Portuguese teacher says my accent is very Lyon",
                ),
                (
                    "como estás? how are the Portuguese lessons?",
                    "when is your Portuguese exam?",
                ),
            ),
        ),
        calendar=("Video call with Ada", "Ada visiting Porto, pick her up at the airport"),
        greeting="Hey, it's Ada!",
        weight=1.2,
    ),
    Contact(
        name="Priya Raman",
        aliases=("P", "Priya"),
        short="Priya",
        relationship="former coworker",
        city="London",
        topics=("work", "money", "travel", "music"),
        birthday="3 August",
        thread="t-priya",
        facts=(
            Fact(
                "her job search",
                (
                    "another interview today, fingers crossed",
                    "I think I'm done with my team, I've started job hunting",
                    "second round at Helix Bio next week!",
                    "recruiters keep offering me crypto jobs, no thanks",
                ),
                (
                    "any news from the interviews?",
                    "how did the Helix Bio interview go?",
                ),
                stop=0.35,
            ),
            Fact(
                "her new job",
                (
                    "first week at the new job at Helix Bio done, intense but I love it",
                    "the new job means I commute to King's Cross every day now",
                    "my new manager at Helix Bio is great, finally",
                    "got my first project at the new job, it's the lab data pipeline",
                ),
                (
                    "how's the new job going?",
                    "do you miss the old team or is Helix Bio better?",
                ),
                start=0.35,
            ),
            Fact(
                "her flat in Hackney",
                (
                    "my flat in Hackney finally has working heating",
                    "the neighbours in Hackney are learning the trumpet, badly",
                ),
                ("is the flat in Hackney still freezing?",),
            ),
        ),
        calendar=("Catch-up call with Priya",),
        greeting="Hi, it's Priya.",
        weight=1.2,
    ),
    Contact(
        name="Jimmy Okafor",
        aliases=("Jimmy", "Jim"),
        short="Jimmy",
        relationship="neighbour",
        city="Porto",
        topics=("pets", "garden", "food", "football"),
        birthday="21 April",
        thread="t-jimmy",
        facts=(
            Fact(
                "his dog Biscuit",
                (
                    "Biscuit stole a whole baguette off the counter today",
                    "taking Biscuit to the vet {day}, she ate a sock",
                    "can you watch Biscuit {day}? I'll be back by {time}",
                    "Biscuit says hi to Miso",
                    "Biscuit rolled in something awful at the park, bath time",
                ),
                (
                    "how's Biscuit doing?",
                    "is Biscuit ok after the vet?",
                    "want me to walk Biscuit while you're away?",
                ),
            ),
            Fact(
                "his allotment",
                (
                    "the tomatoes in the allotment are finally red",
                    "I've got way too many courgettes from the allotment, want some?",
                ),
                ("how's the allotment?",),
            ),
        ),
        calendar=("Walk Biscuit for Jimmy", "Dinner with Jimmy at {place}"),
        greeting="Hey neighbour, it's Jimmy.",
        weight=1.0,
    ),
    Contact(
        name="Zoë Martin",
        aliases=("Zoë", "Zo", "sis"),
        short="Zoë",
        relationship="sister",
        city="Bordeaux",
        topics=("family", "kids", "birthdays", "moving house"),
        birthday="2 June",
        thread="t-zoe",
        facts=(
            Fact(
                "her son Leo",
                (
                    "Leo lost his first tooth today!",
                    "Leo wants to be an astronaut this week",
                    "Leo asked if his auntie can come for his birthday",
                    "Leo drew a picture of Miso, it has six legs",
                ),
                ("how's Leo?", "did Leo like the dinosaur book?"),
            ),
            Fact(
                "the move",
                (
                    "we're moving to a bigger flat in Bordeaux, boxes everywhere",
                    "moving house with a 5 year old is chaos",
                    "the removal van is booked for the {nth}",
                ),
                ("how's the packing going?", "when is the move again?"),
                start=0.3,
                stop=0.6,
            ),
            Fact(
                "the new flat",
                (
                    "the new flat has a tiny garden, Leo is obsessed",
                    "come see the new flat in Bordeaux!",
                ),
                ("how's the new flat?",),
                start=0.6,
            ),
        ),
        calendar=("Call Zoë", "Train to Bordeaux to see Zoë and Leo"),
        greeting="Hi, it's me, Zoë.",
        weight=1.5,
        family=True,
    ),
    Contact(
        name="Inés García",
        aliases=("Inés", "Ine"),
        short="Inés",
        relationship="climbing partner",
        city="Porto",
        topics=("climbing", "travel", "health", "music"),
        birthday="27 September",
        thread="t-ines",
        facts=(
            Fact(
                "her finger injury",
                (
                    "finger is still sore, the physio says no crimps for {n} more weeks",
                    "I tweaked my A2 pulley again",
                    "taped the finger and did easy routes only, I'm being good",
                ),
                ("how's the finger?", "is the physio helping with the finger?"),
                stop=0.5,
            ),
            Fact(
                "the Kalymnos trip",
                (
                    "booked! Kalymnos in October, you're coming right?",
                    "found a cheap apartment in Masouri for Kalymnos",
                    "Kalymnos packing list: chalk, tape, more chalk",
                ),
                ("did you book the Kalymnos flights?", "how many quickdraws for Kalymnos?"),
                start=0.4,
            ),
            Fact(
                "bouldering at Vertical Porto",
                (
                    "new problems set at Vertical Porto, the purple one is impossible",
                    "Vertical Porto on {weekday} at {time}?",
                ),
                ("did you send the purple problem at Vertical Porto?",),
            ),
        ),
        calendar=("Climbing at Vertical Porto with Inés",),
        greeting="Hola, it's Inés.",
        weight=1.2,
    ),
    Contact(
        name="Dr. Tomasz Nowak",
        aliases=("Dr. Nowak", "Tomasz", "the dentist"),
        short="Dr. Nowak",
        relationship="dentist",
        city="Porto",
        topics=("health", "money", "travel"),
        birthday=None,
        thread="t-nowak",
        facts=(
            Fact(
                "my check-up",
                (
                    "Reminder: your check-up with Dr. Nowak is on {weekday} at {time}.",
                    "Please bring your insurance card to the appointment.",
                    "Your six-monthly check-up is due, please call us to book.",
                ),
                (
                    "Hello, could we move my check-up to {weekday}?",
                    "Is there anything earlier than {time}?",
                ),
            ),
            Fact(
                "the crown",
                (
                    "The crown for your lower molar is ready; please book a fitting.",
                    "The crown fitting takes about 45 minutes.",
                ),
                ("How long will the crown fitting take?",),
                start=0.5,
                stop=0.6,
            ),
        ),
        calendar=("Dentist: check-up with Dr. Nowak",),
        greeting="Hello, this is Dr. Nowak's dental office.",
        weight=0.25,
        casual=False,
    ),
    Contact(
        name="Marco Bianchi",
        aliases=("Marco",),
        short="Marco",
        relationship="coworker at Northwind Labs",
        city="Porto",
        topics=("work", "music", "food", "money"),
        birthday="15 January",
        thread="t-marco",
        facts=(
            Fact(
                "the Atlas migration",
                (
                    "Atlas migration is slipping again, standup will be fun",
                    "can you review my Atlas PR before {time}?",
                    "the Atlas cutover is scheduled for {day}, pray for us",
                ),
                (
                    "is the Atlas migration still on for this sprint?",
                    "need a hand with the Atlas cutover?",
                ),
                stop=0.8,
            ),
            Fact(
                "the Atlas migration",
                ("we finally switched off the last Atlas server!!",),
                ("any regrets now that Atlas is gone?",),
                start=0.8,
            ),
            Fact(
                "his band",
                (
                    "The Late Trains are playing at Maus Hábitos on {weekday}, come!",
                    "band practice ran late, we have a new song",
                ),
                ("when's the next Late Trains gig?",),
            ),
        ),
        calendar=("1:1 with Marco", "The Late Trains gig at Maus Hábitos"),
        greeting="Ciao, it's Marco.",
        weight=1.3,
    ),
    Contact(
        name="Hannah Schmidt",
        aliases=("Hannah", "Han"),
        short="Hannah",
        relationship="old friend from Berlin",
        city="Berlin",
        topics=("books", "music", "travel", "food"),
        birthday="8 November",
        thread="t-hannah",
        facts=(
            Fact(
                "her book club",
                (
                    "book club picked {book} this month, have you read it?",
                    "book club was mostly wine again",
                ),
                ("what's the book club reading?",),
            ),
            Fact(
                "her novel",
                (
                    "finished chapter {n} of the novel, only twenty to go",
                    "my agent liked the first draft of the novel!",
                    "the novel's main character is a cellist now, blame you",
                ),
                ("how's the novel coming along?",),
            ),
        ),
        calendar=("Book swap call with Hannah",),
        greeting="Hallo, it's Hannah.",
        weight=0.7,
    ),
    Contact(
        name="Kenji Watanabe",
        aliases=("Kenji",),
        short="Kenji",
        relationship="stand partner in the community orchestra",
        city="Porto",
        topics=("music", "food", "books"),
        birthday="30 May",
        thread="t-kenji",
        facts=(
            Fact(
                "the spring concert",
                (
                    "rehearsal moved to {weekday} at {time}",
                    "the Dvořák is going to be rough, practise bar 120!",
                    "conductor wants the cellos louder in the slow movement",
                ),
                ("which pieces are we doing for the spring concert?",),
            ),
            Fact(
                "his ramen",
                ("made ramen from scratch, the broth took 12 hours",),
                ("can you send me your ramen recipe?",),
            ),
        ),
        calendar=("Orchestra rehearsal with Kenji",),
        greeting="Hi, Kenji here.",
        weight=0.6,
    ),
    Contact(
        name="Maria Silva",
        aliases=("Mum", "Mãe", "Maria"),
        short="Mum",
        relationship="mother",
        city="Coimbra",
        topics=("family", "health", "garden", "birthdays"),
        birthday="19 October",
        thread="t-mum",
        facts=(
            Fact(
                "her garden",
                (
                    "the lemon tree is full this year, I'll send you some",
                    "the frost got my hydrangeas",
                ),
                ("how's the garden, Mãe?",),
            ),
            Fact(
                "her knee surgery",
                (
                    "the knee surgery is booked for the {nth}, don't worry",
                    "physio again today, the knee is getting better",
                ),
                ("how's the knee?", "do you need me to come to Coimbra for the surgery?"),
                start=0.45,
                stop=0.65,
            ),
            Fact(
                "Sunday lunch",
                (
                    "are you coming to Coimbra for lunch on Sunday?",
                    "I made arroz de pato, your favourite",
                ),
                ("what are you cooking on Sunday?",),
            ),
        ),
        calendar=("Sunday lunch in Coimbra with Mum",),
        greeting="Olá querida, it's Mum.",
        weight=1.3,
        family=True,
    ),
    Contact(
        name="Sam Oduya",
        aliases=("Sam",),
        short="Sam",
        relationship="landlord",
        city="Porto",
        topics=("moving house", "money", "garden"),
        birthday=None,
        thread="t-sam",
        facts=(
            Fact(
                "the boiler",
                (
                    "The plumber will come on {weekday} between 9 and 12 to look at the boiler.",
                    "New boiler is installed, let me know if the hot water is ok.",
                ),
                ("Hi Sam, the boiler is making noises again.",),
            ),
            Fact(
                "the lease renewal",
                (
                    "Lease renewal is coming up in September, same terms as last year.",
                    "Rent goes up by 2% from next month, as per the contract.",
                ),
                ("Can we sign the lease renewal next week?",),
            ),
        ),
        calendar=("Plumber visit (Sam arranged it)",),
        greeting="Hello, it's Sam, your landlord.",
        weight=0.4,
        casual=False,
    ),
    Contact(
        name="Léa Dubois",
        aliases=("Léa",),
        short="Léa",
        relationship="old colleague",
        city="Paris",
        topics=("kids", "pets", "food", "travel"),
        birthday="12 February",
        thread="t-lea",
        facts=(
            Fact(
                "her twins",
                (
                    "the twins started daycare and I cried more than they did",
                    "Jules and Camille both have chickenpox",
                    "Camille said her first full sentence: 'no more broccoli'",
                ),
                ("how are Jules and Camille?",),
            ),
            Fact(
                "her cat Mochi",
                (
                    "Mochi sat on my laptop during a client call",
                    "Mochi and Miso should meet one day",
                ),
                ("how's Mochi?",),
            ),
        ),
        calendar=("Video call with Léa and the twins",),
        greeting="Coucou, it's Léa.",
        weight=0.6,
    ),
)

# Group threads: id and the indexes of the contacts in it.
_GROUPS: Final = (
    ("g-climbing", (4, 2, 6), "climbing"),  # Inés, Jimmy, Marco
    ("g-family", (3, 9), "family"),  # Zoë, Mum
)

# What people say about each topic, by whoever is speaking.
_TOPICS: Final[dict[str, tuple[str, ...]]] = {
    "travel": (
        "just booked flights to {trip}!",
        "anyone been to {trip}? need tips",
        "the train to {trip} was three hours late",
        "I need a holiday so badly",
        "packing for {trip}, why do I own so many socks",
    ),
    "health": (
        "I think I'm coming down with something",
        "slept nine hours, I feel like a new person",
        "back is sore from sitting all day",
        "doing the 10-minute stretch thing every morning now",
    ),
    "work": (
        "endless meetings today",
        "our sprint review is {day}, nothing is ready",
        "got the promotion talk scheduled!",
        "the new intern is brilliant",
        "on call this week, phone on loud",
    ),
    "family": (
        "the whole family is coming for {day}",
        "Mum called three times today",
        "family group chat is on fire again",
        "planning the Christmas rota already",
    ),
    "food": (
        "I made {food} tonight and it was actually good",
        "we need to go back to {place}",
        "craving {food} so much",
        "found a new place for {food}, we have to go",
    ),
    "music": (
        "listening to {music} on repeat",
        "got tickets for {music} in the spring!",
        "what are you listening to these days?",
    ),
    "running": (
        "ran {km} km this morning",
        "it was raining the whole run",
        "foam roller is my best friend",
    ),
    "climbing": (
        "who's climbing {day}?",
        "my forearms are destroyed",
        "new shoes are killing my toes",
        "finally sent my project!",
        "Vertical Porto on {weekday} at {time}?",
    ),
    "football": (
        "did you see the Porto game? what a goal",
        "Porto lost again, I can't talk about it",
    ),
    "moving house": (
        "flat viewings all weekend",
        "why do I own so many boxes",
        "the estate agent never calls back",
    ),
    "books": (
        "just finished {book}, I need to talk about it",
        "reading {book} now, slow start",
        "library haul: {n} books, zero shelf space",
    ),
    "money": (
        "rent went up again",
        "doing my taxes, send snacks",
        "trying to save for a trip this year",
    ),
    "kids": (
        "the kids are finally asleep",
        "school run chaos this morning",
        "parents evening {day}, wish me luck",
    ),
    "pets": (
        "the vet bill this month was unreal",
        "the vet says someone needs to lose weight",
        "someone ate a whole sock",
    ),
    "garden": (
        "the basil is out of control",
        "tomatoes are finally coming",
        "snails ate every single lettuce",
    ),
    "birthdays": (
        "what should I get for the birthday?",
        "the cake is ordered!",
        "don't forget the birthday on {weekday}",
    ),
}

_SLOT_VALUES: Final[dict[str, tuple[str, ...]]] = {
    "day": (
        "Friday",
        "Saturday",
        "tomorrow",
        "Thursday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "tonight",
        "next week",
    ),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
    "day2": ("Saturday", "Sunday", "next Tuesday", "Wednesday", "the weekend"),
    "time": ("19:30", "20:00", "18:30", "12:30", "10:00", "21:00", "13:00", "09:30"),
    "place": (
        "Casa Lisa",
        "Café Majestic",
        "Taberna do Largo",
        "Mercado do Bolhão",
        "the ramen place on Rua das Flores",
        "Musa",
        "A Sandeira",
    ),
    "food": ("ramen", "pizza", "tapas", "sushi", "francesinha", "pastéis de nata", "dumplings"),
    "activity": ("dinner", "coffee", "lunch", "drinks", "a walk"),
    "trip": ("Lisbon", "Madrid", "Lyon", "Kalymnos", "Berlin", "the Azores", "Seville"),
    "book": ("Piranesi", "The Dispossessed", "Klara and the Sun", "Middlemarch", "Stoner"),
    "music": ("Nils Frahm", "Radiohead", "Rosalía", "the Bach cello suites", "Arvo Pärt"),
    "n": ("2", "3", "4", "5", "6", "7", "9", "12"),
    "km": ("12", "18", "21", "24", "28", "32"),
    "nth": ("2nd", "3rd", "5th", "9th", "12th", "17th", "21st", "28th"),
}

_REPLIES: Final = (
    "haha",
    "omg",
    "yes!!",
    "sounds good",
    "ok 👍",
    "oh no",
    "that's amazing",
    "wait really?",
    "love that",
    "ugh, same",
    "hmm not sure",
    "true",
    "ahaha yes",
    "so good",
    "ok deal",
    "nice!",
    "❤️",
    "fair enough",
    "tell me more",
    "lol",
)
# Reactions that can lead into a longer message from the same person.
_LEADS: Final = ("haha ", "omg ", "yes! ", "ok so ", "oh no! ", "wait, ", "ahh ", "hmm, ", "lol ")
_FORMAL_REPLIES: Final = ("Thank you!", "Perfect, thanks.", "Noted, thank you.", "Great, thanks.")
_OPENERS: Final = ("", "", "hey! ", "hi! ", "so ", "random but ", "morning! ", "ok ")
_SUFFIXES: Final = ("", "", "", "", " 😊", "!", " x", " 😅", " haha")

# Plans come as a little scripted exchange so that a burst reads like a real chat:
# proposal, answer, details, confirmation.
_PLAN_LOCAL: Final = (
    (
        "{activity} {day}?",
        "free for {activity} {day}?",
        "are you around {day}? {activity}?",
        "want to grab {activity} {day}? I'm free after {time}",
    ),
    ("yes! where?", "I'm in, what time?", "can't {day}, how about {day2}?", "yesss. {place}?"),
    (
        "{place} at {time}?",
        "let's do {place}, {time}",
        "how about {place}? I'll book for {time}",
    ),
    ("perfect, see you there", "booked 👍", "great, see you then!", "deal"),
)
_PLAN_PEANUTS: Final = ("{place} at {time}? not the satay place though, I'm allergic to peanuts",)
_PLAN_REMOTE: Final = (
    ("call {day}?", "video call {day}? I miss your face", "can we talk {day}? I have news"),
    ("yes! after {time}?", "can't {day}, {day2}?", "always, when?"),
    ("{time} my time?", "{day2} at {time} works", "let's say {time}"),
    ("perfect", "ok, talk then!", "👍"),
)

_USER_FACT_MESSAGES: Final = (
    "careful, I'm allergic to peanuts, so no satay for me",
    "I live in Porto now! come visit, the spare room is yours",
    "I work at Northwind Labs these days, on the data platform team",
    "I play the cello in the community orchestra now, concert in May",
    "my birthday is on 14 March btw, drinks at ours?",
    "I have a cat called Miso now, she's a menace",
)
_USER_FACT_JOURNAL: Final = (
    "Still can't quite believe I live in Porto. The light over the Douro tonight was unreal.",
    "Note to future me: I'm allergic to peanuts, always ask about the sauces.",
    "I work at Northwind Labs and this sprint has been brutal.",
    "Practised for an hour. I play the cello badly but with conviction.",
    "Another year soon: my birthday is on 14 March and I want a quiet dinner.",
    "I have a cat called Miso and she has decided 5am is breakfast time.",
    "Told the new waiter I'm allergic to peanuts three times. Worth it.",
    "I play the cello every evening now, even twenty minutes helps.",
)
_USER_FACT_SPOKEN: Final = (
    "You know I'm allergic to peanuts, right? So not that place.",
    "Since I live in Porto now, you have no excuse not to visit.",
    "Work is busy, I work at Northwind Labs, remember, and it's release month.",
    "I play the cello in a concert next month, you should come.",
    "Don't forget, my birthday is on 14 March!",
    "Miso says hi. I have a cat called Miso now, did I tell you?",
)
_JOURNAL_OPENERS: Final = (
    "Rainy day in Porto.",
    "Good day today.",
    "Tired.",
    "Slow Sunday.",
    "Sunny, finally.",
    "Woke up early for once.",
    "Long day.",
    "Quiet evening at home.",
    "Strange week.",
)
_JOURNAL_BODY: Final = (
    "Work was mostly meetings, but the data pipeline is finally green.",
    "Walked along the river after work and felt better.",
    "Made soup and watched half a film before falling asleep.",
    "Miso knocked a glass off the table at 3am.",
    "Cleaned the flat, answered emails, nothing heroic.",
    "The orchestra rehearsal went well, the slow movement is coming together.",
    "Went to the market and bought too many oranges.",
    "Skipped the gym, will go tomorrow. Probably.",
    "Read {book} for an hour on the balcony.",
    "Craving {food}. Should go to {place} this week.",
)
_JOURNAL_ABOUT: Final = (
    "Need to ask {short} about {about}.",
    "Thinking about {short} and {about}.",
    "Talked to {short} about {about} today.",
    "Remember to check in with {short} about {about}.",
)
_JOURNAL_CLOSERS: Final = (
    "Early night.",
    "Grateful for small things.",
    "Tomorrow will be better.",
    "",
    "Need more sleep.",
    "",
    "Good enough.",
)

_OWN_POSTS: Final = (
    "Sunset from the Dom Luís I bridge tonight",
    "First rehearsal of the season. I play the cello in the back row and I love it.",
    "Porto rain, day {n}",
    "Miso has claimed my new jumper. I have a cat called Miso and no jumpers.",
    "Made francesinha at home. Never again.",
    "Weekend in {trip}, highly recommend",
    "New record: {n} hours without checking work email",
    "Spring concert in two weeks, come and hear us!",
)
_POST_TAGS: Final = ("", "", "", " #sundays", " #porto", " #goodtimes", " #life")

_CALL_OPENERS: Final = (
    ("Hey {short}!", "Hi! Is this a good time?"),
    ("Hi {short}, it's me.", "Oh hey! I was just thinking about you."),
    ("Hello!", "Hi! Sorry I missed your call earlier."),
)
_CALL_CLOSERS: Final = (
    ("Ok, I have to run. Talk soon!", "Bye, take care!"),
    ("Let's talk again next week.", "Yes! Bye!"),
    ("Right, dinner is burning, bye!", "Haha go, bye!"),
)
_CALL_REACTIONS: Final = ("Ha, I know!", "Noted!", "Of course.", "Yes, yes.", "I remember!")
_VOICEMAIL_CLOSERS: Final = (
    "Call me back when you get a chance.",
    "No rush, talk soon!",
    "Bye!",
    "Text me when you hear this.",
)
_FORMAL_CLOSERS: Final = (
    "Please call us back at your convenience. Thank you.",
    "If you have any questions, just reply to this message. Thank you.",
)

_CAL_ACTIVITY: Final = ("Dinner", "Lunch", "Coffee", "Drinks")
_CAL_SOLO: Final = (
    "Orchestra rehearsal",
    "Sprint planning (Northwind Labs)",
    "Cello lesson",
    "Vet: Miso's vaccinations",
    "Flight to {trip}",
    "Yoga",
    "Team offsite",
    "Haircut",
    "Pay rent",
)
_WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = (
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Oct",
    "Nov",
    "Dec",
)

_USER_QA: Final = (
    ("Where do I work again?", "You work at Northwind Labs."),
    (
        "Can I eat the satay at the new Thai place?",
        "Better not: you're allergic to peanuts, and satay sauce is usually made with them.",
    ),
    (
        "When is my birthday? A form is asking and my brain is empty.",
        "Your birthday is on 14 March.",
    ),
    ("Which instrument do I play in the orchestra?", "You play the cello."),
    ("What's my cat called?", "Your cat is called Miso."),
    ("Which city do I live in, for this address form?", "You live in Porto."),
)

# Episode kinds and how often an episode of each starts. Weights are target event
# shares divided by the mean events per episode, so the *event* mix comes out near
# messages 63%, journal 10%, posts 8%, calendar 7%, calls 5%, agent chat 4%,
# voicemail 3%.
_EPISODES: Final = ("message", "call", "voicemail", "post", "journal", "calendar", "agent")
_MSG_SIZES: Final = (1, 2, 2, 3, 3, 4, 4, 5, 6, 8)  # mean 3.8
_MSG_MEAN: Final = sum(_MSG_SIZES) / len(_MSG_SIZES)
_AGENT_MEAN: Final = 2.4  # one exchange, sometimes two
_EPISODE_WEIGHTS: Final = (0.63 / _MSG_MEAN, 0.05, 0.03, 0.08, 0.10, 0.07, 0.04 / _AGENT_MEAN)
_EPISODE_CUM: Final = tuple(sum(_EPISODE_WEIGHTS[: i + 1]) for i in range(len(_EPISODE_WEIGHTS)))
# Share of events that follow another event of the same episode within seconds or
# minutes rather than after a fresh gap; the gap model needs it to hit the window.
_CONT_SHARE: Final = 0.63 * (1 - 1 / _MSG_MEAN) + 0.04 * (1 - 1 / _AGENT_MEAN)
_NEW_SHARE_INV: Final = 1.0 / (1.0 - _CONT_SHARE)
_log: Final = math.log

_CONTACT_CUM: Final = tuple(sum(c.weight for c in CONTACTS[: i + 1]) for i in range(len(CONTACTS)))

_DAY_MS: Final = 86_400_000
_HOUR_MS: Final = 3_600_000
_WAKE_MS: Final = 7 * _HOUR_MS  # nothing much happens before 07:00 (UTC, which is Porto)
_CHAT_GAP_MS: Final = 100_000.0  # mean pause between messages in a burst
_CHAT_MIN_MS: Final = 3_000
_EPOCH_ORDINAL: Final = dt.date(1970, 1, 1).toordinal()
_MMSS: Final = tuple(f"{m:02d}:{sec:02d}Z" for m in range(60) for sec in range(60))
_NAMES: Final = tuple(c.name for c in CONTACTS)
_THREADS: Final = tuple(c.thread for c in CONTACTS)

# Pace of an event relative to the one before it in the same episode.
_PACE_NEW: Final = 0  # first event of an episode
_PACE_CHAT: Final = 1  # next message in a burst
_PACE_AGENT: Final = 2  # the agent answering

# kind, text, contact index, thread, source, from_me, pace
_Draft = tuple[str, str, int | None, str | None, str | None, bool | None, int]


class _Slots(dict[str, str]):
    """Template values drawn on first use and then kept for the whole episode.

    Keeping them is what makes "dinner Friday?" ... "great, see you Friday"
    agree inside one burst; drawing lazily leaves unused slots undrawn. One
    instance is reset per episode rather than rebuilt, which is measurably
    cheaper at a million events.
    """

    __slots__ = ("_rnd",)

    def __init__(self, rnd: Callable[[], float]) -> None:
        super().__init__()
        self._rnd = rnd

    def reset(self, contact: Contact | None) -> _Slots:
        self.clear()
        if contact is not None:
            self["short"] = contact.short
            self["city"] = contact.city
        return self

    def __missing__(self, key: str) -> str:
        values = _SLOT_VALUES[key]
        value = values[int(self._rnd() * len(values))]
        self[key] = value
        return value


def _fill(template: str, slots: _Slots) -> str:
    return template.format_map(slots) if "{" in template else template


def _fact_periods(contact: Contact) -> tuple[tuple[float, tuple[Fact, ...]], ...]:
    """The contact's timeline cut where facts start or stop: (until, facts current)."""
    cuts = sorted({f.start for f in contact.facts} | {f.stop for f in contact.facts} | {1.0})
    periods = []
    low = 0.0
    for cut in cuts:
        if cut <= low:
            continue
        current = tuple(f for f in contact.facts if f.start <= low < f.stop)
        periods.append((cut, current or contact.facts[:1]))
        low = cut
    return tuple(periods)


_FACT_PERIODS: Final = tuple(_fact_periods(c) for c in CONTACTS)

_json_str: Final[Callable[[str], str]] = encode_basestring  # the escaper json.dumps uses

# What the core loop yields: id, kind, at, text, contact name, thread, source, from_me.
_Record = tuple[str, str, str, str, str | None, str | None, str | None, bool | None]


class _Life:
    """The generator's state: one random stream, counters and what has appeared."""

    def __init__(self, seed: int, events: int, start_ms: int, end_ms: int) -> None:
        # Random(n) seeds from abs(n), so -7 would replay 7; a negative seed gets
        # its own stream through the (hash-independent) string seeding instead.
        self._rng = Random(seed) if seed >= 0 else Random(f"samplelife{seed}")
        self._rnd = self._rng.random
        self._events = events
        self._start_ms = start_ms
        self._end_ms = end_ms
        self._span = float(end_ms - start_ms)
        self._phase = 0.0
        self._slots = _Slots(self._rnd)
        self._deck: list[int] = []
        self._counters = {"call": 0, "voicemail": 0, "post": 0, "cal": 0}
        # Plain containers scanned in a fixed order: nothing here may depend on
        # string hashing, which changes from one interpreter run to the next.
        self._kind_seen = dict.fromkeys(KINDS, False)
        self._contact_seen = [False] * len(CONTACTS)
        self._owed = len(self._kind_seen) + len(self._contact_seen)  # still to appear

    # -- small helpers -------------------------------------------------------

    def _pick(self, seq: Sequence[str]) -> str:
        return seq[int(self._rnd() * len(seq))]

    def _contact(self) -> int:
        return bisect.bisect_right(_CONTACT_CUM, self._rnd() * _CONTACT_CUM[-1])

    def _fact(self, index: int) -> Fact:
        """A fact about contact `index` that holds at the current point in time."""
        phase = self._phase
        periods = _FACT_PERIODS[index]
        facts = periods[-1][1]
        for until, current in periods:
            if phase < until:
                facts = current
                break
        return facts[int(self._rnd() * len(facts))]

    def _journal_fact(self) -> str:
        """The next of the user's facts for the journal, dealt from a shuffled deck.

        Dealing rather than drawing means every fact turns up within a few
        journal entries, so even a short run shows all of them.
        """
        if not self._deck:
            self._deck = list(range(len(_USER_FACT_JOURNAL)))
            self._rng.shuffle(self._deck)
        return _USER_FACT_JOURNAL[self._deck.pop()]

    def _source(self, counter: str) -> str:
        self._counters[counter] += 1
        return f"{counter}:{self._counters[counter]}"

    # -- time ----------------------------------------------------------------

    def _first_gap(self, cursor: int, remaining: int) -> int:
        """Gap before an episode's first event: long, and mostly not at night.

        The mean is re-derived from the time and events still left, so early
        luck (or the night shifts) is corrected as we go and the run ends near
        the end of the window without ever passing it.
        """
        # Written with conditional expressions rather than min()/max(): this runs
        # once per episode and the builtin calls showed up in profiles.
        left = self._end_ms - cursor
        target = left / remaining
        burst = 0.5 * target if 0.5 * target < _CHAT_GAP_MS else _CHAT_GAP_MS
        mean = (target - _CONT_SHARE * burst) * _NEW_SHARE_INV
        gap = 1 + int(-_log(1.0 - self._rnd()) * mean)
        since_midnight = (cursor + gap) % _DAY_MS
        if since_midnight < _WAKE_MS and self._rnd() < 0.95:
            # Most of life happens awake: move the episode into the morning,
            # spread over at most the waking day or a few mean gaps.
            window = 4 * mean if 4 * mean < 17 * _HOUR_MS else 17 * _HOUR_MS
            window = window if window > _HOUR_MS else _HOUR_MS
            gap += _WAKE_MS - since_midnight + int(self._rnd() * window)
        # Leave at least 1 ms for every later event: times stay strictly increasing
        # (so v7 ids sort by time too) and the last one is at or before the end.
        limit = left - remaining + 1
        if remaining > 1 and left // 2 < limit:
            limit = left // 2
        return gap if gap < limit else limit

    # -- the stream ----------------------------------------------------------

    def records(self) -> Iterator[_Record]:
        """The event stream as flat tuples; `generate` and `write_jsonl` dress them.

        Ids and times are made inline because this loop runs once per event.
        """
        remaining = self._events
        cursor = self._start_ms
        start, span, end = self._start_ms, self._span, self._end_ms
        rnd, log = self._rnd, math.log
        getrandbits = self._rng.getrandbits
        kind_seen, contact_seen = self._kind_seen, self._contact_seen
        hour_key, hour_prefix = -1, ""
        while remaining > 0:
            cursor += self._first_gap(cursor, remaining)
            self._phase = (cursor - start) / span
            for kind, text, contact, thread, source, from_me, pace in self._episode(
                cursor, remaining
            ):
                if pace != _PACE_NEW:
                    # Inside an episode: seconds to minutes, but never more than
                    # half the average gap left, and always 1 ms per later event.
                    if pace == _PACE_CHAT:
                        gap = _CHAT_MIN_MS + int(-log(1.0 - rnd()) * _CHAT_GAP_MS)
                    else:
                        gap = 2_000 + int(rnd() * 18_000)
                    left = end - cursor
                    half = left // (2 * remaining) + 1
                    spare = left - remaining + 1  # never below 1: left >= remaining
                    cap = half if half < spare else spare
                    cursor += gap if gap < cap else cap
                seconds = cursor // 1000
                hour = seconds // 3600
                if hour != hour_key:
                    hour_key, hour_prefix = hour, _hour_prefix(hour)
                # A version-7 UUID (RFC 9562): 48-bit ms time, version nibble 7,
                # 12 random bits, variant 0b10, 62 random bits. Built by hand, as
                # uuid.UUID takes only versions 1-5 before Python 3.14.
                bits = getrandbits(74)
                uid = "%08x-%04x-7%03x-%04x-%012x" % (  # noqa: UP031 - measurably faster
                    cursor >> 16,
                    cursor & 0xFFFF,
                    bits >> 62,
                    0x8000 | ((bits >> 48) & 0x3FFF),
                    bits & 0xFFFF_FFFF_FFFF,
                )
                name = None if contact is None else _NAMES[contact]
                if self._owed:  # coverage bookkeeping, until everything has appeared
                    if contact is not None and not contact_seen[contact]:
                        contact_seen[contact] = True
                        self._owed -= 1
                    if not kind_seen[kind]:
                        kind_seen[kind] = True
                        self._owed -= 1
                at = hour_prefix + _MMSS[seconds - hour * 3600]
                yield uid, kind, at, text, name, thread, source, from_me
                remaining -= 1

    def _episode(self, ms: int, remaining: int) -> list[_Draft]:
        kind, contact, forced = self._choose(remaining)
        # A free episode may not eat the events reserved for coverage (two per
        # thing still owed); a forced one is as small as it can be.
        room = 1 if forced else remaining - 2 * self._owed
        room = room if room > 1 else 1
        if kind == "agent" and room < 2 and not forced:
            kind = "message"
        if kind == "message":
            size = _MSG_SIZES[int(self._rnd() * len(_MSG_SIZES))]
            size = size if size < room else room
            return self._messages(contact, size)
        if kind == "call":
            return [self._call(self._contact() if contact is None else contact)]
        if kind == "voicemail":
            return [self._voicemail(self._contact() if contact is None else contact)]
        if kind == "post":
            return [self._post(contact)]
        if kind == "journal":
            return [self._journal()]
        if kind == "calendar":
            return [self._calendar(contact, ms)]
        exchanges = 2 if room >= 4 and self._rnd() < 0.2 else 1
        return self._agent(exchanges)

    def _choose(self, remaining: int) -> tuple[str, int | None, bool]:
        """Pick the next episode: its kind, a contact if one is imposed, and whether forced.

        Even a 300-event run has to show every kind and every contact (demos and
        tests rely on it), and chance alone does not promise that. So once the
        events left get close to the number of things not yet seen, episodes
        are aimed at those instead of drawn freely. Each forced episode covers
        at least one of them, and free episodes leave enough events for that.
        """
        owed = self._owed
        if owed and remaining <= 3 * owed + 2:
            missing_kinds = [k for k, seen in self._kind_seen.items() if not seen]
            missing_contacts = [i for i, seen in enumerate(self._contact_seen) if not seen]
            contact = missing_contacts[0] if missing_contacts else None
            for kind in missing_kinds:
                if kind.startswith("agent_chat"):
                    if remaining >= 2:
                        return "agent", None, True
                    continue
                if kind == "journal" or (
                    kind == "post" and contact is not None and not CONTACTS[contact].casual
                ):
                    return kind, None, True
                return kind, contact, True
            return "message", contact, True
        x = self._rnd() * _EPISODE_CUM[-1]
        return _EPISODES[bisect.bisect_right(_EPISODE_CUM, x)], None, False

    # -- episode builders ----------------------------------------------------

    def _messages(self, forced: int | None, size: int) -> list[_Draft]:
        """A burst in one thread: a 1:1 chat, or now and then a group chat.

        Written with inline draws rather than helpers: messages are most of
        the events, so this is where the time goes.
        """
        rnd = self._rnd
        members: tuple[int, ...]
        if forced is None and rnd() < 0.12:
            thread, members, topic = _GROUPS[int(rnd() * len(_GROUPS))]
        else:
            index = self._contact() if forced is None else forced
            thread, members, topic = _THREADS[index], (index,), ""
        group = len(members) > 1
        anchor = CONTACTS[members[0]]
        casual = anchor.casual
        slots = self._slots.reset(anchor)
        fact = self._fact(members[0])
        me = rnd() < 0.45
        mode = rnd()
        plan: Sequence[tuple[str, ...]] = ()
        if casual and mode < 0.22:
            plan = _PLAN_LOCAL if anchor.local else _PLAN_REMOTE
        options: Sequence[str]
        drafts: list[_Draft] = []
        said: set[str] = set()  # only for membership tests, never iterated
        speaker = members[int(rnd() * len(members))]
        for step in range(size):
            # A scripted plan alternates strictly; free chat mostly alternates,
            # and a double text is always content, never a bare "haha".
            switched = step > 0 and (step < len(plan) or rnd() < 0.7)
            if switched:
                me = not me
            if group and step and not me:
                speaker = members[int(rnd() * len(members))]
            who = CONTACTS[speaker]
            content = False
            if step < len(plan):
                options = plan[step]
                if step == 2 and me and anchor.local and rnd() < 0.2:
                    options = _PLAN_PEANUTS  # the user's allergy, in the user's own words
            elif step == 0 or not switched or rnd() < 0.55:
                content = True
                options = self._chat_options(
                    me,
                    who,
                    speaker,
                    fact if who is anchor else None,
                    topic,
                    opener=step == 0 and mode < 0.3,
                )
            else:
                options = _REPLIES if casual else _FORMAL_REPLIES
            text = options[int(rnd() * len(options))]
            if "{" in text:
                text = text.format_map(slots)
            if content:
                for _ in range(3):  # said already in this burst: change the subject
                    if text not in said:
                        break
                    if casual:
                        options = _TOPICS[topic or who.topics[int(rnd() * len(who.topics))]]
                    else:
                        options = _FORMAL_REPLIES
                    text = _fill(options[int(rnd() * len(options))], slots)
                said.add(text)
                if switched and casual and rnd() < 0.3:
                    text = _LEADS[int(rnd() * len(_LEADS))] + text
            if casual and rnd() < 0.3:
                if step == 0:
                    text = _OPENERS[int(rnd() * len(_OPENERS))] + text
                text += _SUFFIXES[int(rnd() * len(_SUFFIXES))]
            contact = None if (me and group) else speaker
            drafts.append(
                ("message", text, contact, thread, None, me, _PACE_CHAT if step else _PACE_NEW)
            )
        return drafts

    def _chat_options(
        self, me: bool, who: Contact, index: int, fact: Fact | None, topic: str, *, opener: bool
    ) -> Sequence[str]:
        """Where a content-bearing message comes from: a fact, a topic, the user's facts."""
        rnd = self._rnd
        if fact is None:
            fact = self._fact(index)
        if me:
            roll = rnd()
            if roll < 0.1 and who.casual and not who.family:
                return _USER_FACT_MESSAGES
            if roll < 0.6 or not who.casual:
                return fact.asks
        elif opener or rnd() < 0.6 or not who.casual:
            return fact.says
        return _TOPICS[topic or who.topics[int(rnd() * len(who.topics))]]

    def _call(self, index: int) -> _Draft:
        """A phone call transcript: greetings, a few real exchanges, goodbyes."""
        who = CONTACTS[index]
        slots = self._slots.reset(who)
        pick = self._pick
        label = who.short
        first, reply = _CALL_OPENERS[int(self._rnd() * len(_CALL_OPENERS))]
        lines = [f"Me: {_fill(first, slots)}", f"{label}: {reply}"]
        used: set[str] = set()  # membership only: nobody repeats themselves on a call

        def fresh(options: Sequence[str]) -> str | None:
            for _ in range(3):
                line = _spoken(pick(options), slots)
                if line not in used:
                    used.add(line)
                    return line
            return None

        for _ in range(2 + int(self._rnd() * 7) if who.casual else 1 + int(self._rnd() * 2)):
            fact = self._fact(index)
            reaction = ""
            roll = self._rnd()
            if who.casual and not who.family and roll < 0.15:
                mine = fresh(_USER_FACT_SPOKEN)
                reaction = pick(_CALL_REACTIONS) + " "
            elif roll < 0.7 or not who.casual:
                mine = fresh(fact.asks)
            else:
                mine = fresh(_TOPICS[pick(who.topics)])
            theirs = fresh(fact.says)
            if theirs is None and who.casual:
                theirs = fresh(_TOPICS[pick(who.topics)])
            if mine is None or theirs is None:
                break  # run out of things to say: time to hang up
            if who.casual and self._rnd() < 0.6:
                extra = fresh(_TOPICS[pick(who.topics)])
                if extra is not None:
                    theirs = f"{theirs} {extra}"
            lines.append(f"Me: {mine}")
            lines.append(f"{label}: {reaction}{theirs}")
        bye, back = _CALL_CLOSERS[int(self._rnd() * len(_CALL_CLOSERS))]
        lines.extend((f"{label}: {bye}", f"Me: {back}"))
        return ("call", _fit_lines(lines), index, None, self._source("call"), None, _PACE_NEW)

    def _voicemail(self, index: int) -> _Draft:
        """A short monologue from the contact, in their own voice."""
        who = CONTACTS[index]
        slots = self._slots.reset(who)
        body = _sentence(_fill(self._pick(self._fact(index).says), slots))
        closer = self._pick(_VOICEMAIL_CLOSERS if who.casual else _FORMAL_CLOSERS)
        text = f"{who.greeting} {body} {closer}"
        return ("voicemail", text, index, None, self._source("voicemail"), None, _PACE_NEW)

    def _post(self, forced: int | None) -> _Draft:
        """A social post: the user's own (about 40%) or a casual friend's."""
        if forced is None and self._rnd() < 0.4:
            text = _fill(self._pick(_OWN_POSTS), self._slots.reset(None)) + self._pick(_POST_TAGS)
            return ("post", text, None, None, self._source("post"), True, _PACE_NEW)
        index = self._contact() if forced is None else forced
        while not CONTACTS[index].casual and forced is None:
            index = self._contact()
        who = CONTACTS[index]
        slots = self._slots.reset(who)
        if self._rnd() < 0.6:
            text = _fill(self._pick(self._fact(index).says), slots)
        else:
            text = _fill(self._pick(_TOPICS[self._pick(who.topics)]), slots)
        text = _sentence(text) + self._pick(_POST_TAGS)
        return ("post", text, index, None, self._source("post"), False, _PACE_NEW)

    def _journal(self) -> _Draft:
        """A diary entry: mood, a couple of happenings, often one of the user's facts."""
        rnd = self._rnd
        pick = self._pick
        slots = self._slots.reset(None)
        parts = [pick(_JOURNAL_OPENERS)]
        for _ in range(1 + int(rnd() * 3)):
            roll = rnd()
            if roll < 0.35:
                part = self._journal_fact()
            elif roll < 0.6:
                index = self._contact()
                about = self._fact(index).about
                part = pick(_JOURNAL_ABOUT).format(short=CONTACTS[index].short, about=about)
            else:
                part = _fill(pick(_JOURNAL_BODY), slots)
            if part not in parts:
                parts.append(part)
        parts.append(pick(_JOURNAL_CLOSERS))
        text = " ".join(p for p in parts if p)
        return ("journal", text, None, None, None, None, _PACE_NEW)

    def _calendar(self, forced: int | None, ms: int) -> _Draft:
        """A calendar entry a few days ahead: with someone, a birthday, or just the user."""
        rnd = self._rnd
        when = _date_label(ms // _DAY_MS + 1 + int(rnd() * 14))
        index: int | None = None
        if forced is not None or rnd() < 0.55:
            index = self._contact() if forced is None else forced
            who = CONTACTS[index]
            slots = self._slots.reset(who)
            if who.birthday is not None and rnd() < 0.12:
                return (
                    "calendar",
                    f"{who.short}'s birthday ({who.birthday})",
                    index,
                    None,
                    self._source("cal"),
                    None,
                    _PACE_NEW,
                )
            if who.local and who.casual and rnd() < 0.5:
                title = f"{self._pick(_CAL_ACTIVITY)} with {who.short} at {{place}}"
            else:
                title = self._pick(who.calendar)
        else:
            slots = self._slots.reset(None)
            title = self._pick(_CAL_SOLO)
        text = f"{_fill(title, slots)}, {when} {slots['time']}"
        return ("calendar", text, index, None, self._source("cal"), None, _PACE_NEW)

    def _agent(self, exchanges: int) -> list[_Draft]:
        """Questions to the agent and its answers, grounded in the same life."""
        drafts: list[_Draft] = []
        for turn in range(exchanges):
            question, answer = self._qa()
            pace = _PACE_CHAT if turn else _PACE_NEW
            drafts.append(("agent_chat_user", question, None, None, None, None, pace))
            drafts.append(("agent_chat_agent", answer, None, None, None, None, _PACE_AGENT))
        return drafts

    def _qa(self) -> tuple[str, str]:
        roll = self._rnd()
        if roll < 0.2:
            return _USER_QA[int(self._rnd() * len(_USER_QA))]
        index = self._contact()
        who = CONTACTS[index]
        slots = self._slots.reset(who)
        if roll < 0.6:
            fact = self._fact(index)
            said = _sentence(_fill(self._pick(fact.says), slots))
            question = f"What did {who.short} say about {fact.about}?"
            return question, f"The last thing {who.short} said about it: “{said}”"
        if roll < 0.7 and who.birthday is not None:
            return (
                f"When is {who.short}'s birthday?",
                f"{who.short}'s birthday is on {who.birthday}.",
            )
        if roll < 0.85:
            alias = self._pick(who.aliases)
            return (
                f"Who is {alias} again?",
                f"{alias} is {who.name}, your {who.relationship} in {who.city}.",
            )
        if not who.casual:
            day = slots["weekday"]
            draft = f"Hello {who.short}, {day} at {slots['time']} works for me. Thank you!"
            return (
                f"Draft a polite reply to {who.short} saying {day} works.",
                f"Here's a draft: “{draft}”",
            )
        day = slots["day"]
        activity = slots["activity"] if who.local else "a call"
        draft = f"Hey {who.short}! Free for {activity} {day}?"
        if who.local:
            draft += f" Maybe {slots['place']} at {slots['time']}?"
        return (
            f"Draft a short message to {who.short} suggesting {activity}.",
            f"Here's a draft: “{draft}”",
        )


def _hour_prefix(hour: int) -> str:
    """The "YYYY-MM-DDTHH:" of an hour counted from the Unix epoch (no locale, no tz)."""
    day, hh = divmod(hour, 24)
    return f"{dt.date.fromordinal(_EPOCH_ORDINAL + day).isoformat()}T{hh:02d}:"


def _date_label(day: int) -> str:
    """A calendar date like "Fri 14 Mar" from our own tables, whatever the locale."""
    date = dt.date.fromordinal(_EPOCH_ORDINAL + day)
    return f"{_WEEKDAYS[date.weekday()]} {date.day} {_MONTHS[date.month - 1]}"


def _sentence(text: str) -> str:
    """Capitalise and end a chat-style fragment so it reads as speech in a transcript."""
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?”)" else text + "."


_SPOKEN: dict[str, str] = {}  # template -> _sentence(template), for templates without slots


def _spoken(template: str, slots: _Slots) -> str:
    """`_sentence` of a filled template, remembering the slot-free ones (calls use many)."""
    if "{" in template:
        return _sentence(template.format_map(slots))
    line = _SPOKEN.get(template)
    if line is None:
        line = _SPOKEN[template] = _sentence(template)
    return line


def _fit_lines(lines: list[str]) -> str:
    """Join transcript turns, dropping middle turns until it fits MAX_TEXT_CHARS."""
    text = "\n".join(lines)
    while len(text) > MAX_TEXT_CHARS and len(lines) > 4:
        del lines[-4:-2]  # drop the last full exchange, keep the goodbyes
        text = "\n".join(lines)
    return text[:MAX_TEXT_CHARS]


def _window(seed: int, events: int, end: dt.date | None, years: float) -> tuple[int, int]:
    """Check the arguments and return the window as (start, end) in Unix milliseconds."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError("seed must be an int")
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an int >= 0, not {events!r}")
    if not years > 0 or not math.isfinite(years):
        raise ValueError(f"years must be a positive number, not {years!r}")
    day = (end if end is not None else DEFAULT_END).toordinal() - _EPOCH_ORDINAL
    end_ms = day * _DAY_MS + 18 * _HOUR_MS
    start_ms = end_ms - round(years * 365.25 * _DAY_MS)
    if start_ms < 0:
        raise ValueError("the window starts before 1970")
    if events > end_ms - start_ms:
        raise ValueError("more events than milliseconds in the window")
    return start_ms, end_ms


def _records(seed: int, events: int, end: dt.date | None, years: float) -> Iterator[_Record]:
    """Check the arguments now (not at the first `next`) and start the stream."""
    start_ms, end_ms = _window(seed, events, end, years)
    return _Life(seed, events, start_ms, end_ms).records()


def generate(
    seed: int = 7,
    events: int = 2000,
    end: dt.date | None = None,
    years: float = 3.0,
) -> Iterator[Event]:
    """Yield `events` sample events in time order, the same ones for the same arguments.

    They span `years` years up to `end` (default `DEFAULT_END`, a fixed date so
    that output never depends on when it is run) at 18:00 UTC. Events are made
    lazily, so millions cost no memory. Bad arguments raise at the call.
    """
    return _events(_records(seed, events, end, years))


def _events(records: Iterator[_Record]) -> Iterator[Event]:
    """Dress records as dicts, leaving out the fields that do not apply."""
    for uid, kind, at, text, contact, thread, source, from_me in records:
        event: Event = {"id": uid, "kind": kind, "at": at, "text": text}
        if contact is not None:
            event["contact"] = contact
        if thread is not None:
            event["thread"] = thread
        if source is not None:
            event["source"] = source
        if from_me is not None:
            event["from_me"] = from_me
        yield event


def write_jsonl(
    stream: TextIO,
    *,
    seed: int = 7,
    events: int = 2000,
    end: dt.date | None = None,
    years: float = 3.0,
) -> int:
    """Write `generate(...)` to `stream` as JSON lines; return how many were written.

    Each line is exactly `json.dumps(event, ensure_ascii=False, separators=(",", ":"))`
    for the event `generate` yields, but assembled directly: the json module's
    per-call setup was the largest single cost of a million-event run. Only the
    free-text fields go through the JSON string escaper; ids, kinds and times
    are made here from hex digits and numbers and need none.
    """
    count = 0
    batch: list[str] = []
    for uid, kind, at, text, contact, thread, source, from_me in _records(seed, events, end, years):
        line = f'{{"id":"{uid}","kind":"{kind}","at":"{at}","text":{_json_str(text)}'
        if contact is not None:
            line += f',"contact":{_json_str(contact)}'
        if thread is not None:
            line += f',"thread":{_json_str(thread)}'
        if source is not None:
            line += f',"source":{_json_str(source)}'
        if from_me is not None:
            line += ',"from_me":true}' if from_me else ',"from_me":false}'
        else:
            line += "}"
        batch.append(line)
        count += 1
        if len(batch) >= 4096:
            batch.append("")
            stream.write("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        stream.write("\n".join(batch))
    return count


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.testkit.samplelife",
        description="Write a deterministic sample life as JSON lines.",
    )
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--events", type=int, default=2000, help="how many events (default 2000)")
    parser.add_argument(
        "--end",
        type=dt.date.fromisoformat,
        default=DEFAULT_END,
        help=f"last day, YYYY-MM-DD (default {DEFAULT_END.isoformat()})",
    )
    parser.add_argument("--years", type=float, default=3.0, help="years covered (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="output file (default stdout)")
    args = parser.parse_args(argv)
    if args.events < 0:
        parser.error("--events must be >= 0")
    if not args.years > 0 or not math.isfinite(args.years):
        parser.error("--years must be a positive number")
    return args


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the process exit status."""
    args = _parse_args(argv)
    try:
        _window(args.seed, args.events, args.end, args.years)
    except ValueError as exc:
        print(f"samplelife: {exc}", file=sys.stderr)
        return 2

    def write(stream: TextIO) -> int:
        return write_jsonl(
            stream, seed=args.seed, events=args.events, end=args.end, years=args.years
        )

    if args.out is not None:
        with args.out.open("w", encoding="utf-8", newline="\n") as stream:
            write(stream)
        return 0
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper) and out.encoding.lower().replace("-", "") != "utf8":
        # The names are not ASCII; a C-locale terminal must not turn them into errors.
        out.reconfigure(encoding="utf-8")
    try:
        write(out)
        out.flush()
    except BrokenPipeError:
        # The reader went away (`... | head`). Stop quietly, as the Python docs
        # advise: point stdout at devnull so the interpreter's final flush is
        # silent, and report the short write in the exit status.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
