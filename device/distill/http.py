"""The HTTP backend: an OpenAI-compatible chat-completions endpoint (what
Ollama, llama.cpp's server, vLLM and hosted APIs speak).

`ChatCompletionsBackend` sends the prompt and asks for JSON matching the wire
schema, under a hard deadline with a few retries; `first_choice` and
`decode_completion` take a response body apart (the chat loop uses them for
its own requests too). httpx is imported only when a request is made.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import trio

from pixie.device.distill.contract import (
    MAX_ANSWER_TOKENS,
    BackendFailure,
    DistillRequest,
    Failure,
)
from pixie.device.distill.prompt import WIRE_SCHEMA, render_prompt
from pixie.device.distill.settings import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    import httpx

MAX_RESPONSE_BYTES = 256 * 1024  # the HTTP body; reading stops past it
MAX_CONTENT_CHARS = 16 * 1024  # the model's message inside it
RETRIES = 2  # extra attempts after a transient failure (refused, reset, 5xx, 429)
BACKOFF = 0.5  # seconds before the first retry, doubling after


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


__all__ = [
    "BACKOFF",
    "MAX_CONTENT_CHARS",
    "MAX_RESPONSE_BYTES",
    "RETRIES",
    "ChatCompletionsBackend",
    "decode_completion",
    "first_choice",
]
