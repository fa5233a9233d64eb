"""The control socket survives any request its owner can write: a timeout of
Infinity (valid JSON to Python's reader) is refused in one line, and a request
that fails in a way nobody foresaw is answered with an error while the daemon
goes on."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import trio

from pixie.device.app.control import Live, partial_handler
from pixie.device.node.keyed import Node
from pixie.device.sync import pairing
from pixie.device.sync.driver import SyncEndpoint
from pixie.device.sync.relayclient import RelayAddress


async def ask(live: Live, request: str) -> dict[str, Any]:
    ours, theirs = trio.socket.socketpair()
    handler = partial_handler(live)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(handler, trio.SocketStream(theirs))
        stream = trio.SocketStream(ours)
        await stream.send_all(request.encode() + b"\n")
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                data += chunk
        await stream.aclose()
    answers = [json.loads(line) for line in data.splitlines()]
    return cast(dict[str, Any], answers[-1])


@pytest.mark.parametrize("op", ["invite", "pair", "offload"])
@pytest.mark.parametrize("timeout", ["Infinity", "NaN", "-1", "1e308", "true", '"10"'])
async def test_a_timeout_no_deadline_can_take_is_refused(node: Node, op: str, timeout: str) -> None:
    live = Live(node, endpoint=cast(SyncEndpoint, object()), relay=RelayAddress("127.0.0.1", 1))
    answer = await ask(live, f'{{"op": "{op}", "args": {{"timeout": {timeout}}}}}')
    assert answer["ok"] is False
    assert "timeout must be a number of seconds" in answer["error"]


async def test_a_request_that_fails_unforeseen_is_an_error_not_a_dead_daemon(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise OverflowError("as int(time.time() + inf) once did")

    monkeypatch.setattr(pairing, "new_code", broken)
    live = Live(node, endpoint=cast(SyncEndpoint, object()), relay=RelayAddress("127.0.0.1", 1))
    answer = await ask(live, '{"op": "invite", "args": {"timeout": 60}}')
    assert answer == {"ok": False, "error": "the daemon could not do that (OverflowError)"}
    # ... and the handler answers the next request as ever.
    answer = await ask(live, '{"op": "no such thing"}')
    assert answer == {"ok": False, "error": "unknown control operation 'no such thing'"}
