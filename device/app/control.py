"""The control socket: commands that need the relay go through a running daemon.

A peer has one identity, and the relay keeps one connection per identity: a
`pixie sync` or `pixie offload` opening its own connection while `pixie run`
holds one would knock the daemon off (and the daemon, reconnecting, would
knock the command off). So `pixie run` listens on a Unix socket in the data dir
(``control.sock``, mode 0600), and those commands, when they find a daemon
there, ask it to do the work over its connection instead.

The protocol is one JSON line each way: ``{"op": ..., "args": {...}}`` and
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}`` (a fetch or
recall that got no verified body adds its typed ``outcome`` and ``detail``, and
the command raises `OffloadFailed` again from them); before its
answer, an operation may send ``{"note": {...}}`` lines (`pixie invite` prints
the code the daemon made that way). Requests are bounded (64 KiB) and every
wait has a deadline. Pairing (`invite`, `pair`) goes through the daemon too,
over its connection, and ends when the command hangs up (Ctrl-C). A socket
file that nothing answers on (a daemon killed with -9) is stale: the next
daemon replaces it and commands ignore it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from pixie.device.errors import BadInput, DeviceError
from pixie.device.node.keyed import Node
from pixie.device.sync import pairing
from pixie.device.sync.driver import SyncEndpoint
from pixie.device.sync.offload import NoteOffloadService, OffloadFailed, holder_of
from pixie.device.sync.peers import Incoming
from pixie.device.sync.relayclient import RelayAddress
from pixie.protocol.offload import Outcome, Verdict
from pixie.protocol.peerwire import (
    FetchPart,
    HolderRefusal,
    OffloadAck,
    PeerMessage,
    Released,
)

log = logging.getLogger("pixie.control")

CONTROL_NAME = "control.sock"
MAX_REQUEST_BYTES = 64 * 1024
MAX_TIMEOUT = 7 * 24 * 3600.0  # a week, as the command line allows
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_PATH_BYTES = 100  # AF_UNIX paths are limited (108 bytes on Linux, 104 on macOS)
REPLY_QUEUE = 256
# Operations that wait on a person (the other peer's `pixie pair`): they end
# when the command that asked for them goes away.
PAIRING_OPS = ("invite", "pair")
Note = Callable[[dict[str, Any]], Awaitable[None]]


class DaemonBusy(DeviceError):
    """Another `pixie run` already serves this data dir."""


def control_path(data_dir: Path) -> Path:
    return data_dir / CONTROL_NAME


@dataclass
class Live:
    """What a running daemon lends its control socket: the current endpoint
    (None while it reconnects), and the holder replies the endpoint routes."""

    node: Node
    endpoint: SyncEndpoint | None = None
    relay: RelayAddress | None = None  # the relay the daemon keeps a connection to
    lock: trio.Lock = field(default_factory=trio.Lock)
    replies: tuple[trio.MemorySendChannel[Incoming], trio.MemoryReceiveChannel[Incoming]] = field(
        default_factory=lambda: trio.open_memory_channel[Incoming](REPLY_QUEUE)
    )


class HolderReplies:
    """A `PeerService` that hands the holder's answers to the control socket's
    offload service (the endpoint reads every envelope; someone must route them)."""

    def __init__(self, live: Live) -> None:
        self.live = live

    def wants(self, message: PeerMessage) -> bool:
        return isinstance(message, OffloadAck | HolderRefusal | FetchPart | Released)

    async def handle(
        self,
        incoming: Incoming,
        reply: Callable[[bytes, PeerMessage], Awaitable[int]],
        call: Callable[..., Awaitable[Any]],
    ) -> None:
        with contextlib.suppress(trio.WouldBlock):
            self.live.replies[0].send_nowait(incoming)


# -- the daemon's side ---------------------------------------------------------------------


async def serve_control(
    live: Live, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Listen on the data dir's control socket until cancelled."""
    path = control_path(live.node.data.path)
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        log.warning(
            "data dir path too long for a control socket; commands will not use this daemon"
        )
        task_status.started()
        await trio.sleep_forever()
    if _answers(path):
        raise DaemonBusy(f"another `pixie run` already serves {live.node.data.path}")
    path.unlink(missing_ok=True)  # stale: nothing answers on it
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old_mask)
    sock.listen(16)
    listener = trio.SocketListener(sock)
    try:
        task_status.started()
        await trio.serve_listeners(partial_handler(live), [listener])
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def partial_handler(live: Live) -> Callable[[trio.SocketStream], Awaitable[None]]:
    async def handler(stream: trio.SocketStream) -> None:
        async def note(payload: dict[str, Any]) -> None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(json.dumps({"note": payload}).encode() + b"\n")

        async def answer_to(request: Any) -> dict[str, Any]:
            try:
                return await _dispatch(live, request, note)
            except (trio.TooSlowError, ValueError) as exc:
                return {"ok": False, "error": f"bad control request: {exc or 'too slow'}"}

        async with stream:
            answer: dict[str, Any] | None = None
            try:
                with trio.fail_after(10):
                    request = await _read_line(stream, MAX_REQUEST_BYTES)
            except (trio.TooSlowError, ValueError) as exc:
                answer = {"ok": False, "error": f"bad control request: {exc or 'too slow'}"}
            else:
                if isinstance(request, dict) and request.get("op") in PAIRING_OPS:
                    answers: list[dict[str, Any]] = []  # none if the command went away
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_until_hangup, stream, nursery.cancel_scope)
                        answers.append(await answer_to(request))
                        nursery.cancel_scope.cancel()
                    answer = answers[0] if answers else None
                else:
                    answer = await answer_to(request)
            if answer is None:
                return  # the command went away, and its operation with it
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(json.dumps(answer).encode() + b"\n")

    return handler


async def _until_hangup(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` when the command closes its end (it sends nothing more)."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while await stream.receive_some(1024):
            pass
    scope.cancel()


async def _read_line(stream: trio.SocketStream, limit: int) -> Any:
    data = bytearray()
    while b"\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("request too large")
    return json.loads(data.split(b"\n", 1)[0])


async def _dispatch(live: Live, request: Any, note: Note) -> dict[str, Any]:
    if not isinstance(request, dict) or not isinstance(request.get("args", {}), dict):
        return {"ok": False, "error": "bad control request"}
    op, args = request.get("op"), request.get("args", {})
    endpoint = live.endpoint
    if endpoint is None:
        return {"ok": False, "error": "the daemon is not connected to the relay right now"}
    try:
        if op in PAIRING_OPS:
            return await _pairing(live, endpoint, op, args, note)
        if op == "sync":
            siblings = await trio.to_thread.run_sync(live.node.siblings.all)
            reports = [await endpoint.sync_with(s.key) for s in siblings]
            return {"ok": True, "result": [r.as_json() for r in reports]}
        if op in ("offload", "fetch", "recall"):
            async with live.lock:
                service = await _offload_service(live, endpoint, _timeout(args, 10.0))
                note_id = str(args.get("note_id", ""))
                if op == "offload":
                    return {"ok": True, "result": (await service.offload(note_id)).as_json()}
                if op == "fetch":
                    return {"ok": True, "result": await service.fetch(note_id)}
                return {"ok": True, "result": await service.recall(note_id)}
    except OffloadFailed as exc:
        detail = exc.verdict.detail
        return {"ok": False, "error": str(exc), "outcome": exc.outcome.value, "detail": detail}
    except DeviceError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:
        # One request that goes wrong in a way nobody foresaw must not stop
        # the daemon: the command hears of it, the daemon goes on.
        log.warning("control request %s failed: %s", _op_name(op), type(exc).__name__)
        return {"ok": False, "error": f"the daemon could not do that ({type(exc).__name__})"}
    return {"ok": False, "error": f"unknown control operation {_op_name(op)}"}


def _op_name(op: object) -> str:
    return repr(op)[:40] if isinstance(op, str) else type(op).__name__


def _timeout(args: dict[str, Any], default: float) -> float:
    """A request's timeout: a finite number of seconds above 0 and at most a
    week (JSON from the socket may say Infinity or NaN, which the code, its
    expiry and every deadline below could not take)."""
    timeout = args.get("timeout", default)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise BadInput(
            f"bad control request: timeout must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT:g}"
        )
    return float(timeout)


async def _pairing(
    live: Live, endpoint: SyncEndpoint, op: str, args: dict[str, Any], note: Note
) -> dict[str, Any]:
    """Invite, or pair, over the daemon's own connection."""
    timeout = _timeout(args, pairing.DEFAULT_TIMEOUT)
    if op == "invite":
        relay = live.relay
        asked = args.get("relay")
        if asked is not None:
            # --relay: the invite goes through the daemon only if it holds a
            # connection to one of those relays (the code then names them all);
            # else the command invites over a connection of its own.
            named = RelayAddress.parse(str(asked))
            if relay is None or not set(relay.each()) & set(named.each()):
                return {"ok": True, "result": None}
            relay = named
        if relay is None:
            raise BadInput("the daemon is not connected to the relay right now")
        node = live.node
        code = pairing.new_code(node.public_key(), relay, timeout, node.clock, node.entropy)
        async with endpoint.pairing() as desk:
            await note({"code": code.encode()})
            info = await pairing.await_joiner(live.node, code, desk, timeout=timeout)
        return {"ok": True, "result": info.as_json()}
    now = live.node.clock.now_us() / 1_000_000
    invite = pairing.InviteCode.parse(str(args.get("code", "")), now=now)
    if live.relay is None or str(invite.relay) != str(live.relay):
        # Another relay: the command pairs over a connection of its own, which
        # knocks no daemon off (the relay keeps one connection per key).
        return {"ok": True, "result": None}
    async with endpoint.pairing() as desk:
        info = await pairing.join(live.node, invite, desk, timeout=timeout)
    return {"ok": True, "result": info.as_json()}


async def _offload_service(
    live: Live, endpoint: SyncEndpoint, timeout: float
) -> NoteOffloadService:
    holder = await trio.to_thread.run_sync(holder_of, live.node)
    receive = live.replies[1]
    while True:  # answers to requests that already ended are of no use now
        try:
            receive.receive_nowait()
        except trio.WouldBlock:
            break
    return NoteOffloadService(
        live.node,
        holder,
        endpoint.link.send,
        receive.receive,
        timeout=timeout,
        lane=endpoint.lane,
    )


def _answers(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


# -- the command's side --------------------------------------------------------------------


def call(
    data_dir: Path,
    op: str,
    args: dict[str, Any],
    timeout: float,
    *,
    on_note: Callable[[dict[str, Any]], None] | None = None,
) -> Any | None:
    """Ask the daemon serving ``data_dir`` to run ``op``: its result, or None
    when no daemon answers there (the caller then does the work itself). An
    error the daemon reports is raised as `BadInput`. ``on_note`` hears the
    notes the operation sends before its answer."""
    path = control_path(data_dir)
    if not path.exists() or len(os.fsencode(path)) > MAX_PATH_BYTES:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(str(path))
        except OSError:
            return None  # stale: a daemon that died without removing it
        sock.settimeout(timeout)
        try:
            sock.sendall(json.dumps({"op": op, "args": args}).encode() + b"\n")
            data = bytearray()
            while True:
                while b"\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    if len(data) > MAX_RESPONSE_BYTES:
                        raise BadInput("the daemon's answer is too large")
                line, _, rest = bytes(data).partition(b"\n")
                try:
                    answer = json.loads(line)
                except ValueError:
                    raise BadInput("the running daemon sent an unreadable answer") from None
                if not (isinstance(answer, dict) and isinstance(answer.get("note"), dict)):
                    break
                if on_note is not None:
                    on_note(answer["note"])
                data = bytearray(rest)
        except TimeoutError:
            raise BadInput(f"the running daemon did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise BadInput(f"lost the running daemon: {exc}") from None
    if not isinstance(answer, dict) or not answer.get("ok"):
        error = answer.get("error") if isinstance(answer, dict) else None
        failed = _offload_failed(answer)
        if failed is not None:
            raise failed
        raise BadInput(str(error or "the running daemon refused the request"))
    return answer.get("result")


def _offload_failed(answer: Any) -> OffloadFailed | None:
    """The typed failure of a fetch or recall the daemon reported, if it was one."""
    if not isinstance(answer, dict):
        return None
    outcome, detail = answer.get("outcome"), answer.get("detail")
    if not isinstance(outcome, str) or not isinstance(detail, str):
        return None
    try:
        return OffloadFailed(Verdict(Outcome(outcome), detail))
    except ValueError:
        return None


__all__ = ["CONTROL_NAME", "DaemonBusy", "HolderReplies", "Live", "call", "serve_control"]
