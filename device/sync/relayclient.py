"""The trio side of talking to the relay: connect, prove our key, send, receive.

Every wait has a deadline chosen by the caller; the handshake has its own.
The client answers the relay's pings itself and hands the caller only
envelopes addressed to it, each with the key its sender proved to the relay.

A relay address may name several relays of one fleet (``A,B,C``): any of them
reaches every peer. `RelayClient.connect` tries them in turn, starting with the
one that last answered in this process, so a relay that died costs one failed
attempt, not one per reconnection.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

import trio
from nacl.signing import SigningKey

from pixie.device.errors import DeviceError
from pixie.protocol import relaywire
from pixie.protocol.errors import ProtocolError
from pixie.protocol.framing import FrameDecoder, encode_frame
from pixie.protocol.proof import sign_key_proof

HANDSHAKE_TIMEOUT = 10.0
RECEIVE_CHUNK = 65_536
MAX_RELAYS = 8  # addresses in one list: a fleet's entry points, not a directory


CA_ENV = "PIXIE_RELAY_CA"


def tls_context() -> ssl.SSLContext:
    """The system's trust store, or the CA bundle named by PIXIE_RELAY_CA (for a
    relay with a self-signed certificate)."""
    cafile = os.environ.get(CA_ENV)
    try:
        return ssl.create_default_context(cafile=cafile or None)
    except (OSError, ssl.SSLError) as exc:
        raise DeviceError(f"cannot load {CA_ENV}={cafile}: {exc}") from None


class RelayUnavailable(DeviceError):
    """The relay could not be reached, refused us, or went away."""


@dataclass(frozen=True, slots=True)
class RelayAddress:
    host: str
    port: int
    tls: bool = False
    # More relays of the same fleet, tried in turn when one fails.
    others: tuple[RelayAddress, ...] = ()

    @classmethod
    def parse(cls, text: str) -> RelayAddress:
        """``HOST:PORT``, or ``tls://HOST:PORT`` for a relay behind TLS; several
        relays of one fleet separated by commas (``A,B,C``)."""
        parts = [part.strip() for part in text.split(",")]
        if len(parts) > MAX_RELAYS:
            raise DeviceError(f"at most {MAX_RELAYS} relay addresses, not {len(parts)}")
        first, *rest = [cls._parse_one(part, text) for part in parts]
        unique = tuple(dict.fromkeys(a for a in rest if a != first))
        return cls(first.host, first.port, first.tls, unique)

    @classmethod
    def _parse_one(cls, part: str, text: str) -> RelayAddress:
        tls = part.startswith("tls://")
        rest = part.removeprefix("tls://")
        host, sep, port = rest.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            what = "relay address must be HOST:PORT"
            if "," in text:
                what = "relay addresses must be HOST:PORT,HOST:PORT,..."
            raise DeviceError(f"{what}, not {text!r:.80}")
        return cls(host, int(port), tls)

    def each(self) -> tuple[RelayAddress, ...]:
        """Every relay this address names, each on its own, in the given order."""
        return (RelayAddress(self.host, self.port, self.tls), *self.others)

    def __str__(self) -> str:
        return ",".join(f"{'tls://' if a.tls else ''}{a.host}:{a.port}" for a in self.each())


# Which of a list of relays answered last, by the list's text: the next connection
# in this process starts there.
_answered: dict[str, int] = {}


@dataclass(frozen=True, slots=True)
class Delivered:
    """An envelope from the relay, and the key its sender's connection proved.

    The relay vouches for ``sender`` only as far as the relay is trusted: a
    receiver uses it to drop mail from unknown keys before any cryptography,
    and checks it against the signature inside the envelope."""

    sender: bytes
    envelope: bytes


class RelayClient:
    def __init__(self, stream: trio.abc.Stream, identity: SigningKey) -> None:
        self._stream = stream
        self._identity = identity
        self._decoder = FrameDecoder()
        self._pending: list[bytes] = []
        self.queued_at_welcome = 0
        self.address: RelayAddress | None = None  # the relay this connection reached
        # One task may be sending envelopes while another receives (and answers
        # the relay's pings): their writes must not interleave.
        self._send_lock = trio.Lock()

    @classmethod
    async def connect(
        cls,
        address: RelayAddress,
        identity: SigningKey,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = HANDSHAKE_TIMEOUT,
    ) -> RelayClient:
        """Connect and prove our key to the relay at ``address``, or to the first
        of its relays that lets us, each given ``timeout``."""
        relays = address.each()
        if len(relays) == 1:
            return await cls._connect_one(relays[0], identity, ssl_context, timeout)
        key = str(address)
        start = _answered.get(key, 0) % len(relays)
        failures: list[str] = []
        for turn in range(len(relays)):
            index = (start + turn) % len(relays)
            try:
                client = await cls._connect_one(relays[index], identity, ssl_context, timeout)
            except RelayUnavailable as exc:
                failures.append(str(exc))
                continue
            _answered[key] = index
            return client
        raise RelayUnavailable(f"no relay of {len(relays)} answered: {'; '.join(failures)}")

    @classmethod
    async def _connect_one(
        cls,
        address: RelayAddress,
        identity: SigningKey,
        ssl_context: ssl.SSLContext | None,
        timeout: float,
    ) -> RelayClient:
        try:
            with trio.fail_after(timeout):
                stream: trio.abc.Stream = await trio.open_tcp_stream(address.host, address.port)
                if address.tls:
                    context = ssl_context or tls_context()
                    stream = trio.SSLStream(stream, context, server_hostname=address.host)
                    await stream.do_handshake()
                client = cls(stream, identity)
                client.address = address
                await client._handshake()
                return client
        except trio.TooSlowError:
            raise RelayUnavailable(f"relay {address} did not answer within {timeout:g} s") from None
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise RelayUnavailable(f"cannot reach relay {address}: {_describe(exc)}") from None

    async def _handshake(self) -> None:
        key = bytes(self._identity.verify_key)
        await self._send(relaywire.Hello(relaywire.RELAY_VERSION, key))
        challenge = await self._next()
        if not isinstance(challenge, relaywire.Challenge):
            raise RelayUnavailable(f"relay refused us: {_reason(challenge)}")
        await self._send(relaywire.Prove(sign_key_proof(self._identity, challenge.nonce)))
        welcome = await self._next()
        if not isinstance(welcome, relaywire.Welcome):
            raise RelayUnavailable(f"relay refused us: {_reason(welcome)}")
        self.queued_at_welcome = welcome.queued

    async def send(self, recipient: bytes, envelope: bytes) -> None:
        await self._send(relaywire.Send(recipient, envelope))

    async def receive(self) -> Delivered:
        """The next envelope addressed to us, with its sender (pings are answered
        on the way)."""
        while True:
            message = await self._next()
            if isinstance(message, relaywire.Deliver):
                return Delivered(message.sender, message.envelope)
            if isinstance(message, relaywire.Ping):
                await self._send(relaywire.Pong(message.token))
            elif isinstance(message, relaywire.Refuse):
                raise RelayUnavailable(f"relay closed the connection: {message.reason}")

    async def _send(self, message: relaywire.RelayMessage) -> None:
        try:
            async with self._send_lock:
                await self._stream.send_all(encode_frame(relaywire.encode(message)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise RelayUnavailable(f"lost the relay connection: {exc}") from None

    async def _next(self) -> relaywire.RelayMessage:
        while not self._pending:
            try:
                data = await self._stream.receive_some(RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise RelayUnavailable(f"lost the relay connection: {exc}") from None
            if not data:
                raise RelayUnavailable("the relay closed the connection")
            try:
                self._pending.extend(self._decoder.feed(data))
            except ProtocolError as exc:
                raise RelayUnavailable(f"the relay sent a bad frame: {exc}") from None
        try:
            return relaywire.decode(self._pending.pop(0))
        except ProtocolError as exc:
            raise RelayUnavailable(f"the relay sent a bad frame: {exc}") from None

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)


def _describe(exc: BaseException) -> str:
    """trio wraps TLS failures in an empty BrokenResourceError; say the cause."""
    while not str(exc) and exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__


def _reason(message: relaywire.RelayMessage) -> str:
    return message.reason if isinstance(message, relaywire.Refuse) else type(message).__name__
