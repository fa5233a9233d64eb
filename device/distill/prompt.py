"""What a model is told and what its answer must be.

The instructions and the user message built from a request
(`render_prompt`), the JSON schema an answer must match (`RESULT_SCHEMA`, and
`WIRE_SCHEMA`, the subset sent to an endpoint), and `parse_result`, which
checks a decoded answer against the schema and its bounds. Every answer,
whichever backend gave it, goes through `parse_result` before anything else
sees it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from pixie.device.distill.contract import (
    MAX_APPOINTMENTS,
    MAX_FACT_CHARS,
    MAX_FACTS,
    MAX_NAME_CHARS,
    MAX_OPEN_THREADS,
    MAX_OTHERS,
    MAX_PERSON_CHARS,
    MAX_PERSON_FACTS,
    MAX_RESULT_TAGS,
    MAX_SUMMARY_CHARS,
    MAX_WITH,
    Appointment,
    DistillRequest,
    DistillResult,
    Fact,
    FactKind,
    SourceKind,
    fact_key,
)
from pixie.device.distill.pages import guess_kind
from pixie.device.errors import BadInput
from pixie.device.store.notes import MAX_TAG_CHARS, clean_tags
from pixie.protocol.timestamps import format_time

# -- the result schema -----------------------------------------------------------

_DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind", "text", "date"],
    "properties": {
        "kind": {"type": "string", "enum": [k.value for k in FactKind]},
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS},
        "date": {"type": ["string", "null"], "pattern": _DAY_PATTERN},
    },
}
_SHORT = 200
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "summary",
        "person",
        "facts",
        "tags",
        "person_facts",
        "open_threads",
        "appointments",
        "others",
    ],
    "properties": {
        "summary": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_CHARS},
        "person": {"type": ["string", "null"], "maxLength": MAX_PERSON_CHARS},
        "facts": {"type": "array", "maxItems": MAX_FACTS, "items": _FACT_SCHEMA},
        "tags": {
            "type": "array",
            "maxItems": MAX_RESULT_TAGS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
        },
        "person_facts": {"type": "array", "maxItems": MAX_PERSON_FACTS, "items": _FACT_SCHEMA},
        "open_threads": {
            "type": "array",
            "maxItems": MAX_OPEN_THREADS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS},
        },
        "others": {
            "type": "array",
            "maxItems": MAX_OTHERS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "kind", "text", "date"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
                    **_FACT_SCHEMA["properties"],
                },
            },
        },
        "appointments": {
            "type": "array",
            "maxItems": MAX_APPOINTMENTS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["what", "date", "time", "place", "with"],
                "properties": {
                    "what": {"type": "string", "minLength": 1, "maxLength": _SHORT},
                    "date": {"type": "string", "pattern": _DAY_PATTERN},
                    "time": {"type": ["string", "null"], "pattern": r"^[0-9]{2}:[0-9]{2}$"},
                    "place": {"type": ["string", "null"], "maxLength": _SHORT},
                    "with": {
                        "type": "array",
                        "maxItems": MAX_WITH,
                        "items": {"type": "string", "minLength": 1, "maxLength": _SHORT},
                    },
                },
            },
        },
    },
}
# The four keys every answer must have; the other three may be left out (an
# answer in the older four-key shape is still valid: nothing to add there).
_CORE = frozenset({"summary", "person", "facts", "tags"})
_KEYS = frozenset(RESULT_SCHEMA["required"])
_NOT_SENT = frozenset({"minLength", "maxLength", "minItems", "maxItems", "pattern"})


def _without_bounds(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_bounds(v) for k, v in schema.items() if k not in _NOT_SENT}
    if isinstance(schema, list):
        return [_without_bounds(v) for v in schema]
    return schema


# What an endpoint is sent: the strict subset every structured-output
# implementation accepts (all keys required, null for "none", no extra keys,
# no length, count or pattern limits, which some hosted APIs refuse in strict
# mode). The bounds are enforced here, on every answer, whatever the endpoint did.
WIRE_SCHEMA: dict[str, Any] = _without_bounds(RESULT_SCHEMA)


class SchemaViolation(ValueError):
    """An answer that does not match RESULT_SCHEMA. The message names the
    field and the rule, never the content."""


def parse_result(answer: object) -> DistillResult:
    """Validate a decoded answer against RESULT_SCHEMA and its bounds."""
    if not isinstance(answer, dict):
        raise SchemaViolation(f"the answer is a JSON {_json_type(answer)}, not an object")
    missing = sorted(_CORE - answer.keys())
    if missing:
        raise SchemaViolation(f"missing key {missing[0]!r}")
    extra = sorted(str(k) for k in answer.keys() - _KEYS)
    if extra:
        raise SchemaViolation(f"unexpected key {extra[0]!r:.24}")
    summary = _text(answer["summary"], "summary", MAX_SUMMARY_CHARS)
    if not summary:
        raise SchemaViolation("summary is empty")
    person = None
    if answer["person"] is not None:
        person = _text(answer["person"], "person", MAX_PERSON_CHARS) or None
    facts = _facts(answer["facts"], "facts", MAX_FACTS)
    tags = _array(answer["tags"], "tags", MAX_RESULT_TAGS)
    try:
        clean = clean_tags(tags)
    except BadInput:
        raise SchemaViolation("a tag is not a short topic (letters, digits, spaces, '-')") from None
    person_facts = _facts(answer.get("person_facts", []), "person_facts", MAX_PERSON_FACTS)
    threads: list[str] = []
    for i, value in enumerate(
        _array(answer.get("open_threads", []), "open_threads", MAX_OPEN_THREADS)
    ):
        thread = _line(value, f"open_threads[{i}]", MAX_FACT_CHARS)
        if thread not in threads:
            threads.append(thread)
    appointments = tuple(
        _appointment(value, f"appointments[{i}]")
        for i, value in enumerate(
            _array(answer.get("appointments", []), "appointments", MAX_APPOINTMENTS)
        )
    )
    others = _others(answer.get("others", []))
    return DistillResult(
        summary, person, facts, clean, person_facts, tuple(threads), appointments, others
    )


def _others(value: object) -> tuple[tuple[str, Fact], ...]:
    """Facts about other people the source names, each {"name", "kind",
    "text", "date"}."""
    out: list[tuple[str, Fact]] = []
    for i, item in enumerate(_array(value, "others", MAX_OTHERS)):
        where = f"others[{i}]"
        if not isinstance(item, dict):
            raise SchemaViolation(f"{where} is a JSON {_json_type(item)}, not an object")
        name = _line(item.get("name"), f"{where}.name", MAX_NAME_CHARS)
        (fact,) = _facts([{k: v for k, v in item.items() if k != "name"}], where, 1)
        out.append((name, fact))
    return tuple(out)


def _facts(value: object, what: str, limit: int) -> tuple[Fact, ...]:
    """Facts as objects ({"kind", "text", "date"}); a bare string is taken as
    a fact of the kind its wording suggests, undated."""
    out: list[Fact] = []
    seen: set[tuple[FactKind, str]] = set()
    for i, item in enumerate(_array(value, what, limit)):
        where = f"{what}[{i}]"
        if isinstance(item, str):
            text = _line(item, where, MAX_FACT_CHARS)
            fact = Fact(guess_kind(text), text)
        elif isinstance(item, dict):
            unknown = sorted(str(k) for k in item.keys() - {"kind", "text", "date"})
            if unknown:
                raise SchemaViolation(f"{where} has an unexpected key {unknown[0]!r:.24}")
            kind = item.get("kind")
            if kind not in _FACT_KINDS:
                raise SchemaViolation(f"{where}.kind is not one of the fact kinds")
            text = _line(item.get("text"), f"{where}.text", MAX_FACT_CHARS)
            fact = Fact(FactKind(kind), text, _day(item.get("date"), f"{where}.date"))
        else:
            raise SchemaViolation(f"{where} is a JSON {_json_type(item)}, not an object")
        key = (fact.kind, fact_key(fact.text))
        if key not in seen:
            seen.add(key)
            out.append(fact)
    return tuple(out)


_FACT_KINDS = frozenset(k.value for k in FactKind)
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CLOCK = re.compile(r"[0-9]{2}:[0-9]{2}")


def _day(value: object, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ISO_DAY.fullmatch(value):
        raise SchemaViolation(f"{what} is not a date (YYYY-MM-DD) or null")
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise SchemaViolation(f"{what} names no day") from None
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()) * 1_000_000


def _appointment(value: object, what: str) -> Appointment:
    if not isinstance(value, dict):
        raise SchemaViolation(f"{what} is a JSON {_json_type(value)}, not an object")
    keys = {"what", "date", "time", "place", "with"}
    unknown = sorted(str(k) for k in value.keys() - keys)
    if unknown:
        raise SchemaViolation(f"{what} has an unexpected key {unknown[0]!r:.24}")
    name = _line(value.get("what"), f"{what}.what", _SHORT)
    if _day(value.get("date"), f"{what}.date") is None:
        raise SchemaViolation(f"{what}.date is missing")
    time = value.get("time")
    if time is not None and (not isinstance(time, str) or not _CLOCK.fullmatch(time)):
        raise SchemaViolation(f"{what}.time is not HH:MM or null")
    place = value.get("place")
    if place is not None:
        place = _line(place, f"{what}.place", _SHORT)
    people = tuple(
        _line(p, f"{what}.with[{j}]", _SHORT)
        for j, p in enumerate(_array(value.get("with", []), f"{what}.with", MAX_WITH))
    )
    return Appointment(name, str(value["date"]), time, place, people)


def _line(value: object, what: str, limit: int) -> str:
    text = _text(value, what, limit)
    if not text or "\n" in text or "\r" in text:
        raise SchemaViolation(f"{what} is not one line of text")
    return text


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise SchemaViolation(f"{what} is a JSON {_json_type(value)}, not a string")
    text = value.strip()
    if len(text) > limit:
        raise SchemaViolation(f"{what} is longer than {limit} characters ({len(text)})")
    if "\x00" in text:
        raise SchemaViolation(f"{what} contains a NUL character")
    return text


def _array(value: object, what: str, limit: int) -> list[object]:
    if not isinstance(value, list):
        raise SchemaViolation(f"{what} is a JSON {_json_type(value)}, not an array")
    if len(value) > limit:
        raise SchemaViolation(f"{what} has {len(value)} items (at most {limit})")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# -- the prompt ------------------------------------------------------------------

SYSTEM_PROMPT = """\
You keep a private notebook for the user of a personal assistant. You are \
shown one source from the user's life: a conversation, a mail thread, a \
post, a call, a journal entry or a calendar entry (which may repeat). "Me" \
is the user. Write what it means, not copies of it. Reply with one JSON \
object and nothing else, with exactly these keys:
"summary": what the source is about and anything still open, in one to three \
plain sentences; for a post, do not repeat the post's text;
"person": one to three sentences with your read on the relationship with the \
person named in the request (how often and how warmly you are in touch, what \
you talk about), or null when no person is named;
"facts": durable facts the user states about themselves (home, work, \
birthday, allergies, diet, likes, family and friends, pets), each an object \
{{"kind", "text", "date"}}: kind one of {kinds}; text a short phrase such as \
"lives in Lisbon"; date the day it was said (YYYY-MM-DD) or null;
"tags": up to five short lowercase topic tags, such as "travel" or "work";
"person_facts": durable facts about the person named in the request (or the \
one other person in the source) that they say about themselves or the user \
says about them, in the same shape: where they work and as what, where they \
live, family, birthday, pets, plans made with them; only the newest fact of \
each kind that can change (work, role, home, birthday);
"open_threads": questions left unanswered and promises still open with that \
person, each one short line; an empty list when there are none;
"others": durable facts the source states about other people it names (not \
the user, not the person named in the request), each {{"name", "kind", "text", \
"date"}} with the name as the source writes it; an empty list when there are none;
"appointments": for a calendar entry, {{"what", "date" (YYYY-MM-DD), "time" \
(HH:MM or null), "place" (or null), "with" (names)}}; otherwise an empty list.
Use only what the source says.""".format(kinds=", ".join(k.value for k in FactKind))


MAX_PROMPT_OCCURRENCES = 60  # of a repeating entry's starts, in a prompt


def render_prompt(request: DistillRequest) -> tuple[str, str]:
    """The system and user messages for a chat model: the instructions, then
    the request's own lines and nothing else."""
    what = {
        SourceKind.CONVERSATION: "messages",
        SourceKind.POST: "post and its replies",
        SourceKind.CALL: "call",
        SourceKind.JOURNAL: "journal entry",
        SourceKind.CALENDAR: "calendar entry",
        SourceKind.MAIL: "emails",
    }[request.kind]
    person = (
        f"Person to describe: {request.person}"
        if request.person
        else 'Person to describe: none (reply "person": null)'
    )
    head = [f"Source: {request.title}", person]
    if request.details:
        card = "; ".join(f"{field}: {value}" for field, value in request.details)
        head.append(f"Their contact card: {card}")
    if len(request.occurrences) > 1:
        head.append(
            f"It repeats: {len(request.occurrences)} occurrences, starting (UTC) "
            + ", ".join(_minute(at) for at in request.occurrences[:MAX_PROMPT_OCCURRENCES])
            + (" ..." if len(request.occurrences) > MAX_PROMPT_OCCURRENCES else "")
        )
    if request.earlier:
        head.append(f"{len(request.earlier)} earlier lines that state facts, oldest first:")
        head += [f"[{_minute(line.at)}] {line.speaker}: {line.text}" for line in request.earlier]
    if request.kind is SourceKind.CONVERSATION:
        head.append(f"The {len(request.lines)} most recent {what}, oldest first:")
    else:
        head.append(f"The {what}, oldest first:")
    body = [f"[{_minute(line.at)}] {line.speaker}: {line.text}" for line in request.lines]
    return SYSTEM_PROMPT, "\n".join(head + body)


def _minute(at: int) -> str:
    return format_time(at - at % 60_000_000)[:16].replace("T", " ")


__all__ = [
    "RESULT_SCHEMA",
    "SYSTEM_PROMPT",
    "WIRE_SCHEMA",
    "SchemaViolation",
    "parse_result",
    "render_prompt",
]
