"""A scripted OpenAI-compatible server on loopback, for tests that talk to a model.

A real HTTP server (the standard library's, in a thread) on 127.0.0.1 and a
port the OS picks. It answers ``POST /v1/chat/completions`` with whatever the
test scripted, records every request it got (path, headers, decoded JSON
body), and can misbehave on purpose: a status code, a body that is not JSON,
an answer that breaks the schema, a truncated answer, an oversized one, or no
answer at all until the test ends (a late answer: the client's deadline has to
fire). `refused_url` gives an address where nothing listens.

    with ScriptedLLMServer() as server:
        server.then(Reply.status(500), Reply.answer({...}))
        ... point the client at server.url ...
        assert len(server.requests) == 2

Replies queued with `then` are used in order; after them, ``default`` answers
(by default a valid distillation that names no person unless asked to).

For the chat loop, a reply can also be a model asking for tools
(``Reply.calls(("grep_memory", {"query": "lyon"}))``, arguments given as an
object or as the raw text a model wrote), and any reply can be sent after a
scripted wait (``reply.after(0.05)``). `Recorded.transcript` is everything a
chat request showed the model; `Recorded.tool_names` the tools it offered.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (past its deadline, or refusing an
        # oversized body) is part of what the tests script, not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON, or None if the body was not JSON

    def message(self, role: str) -> str:
        """The text of the first chat message with this role ("" if none)."""
        for m in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            if m.get("role") == role:
                return str(m.get("content", ""))
        return ""

    @property
    def prompt(self) -> str:
        """Everything the model was shown, system and user messages together."""
        return self.message("system") + "\n" + self.message("user")

    @property
    def transcript(self) -> str:
        """Every message of a chat request as the model was sent it: each
        message's text and the arguments of each tool call, in order."""
        out: list[str] = []
        for m in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            out.append(str(m.get("content") or ""))
            for call in m.get("tool_calls") or []:
                out.append(str(call.get("function", {}).get("arguments", "")))
        return "\n".join(out)

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the request offered (none: tools were off)."""
        tools = self.body.get("tools", []) if isinstance(self.body, dict) else []
        return [t["function"]["name"] for t in tools]


@dataclass(frozen=True)
class Reply:
    """What the server does with one request."""

    status: int = 200
    body: bytes | None = None  # sent as is when given
    content: str | None = None  # the assistant message, wrapped in a chat completion
    finish_reason: str = "stop"
    hold: bool = False  # answer nothing until the server stops
    hold_after_headers: bool = False  # send the headers, then nothing more
    tool_calls: tuple[tuple[str, object], ...] = ()  # (name, arguments) the model calls
    delay: float = 0.0  # seconds the model "thinks" before answering

    @classmethod
    def calls(cls, *calls: tuple[str, object], content: str | None = None) -> Reply:
        """A chat completion asking for tool calls: (name, arguments) pairs;
        arguments that are not a string are sent as their JSON text."""
        return cls(content=content, tool_calls=calls, finish_reason="tool_calls")

    def after(self, seconds: float) -> Reply:
        """This reply, sent ``seconds`` after the request arrives."""
        return replace(self, delay=seconds)

    @classmethod
    def answer(cls, obj: object, *, finish_reason: str = "stop") -> Reply:
        """A chat completion whose message is ``obj`` as JSON."""
        return cls(content=json.dumps(obj), finish_reason=finish_reason)

    @classmethod
    def text(cls, content: str) -> Reply:
        """A chat completion whose message is ``content``, verbatim."""
        return cls(content=content)

    @classmethod
    def error(cls, status: int) -> Reply:
        return cls(status=status, body=json.dumps({"error": {"message": "scripted"}}).encode())

    @classmethod
    def raw(cls, body: bytes) -> Reply:
        return cls(body=body)

    @classmethod
    def late(cls) -> Reply:
        return cls(hold=True)

    def encode(self) -> bytes:
        if self.body is not None:
            return self.body
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (name, args) in enumerate(self.tool_calls)
            ]
        return json.dumps(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "model": "scripted",
                "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            }
        ).encode()


def good_answer(request: Recorded) -> Reply:
    """A valid distillation: a person summary only when one is asked for."""
    wants_person = "Person to describe: none" not in request.message("user")
    return Reply.answer(
        {
            "summary": "A scripted summary.",
            "person": "A scripted person summary." if wants_person else None,
            "facts": ["Scripted fact"],
            "tags": ["scripted"],
        }
    )


@dataclass
class ScriptedLLMServer:
    default: Callable[[Recorded], Reply] = good_answer
    requests: list[Recorded] = field(default_factory=list)
    _queue: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API base, as PIXIE_LLM_URL takes it."""
        assert self._server is not None, "start the server first (use it as a context manager)"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def then(self, *replies: Reply) -> ScriptedLLMServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        return self.default(request)

    def __enter__(self) -> ScriptedLLMServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without this, Nagle's
            # algorithm and a delayed ACK add ~40 ms to every answer.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                request = Recorded(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                reply = owner._next(request)
                if self.path != "/v1/chat/completions":
                    reply = Reply.error(404)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.hold:
                    owner._release.wait()
                    self.close_connection = True
                    return
                payload = reply.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    if reply.hold_after_headers:
                        self.wfile.flush()
                        owner._release.wait()
                        self.close_connection = True
                        return
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test reads `requests`

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.01,), name="llmserver", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release.set()  # let held requests go
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def refused_url() -> str:
    """An API base on loopback where nothing listens: connecting is refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/v1"
