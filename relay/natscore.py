"""A core NATS connection written for trio: the fleet's hot path rides on it.

JetStream (`pixie.relay.natsbus`) goes through nats-py, an asyncio client,
under trio-asyncio; each call there hops between the two loops, and each
message received passes through an asyncio queue and task. That is right for
mail that waits, and too dear for every envelope of an online peer: measured
on the fleet bench, the hops were most of what a bridged envelope cost. The
hot path needs only core NATS (publish, subscribe, ping), whose text protocol
is a few commands, so this speaks it directly on a trio stream:

- publishing is one ``send_all`` of every message queued, under a deadline;
- messages received are parsed in the reading task and handed to their
  subscription's callback there and then, with no queue between;
- the connection proves itself as `NatsAuth` says, the same ways nats-py does
  (user and password, token, nkey seed, or credentials file: the server's
  nonce signed with the nkey), over TLS when the server or ``tls://`` asks
  for it or a CA is given;
- it pings the server and expects an answer within a deadline, and comes back
  by itself after any failure, subscriptions and all.

Every wait has a deadline, a line the server sends is at most `MAX_LINE` bytes
and a message at most the server's ``max_payload``; anything else ends the
connection, which then starts afresh.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import trio

from .fleet import NatsAuth
from .logs import event
from .natsbus import BusError, connect_options

MAX_LINE = 64 << 10  # INFO lines included
RECONNECT_WAIT = 0.5
PING_INTERVAL = 5.0
RECEIVE_CHUNK = 1 << 18
# A server never sends more than its max_payload; until INFO says, at most this.
DEFAULT_MAX_PAYLOAD = 1 << 20
_VERSION = "1"

Callback = Callable[[bytes], None]


class LinkError(BusError):
    """The server said something this link cannot go on from."""


def _sign(seed: bytes, nonce: str) -> tuple[str, str]:
    """(public key, signature of ``nonce``) for an nkey ``seed``."""
    import nkeys  # only a link that uses nkeys needs the library loaded

    try:
        pair = nkeys.from_seed(bytearray(seed))
    except Exception as exc:  # nkeys raises its own errors and binascii's
        raise LinkError(f"NATS nkey seed: {type(exc).__name__}") from None
    signature = base64.urlsafe_b64encode(pair.sign(nonce.encode())).rstrip(b"=").decode()
    public = pair.public_key.decode()
    pair.wipe()
    return public, signature


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise LinkError(f"cannot read {flag} {path}: {exc.strerror or exc}") from None


def read_creds(path: Path) -> tuple[str, bytes]:
    """(user JWT, nkey seed) from a NATS credentials file."""
    lines = _read(path, "--nats-creds").decode("ascii", "replace").splitlines()
    jwt = seed = None
    for at, line in enumerate(lines[:-1]):
        if "BEGIN NATS USER JWT" in line:
            jwt = lines[at + 1].strip()
        elif "BEGIN USER NKEY SEED" in line:
            seed = lines[at + 1].strip().encode()
    if not jwt or not seed:
        raise LinkError(f"--nats-creds {path}: no user JWT and nkey seed in it")
    return jwt, seed


class CoreLink:
    """One core NATS connection that keeps itself up (see the module)."""

    def __init__(
        self,
        url: str,
        auth: NatsAuth,
        *,
        name: str = "pixie-relay-hot",
        timeout: float = 5.0,
        on_up: Callable[[], None] | None = None,
        on_down: Callable[[str], None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("nats", "tls") or not parts.hostname:
            raise BusError(f"the hot path speaks nats:// or tls://, not {url!r:.80}")
        self.host = parts.hostname
        self.port = parts.port or 4222
        self._url_user = unquote(parts.username) if parts.username else None
        self._url_password = unquote(parts.password) if parts.password else None
        self._tls_wanted = parts.scheme == "tls"
        self.auth = auth
        self.name = name
        self.timeout = timeout
        self.on_up = on_up
        self.on_down = on_down
        self.up = False
        self.max_payload = DEFAULT_MAX_PAYLOAD
        self._subs: dict[bytes, tuple[str, Callback]] = {}
        self._stream: trio.abc.Stream | None = None
        self._serving: trio.CancelScope | None = None
        self._why = ""
        self._send_lock = trio.Lock()
        self._pongs = 0  # pings sent and not yet answered
        self.sent = self.received = 0

    @property
    def busy(self) -> bool:
        """Whether a write is under way (a new one would wait for it)."""
        return self._send_lock.locked()

    def listen(self, subject: str, callback: Callback) -> None:
        """Hand every message on ``subject`` to ``callback`` from now on (taken
        up at the next connection if not connected now)."""
        sid = str(len(self._subs) + 1).encode()
        self._subs[sid] = (subject, callback)

    # -- sending -------------------------------------------------------------------

    async def send(
        self, messages: Iterable[tuple[str, bytes | list[bytes]]], timeout: float
    ) -> None:
        """Publish every message, in order, in one write; `BusError` if the link
        is down or the write does not finish within ``timeout``. A payload may
        come in parts, joined here (so each byte is copied once on its way)."""
        parts: list[bytes] = []
        count = 0
        for subject, payload in messages:
            size = len(payload) if isinstance(payload, bytes) else sum(map(len, payload))
            if size > self.max_payload:
                raise BusError(f"NATS publish: {size} bytes over the server's limit")
            parts.append(b"PUB %s %d\r\n" % (subject.encode(), size))
            if isinstance(payload, bytes):
                parts.append(payload)
            else:
                parts += payload
            parts.append(b"\r\n")
            count += 1
        if count:
            await self._write(b"".join(parts), timeout)
            self.sent += count

    async def _write(self, data: bytes, timeout: float) -> None:
        stream = self._stream
        if stream is None or not self.up:
            raise BusError("NATS publish: the hot path's connection is down")
        try:
            with trio.fail_after(timeout):
                async with self._send_lock:
                    await stream.send_all(data)
        except trio.TooSlowError:
            self._broken("a write took longer than its deadline")
            raise BusError(f"NATS publish: no progress within {timeout:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._broken(f"write failed: {type(exc).__name__}")
            raise BusError(f"NATS publish: {type(exc).__name__}") from None

    def _broken(self, why: str) -> None:
        """End the connection (`run` then starts afresh)."""
        self._stream = None
        self._why = why
        if self._serving is not None:
            self._serving.cancel()

    # -- the connection's life --------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and connect again after any failure, until cancelled."""
        while True:
            self._why = "the server closed the connection"
            try:
                await self._session()
                why = self._why
            except LinkError as exc:
                why = str(exc)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                why = f"{type(exc).__name__}: {exc}"[:200]
            except trio.TooSlowError:
                why = f"no answer within {self.timeout:g} s"
            except ssl.SSLError as exc:
                why = f"TLS: {exc}"[:200]
            stream, self._stream = self._stream, None
            if stream is not None:
                await trio.aclose_forcefully(stream)
            if self.up:
                self.up = False
                if self.on_down is not None:
                    self.on_down(why)
            else:
                event(logging.DEBUG, "nats_hot_retry", host=self.host, reason=why)
            await trio.sleep(RECONNECT_WAIT)

    async def _session(self) -> None:
        reader = _Reader()
        with trio.fail_after(self.timeout):
            stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
            try:
                info = await self._info(stream, reader)
                stream = await self._secure(stream, info)
                await self._hello(stream, reader, info)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
        self._stream = stream
        self._pongs = 0
        self.up = True
        if self.on_up is not None:
            self.on_up()
        try:
            with trio.CancelScope() as self._serving:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pinger)
                    # (caught here: raised through the nursery it would come out
                    # wrapped in an exception group)
                    try:
                        await self._read_loop(stream, reader)
                    except (BusError, OSError, ssl.SSLError) as exc:
                        self._why = str(exc)[:200]
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._why = "the connection was lost"
                    nursery.cancel_scope.cancel()
        finally:
            self._serving = None

    async def _info(self, stream: trio.abc.Stream, reader: _Reader) -> dict[str, object]:
        line = await reader.line(stream)
        if not line.startswith(b"INFO "):
            raise LinkError("the server did not begin with INFO: is this NATS?")
        try:
            info = json.loads(line[5:])
        except ValueError:
            raise LinkError("the server's INFO is not JSON") from None
        if not isinstance(info, dict):
            raise LinkError("the server's INFO is not an object")
        payload = info.get("max_payload")
        if isinstance(payload, int) and payload > 0:
            self.max_payload = payload
        return info

    async def _secure(self, stream: trio.abc.Stream, info: dict[str, object]) -> trio.abc.Stream:
        auth = self.auth
        wanted = self._tls_wanted or auth.tls_ca is not None or auth.tls_cert is not None
        if not (wanted or info.get("tls_required")):
            return stream
        context = connect_options(auth).get("tls") or ssl.create_default_context()
        secure = trio.SSLStream(stream, context, server_hostname=self.host)
        await secure.do_handshake()
        return secure

    async def _hello(
        self, stream: trio.abc.Stream, reader: _Reader, info: dict[str, object]
    ) -> None:
        options: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "lang": "python-trio",
            "version": _VERSION,
            "protocol": 1,
            "name": self.name,
            "echo": False,  # a relay's own presence need not come back to it
        }
        options.update(self._credentials(str(info.get("nonce") or "")))
        hello = b"CONNECT %s\r\n" % json.dumps(options).encode()
        for sid, (subject, _) in self._subs.items():
            hello += b"SUB %s %s\r\n" % (subject.encode(), sid)
        # The server answers in order: its PONG says the subscriptions hold too.
        await stream.send_all(hello + b"PING\r\n")
        while True:
            line = await reader.line(stream)
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise LinkError(f"NATS refused the hot path's connection: {line[5:80].decode()}")
            if line == b"PING":
                await stream.send_all(b"PONG\r\n")

    def _credentials(self, nonce: str) -> dict[str, object]:
        auth = self.auth
        if auth.creds is not None:
            jwt, seed = read_creds(auth.creds)
            _, signature = _sign(seed, nonce)
            return {"jwt": jwt, "sig": signature}
        if auth.nkey_seed is not None:
            public, signature = _sign(_read(auth.nkey_seed, "--nats-nkey-seed").strip(), nonce)
            return {"nkey": public, "sig": signature}
        secrets = {k: v for k, v in connect_options(auth).items() if k != "tls"}
        if "user" in secrets:
            return {"user": secrets["user"], "pass": secrets["password"]}
        if "token" in secrets:
            return {"auth_token": secrets["token"]}
        if self._url_user is not None:
            if self._url_password is None:
                return {"auth_token": self._url_user}
            return {"user": self._url_user, "pass": self._url_password}
        return {}

    async def _pinger(self) -> None:
        """A server that stops answering is a connection to start afresh."""
        while True:
            await trio.sleep(PING_INTERVAL)
            if self._pongs >= 2:
                self._broken("the server stopped answering pings")
                return
            self._pongs += 1
            try:
                await self._write(b"PING\r\n", self.timeout)
            except BusError:
                return

    async def _read_loop(self, stream: trio.abc.Stream, reader: _Reader) -> None:
        subs = self._subs
        while True:
            line = await reader.line(stream)
            if line.startswith(b"MSG "):
                # MSG <subject> <sid> [reply-to] <#bytes>
                fields = line.split(b" ")
                if len(fields) not in (4, 5):
                    raise LinkError("a MSG line this link cannot read")
                size = _size(fields[-1], self.max_payload)
                payload = await reader.exactly(stream, size)
                self.received += 1
                sub = subs.get(fields[2])
                if sub is not None:
                    sub[1](payload)
            elif line.startswith(b"HMSG "):
                # HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>: not
                # something the hot path sends; read past it.
                fields = line.split(b" ")
                if len(fields) not in (5, 6):
                    raise LinkError("an HMSG line this link cannot read")
                await reader.exactly(stream, _size(fields[-1], self.max_payload + MAX_LINE))
            elif line == b"PING":
                await self._write(b"PONG\r\n", self.timeout)
            elif line == b"PONG":
                self._pongs = 0
            elif line.startswith(b"-ERR"):
                raise LinkError(f"NATS: {line[5:120].decode('ascii', 'replace')}")
            elif line.startswith(b"INFO ") or line == b"+OK":
                continue
            else:
                raise LinkError("the server sent a line this link cannot read")


def _size(field: bytes, limit: int) -> int:
    if not field.isdigit() or len(field) > 10:
        raise LinkError("a message size this link cannot read")
    size = int(field)
    if size > limit:
        raise LinkError(f"a message of {size} bytes, over the limit of {limit}")
    return size


class _Reader:
    """Lines and payloads from a stream, with a buffer read into in large
    chunks and consumed from an offset (compacted as it is refilled)."""

    __slots__ = ("buffer", "pos")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.pos = 0

    async def _fill(self, stream: trio.abc.Stream) -> None:
        if self.pos:
            del self.buffer[: self.pos]
            self.pos = 0
        data = await stream.receive_some(RECEIVE_CHUNK)
        if not data:
            raise trio.BrokenResourceError("closed")
        self.buffer += data

    async def line(self, stream: trio.abc.Stream) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n", self.pos)
            if end >= 0:
                line = bytes(self.buffer[self.pos : end])
                self.pos = end + 2
                return line
            if len(self.buffer) - self.pos > MAX_LINE:
                raise LinkError(f"a line from the server over {MAX_LINE} bytes")
            await self._fill(stream)

    async def exactly(self, stream: trio.abc.Stream, size: int) -> bytes:
        """``size`` bytes, then the CRLF that ends them."""
        while len(self.buffer) - self.pos < size + 2:
            await self._fill(stream)
        start = self.pos
        if self.buffer[start + size : start + size + 2] != b"\r\n":
            raise LinkError("a message that does not end where its size says")
        self.pos = start + size + 2
        with memoryview(self.buffer) as view:  # one copy, not a slice and then bytes
            return bytes(view[start : start + size])


__all__ = ["CoreLink", "LinkError", "read_creds"]
