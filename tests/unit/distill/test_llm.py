"""LLMRouter and the OpenAI-compatible backend, against a real HTTP server on
loopback that answers as scripted: good answers, malformed JSON, schema
violations, truncated and oversized answers, late answers, 5xx, refused
connections. Whatever goes wrong, the answer never gets past the router, the
next backend answers instead, and the log says why without the content."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from pixie.device.distill.contract import (
    MAX_FACTS,
    MAX_LINE_CHARS,
    MAX_LINES,
    MAX_SUMMARY_CHARS,
    MAX_TRANSCRIPT_CHARS,
    ME,
    Fact,
    FactKind,
    Failure,
    Line,
    NoBackendAnswered,
    SourceKind,
    make_request,
)
from pixie.device.distill.factory import llm_settings, router_for
from pixie.device.distill.http import (
    MAX_CONTENT_CHARS,
    MAX_RESPONSE_BYTES,
    ChatCompletionsBackend,
    decode_completion,
)
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.prompt import RESULT_SCHEMA, WIRE_SCHEMA, parse_result, render_prompt
from pixie.device.distill.router import LLMRouter
from pixie.device.errors import BadInput
from pixie.device.store import config
from tests.support.llmserver import Reply, ScriptedLLMServer, refused_url

DAY = 86_400_000_000
START = 1_700_000_000_000_000

REQUEST = make_request(
    SourceKind.CONVERSATION,
    "conversation with Ada Lovelace (one-to-one)",
    "Ada Lovelace",
    ("Ada Lovelace",),
    [
        Line(START, "Ada Lovelace", False, "Lyon marathon training is going ok, 4 weeks to go"),
        Line(START + DAY, ME, True, "I live in Porto now! come visit"),
    ],
)
GOOD = {
    "summary": "Ada is training.",
    "person": "Ada runs.",
    "facts": [],
    "tags": ["running"],
    "person_facts": [],
    "open_threads": [],
    "appointments": [],
    "others": [],
}


def http(url: str, **kw: object) -> ChatCompletionsBackend:
    options: dict[str, object] = {"timeout": 10.0, "backoff": 0.0}
    options.update(kw)
    return ChatCompletionsBackend(url, "test-model", **options)  # type: ignore[arg-type]


Make = Callable[..., LLMRouter]


@pytest.fixture
async def router() -> AsyncIterator[Make]:
    """Routers of the given backends, then the offline distiller; closed after."""
    made: list[LLMRouter] = []

    def make(*backends: object, offline: bool = True) -> LLMRouter:
        tail = (OfflineDistiller(),) if offline else ()
        made.append(LLMRouter((*backends, *tail)))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for r in made:
        await r.aclose()


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as s:
        yield s


async def test_a_good_answer_is_used_and_the_request_is_openai_shaped(
    server: ScriptedLLMServer,
    router: Make,
) -> None:
    server.then(Reply.answer(GOOD))
    r = router(http(server.url))
    routed = await r.distill(REQUEST)
    assert (routed.backend, routed.failures) == ("http", ())
    assert routed.result.summary == "Ada is training." and routed.result.tags == ("running",)
    (req,) = server.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.body["model"] == "test-model"
    assert req.body["temperature"] == 0 and req.body["stream"] is False
    assert req.body["response_format"]["type"] == "json_schema"
    sent = req.body["response_format"]["json_schema"]
    assert sent["strict"] is True and sent["schema"] == WIRE_SCHEMA
    assert WIRE_SCHEMA["required"] == RESULT_SCHEMA["required"] == list(GOOD)
    assert "maxLength" not in json.dumps(WIRE_SCHEMA)  # bounds are checked here instead
    assert [m["role"] for m in req.body["messages"]] == ["system", "user"]
    assert "authorization" not in req.headers  # no key configured, none sent
    assert "Person to describe: Ada Lovelace" in req.message("user")
    assert "Me: I live in Porto now! come visit" in req.message("user")
    assert r.calls == {"http": 1}


async def test_the_api_key_goes_in_a_bearer_header(server: ScriptedLLMServer, router: Make) -> None:
    await router(http(server.url, api_key="sk-test-123")).distill(REQUEST)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-123"


CANARY = "CANARYxyzzy"
VALID = {"summary": CANARY, "person": None, "facts": [], "tags": []}

BAD_ANSWERS = [
    (Reply.text(f"{CANARY} is not JSON {{"), Failure.MALFORMED),
    (Reply.text('{"summary": "' + CANARY + " and then the answer stops"), Failure.MALFORMED),
    (Reply.raw(f"<html>{CANARY}</html>".encode()), Failure.MALFORMED),
    (Reply.raw(b'{"choices": []}'), Failure.MALFORMED),
    (Reply.raw(b'{"choices": [{"message": {"role": "assistant", "content": null}}]}'), None),
    (Reply.answer({"summary": CANARY, "person": None, "facts": []}), Failure.SCHEMA),
    (Reply.answer({**VALID, "notes": CANARY}), Failure.SCHEMA),
    (Reply.answer({**VALID, "summary": 5}), Failure.SCHEMA),
    (Reply.answer({**VALID, "summary": "  "}), Failure.SCHEMA),
    (Reply.answer({**VALID, "summary": CANARY * 200}), Failure.SCHEMA),
    (Reply.answer({**VALID, "person": ["Ada"]}), Failure.SCHEMA),
    (Reply.answer({**VALID, "facts": [CANARY] * (MAX_FACTS + 1)}), Failure.SCHEMA),
    (Reply.answer({**VALID, "facts": [f"two\n{CANARY}"]}), Failure.SCHEMA),
    (Reply.answer({**VALID, "facts": [7]}), Failure.SCHEMA),
    (Reply.answer({**VALID, "tags": [f"#{CANARY}!"]}), Failure.SCHEMA),
    (Reply.answer({**VALID, "tags": "travel"}), Failure.SCHEMA),
    (Reply.answer([CANARY]), Failure.SCHEMA),
    (Reply.answer(VALID, finish_reason="length"), Failure.TRUNCATED),
    (Reply.raw(CANARY.encode() * (MAX_RESPONSE_BYTES // len(CANARY) + 1)), Failure.OVERSIZED),
    (Reply.text(CANARY * (MAX_CONTENT_CHARS // len(CANARY) + 1)), Failure.OVERSIZED),
    (Reply.error(400), Failure.STATUS),
    (Reply.error(404), Failure.STATUS),
]


@pytest.mark.parametrize(("reply", "reason"), BAD_ANSWERS)
async def test_a_bad_answer_falls_back_and_is_logged_without_content(
    server: ScriptedLLMServer,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    reason: Failure | None,
    router: Make,
) -> None:
    server.then(reply)
    caplog.set_level(logging.INFO)
    routed = await router(http(server.url)).distill(REQUEST)
    assert routed.backend == "offline"
    assert routed.failures == (("http", reason or Failure.MALFORMED),)
    assert CANARY not in routed.result.summary and CANARY not in str(routed.result.facts)
    assert len(server.requests) == 1  # not worth a retry
    assert "backend http gave no usable answer" in caplog.text
    assert (reason or Failure.MALFORMED).value in caplog.text
    assert CANARY not in caplog.text


async def test_5xx_is_retried_a_bounded_number_of_times(
    server: ScriptedLLMServer, router: Make
) -> None:
    server.then(Reply.error(500), Reply.error(503), Reply.error(502), Reply.answer(GOOD))
    backend = http(server.url, retries=2)
    routed = await router(backend).distill(REQUEST)
    assert routed.backend == "offline"
    assert routed.failures == (("http", Failure.STATUS),)
    assert len(server.requests) == 3 == backend.requests  # one try and two retries, no more


async def test_a_transient_error_then_a_good_answer(
    server: ScriptedLLMServer, router: Make
) -> None:
    server.then(Reply.error(429), Reply.answer(GOOD))
    routed = await router(http(server.url)).distill(REQUEST)
    assert (routed.backend, routed.failures) == ("http", ())
    assert len(server.requests) == 2


@pytest.mark.parametrize("reply", [Reply.late(), Reply(hold_after_headers=True)])
async def test_a_late_answer_falls_back_without_a_retry(
    server: ScriptedLLMServer,
    reply: Reply,
    router: Make,
) -> None:
    server.then(reply)
    backend = http(server.url, timeout=0.3)
    routed = await router(backend).distill(REQUEST)
    assert routed.backend == "offline"
    assert routed.failures == (("http", Failure.LATE),)
    assert backend.requests == 1


async def test_a_refused_connection_falls_back(router: Make) -> None:
    backend = http(refused_url(), retries=1)
    routed = await router(backend).distill(REQUEST)
    assert routed.backend == "offline"
    assert routed.failures == (("http", Failure.UNREACHABLE),)
    assert backend.requests == 2


async def test_backends_are_asked_in_order(server: ScriptedLLMServer, router: Make) -> None:
    first = http(refused_url(), name="first", retries=0)
    second = http(server.url, name="second")
    routed = await router(first, second).distill(REQUEST)
    assert routed.backend == "second"
    assert routed.failures == (("first", Failure.UNREACHABLE),)

    server.then(Reply.text("nope"))
    routed = await router(first, second).distill(REQUEST)
    assert routed.backend == "offline"
    assert routed.failures == (("first", Failure.UNREACHABLE), ("second", Failure.MALFORMED))


async def test_a_backend_that_keeps_failing_sits_out_the_rest_of_the_pass(
    server: ScriptedLLMServer,
    router: Make,
) -> None:
    dead = http(refused_url(), name="dead", retries=0)
    r = router(dead)
    for _ in range(5):
        assert (await r.distill(REQUEST)).backend == "offline"
    assert r.calls == {"dead": 3, "offline": 5}
    r.new_pass()  # a new pass gives it another chance
    await r.distill(REQUEST)
    assert r.calls == {"dead": 1, "offline": 1}

    server.then(Reply.error(401))  # will not change this pass: benched at once
    denied = http(server.url, name="denied")
    r = router(denied)
    await r.distill(REQUEST)
    await r.distill(REQUEST)
    assert r.calls == {"denied": 1, "offline": 2}
    assert len(server.requests) == 1


async def test_when_every_backend_fails_the_router_says_so(router: Make) -> None:
    only = router(http(refused_url(), retries=0), offline=False)
    with pytest.raises(NoBackendAnswered, match="http: unreachable"):
        await only.distill(REQUEST)


def test_valid_answers_are_normalised() -> None:
    result = parse_result(
        {
            "summary": "  Ada is training.  ",
            "person": "",
            "facts": ["Lives in Porto", "lives in porto.", "Works at Northwind Labs"],
            "tags": ["Travel", "travel", "long runs"],
        }
    )
    assert result.summary == "Ada is training."
    assert result.person is None
    # Bare strings (the older four-key shape) are facts of the kind their
    # wording suggests, undated.
    assert result.facts == (
        Fact(FactKind.HOME, "Lives in Porto"),
        Fact(FactKind.WORK, "Works at Northwind Labs"),
    )
    assert result.tags == ("travel", "long runs")
    fenced = b'{"choices": [{"message": {"content": "```json\\n{\\"a\\": 1}\\n```"}}]}'
    assert decode_completion(fenced) == {"a": 1}
    assert len(parse_result({**GOOD, "summary": "x" * MAX_SUMMARY_CHARS}).summary) == 1500


def _lines(n: int, chars: int = 20) -> list[Line]:
    return [Line(START + i, "Ada", False, f"M{i:03d} " + "x" * chars) for i in range(n)]


def test_a_request_holds_the_newest_lines_within_budget() -> None:
    req = make_request(SourceKind.CONVERSATION, "t", "Ada", ("Ada",), _lines(100))
    assert len(req.lines) == MAX_LINES
    assert [line.text[:4] for line in req.lines] == [f"M{i:03d}" for i in range(60, 100)]

    long = make_request(SourceKind.CONVERSATION, "t", "Ada", ("Ada",), _lines(40, 5_000))
    assert all(len(line.text) <= MAX_LINE_CHARS for line in long.lines)
    assert sum(len(line.text) for line in long.lines) <= MAX_TRANSCRIPT_CHARS
    assert long.lines[-1].text.startswith("M039")  # the newest survive the cut

    post = make_request(SourceKind.POST, "p", None, ("Ada",), _lines(60))
    assert post.lines[0].text.startswith("M000")  # the post itself stays
    assert [line.text[:4] for line in post.lines[1:]] == [f"M{i:03d}" for i in range(21, 60)]

    call = [Line(START, "Ada", False, "Me: hi\n" + "Ada: words " * 5_000, "call")]
    assert len(make_request(SourceKind.CALL, "c", None, ("Ada",), call).lines[0].text) <= (
        MAX_TRANSCRIPT_CHARS
    )


def test_the_prompt_is_the_instructions_and_the_request_only() -> None:
    system, user = render_prompt(REQUEST)
    assert "JSON" in system and '"facts"' in system
    assert user.splitlines() == [
        "Source: conversation with Ada Lovelace (one-to-one)",
        "Person to describe: Ada Lovelace",
        "The 2 most recent messages, oldest first:",
        "[2023-11-14 22:13] Ada Lovelace: Lyon marathon training is going ok, 4 weeks to go",
        "[2023-11-15 22:13] Me: I live in Porto now! come visit",
    ]


# -- settings ------------------------------------------------------------------------


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("PIXIE_LLM_URL", "PIXIE_LLM_MODEL", "PIXIE_LLM_TIMEOUT", "PIXIE_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "config.toml"


def test_settings_flags_beat_environment_beat_file(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert llm_settings(cfg).url is None  # nothing set: the built-in distiller alone
    assert router_for(llm_settings(cfg)).names == ("offline",)
    cfg.write_text('[llm]\nurl = "http://127.0.0.1:1/v1"\nmodel = "file-model"\ntimeout = 7\n')
    s = llm_settings(cfg)
    assert (s.url, s.model, s.timeout) == ("http://127.0.0.1:1/v1", "file-model", 7.0)
    assert router_for(s).names == ("http", "offline")
    assert router_for(s, offline_only=True).names == ("offline",)
    monkeypatch.setenv("PIXIE_LLM_MODEL", "env-model")
    monkeypatch.setenv("PIXIE_LLM_TIMEOUT", "2.5")
    s = llm_settings(cfg)
    assert (s.model, s.timeout) == ("env-model", 2.5)
    s = llm_settings(cfg, {"llm_model": "flag-model", "llm_url": "https://example.test/v1/"})
    assert (s.url, s.model, s.timeout) == ("https://example.test/v1", "flag-model", 2.5)


def test_the_api_key_comes_from_the_environment_only(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg.write_text('[llm]\nurl = "https://example.test/v1"\nmodel = "m"\n')
    assert llm_settings(cfg).api_key is None
    monkeypatch.setenv(config.LLM_API_KEY_ENV, "sk-from-env")
    settings = llm_settings(cfg)
    assert settings.api_key == "sk-from-env"
    assert "sk-from-env" not in repr(settings)
    cfg.write_text('[llm]\nurl = "https://example.test/v1"\nmodel = "m"\napi_key = "sk-no"\n')
    with pytest.raises(BadInput, match="secrets never go in the config file") as info:
        llm_settings(cfg)
    assert "sk-no" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[llm]\nurl = "ftp://example.test"\nmodel = "m"\n', "not an http:// or https://"),
        ('[llm]\nurl = "http://u:pw@example.test/v1"\nmodel = "m"\n', "must not carry"),
        ('[llm]\nurl = "http://example.test/v1?x=1"\nmodel = "m"\n', "query or fragment"),
        ('[llm]\nurl = "http://example.test:99999/v1"\nmodel = "m"\n', "bad port"),
        ('[llm]\nurl = "http://example.test/v1"\n', "no model"),
        ('[llm]\nurl = 5\nmodel = "m"\n', "non-empty string"),
        ('[llm]\nmodel = ""\n', "1 to 200"),
        ("[llm]\ntimeout = 0\n", "above 0"),
        ("[llm]\ntimeout = 9999\n", "at most 600"),
        ("[llm]\ntimeout = true\n", "number of seconds"),
        ('[llm]\ntimeout = "soon"\n', "number of seconds"),
        ('[llm]\nurll = "http://x"\n', "unknown setting [llm] urll"),
        ('llm = "http://x"\n', "must be a table"),
        ("[llm\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_refused_with_one_clear_line(cfg: Path, text: str, error: str) -> None:
    cfg.write_text(text)
    with pytest.raises(BadInput, match=error.replace("?", r"\?").replace("[", r"\[")) as info:
        llm_settings(cfg)
    assert "\n" not in str(info.value)
    assert "pw" not in str(info.value)


def test_an_api_key_travels_only_over_https_or_to_this_machine(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.LLM_API_KEY_ENV, "sk-x")
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "https://api.test/v1"):
        assert llm_settings(cfg, {"llm_url": url, "llm_model": "m"}).url == url
    with pytest.raises(BadInput, match="over plain http"):
        llm_settings(cfg, {"llm_url": "http://192.0.2.7/v1", "llm_model": "m"})
