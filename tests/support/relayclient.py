"""Relay clients for tests, in memory or over TCP, and helpers that send,
read refusals and check the relay's accounting."""

from __future__ import annotations

import datetime
import io
import ipaddress
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing
from nacl.signing import SigningKey

from pixie.protocol import relaywire as rw
from pixie.protocol.framing import (
    FrameDecoder,
    encode_frame,
)
from pixie.protocol.proof import sign_key_proof
from pixie.relay.logs import LOGGER_NAME
from pixie.relay.server import (
    Relay,
    RelayConfig,
)

# These tests tell envelopes apart by short tags, so their relays take envelopes of
# any size; the smallest sealed size is enforced by default (see test_relay_abuse).
TAGGED = RelayConfig(min_envelope_bytes=0)


class Client:
    """Speaks relaywire over any trio stream; hides nothing the relay sends."""

    def __init__(self, stream: trio.abc.Stream, key: SigningKey | None = None) -> None:
        self.stream = stream
        self.key = key or SigningKey.generate()
        self.decoder = FrameDecoder()
        self.pending: list[bytes] = []
        self._tokens = 0

    @property
    def public(self) -> bytes:
        return bytes(self.key.verify_key)

    async def send(self, *messages: rw.RelayMessage) -> None:
        await self.stream.send_all(b"".join(encode_frame(rw.encode(m)) for m in messages))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def recv(self) -> rw.RelayMessage | None:
        """The next message, or None once the relay has closed (or reset) the connection."""
        while not self.pending:
            try:
                data = await self.stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            self.pending.extend(self.decoder.feed(data))
        return rw.decode(self.pending.pop(0))

    async def handshake(
        self, *, signer: SigningKey | None = None, version: int = rw.RELAY_VERSION
    ) -> rw.RelayMessage | None:
        await self.send(rw.Hello(version, self.public))
        challenge = await self.recv()
        if not isinstance(challenge, rw.Challenge):
            return challenge
        if signer is None:
            proof = sign_key_proof(self.key, challenge.nonce)
        else:  # another key signs the proof of this one's: the relay must refuse it
            proof = signer.sign(rw.auth_message(challenge.nonce, self.public)).signature
        await self.send(rw.Prove(proof))
        return await self.recv()

    async def login(self) -> int:
        welcome = await self.handshake()
        assert isinstance(welcome, rw.Welcome), welcome
        return welcome.queued

    async def envelope(self) -> bytes:
        message = await self.recv()
        assert isinstance(message, rw.Deliver), message
        return message.envelope

    async def delivered(self) -> tuple[bytes, bytes]:
        """The next envelope and the sender the relay attests for it."""
        message = await self.recv()
        assert isinstance(message, rw.Deliver), message
        return message.sender, message.envelope

    async def envelopes(self, n: int) -> list[bytes]:
        return [await self.envelope() for _ in range(n)]

    async def sync(self) -> list[rw.RelayMessage]:
        """Ping and wait for the Pong; return whatever came before it."""
        self._tokens += 1
        await self.send(rw.Ping(self._tokens))
        before: list[rw.RelayMessage] = []
        while True:
            message = await self.recv()
            assert message is not None, f"closed before the Pong; got {before}"
            if message == rw.Pong(self._tokens):
                return before
            before.append(message)

    async def drain(self) -> list[rw.RelayMessage]:
        """Everything until the relay closes the connection."""
        got: list[rw.RelayMessage] = []
        while (message := await self.recv()) is not None:
            got.append(message)
        return got

    async def close(self) -> None:
        await trio.aclose_forcefully(self.stream)


def memory_client(relay: Relay, nursery: trio.Nursery, key: SigningKey | None = None) -> Client:
    ours, theirs = trio.testing.memory_stream_pair()
    nursery.start_soon(relay.handle, theirs)
    return Client(ours, key)


@asynccontextmanager
async def tcp_relay(config: RelayConfig | None = None) -> AsyncIterator[tuple[Relay, int]]:
    relay = Relay(config or TAGGED)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(relay.serve)
        yield relay, port
        relay.shutdown()


async def tcp_client(port: int, key: SigningKey | None = None) -> Client:
    return Client(await trio.open_tcp_stream("127.0.0.1", port), key)


def send(to: Client, envelope: bytes) -> rw.Send:
    return rw.Send(to.public, envelope)


def refused(messages: list[rw.RelayMessage], *fragments: str) -> str:
    """The reason of the Refuse that must end ``messages``, checked for ``fragments``."""
    assert messages, "expected a Refuse, got nothing"
    last = messages[-1]
    assert isinstance(last, rw.Refuse), messages
    for fragment in fragments:
        assert fragment in last.reason
    assert not any(isinstance(m, rw.Deliver) for m in messages)
    return last.reason


def conserved(stats: dict[str, Any]) -> bool:
    """Every envelope taken in is delivered, dropped for a counted reason, or held."""
    dropped = sum(n for reason, n in stats["drops"].items() if reason != "pong")
    held = stats["mailbox_envelopes"] + stats["outbox_frames"]
    return bool(stats["envelopes_in"] == stats["envelopes_delivered"] + dropped + held)


@contextmanager
def captured_log(formatter: logging.Formatter) -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    logger = logging.getLogger(LOGGER_NAME)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "relay.crt", tmp_path / "relay.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
