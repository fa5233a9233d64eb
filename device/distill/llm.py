"""The model seam, from one place: each part lives in its own module and is
re-exported here so ``from pixie.device.distill.llm import ...`` keeps working.

* `contract` -- the request, the result, their bounds, and the `Backend`
  protocol with its failures;
* `prompt` -- the instructions and user message a model is sent, the result
  schema, and `parse_result`, which checks every answer;
* `http` -- `ChatCompletionsBackend`, an OpenAI-compatible endpoint;
* `router` -- `LLMRouter`, which asks backends in order and keeps a failing
  answer away from the Notebook;
* `settings` -- `LLMSettings`, the endpoint a peer is set to use.

New code imports from those modules directly.
"""

from __future__ import annotations

from pixie.device.distill.contract import (
    MAX_ANSWER_TOKENS,
    MAX_FACT_CHARS,
    MAX_FACTS,
    MAX_LINE_CHARS,
    MAX_LINES,
    MAX_PERSON_CHARS,
    MAX_RESULT_TAGS,
    MAX_SUMMARY_CHARS,
    MAX_TRANSCRIPT_CHARS,
    ME,
    Backend,
    BackendFailure,
    DistillRequest,
    DistillResult,
    Failure,
    Line,
    NoBackendAnswered,
    SourceKind,
    fact_key,
    make_request,
)
from pixie.device.distill.http import (
    BACKOFF,
    MAX_CONTENT_CHARS,
    MAX_RESPONSE_BYTES,
    RETRIES,
    ChatCompletionsBackend,
    decode_completion,
    first_choice,
)
from pixie.device.distill.prompt import (
    RESULT_SCHEMA,
    SYSTEM_PROMPT,
    WIRE_SCHEMA,
    SchemaViolation,
    parse_result,
    render_prompt,
)
from pixie.device.distill.router import (
    TRIP_AFTER,
    LLMRouter,
    Routed,
)
from pixie.device.distill.settings import (
    DEFAULT_TIMEOUT,
    MAX_MODEL_CHARS,
    MAX_TIMEOUT,
    MAX_URL_CHARS,
    LLMSettings,
    check_model,
    check_timeout,
    check_url,
)

__all__ = [
    "BACKOFF",
    "DEFAULT_TIMEOUT",
    "MAX_ANSWER_TOKENS",
    "MAX_CONTENT_CHARS",
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_MODEL_CHARS",
    "MAX_PERSON_CHARS",
    "MAX_RESPONSE_BYTES",
    "MAX_RESULT_TAGS",
    "MAX_SUMMARY_CHARS",
    "MAX_TIMEOUT",
    "MAX_TRANSCRIPT_CHARS",
    "MAX_URL_CHARS",
    "ME",
    "RESULT_SCHEMA",
    "RETRIES",
    "SYSTEM_PROMPT",
    "TRIP_AFTER",
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
    "SchemaViolation",
    "SourceKind",
    "check_model",
    "check_timeout",
    "check_url",
    "decode_completion",
    "fact_key",
    "first_choice",
    "make_request",
    "parse_result",
    "render_prompt",
]
