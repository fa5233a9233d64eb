"""The built-in distiller on conversations, posts and calls: the digest of a
thread, the page of the person in it, and what they said of themselves."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace

from pixie.device.distill.contract import (
    MAX_OPEN_THREADS,
    MAX_PERSON_CHARS,
    MAX_PERSON_FACTS,
    DistillRequest,
    Fact,
    FactKind,
    Line,
    fact_key,
)
from pixie.device.distill.extract import FIRST_PERSON, SECOND_PERSON, facts_in, sentences
from pixie.device.distill.offline_others import _answer, _as_theirs, _states, others_in
from pixie.device.distill.offline_words import (
    _EMAIL,
    _HAS_DIGIT,
    _NUMBERS,
    _PHONE_NUMBER,
    _STOP,
    _WORD,
    HIGHLIGHTS,
    _best,
    _call_turns,
    _distinct,
    _first,
    _fit,
    _hanging_question,
    _hashtags,
    _is_small_talk,
    _join,
    _names,
    _quote,
    _Said,
    _score,
    _span,
    _topics,
    _utterances,
    _when,
    _who,
    _words,
    day_label,
)
from pixie.device.distill.pages import merge_facts
from pixie.device.distill.plans import Said, plan_in


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
