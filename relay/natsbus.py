"""The relay's one door to NATS: the asyncio client (nats-py) seen from trio.

nats-py is asyncio-only; the relay is trio. The client runs on trio-asyncio's
loop, inside the relay's own trio run and thread (``async with
trio_asyncio.open_loop()`` around the relay, then each call through
``aio_as_trio``), rather than on an asyncio loop in a thread of its own:

- the relay's state (outboxes, mailboxes, counters) is touched from one thread
  only, so a message callback may hand a frame straight to a connection's
  outbox, with no lock and no hop between threads per envelope;
- a trio deadline or cancellation reaches the asyncio call it wraps (trio-asyncio
  cancels the asyncio task), so every wait below has a trio deadline that really
  ends it, and a connection that closes takes its NATS work with it;
- a thread would buy no parallelism for Python code (the GIL), only a second
  scheduler and cross-thread queues whose bounds would need their own care.

Every method here is a trio coroutine, each NATS wait runs under a deadline, and
every failure of NATS (unreachable, timed out, refused) comes out as one
`BusError` with a one-line reason: callers decide what a failure means.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable, Coroutine, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import trio
import trio_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from .errors import RelayError
from .fleet import NatsAuth, StreamPlan

# Every call to NATS gets at most this long unless the caller says otherwise.
CALL_TIMEOUT = 5.0
CONNECT_TIMEOUT = 5.0
# How long nats-py waits between reconnection attempts after losing the server.
RECONNECT_WAIT = 0.5


class BusError(RelayError):
    """NATS could not do what was asked (unreachable, timed out, refused)."""


def stream_config(plan: StreamPlan) -> StreamConfig:
    return StreamConfig(
        name=plan.name,
        subjects=[plan.subjects],
        # A message leaves once a relay has written it to its recipient and
        # acked it; until then the limits below are all that bound it.
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        num_replicas=plan.replicas,
        max_msgs_per_subject=plan.max_msgs_per_subject,
        max_bytes=plan.max_bytes,
        max_age=plan.max_age,
        max_msg_size=plan.max_msg_size,
        # A full stream takes nothing new: dropping its oldest would let a
        # flood from strangers push out a sibling's waiting mail. A full
        # subject (one sender's share of one recipient's mail) drops its own
        # oldest: a peer that comes back wants that sender's newest state.
        discard=DiscardPolicy.NEW,
        discard_new_per_subject=False,
    )


def consumer_config(plan: StreamPlan, name: str, subject: str) -> ConsumerConfig:
    return ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=subject,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=plan.ack_wait,
        max_ack_pending=plan.max_ack_pending,
        max_waiting=16,
        # A recipient that stays away this long loses its consumer (not its mail).
        inactive_threshold=plan.consumer_idle,
    )


def connect_options(auth: NatsAuth) -> dict[str, Any]:
    """nats.connect's keyword arguments for ``auth``: its secrets read from
    their files here, and a TLS context that checks the server against
    ``tls_ca`` (and shows ``tls_cert``, if given)."""
    options: dict[str, Any] = {}
    try:
        if auth.creds is not None:
            options["user_credentials"] = str(auth.creds)
        if auth.nkey_seed is not None:
            options["nkeys_seed"] = str(auth.nkey_seed)
        if auth.user is not None and auth.password_file is not None:
            options["user"] = auth.user
            options["password"] = _secret(auth.password_file, "--nats-password-file")
        if auth.token_file is not None:
            options["token"] = _secret(auth.token_file, "--nats-token-file")
        if auth.tls_ca is not None or auth.tls_cert is not None:
            context = ssl.create_default_context(
                cafile=str(auth.tls_ca) if auth.tls_ca is not None else None
            )
            if auth.tls_cert is not None and auth.tls_key is not None:
                context.load_cert_chain(str(auth.tls_cert), str(auth.tls_key))
            options["tls"] = context
    except (OSError, ssl.SSLError) as exc:
        raise RelayError(f"NATS TLS files: {exc}") from None
    return options


def _secret(path: Path, flag: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RelayError(f"cannot read {flag} {path}: {exc}") from None
    if not text or "\n" in text:
        raise RelayError(f"{flag} {path}: one line holding the secret, please")
    return text


def _asks_for_auth(client: Client) -> bool:
    """Whether the server's INFO said it requires authentication."""
    info = getattr(client, "_server_info", None) or {}
    return bool(info.get("auth_required"))


def _aio(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    wrapped: Callable[..., Any] = trio_asyncio.aio_as_trio(fn)
    return wrapped


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


_FAILURES = (nats.errors.Error, nats.js.errors.Error, OSError, asyncio.TimeoutError)


class NatsBus:
    """One NATS connection with JetStream, for the whole relay."""

    def __init__(self, client: Client, url: str) -> None:
        self._nc = client
        self._js = client.jetstream(timeout=CALL_TIMEOUT)
        self.url = url
        self._acks: tuple[str, Subscription] | None = None  # see `open_acks`

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        timeout: float = CONNECT_TIMEOUT,
        on_down: Callable[[], None] | None = None,
        on_up: Callable[[], None] | None = None,
        auth: NatsAuth | None = None,
    ) -> NatsBus:
        """Connect to ``url`` (it must answer within ``timeout``) as ``auth``
        says; afterwards the client reconnects by itself, forever, telling
        ``on_down`` / ``on_up``. A NATS that asks for no authentication is
        refused unless ``auth.insecure``: anyone who reaches it could list the
        mail subjects, publish into the stream and purge it."""
        auth = auth if auth is not None else NatsAuth()
        options = connect_options(auth)

        async def down() -> None:
            if on_down is not None:
                on_down()

        async def up() -> None:
            if on_up is not None:
                on_up()

        seen: list[Exception] = []

        async def quiet(exc: Exception) -> None:
            # nats-py's default prints every reconnect failure; the relay logs
            # the outage once, through on_down. The last one says why a first
            # connection did not come up (a refused login, say).
            seen[:] = [*seen[-15:], exc]

        try:
            with trio.fail_after(timeout):
                client = await _aio(nats.connect)(
                    url,
                    connect_timeout=max(1, int(timeout)),
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=RECONNECT_WAIT,
                    ping_interval=5,
                    max_outstanding_pings=2,
                    disconnected_cb=down,
                    reconnected_cb=up,
                    error_cb=quiet,
                    name="pixie-relay",
                    **options,
                )
        except trio.TooSlowError:
            # A refused login says more than the reset that follows it.
            refused = [e for e in seen if "authoriz" in str(e).lower()]
            why = f": {_why((refused or seen)[-1])}" if seen else ""
            raise BusError(f"NATS at {url} did not answer within {timeout:g} s{why}") from None
        except (*_FAILURES, ValueError) as exc:
            raise BusError(f"cannot reach NATS at {url}: {_why(exc)}") from None
        bus = cls(client, url)
        if not auth.insecure and not _asks_for_auth(client):
            await bus.close(timeout)
            raise RelayError(
                f"NATS at {url} asks for no authentication: anyone who reaches it can read, "
                "publish and purge the fleet's mail. Give it users (see the README) and "
                "the relay --nats-creds, --nats-nkey-seed, --nats-user or --nats-token-file; "
                "or pass --nats-insecure for a NATS only this machine can reach"
            )
        return bus

    async def _call(self, what: str, fn: Callable[[], Any], timeout: float) -> Any:
        try:
            with trio.fail_after(timeout):
                return await _aio(fn)()
        except trio.TooSlowError:
            raise BusError(f"NATS {what}: no answer within {timeout:g} s") from None
        except _FAILURES as exc:
            raise BusError(f"NATS {what}: {_why(exc)}") from None

    async def ensure_stream(self, plan: StreamPlan, timeout: float = CALL_TIMEOUT) -> None:
        """Create the stream, or bring an existing one to ``plan``'s settings."""
        config = stream_config(plan)

        async def ensure() -> None:
            try:
                await self._js.stream_info(plan.name)
            except nats.js.errors.NotFoundError:
                await self._js.add_stream(config)
            else:
                await self._js.update_stream(config)

        await self._call("stream setup", ensure, timeout)

    async def ensure_consumer(
        self, plan: StreamPlan, name: str, subject: str, timeout: float = CALL_TIMEOUT
    ) -> None:
        config = consumer_config(plan, name, subject)

        async def ensure() -> None:
            await self._js.add_consumer(plan.name, config)

        await self._call("consumer setup", ensure, timeout)

    async def open_acks(
        self, on_ack: Callable[[bool], None], timeout: float = CALL_TIMEOUT
    ) -> None:
        """Take the stream's answers to `publish` (a PubAck, or an error, for each
        message, in the order published) on a fresh inbox of ours, and tell
        ``on_ack`` for each whether the message was stored. Any earlier inbox is
        dropped: answers still on their way to it are not counted."""
        old = self._acks

        async def handle(msg: Msg) -> None:
            on_ack(stored(msg))

        self._acks = None
        if old is not None:
            with suppress(BusError):
                await self.unsubscribe(old[1], timeout)
        self._acks = await self.subscribe_raw(handle, timeout)

    async def publish(
        self, messages: Iterable[tuple[str, bytes]], timeout: float = CALL_TIMEOUT
    ) -> None:
        """Publish every message to JetStream, in order, each asking for its
        answer on the inbox `open_acks` set up; waits for none of them, so the
        relay publishes its next batch while the stream stores this one. (One
        shared inbox instead of nats-py's ``publish_async``, whose per-message
        future, task and token cost several times the publish itself.)"""
        if self._acks is None:
            raise BusError("NATS publish: no inbox for the stream's answers")
        inbox = self._acks[0]
        batch = list(messages)
        publish = self._nc.publish

        async def publish_all() -> None:
            for subject, payload in batch:
                await publish(subject, payload, reply=inbox)

        await self._call("publish", publish_all, timeout)

    async def send(
        self, messages: Iterable[tuple[str, bytes]], timeout: float = CALL_TIMEOUT
    ) -> None:
        """Publish every message on core NATS, in order: no stream stores it, and
        it reaches whoever reads its subject now, or no one."""
        batch = list(messages)
        publish = self._nc.publish

        async def send_all() -> None:
            for subject, payload in batch:
                await publish(subject, payload)

        await self._call("publish", send_all, timeout)

    async def listen(
        self, subject: str, on_message: Callable[[Msg], None], timeout: float = CALL_TIMEOUT
    ) -> Subscription:
        """Read ``subject`` on core NATS: each message goes to ``on_message`` (on
        this thread, in arrival order). The client renews the subscription by
        itself after a reconnection."""

        async def handle(msg: Msg) -> None:
            on_message(msg)

        async def subscribe() -> Subscription:
            return await self._nc.subscribe(subject, cb=handle)

        subscription: Subscription = await self._call("subscribe", subscribe, timeout)
        return subscription

    async def subscribe(
        self, on_message: Callable[[Msg], None], timeout: float = CALL_TIMEOUT
    ) -> tuple[str, Subscription]:
        """A fresh inbox whose messages go to ``on_message`` (called on this thread,
        in arrival order), and its subscription."""

        async def handle(msg: Msg) -> None:
            on_message(msg)

        return await self.subscribe_raw(handle, timeout)

    async def subscribe_raw(
        self, handle: Callable[[Msg], Coroutine[Any, Any, None]], timeout: float
    ) -> tuple[str, Subscription]:
        inbox = self._nc.new_inbox()

        async def subscribe() -> Subscription:
            return await self._nc.subscribe(inbox, cb=handle)

        subscription: Subscription = await self._call("subscribe", subscribe, timeout)
        return inbox, subscription

    async def unsubscribe(self, subscription: Subscription, timeout: float = CALL_TIMEOUT) -> None:
        await self._call("unsubscribe", subscription.unsubscribe, timeout)

    async def pull(
        self, stream: str, consumer: str, inbox: str, batch: int, expires: float
    ) -> None:
        """Ask ``consumer`` for up to ``batch`` messages, delivered to ``inbox`` as
        they come, the request lingering ``expires`` seconds (JetStream's pull API;
        it ends with a status message when it expires or cannot be served)."""
        request = json.dumps({"batch": batch, "expires": int(expires * 1e9)}).encode()
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"

        async def pull() -> None:
            await self._nc.publish(subject, request, reply=inbox)

        await self._call("pull", pull, CALL_TIMEOUT)

    async def reply_all(
        self, replies: Iterable[str], payload: bytes, timeout: float = CALL_TIMEOUT
    ) -> None:
        """Answer each JetStream reply subject with ``payload`` (an ack or a nak)."""
        batch = list(replies)

        async def answer() -> None:
            for reply in batch:
                await self._nc.publish(reply, payload)

        await self._call("ack", answer, timeout)

    async def ping(self, timeout: float) -> None:
        """A round trip to the server (PING, PONG) within ``timeout``."""

        async def flush() -> None:
            await self._nc.flush(timeout=max(1, int(timeout)))

        await self._call("ping", flush, timeout)

    @property
    def max_payload(self) -> int:
        """The largest message the server takes (its max_payload, 1 MiB by default)."""
        return int(self._nc.max_payload)

    @property
    def connected(self) -> bool:
        return bool(self._nc.is_connected)

    async def close(self, timeout: float = CALL_TIMEOUT) -> None:
        with trio.move_on_after(timeout) as scope:
            scope.shield = True
            with suppress(*_FAILURES):
                await _aio(self._nc.close)()


ACK = b"+ACK"


def nak(delay: float) -> bytes:
    """A nak asking JetStream to redeliver after ``delay`` seconds (0: at once)."""
    if delay <= 0:
        return b"-NAK"
    return b"-NAK " + json.dumps({"delay": int(delay * 1e9)}).encode()


def stored(msg: Msg) -> bool:
    """Whether the stream's answer to a publish says it stored the message (a
    PubAck), rather than an error or a status such as 503 no responders."""
    return status(msg) is None and b'"error"' not in msg.data and b'"seq"' in msg.data


def status(msg: Msg) -> str | None:
    """A JetStream status message's code ('408', '404', ...), or None for mail."""
    headers = msg.headers
    if not msg.data and headers:
        code = headers.get("Status")
        if code is not None:
            return str(code)
    return None


__all__ = [
    "ACK",
    "BusError",
    "NatsBus",
    "consumer_config",
    "nak",
    "status",
    "stored",
    "stream_config",
]
