"""A real relay behind a recording proxy, and nodes paired through it."""

from __future__ import annotations

from pathlib import Path

import trio

from pixie.device.node.keyed import Node
from pixie.device.store.provision import create_data_dir
from pixie.device.sync.pairing import invite, pair
from pixie.device.sync.relayclient import RelayAddress
from pixie.relay.server import RelayConfig, serve_relay


class Recorder:
    def __init__(self) -> None:
        self.seen = bytearray()


async def pump(src: trio.abc.Stream, dst: trio.abc.Stream, rec: Recorder) -> None:
    try:
        while data := await src.receive_some(65536):
            rec.seen += data
            await dst.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(dst)


async def proxy(relay_port: int, rec: Recorder, task_status: trio.TaskStatus[int]) -> None:
    async def handle(client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream("127.0.0.1", relay_port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, upstream, rec)
            nursery.start_soon(pump, upstream, client, rec)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def recorded_relay(nursery: trio.Nursery) -> tuple[RelayAddress, Recorder]:
    """A relay behind a recording proxy: the address to use and what crossed it."""
    relay_port = await nursery.start(serve_relay, RelayConfig(port=0))
    rec = Recorder()
    proxy_port = await nursery.start(proxy, relay_port, rec)
    return RelayAddress("127.0.0.1", proxy_port), rec


def make_node(tmp_path: Path, name: str, role: str) -> Node:
    create_data_dir(tmp_path / name, name=name, role=role)
    return Node.open(tmp_path / name)


async def pair_up(
    phone: Node, mac: Node, relay: RelayAddress, code_hook: list[str] | None = None
) -> None:
    codes: trio.MemorySendChannel[str]
    codes, code_rx = trio.open_memory_channel[str](1)
    async with trio.open_nursery() as nursery:

        async def joiner() -> None:
            code = await code_rx.receive()
            if code_hook is not None:
                code_hook.append(code)
            await pair(mac, code, timeout=10)

        nursery.start_soon(joiner)
        await invite(phone, relay, timeout=10, show_code=codes.send_nowait)
