"""Serving the page: Hypercorn's trio worker on one address.

The page listens on loopback by default. Another address is refused unless
the command is told to allow it: the page is plain HTTP, so on a network the
token in its URL and cookie, and every note, would cross the wire in clear
for anyone on that network to read.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio
from starlette.types import ASGIApp

from pixie.device.errors import BadInput

if TYPE_CHECKING:
    from hypercorn.config import Config

DEFAULT_LISTEN = "127.0.0.1:8765"


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` for IPv6; PORT 0 picks a free one)."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise BadInput(f"--listen must be HOST:PORT, not {value!r:.60}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BadInput(f"--listen port must be a number from 0 to 65535, not {port_text!r:.20}")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise BadInput(
                f"--listen host must be an IP address or localhost, not {host!r:.60}"
            ) from None
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def config_for(host: str, port: int) -> Config:
    # The server is imported where it is used: every other `pixie` command
    # would otherwise load it (and its HTTP/2 stack) at start.
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"{url_host(host)}:{port}"]
    # No access log: the first request's address carries the token.
    config.accesslog = None
    config.errorlog = logging.getLogger("pixie.web")
    config.include_server_header = False
    config.graceful_timeout = 3.0
    return config


async def serve_page(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str, int], Awaitable[None]],
    shutdown: Callable[[], Awaitable[None]],
) -> None:
    """Serve ``app`` until ``shutdown`` returns; ``on_ready(host, port)`` runs
    once the socket listens (with the port it got, when asked for 0)."""
    from hypercorn.trio import serve

    config = config_for(host, port)
    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(
                lambda task_status: serve(
                    app,  # type: ignore[arg-type]
                    config,
                    shutdown_trigger=shutdown,
                    task_status=task_status,
                )
            )
        except (OSError, BaseExceptionGroup) as exc:
            refused = _os_error(exc)
            if refused is None:
                raise
            raise BadInput(
                f"cannot listen on {url_host(host)}:{port}: {refused.strerror or refused}"
            ) from None
        bound = binds[0].rpartition(":")[2]
        await on_ready(host, int(bound))


def _os_error(exc: BaseException) -> OSError | None:
    """The socket error behind ``exc``, unwrapped from task groups of one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, OSError) else None


__all__ = ["DEFAULT_LISTEN", "is_loopback", "parse_listen", "serve_page", "url_host"]
