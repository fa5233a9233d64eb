"""LLMRouter: which model distils a source, and what happens when one fails.

The router holds an ordered list of backends: an OpenAI-compatible
chat-completions endpoint when one is configured (what Ollama, llama.cpp's
server, vLLM and hosted APIs speak), then the built-in offline distiller, which
needs no network and always answers. Every answer, whoever gave it, is checked
against `RESULT_SCHEMA` with its size bounds before anything else sees it. An
answer that is invalid, truncated, oversized or late never reaches the
Notebook: the router logs why (a reason and sizes, never the content) and asks
the next backend.

This module also holds the contract every backend works to: the request (one
source's lines, already cut to the model's budget), the prompt an HTTP model is
sent, and the result. It reads nothing itself; what a request carries is
decided by the caller, from one source of the memory log alone.
"""

from __future__ import annotations

import contextlib
import enum
import ipaddress
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import trio

from pixie.device.errors import BadInput, DeviceError
from pixie.device.store.config import LLM_API_KEY_ENV
from pixie.device.store.notes import MAX_TAG_CHARS, clean_tags
from pixie.protocol.timestamps import format_time

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("pixie.llm")

# What one source may put in front of a model. A small on-device model has a
# window of about 4k tokens: the instructions take ~350, the answer up to
# MAX_ANSWER_TOKENS, and the transcript gets what is left (about four
# characters a token). Lines are cut one by one, then the oldest are dropped.
MAX_LINES = 40
MAX_LINE_CHARS = 600
MAX_TRANSCRIPT_CHARS = 8_000
MAX_ANSWER_TOKENS = 800

# Bounds on an answer. A result that breaks one is refused whole.
MAX_SUMMARY_CHARS = 1_500
MAX_PERSON_CHARS = 1_500
MAX_FACTS = 10
MAX_FACT_CHARS = 200
MAX_RESULT_TAGS = 8
MAX_RESPONSE_BYTES = 256 * 1024  # the HTTP body; reading stops past it
MAX_CONTENT_CHARS = 16 * 1024  # the model's message inside it

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
RETRIES = 2  # extra attempts after a transient failure (refused, reset, 5xx, 429)
BACKOFF = 0.5  # seconds before the first retry, doubling after
TRIP_AFTER = 3  # consecutive failures after which a backend sits out the rest of a pass
MAX_URL_CHARS = 500
MAX_MODEL_CHARS = 200


class SourceKind(enum.StrEnum):
    """What a request distils: a conversation thread, a post, or a call
    (a call transcript or a voicemail)."""

    CONVERSATION = "conversation"
    POST = "post"
    CALL = "call"


@dataclass(frozen=True, slots=True)
class Line:
    """One event of the source, as a model is shown it."""

    at: int  # microseconds UTC
    speaker: str  # a display name, or ME for the user
    from_me: bool
    text: str
    kind: str = "message"  # the event kind: message, post, call or voicemail


ME = "Me"


@dataclass(frozen=True, slots=True)
class DistillRequest:
    """One source, cut to a model's budget. Build it with `make_request`."""

    kind: SourceKind
    title: str  # what the source is: "Conversation with Ada Lovelace"
    person: str | None  # whose person summary is wanted, if anyone's
    participants: tuple[str, ...]  # everyone in it but the user, by display name
    lines: tuple[Line, ...]  # oldest first


@dataclass(frozen=True, slots=True)
class DistillResult:
    """A validated answer: what may go on to the Notebook."""

    summary: str
    person: str | None
    facts: tuple[str, ...]
    tags: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "person": self.person,
            "facts": list(self.facts),
            "tags": list(self.tags),
        }


def make_request(
    kind: SourceKind,
    title: str,
    person: str | None,
    participants: Sequence[str],
    lines: Sequence[Line],
) -> DistillRequest:
    """A request holding the newest ``lines`` (given oldest first) that fit:
    at most MAX_LINES, a message at most MAX_LINE_CHARS, MAX_TRANSCRIPT_CHARS
    in all. A post keeps its own text (the first line) ahead of its replies."""
    pinned: list[Line] = []
    budget = MAX_TRANSCRIPT_CHARS
    if kind is SourceKind.POST and len(lines) > 1:
        root = lines[0]
        pinned.append(_cut(root, MAX_TRANSCRIPT_CHARS // 2))
        budget -= len(pinned[0].text)
        lines = lines[1:]
    kept: list[Line] = []
    for line in reversed(lines[-(MAX_LINES - len(pinned)) :]):
        cut = _cut(line, MAX_LINE_CHARS if line.kind == "message" else budget)
        if kept and len(cut.text) > budget:
            break
        cut = _cut(cut, budget)
        budget -= len(cut.text)
        kept.append(cut)
        if budget <= 0:
            break
    kept.reverse()
    return DistillRequest(kind, title, person, tuple(participants), tuple(pinned + kept))


def _cut(line: Line, limit: int) -> Line:
    text = line.text.strip()
    if len(text) <= limit:
        return (
            line
            if text == line.text
            else Line(line.at, line.speaker, line.from_me, text, line.kind)
        )
    return Line(line.at, line.speaker, line.from_me, _clip(text, limit), line.kind)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


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


def fact_key(fact: str) -> str:
    """What two facts are compared by: case, spacing and end punctuation aside."""
    return " ".join(fact.casefold().split()).rstrip(".!;:, ")


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


# -- backends --------------------------------------------------------------------


class Failure(enum.StrEnum):
    """Why a backend's answer was not used."""

    UNREACHABLE = "unreachable"
    STATUS = "http error"
    LATE = "late"
    TRUNCATED = "truncated"
    OVERSIZED = "oversized"
    MALFORMED = "malformed"
    SCHEMA = "schema violation"


class BackendFailure(Exception):
    """A backend gave no usable answer. ``detail`` holds no content."""

    def __init__(
        self, reason: Failure, detail: str, *, retry: bool = False, permanent: bool = False
    ) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retry = retry  # worth another attempt (a refused connection, a 503)
        self.permanent = permanent  # will not change this pass (a 401, a wrong model)


class NoBackendAnswered(DeviceError):
    """Every backend failed on one source."""


class Backend(Protocol):
    """A model: given a request, the decoded JSON answer, not yet validated."""

    @property
    def name(self) -> str: ...

    async def answer(self, request: DistillRequest) -> object: ...

    async def aclose(self) -> None: ...


class ChatCompletionsBackend:
    """An OpenAI-compatible ``/chat/completions`` endpoint, asked for JSON
    matching RESULT_SCHEMA.

    Every attempt runs under a hard deadline (connecting, sending, waiting and
    reading together); a refused connection, a reset or a 5xx/429 is tried
    again, at most RETRIES more times, with a doubling pause. A late answer is
    not: a model that was slow once will be slow again, and the next backend
    is waiting.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        api_key: str | None = None,
        retries: int = RETRIES,
        backoff: float = BACKOFF,
        name: str = "http",
    ) -> None:
        self._name = name
        self.endpoint = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._api_key = api_key
        self._client: httpx.AsyncClient | None = None
        self.requests = 0  # HTTP attempts, retries included

    @property
    def name(self) -> str:
        return self._name

    def body(self, request: DistillRequest) -> dict[str, Any]:
        system, user = render_prompt(request)
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": MAX_ANSWER_TOKENS,
            "stream": False,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "distillation", "strict": True, "schema": WIRE_SCHEMA},
            },
        }

    async def answer(self, request: DistillRequest) -> object:
        payload = json.dumps(self.body(request), ensure_ascii=False).encode()
        return decode_completion(await self.post(payload))

    async def post(self, payload: bytes) -> bytes:
        """POST ``payload`` (a JSON request body) to the endpoint: the body of
        a 200 answer, read within MAX_RESPONSE_BYTES, with the deadline and
        retries described above. Other callers (the chat loop) build their own
        request and decode the answer themselves."""
        attempt = 0
        while True:
            try:
                return await self._attempt(payload)
            except BackendFailure as failure:
                if not failure.retry or attempt >= self.retries:
                    raise
            await trio.sleep(self.backoff * 2**attempt)
            attempt += 1

    async def _attempt(self, payload: bytes) -> bytes:
        import httpx  # only a pass that has a model endpoint pays for the import

        client = self._client_for(httpx)
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        self.requests += 1
        status, raw, late = 0, b"", False
        with trio.move_on_after(self.timeout) as deadline:
            try:
                async with client.stream(
                    "POST", self.endpoint, content=payload, headers=headers
                ) as response:
                    status = response.status_code
                    raw = await _read_bounded(response)
            except httpx.TimeoutException:
                late = True  # the same outcome as our own deadline
            except httpx.HTTPError as exc:
                raise BackendFailure(Failure.UNREACHABLE, type(exc).__name__, retry=True) from None
        if late or deadline.cancelled_caught:
            raise BackendFailure(Failure.LATE, f"no complete answer within {self.timeout:g} s")
        if status != 200:
            transient = status in (408, 425, 429) or 500 <= status <= 599
            raise BackendFailure(
                Failure.STATUS, f"HTTP {status}", retry=transient, permanent=not transient
            )
        return raw

    def _client_for(self, httpx_module: Any) -> httpx.AsyncClient:
        if self._client is None:
            # No proxy variables, no redirects: the endpoint is exactly the one
            # configured, and an API key never follows a redirect elsewhere.
            self._client = httpx_module.AsyncClient(
                timeout=self.timeout, follow_redirects=False, trust_env=False
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await client.aclose()


async def _read_bounded(response: httpx.Response) -> bytes:
    """The body, refused past MAX_RESPONSE_BYTES. A declared length is checked
    before reading; a body of unknown length is read to its end (the caller's
    deadline bounds how long) but never kept past the cap, so memory is bounded
    and httpx's streams are never left half-read."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        raise BackendFailure(Failure.OVERSIZED, f"response of {int(declared)} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size <= MAX_RESPONSE_BYTES:
            chunks.append(chunk)
    if size > MAX_RESPONSE_BYTES:
        raise BackendFailure(Failure.OVERSIZED, f"response over {MAX_RESPONSE_BYTES} bytes")
    return b"".join(chunks)


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*)\n```\s*\Z", re.DOTALL)


def first_choice(raw: bytes) -> tuple[dict[str, Any], object]:
    """The first choice's message and its finish reason, from a chat-completion
    response body; `BackendFailure` if the body is not one."""
    try:
        envelope = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BackendFailure(Failure.MALFORMED, f"response is not JSON ({len(raw)} B)") from None
    try:
        choice = envelope["choices"][0]
        finish = choice.get("finish_reason")
        message = choice["message"]
    except (KeyError, IndexError, TypeError, AttributeError):
        raise BackendFailure(Failure.MALFORMED, "response is not a chat completion") from None
    if not isinstance(message, dict):
        raise BackendFailure(Failure.MALFORMED, "response is not a chat completion")
    return message, finish


def decode_completion(raw: bytes) -> object:
    """The JSON answer inside a chat-completion response body."""
    message, finish = first_choice(raw)
    content = message.get("content")
    if finish == "length":
        raise BackendFailure(Failure.TRUNCATED, "the model ran out of tokens")
    if not isinstance(content, str):
        refused = message.get("refusal")
        raise BackendFailure(Failure.MALFORMED, "refused" if refused else "no text in the answer")
    if len(content) > MAX_CONTENT_CHARS:
        raise BackendFailure(Failure.OVERSIZED, f"answer over {MAX_CONTENT_CHARS} characters")
    fenced = _FENCE.match(content.strip())
    text = fenced.group(1) if fenced else content
    try:
        return json.loads(text)
    except ValueError:
        raise BackendFailure(
            Failure.MALFORMED, f"answer is not JSON ({len(content)} characters)"
        ) from None


# -- the router ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Routed:
    result: DistillResult
    backend: str  # the backend whose answer this is
    failures: tuple[tuple[str, Failure], ...]  # backends asked before it, and why they failed


@dataclass
class LLMRouter:
    """Backends in order of preference; the first valid answer wins.

    A backend that fails TRIP_AFTER sources in a row, or fails in a way that
    will not change (a 401, an unknown model), sits out the rest of the pass,
    so a dead endpoint costs one short wait per pass rather than one per source.
    """

    backends: tuple[Backend, ...]
    trip_after: int = TRIP_AFTER
    calls: Counter[str] = field(default_factory=Counter)  # answers asked for, per backend
    _strikes: Counter[str] = field(default_factory=Counter)
    _benched: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("a router needs at least one backend")
        names = [b.name for b in self.backends]
        if len(set(names)) != len(names):
            raise ValueError(f"backend names repeat: {names}")

    def new_pass(self) -> None:
        """Forget the last pass's counts and benched backends."""
        self.calls.clear()
        self._strikes.clear()
        self._benched.clear()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    async def distill(self, request: DistillRequest) -> Routed:
        failures: list[tuple[str, Failure]] = []
        for backend in self.backends:
            if backend.name in self._benched:
                continue
            self.calls[backend.name] += 1
            try:
                answer = await backend.answer(request)
                try:
                    result = parse_result(answer)
                except SchemaViolation as exc:
                    raise BackendFailure(Failure.SCHEMA, str(exc)) from None
            except BackendFailure as failure:
                failures.append((backend.name, failure.reason))
                self._strikes[backend.name] += 1
                benched = failure.permanent or self._strikes[backend.name] >= self.trip_after
                log.warning(
                    "backend %s gave no usable answer for a %s of %d lines (%s)%s",
                    backend.name,
                    request.kind.value,
                    len(request.lines),
                    failure,
                    "; it sits out the rest of this pass" if benched else "",
                )
                if benched:
                    self._benched.add(backend.name)
                continue
            self._strikes[backend.name] = 0
            return Routed(result, backend.name, tuple(failures))
        raise NoBackendAnswered(
            "no backend gave a usable answer ("
            + ", ".join(f"{name}: {reason.value}" for name, reason in failures)
            + ")"
        )

    async def aclose(self) -> None:
        for backend in self.backends:
            await backend.aclose()


# -- settings --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """The model endpoint, if any. The API key comes from the environment only
    and is never written anywhere."""

    url: str | None = None
    model: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_values(cls, values: dict[str, Any], api_key: str | None) -> LLMSettings:
        """Validate settings as `config.llm` returns them."""
        url = check_url(values["llm_url"]) if values.get("llm_url") is not None else None
        model = check_model(values["llm_model"]) if values.get("llm_model") is not None else None
        timeout = DEFAULT_TIMEOUT
        if values.get("llm_timeout") is not None:
            timeout = check_timeout(values["llm_timeout"])
        if url is not None and model is None:
            raise BadInput(
                "a model URL is set but no model: set [llm] model, PIXIE_LLM_MODEL or --model"
            )
        if url is not None and api_key and not _key_may_travel(url):
            raise BadInput(
                f"refusing to send {LLM_API_KEY_ENV} over plain http to a host that is not "
                "this machine; use an https:// URL"
            )
        return cls(url, model, timeout, api_key)

    def describe(self) -> str:
        if self.url is None:
            return "the built-in distiller"
        return f"{self.model} at {self.url}, then the built-in distiller"


def check_url(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput("the model URL must be a non-empty string")
    url = value.strip()
    if len(url) > MAX_URL_CHARS or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise BadInput(f"the model URL must be one word of at most {MAX_URL_CHARS} characters")
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # Not echoed: the text before the @ is a secret.
        raise BadInput(f"the model URL must not carry credentials; set {LLM_API_KEY_ENV} instead")
    example = "such as http://127.0.0.1:11434/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"model URL {url!r:.80} is not an http:// or https:// address ({example})")
    if parts.query or parts.fragment:
        raise BadInput(f"model URL {url!r:.80} has a query or fragment; give the API base only")
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise BadInput(f"model URL {url!r:.80} has a bad port") from None
    return url.rstrip("/")


def check_model(value: object) -> str:
    if not isinstance(value, str):
        raise BadInput("the model name must be a string")
    model = value.strip()
    if not model or len(model) > MAX_MODEL_CHARS or any(ord(ch) < 32 for ch in model):
        raise BadInput(f"the model name must be one line of 1 to {MAX_MODEL_CHARS} characters")
    return model


def check_timeout(value: object) -> float:
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            seconds = float(value.strip())
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise BadInput(
            f"the model timeout must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT:g} (got {value!r:.20})"
        )
    return seconds


def _key_may_travel(url: str) -> bool:
    """An API key goes over https, or over plain http to this machine only."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = [
    "ME",
    "RESULT_SCHEMA",
    "WIRE_SCHEMA",
    "Backend",
    "BackendFailure",
    "ChatCompletionsBackend",
    "DistillRequest",
    "DistillResult",
    "Failure",
    "LLMRouter",
    "LLMSettings",
    "Line",
    "NoBackendAnswered",
    "Routed",
    "SourceKind",
    "make_request",
    "parse_result",
    "render_prompt",
]
