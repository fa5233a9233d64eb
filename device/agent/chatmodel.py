"""The chat model: an OpenAI-compatible ``/chat/completions`` call with tools.

The HTTP side (deadline, retries, bounded read, no redirects, the API key only
over https or to this machine) is `ChatCompletionsBackend.post`, shared with
distillation. What is new here is the answer: a message that may carry text,
tool calls, or both. Everything in it is bounded and checked before the loop
sees it; an answer that breaks a bound is a `BackendFailure`, never a crash,
and a tool call whose arguments are not a JSON object still reaches the loop
(as `ToolCall.problem`), so the model can be told and try again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pixie.device.distill.contract import BackendFailure, Failure
from pixie.device.distill.http import MAX_CONTENT_CHARS, ChatCompletionsBackend, first_choice
from pixie.device.distill.settings import LLMSettings

MAX_CHAT_TOKENS = 800  # the reply; a small model's window is ~4k tokens
MAX_TOOL_CALLS = 8  # in one answer; more is a model gone wrong, not a plan
MAX_CALL_ID_CHARS = 200
MAX_TOOL_NAME_CHARS = 64
MAX_ARGUMENTS_CHARS = 4_096  # a call's arguments, as the JSON text the model wrote


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is the decoded JSON object,
    or None with ``problem`` saying what was wrong with it."""

    id: str
    name: str
    arguments: Mapping[str, Any] | None
    problem: str | None = None

    def wire(self) -> dict[str, Any]:
        """The call as it goes back to the model in the assistant message."""
        text = "{}" if self.arguments is None else json.dumps(self.arguments, ensure_ascii=False)
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": text},
        }


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """A checked answer: the text (may be empty) and the calls (may be none)."""

    text: str
    calls: tuple[ToolCall, ...]


class ChatModel(Protocol):
    """What the chat loop talks to. ``tools`` empty means none may be called."""

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ModelAnswer: ...

    async def aclose(self) -> None: ...


class ToolCallingModel:
    """A chat model behind an OpenAI-compatible endpoint, offered tools."""

    def __init__(self, url: str, model: str, *, timeout: float, api_key: str | None) -> None:
        self.http = ChatCompletionsBackend(
            url, model, timeout=timeout, api_key=api_key, name="chat"
        )
        self.model = model

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> ToolCallingModel | None:
        """The configured model, or None when no endpoint is configured."""
        if settings.url is None or settings.model is None:
            return None
        return cls(settings.url, settings.model, timeout=settings.timeout, api_key=settings.api_key)

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": 0,
            "max_tokens": MAX_CHAT_TOKENS,
            "stream": False,
        }
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
        return body

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ModelAnswer:
        payload = json.dumps(self.body(messages, tools), ensure_ascii=False).encode()
        return decode_answer(await self.http.post(payload))

    async def aclose(self) -> None:
        await self.http.aclose()


def decode_answer(raw: bytes) -> ModelAnswer:
    """The checked message inside a chat-completion response body."""
    message, finish = first_choice(raw)
    content = message.get("content")
    calls = message.get("tool_calls")
    if content is not None and not isinstance(content, str):
        raise BackendFailure(Failure.MALFORMED, "the message content is not text")
    text = (content or "").strip()
    if len(text) > MAX_CONTENT_CHARS:
        raise BackendFailure(Failure.OVERSIZED, f"answer over {MAX_CONTENT_CHARS} characters")
    if "\x00" in text:
        raise BackendFailure(Failure.MALFORMED, "the answer contains a NUL character")
    if calls is None:
        calls = []
    if not isinstance(calls, list):
        raise BackendFailure(Failure.MALFORMED, "tool_calls is not a list")
    if len(calls) > MAX_TOOL_CALLS:
        raise BackendFailure(
            Failure.OVERSIZED, f"{len(calls)} tool calls (at most {MAX_TOOL_CALLS})"
        )
    decoded = tuple(_tool_call(call, i) for i, call in enumerate(calls))
    if not decoded:
        if finish == "length":
            raise BackendFailure(Failure.TRUNCATED, "the model ran out of tokens")
        if not text:
            refused = message.get("refusal")
            raise BackendFailure(Failure.MALFORMED, "refused" if refused else "an empty answer")
    return ModelAnswer(text, decoded)


def _tool_call(call: object, index: int) -> ToolCall:
    if not isinstance(call, dict):
        raise BackendFailure(Failure.MALFORMED, f"tool_calls[{index}] is not an object")
    function = call.get("function")
    call_id = call.get("id")
    if not isinstance(function, dict):
        raise BackendFailure(Failure.MALFORMED, f"tool_calls[{index}] has no function")
    name = function.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_TOOL_NAME_CHARS:
        raise BackendFailure(Failure.MALFORMED, f"tool_calls[{index}] has no usable name")
    if call_id is None:
        call_id = f"call_{index}"  # some local servers leave it out
    if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_CALL_ID_CHARS:
        raise BackendFailure(Failure.MALFORMED, f"tool_calls[{index}] has no usable id")
    raw = function.get("arguments")
    if isinstance(raw, dict):  # a few servers send the object itself
        raw = json.dumps(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raw = "{}"
    if not isinstance(raw, str):
        return ToolCall(call_id, name, None, "the arguments must be a JSON object")
    if len(raw) > MAX_ARGUMENTS_CHARS:
        return ToolCall(
            call_id, name, None, f"the arguments are longer than {MAX_ARGUMENTS_CHARS} characters"
        )
    try:
        arguments = json.loads(raw)
    except ValueError:
        return ToolCall(call_id, name, None, "the arguments are not valid JSON")
    if not isinstance(arguments, dict):
        return ToolCall(call_id, name, None, "the arguments must be a JSON object")
    return ToolCall(call_id, name, arguments)


__all__ = ["ChatModel", "ModelAnswer", "ToolCall", "ToolCallingModel", "decode_answer"]
