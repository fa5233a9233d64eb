"""What the agent told the user about someone: answers of `pixie chat` that
state a fact about a person, added to their page as "Pixie told you: ..."."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pixie.device.distill.contract import (
    Fact,
    FactKind,
    Line,
)
from pixie.device.distill.extract import identity_statements
from pixie.device.distill.pages import (
    PersonPage,
)
from pixie.device.store.contacts import name_key, name_tag, name_words
from pixie.device.store.notes import (
    MAX_TAG_CHARS,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.sources import Row

# -- what the agent told the user about someone ------------------------------------------
#
# The agent's own answers are never searched (grep_memory leaves them out) and
# are not distilled as a source. One kind of sentence in them is kept all the
# same: "<name> is <the contact's name>, <who they are>" ("Mum is Maria Silva,
# your mother in Coimbra."), or "<a name the contact book knows> is <what>".
# It goes to that contact's page as a dated note that says whose words it is
# ("Note: Pixie told you: Mum is Maria Silva, your mother in Coimbra; as of
# 26 Dec 2023"), at most MAX_AGENT_SAID per page (the newest), and the name it
# used becomes a tag of the page (at most MAX_ALIAS_TAGS), which is how
# check_notebook finds "Mum" when the contact book knows only "Maria Silva".
# The first form is checked against the contact book (the contact's own name
# must follow "is"); a sentence naming nobody the book knows is dropped.

AGENT_SAID = "Pixie told you: "
AGENT_SAID_KEY = "*agent-said"  # its watermark's row: the newest agent answer looked at
AGENT_SAID_REF = "agent-chat"
GOES_BY = "Goes by “"  # a call transcript's name for them: "Goes by “Mum” in your calls"
IN_CALLS = "” in your calls"
MAX_AGENT_SAID = 3
MAX_ALIAS_TAGS = 3
AGENT_SCAN = 5_000  # agent answers looked at per pass (the rest wait for the next)


def alias_tags(page: PersonPage, name: str) -> list[str]:
    """The names a page's notes say the person goes by (the agent's answers,
    the call transcripts), other than the page's own name, as tags (newest
    note first)."""
    own = name_tag(name)[:MAX_TAG_CHARS]
    out: list[str] = []
    for fact in sorted(_agent_facts(page.facts), key=lambda f: -(f.at or 0)):
        if fact.text.startswith(AGENT_SAID):
            said_as = fact.text[len(AGENT_SAID) :].split(" is ", 1)[0]
        else:
            said_as = fact.text[len(GOES_BY) : -len(IN_CALLS)]
        tag = name_tag(said_as)[:MAX_TAG_CHARS]
        if tag and tag != own and tag not in out:
            out.append(tag)
    return out[:MAX_ALIAS_TAGS]


def call_names(rows: Iterable[Row], name: str) -> list[str]:
    """The speaker labels of a one-to-one call's transcript ("Mum: ...") for
    the other person, where they are not already words of the contact's name
    ("Dr. Nowak" for "Dr. Tomasz Nowak" is not news): the names the user's
    own transcripts call them by. At most MAX_ALIAS_TAGS."""
    own = set(name_words(name))
    out: list[str] = []
    for row in rows:
        for turn in row[5].splitlines():
            match = _SPEAKER.match(turn.strip())
            if match is None:
                continue
            label = " ".join(match.group(1).split())
            words = name_words(label)
            if label.casefold() in _MINE or not words or set(words) <= own:
                continue
            if label not in out:
                out.append(label)
    return out[:MAX_ALIAS_TAGS]


_SPEAKER = re.compile(r"^([^:\n]{1,40}):\s")
_MINE = frozenset({"me", "you", "i"})


def _agent_facts(facts: Iterable[Fact]) -> list[Fact]:
    return [
        f
        for f in facts
        if f.kind is FactKind.NOTE
        and (
            f.text.startswith(AGENT_SAID)
            or (f.text.startswith(GOES_BY) and f.text.endswith(IN_CALLS))
        )
    ]


def cap_agent_facts(page: PersonPage) -> PersonPage:
    """At most MAX_AGENT_SAID of the agent's notes and as many "goes by" notes
    on a page, the newest."""
    dropped: set[Fact] = set()
    for prefix in (AGENT_SAID, GOES_BY):
        said = [f for f in _agent_facts(page.facts) if f.text.startswith(prefix)]
        ranked = sorted(said, key=lambda f: (f.at or 0, f.text), reverse=True)
        dropped.update(ranked[MAX_AGENT_SAID:])
    if not dropped:
        return page
    return PersonPage(tuple(f for f in page.facts if f not in dropped), page.read, page.threads)


@dataclass(frozen=True, slots=True)
class AgentSaid:
    """What the agent's answers said about one contact, and those answers."""

    contact_id: str
    name: str  # the contact's display name
    lines: tuple[Line, ...]
    facts: tuple[Fact, ...]

    @property
    def participants(self) -> tuple[str, ...]:
        return (self.name,)


def agent_statements(
    rows: Iterable[tuple[int, int, str]], names: dict[str, str], known: dict[str, str]
) -> list[AgentSaid]:
    """The statements about contacts in agent answers ``rows`` (n, at, text).
    ``names``: contact id -> display name; ``known``: the `name_key` of every
    display name and alias -> contact id."""
    by_name = {name_key(n): cid for cid, n in names.items()}
    found: dict[str, tuple[list[Line], list[Fact]]] = {}
    for _, at, text in rows:
        for said_as, what in identity_statements(text):
            contact = by_name.get(name_key(what.split(",", 1)[0]))
            if contact is None:
                contact = known.get(name_key(said_as))
            if contact is None:
                continue
            lines, facts = found.setdefault(contact, ([], []))
            if not lines or lines[-1].at != at:
                lines.append(Line(at, "Pixie", False, text, "agent_chat_agent"))
            facts.append(Fact(FactKind.NOTE, f"{AGENT_SAID}{said_as} is {what}", at))
    return [
        AgentSaid(cid, names[cid], tuple(lines), tuple(facts))
        for cid, (lines, facts) in sorted(found.items())
    ]
