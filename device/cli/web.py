"""``pixie web``: the Notebook, the memory log and sync status in a browser.

The page opens the data dir on the clear side only (`ClearNode.open_clear`):
it never holds a key, and the sealed zone is out of its reach. What needs the
identity key, opening an offloaded note, goes to the running `pixie run`
daemon over its control socket, as `pixie fetch` and `pixie recall` do.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import webbrowser
from pathlib import Path
from typing import Any

import trio

from pixie.device.app import control
from pixie.device.cli.common import data_path, seconds_flag
from pixie.device.errors import BadInput
from pixie.device.node.clear import ClearNode
from pixie.device.sync.lastsync import last_syncs_in
from pixie.device.sync.offload import ACK_TIMEOUT
from pixie.device.web.offloaded import NO_DAEMON, HomebaseUnreachable
from pixie.device.web.server import (
    DEFAULT_LISTEN,
    is_loopback,
    parse_listen,
    serve_page,
    url_host,
)


class DaemonOffload:
    """Fetch and recall through the `pixie run` serving ``data_dir``."""

    def __init__(self, data_dir: Path, timeout: float) -> None:
        self.data_dir = data_dir
        self.timeout = timeout

    def _ask(self, op: str, note_id: str) -> Any:
        args = {"note_id": note_id, "timeout": self.timeout}
        answer = control.call(self.data_dir, op, args, self.timeout + 5)
        if answer is None:
            raise HomebaseUnreachable(NO_DAEMON)
        return answer

    def fetch(self, note_id: str) -> str:
        return str(self._ask("fetch", note_id))

    def recall(self, note_id: str) -> bool:
        return bool(self._ask("recall", note_id))


def cmd_web(args: argparse.Namespace) -> int:
    # The app (Starlette, templates, the HTTP server) is loaded here, not when
    # any other `pixie` command starts.
    from pixie.device.web.app import WebConfig, create_app
    from pixie.device.web.security import TOKEN_PARAM, Secrets

    host, port = parse_listen(args.listen)
    if not is_loopback(host) and not args.allow_remote:
        raise BadInput(
            f"--listen {args.listen} is not a loopback address: the page is plain HTTP, so "
            "its token and your notes would cross the network readable; pass --allow-remote "
            "to do it anyway"
        )
    path = data_path(args)
    tokens = Secrets(access=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32))
    with ClearNode.open_clear(path) as node:
        config = WebConfig(
            secrets=tokens,
            offload=DaemonOffload(node.data.path, args.timeout),
            last_syncs=lambda: last_syncs_in(node.db),
            loopback_only=is_loopback(host),
        )
        app = create_app(node, config)
        if not is_loopback(host):
            print("pixie web: warning: serving plain HTTP beyond this machine", file=sys.stderr)

        async def ready(bound_host: str, bound_port: int) -> None:
            # A page bound to every address is still opened here through loopback.
            anywhere = bound_host in ("0.0.0.0", "::", "localhost")  # noqa: S104
            shown = "127.0.0.1" if anywhere else bound_host
            url = f"http://{url_host(shown)}:{bound_port}/?{TOKEN_PARAM}={tokens.access}"
            print(f"pixie web: the Notebook of {path} is at", file=sys.stderr)
            print(url, flush=True)
            print("pixie web: Ctrl-C stops it", file=sys.stderr, flush=True)
            if args.open:
                await trio.to_thread.run_sync(webbrowser.open, url)

        async def until_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    return

        trio.run(lambda: serve_page(app, host, port, on_ready=ready, shutdown=until_signal))
    print("pixie web: stopped", file=sys.stderr)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``web``."""
    p = sub.add_parser(
        "web", parents=[common], help="see and edit your Notebook in a local browser page"
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )
    p.add_argument("--open", action="store_true", help="open the page in your browser")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen (plain HTTP: only on a network you trust)",
    )
    p.add_argument(
        "--timeout",
        type=seconds_flag,
        default=ACK_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the Homebase when opening a note (default {ACK_TIMEOUT:g})",
    )
    p.set_defaults(func=cmd_web)
