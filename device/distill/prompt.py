"""What a model is told and what its answer must be.

The instructions and the user message built from a request
(`render_prompt`), the JSON schema an answer must match (`RESULT_SCHEMA`, and
`WIRE_SCHEMA`, the subset sent to an endpoint), and `parse_result`, which
checks a decoded answer against the schema and its bounds. Every answer,
whichever backend gave it, goes through `parse_result` before anything else
sees it.
"""

from __future__ import annotations

from typing import Any

from pixie.device.distill.contract import (
    MAX_FACT_CHARS,
    MAX_FACTS,
    MAX_PERSON_CHARS,
    MAX_RESULT_TAGS,
    MAX_SUMMARY_CHARS,
    DistillRequest,
    DistillResult,
    SourceKind,
    fact_key,
)
from pixie.device.errors import BadInput
from pixie.device.store.notes import MAX_TAG_CHARS, clean_tags
from pixie.protocol.timestamps import format_time

# -- the result schema -----------------------------------------------------------

RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary", "person", "facts", "tags"],
    "properties": {
        "summary": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_CHARS},
        "person": {"type": ["string", "null"], "maxLength": MAX_PERSON_CHARS},
        "facts": {
            "type": "array",
            "maxItems": MAX_FACTS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS},
        },
        "tags": {
            "type": "array",
            "maxItems": MAX_RESULT_TAGS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
        },
    },
}
_KEYS = frozenset(RESULT_SCHEMA["required"])
_BOUNDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})


def _without_bounds(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_bounds(v) for k, v in schema.items() if k not in _BOUNDS}
    return schema


# What an endpoint is sent: the strict subset every structured-output
# implementation accepts (all keys required, null for "none", no extra keys,
# no length or count limits, which some hosted APIs refuse in strict mode).
# The bounds are enforced here, on every answer, whatever the endpoint did.
WIRE_SCHEMA: dict[str, Any] = _without_bounds(RESULT_SCHEMA)


class SchemaViolation(ValueError):
    """An answer that does not match RESULT_SCHEMA. The message names the
    field and the rule, never the content."""


def parse_result(answer: object) -> DistillResult:
    """Validate a decoded answer against RESULT_SCHEMA and its bounds."""
    if not isinstance(answer, dict):
        raise SchemaViolation(f"the answer is a JSON {_json_type(answer)}, not an object")
    missing = sorted(_KEYS - answer.keys())
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
    facts: list[str] = []
    seen: set[str] = set()
    for i, value in enumerate(_array(answer["facts"], "facts", MAX_FACTS)):
        fact = _text(value, f"facts[{i}]", MAX_FACT_CHARS)
        if not fact or "\n" in fact or "\r" in fact:
            raise SchemaViolation(f"facts[{i}] is not one line of text")
        key = fact_key(fact)
        if key not in seen:
            seen.add(key)
            facts.append(fact)
    tags = _array(answer["tags"], "tags", MAX_RESULT_TAGS)
    try:
        clean = clean_tags(tags)
    except BadInput:
        raise SchemaViolation("a tag is not a short topic (letters, digits, spaces, '-')") from None
    return DistillResult(summary, person, tuple(facts), clean)


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
shown one source from the user's life: a conversation, a post or a call. \
"Me" is the user. Reply with one JSON object and nothing else, with exactly \
these keys:
"summary": what the source is about and anything still open, in one to three \
plain sentences;
"person": one to three sentences about the person named in the request (how \
they are, what is going on in their life), or null when no person is named;
"facts": durable facts the user states about themselves (where they live or \
work, their birthday, allergies, pets), each a short phrase such as "Lives in \
Lisbon"; an empty list when there are none;
"tags": up to five short lowercase topic tags, such as "travel" or "work".
Use only what the source says."""


def render_prompt(request: DistillRequest) -> tuple[str, str]:
    """The system and user messages for a chat model: the instructions, then
    the request's own lines and nothing else."""
    what = {
        SourceKind.CONVERSATION: "messages",
        SourceKind.POST: "post and its replies",
        SourceKind.CALL: "call",
    }[request.kind]
    person = (
        f"Person to describe: {request.person}"
        if request.person
        else 'Person to describe: none (reply "person": null)'
    )
    head = [f"Source: {request.title}", person]
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
