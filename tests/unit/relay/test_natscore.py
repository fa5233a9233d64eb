"""The hot path's own NATS connection against a scripted server on loopback:
it logs in each way NatsAuth allows (the nkey signature checked with nkeys),
subscribes, publishes, reads messages however the bytes arrive, answers the
server's pings, and starts afresh after anything it cannot go on from."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import nkeys
import pytest
import trio

from pixie.relay.fleet import NatsAuth
from pixie.relay.natsbus import BusError
from pixie.relay.natscore import CoreLink

NONCE = "a-nonce-from-the-server"


class Session:
    """One connection to the fake server, from its side."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.connect: dict[str, object] = {}
        self.subs: dict[str, bytes] = {}  # subject -> sid

    async def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            data = await self.stream.receive_some(1 << 16)
            if not data:
                raise EOFError
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    async def payload(self, size: int) -> bytes:
        while len(self.buffer) < size + 2:
            self.buffer += await self.stream.receive_some(1 << 16)
        data, self.buffer = self.buffer[:size], self.buffer[size + 2 :]
        return data


class FakeNats:
    def __init__(self, info: dict[str, object], refuse: bytes | None = None) -> None:
        self.info = info
        self.refuse = refuse
        self.sessions: trio.MemorySendChannel[Session]
        self.sessions, self.arrivals = trio.open_memory_channel[Session](10)
        self.published: list[tuple[bytes, bytes]] = []
        self.pongs = 0
        self.changed = trio.Event()
        self.port = 0

    async def serve(self, stream: trio.SocketStream) -> None:
        session = Session(stream)
        await stream.send_all(b"INFO " + json.dumps(self.info).encode() + b"\r\n")
        try:
            line = await session.line()
            assert line.startswith(b"CONNECT ")
            session.connect = json.loads(line[8:])
            if self.refuse is not None:
                await stream.send_all(b"-ERR '" + self.refuse + b"'\r\n")
                await self.sessions.send(session)
                return
            announced = False
            while True:
                line = await session.line()
                if line == b"PING":
                    await stream.send_all(b"PONG\r\n")
                    if not announced:  # the login's PING: after its subscriptions
                        announced = True
                        await self.sessions.send(session)
                elif line.startswith(b"SUB "):
                    _, subject, sid = line.split(b" ")
                    session.subs[subject.decode()] = sid
                elif line.startswith(b"PUB "):
                    _, subject, size = line.split(b" ")
                    self.published.append((subject, await session.payload(int(size))))
                elif line == b"PONG":
                    self.pongs += 1
                self.changed.set()
                self.changed = trio.Event()
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            return


@asynccontextmanager
async def server(
    info: dict[str, object] | None = None, refuse: bytes | None = None
) -> AsyncIterator[FakeNats]:
    fake = FakeNats({"server_id": "fake", "max_payload": 4096, **(info or {})}, refuse)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
        fake.port = listeners[0].socket.getsockname()[1]
        yield fake
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def running(link: CoreLink) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.run)
        yield
        nursery.cancel_scope.cancel()


def link_to(fake: FakeNats, auth: NatsAuth, **kwargs: object) -> CoreLink:
    return CoreLink(f"nats://127.0.0.1:{fake.port}", auth, timeout=5, **kwargs)  # type: ignore[arg-type]


async def test_it_logs_in_with_a_password_subscribes_and_publishes(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    ups: list[bool] = []
    async with server({"auth_required": True}) as fake:
        link = link_to(fake, NatsAuth(user="relay", password_file=password))
        link.on_up = lambda: ups.append(True)
        got: list[bytes] = []
        link.listen("pixie.a", got.append)
        async with running(link):
            session = await fake.arrivals.receive()
            assert session.connect["user"] == "relay" and session.connect["pass"] == "s3cret"
            assert session.connect["echo"] is False and session.connect["verbose"] is False
            assert session.subs == {"pixie.a": b"1"}
            assert link.up and ups == [True] and link.max_payload == 4096
            await link.send([("pixie.b", b"one"), ("pixie.c", b"")], 5)
            while len(fake.published) < 2:
                await fake.changed.wait()
            assert fake.published == [(b"pixie.b", b"one"), (b"pixie.c", b"")]
            with pytest.raises(BusError, match="over the server's limit"):
                await link.send([("pixie.b", b"x" * 4097)], 5)


async def test_messages_are_read_however_the_bytes_arrive() -> None:
    async with server() as fake:
        link = link_to(fake, NatsAuth(insecure=True))
        got: list[bytes] = []
        done = trio.Event()

        def take(data: bytes) -> None:
            got.append(data)
            if len(got) == 4:
                done.set()

        link.listen("pixie.a", take)
        async with running(link):
            session = await fake.arrivals.receive()
            sid = session.subs["pixie.a"]
            two = b"MSG pixie.a %s 3\r\nabc\r\nMSG pixie.a %s reply.x 2\r\nde\r\n" % (sid, sid)
            await session.stream.send_all(two)
            await session.stream.send_all(b"PING\r\n")  # answered in the same breath
            split = b"MSG pixie.a %s 5\r\nhello\r\n" % sid
            for at in range(0, len(split), 4):
                await session.stream.send_all(split[at : at + 4])
                await trio.sleep(0)
            await session.stream.send_all(
                b"MSG pixie.zz 99 1\r\nz\r\nMSG pixie.a %s 0\r\n\r\n" % sid
            )
            await done.wait()
            assert got == [b"abc", b"de", b"hello", b""]
            while fake.pongs < 1:
                await fake.changed.wait()


async def test_what_it_cannot_read_ends_the_connection_and_it_comes_back() -> None:
    reasons: list[str] = []
    async with server() as fake:
        link = link_to(fake, NatsAuth(insecure=True), on_down=reasons.append)
        link.listen("pixie.a", lambda data: None)
        async with running(link):
            first = await fake.arrivals.receive()
            sid = first.subs["pixie.a"]
            await first.stream.send_all(b"MSG pixie.a %s 5000\r\n" % sid)  # over max_payload
            second = await fake.arrivals.receive()  # it logged in again, and subscribed
            assert second.subs == {"pixie.a": sid}
            assert len(reasons) == 1 and "over the limit" in reasons[0]
            await second.stream.send_all(b"GARBAGE\r\n")
            third = await fake.arrivals.receive()
            assert third.connect and "cannot read" in reasons[1]


async def test_a_refused_login_never_brings_it_up() -> None:
    async with server(refuse=b"Authorization Violation") as fake:
        link = link_to(fake, NatsAuth(insecure=True))
        async with running(link):
            await fake.arrivals.receive()
            await fake.arrivals.receive()  # and it tries again, after a pause
            assert not link.up
            with pytest.raises(BusError, match="down"):
                await link.send([("pixie.a", b"x")], 5)


def _verify(seed: bytes, signature: object) -> None:
    """``signature`` is the nonce signed with ``seed``'s key (nkeys raises if not)."""
    assert isinstance(signature, str)
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    assert nkeys.from_seed(bytearray(seed)).verify(NONCE.encode(), raw)


async def test_it_signs_the_nonce_with_an_nkey_or_a_credentials_file(tmp_path: Path) -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed + b"\n")
    creds = tmp_path / "user.creds"
    creds.write_text(
        "-----BEGIN NATS USER JWT-----\nthe.user.jwt\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n"
    )
    token = tmp_path / "token"
    token.write_text("a-token\n")
    info = {"auth_required": True, "nonce": NONCE}
    async with server(info) as fake:
        async with running(link_to(fake, NatsAuth(nkey_seed=seed_file))):
            said = (await fake.arrivals.receive()).connect
        assert said["nkey"] == public
        _verify(seed, said["sig"])
        async with running(link_to(fake, NatsAuth(creds=creds))):
            said = (await fake.arrivals.receive()).connect
        assert said["jwt"] == "the.user.jwt"
        _verify(seed, said["sig"])
        async with running(link_to(fake, NatsAuth(token_file=token))):
            said = (await fake.arrivals.receive()).connect
        assert said["auth_token"] == "a-token"
        url = f"nats://who:pw%21@127.0.0.1:{fake.port}"
        async with running(CoreLink(url, NatsAuth(insecure=True))):
            said = (await fake.arrivals.receive()).connect
        assert (said["user"], said["pass"]) == ("who", "pw!")


def test_only_nats_and_tls_urls() -> None:
    with pytest.raises(BusError, match="nats:// or tls://"):
        CoreLink("ws://127.0.0.1:8080", NatsAuth(insecure=True))
