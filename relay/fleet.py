"""A relay fleet: many relay processes sharing one NATS JetStream.

A peer connects to any relay of the fleet. An envelope whose recipient is
connected to the same relay goes straight to it, as without a fleet. Any other
envelope is published to JetStream, on the recipient's subject, into one stream
with file storage (`STREAM`); whichever relay holds that recipient reads the
subject through the recipient's durable consumer, writes each envelope to the
peer, and only then acks it. So one mechanism carries mail both to a recipient
connected elsewhere (its relay is pulling, and gets it at once) and to one who
is away (the stream keeps it, within the mailbox limits, until the recipient
comes back to any relay). A relay that dies with mail written to no one never
acked it: JetStream hands it out again after `FleetConfig.ack_wait`, to the
relay the peer reconnects to.

What NATS sees is what the relay sees: a sealed envelope, the key that sent it
(as the relay vouches for it to the recipient), a size and a time. The recipient
key never appears: a subject is ``pixie.mail.`` and 32 hex digits of
HMAC-SHA256 of the key under the fleet secret (`FleetKeys`). The secret is given
to every relay (``PIXIE_FLEET_SECRET``, or ``--fleet-secret-file``) rather than
derived from something the relays share such as the NATS address or the stream
name: anyone who can list subjects or streams knows those too, and could then
hash every key they know to find whose mail waits where. With a secret only the
relays can.

NATS failing is an ordinary outcome, never a relay failure. The relay keeps
serving its own peers; it logs one ``nats_down`` line (ERROR) saying so, and
until NATS answers again (``nats_up``) it holds envelopes for peers it cannot
see in its own memory mailboxes, bounded as always, and hands them to NATS once
it is back. Refusing such envelopes instead would cut off peers on the same
relay from each other for an outage that is not theirs; the sync above resends
whatever the outage loses. Every NATS wait has a deadline (see
`pixie.relay.natsbus`); a relay that cannot reach NATS when it starts refuses to
start, since then a wrong ``--nats`` is the likelier cause.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pixie.protocol import relaywire

from .errors import RelayError
from .mailbox import MailboxLimits

# The stream (and its subjects' shape) of this version: one subject per
# recipient and sender. A stream of the version before it (``PIXIE_MAIL``,
# one subject per recipient) is left alone; what waited there is resent by
# the siblings' next sync.
STREAM = "PIXIE_MAIL_2"
SUBJECT_PREFIX = "pixie.mail"
SECRET_ENV = "PIXIE_FLEET_SECRET"  # noqa: S105 (the variable's name, not a secret)
MIN_SECRET_BYTES = 16
# A payload is the sender key's length, the sender key, then the envelope.
MAX_PAYLOAD_BYTES = 1 + 255 + relaywire.MAX_ENVELOPE_BYTES
_SUBJECT_LABEL = b"pixie-fleet-subject\x00"


class FleetKeys:
    """Recipient key to NATS names, by a keyed hash: the same on every relay
    holding the secret, and meaningless to anyone without it."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise RelayError(f"the fleet secret must be at least {MIN_SECRET_BYTES} bytes")
        self._secret = secret

    def name(self, key: bytes) -> str:
        return self.raw_name(key).hex()

    def raw_name(self, key: bytes) -> bytes:
        """The key's name in the fleet: 16 bytes of its keyed hash."""
        return hmac.new(self._secret, _SUBJECT_LABEL + key, hashlib.sha256).digest()[:16]

    def subject(self, recipient: bytes, sender: bytes) -> str:
        """Where ``sender``'s mail to ``recipient`` waits: a subject of its own,
        so the stream's bound per subject is a share per sender, and one
        sender's flood pushes out only its own older mail."""
        return f"{SUBJECT_PREFIX}.{self.name(recipient)}.{self.name(sender)}"

    def mailbox(self, recipient: bytes) -> str:
        """Every subject of ``recipient``'s mail, whoever sent it."""
        return f"{SUBJECT_PREFIX}.{self.name(recipient)}.*"

    def consumer(self, key: bytes) -> str:
        return f"mail-{self.name(key)}"


def read_secret(path: Path | None) -> bytes:
    """The fleet secret: the file's contents (surrounding whitespace dropped), or
    else ``PIXIE_FLEET_SECRET``; `RelayError` if neither gives one long enough."""
    if path is not None:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise RelayError(
                f"cannot read --fleet-secret-file {path}: {exc.strerror or exc}"
            ) from None
        where = f"--fleet-secret-file {path}"
    else:
        secret = os.environ.get(SECRET_ENV, "").strip().encode()
        where = SECRET_ENV
        if not secret:
            raise RelayError(
                f"--nats needs the fleet secret: set {SECRET_ENV} or pass --fleet-secret-file "
                "(the same on every relay of the fleet)"
            )
    if len(secret) < MIN_SECRET_BYTES:
        raise RelayError(f"{where}: the fleet secret must be at least {MIN_SECRET_BYTES} bytes")
    return secret


def pack(sender: bytes, envelope: bytes) -> bytes:
    return bytes((len(sender),)) + sender + envelope


def unpack(payload: bytes) -> tuple[bytes, bytes] | None:
    """(sender, envelope) from `pack`'s bytes, or None if they are not such."""
    if not payload:
        return None
    size = payload[0]
    sender, envelope = payload[1 : 1 + size], payload[1 + size :]
    if size == 0 or len(sender) != size or not envelope:
        return None
    if len(envelope) > relaywire.MAX_ENVELOPE_BYTES:
        return None
    return sender, envelope


class FleetOutbox(Protocol):
    def put(self, frame: bytes, envelope: bool, sender: bytes = b"") -> str | None: ...

    def put_all(self, frames: list[bytes], size: int, sender: bytes) -> bool: ...


class FleetConnection(Protocol):
    """What the fleet needs of one of the relay's authenticated connections."""

    @property
    def key(self) -> bytes: ...

    @property
    def outbox(self) -> FleetOutbox: ...


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """The JetStream stream that holds mail for recipients who are not connected
    to the relay that took it, and the consumers that read one recipient's mail."""

    name: str
    subjects: str  # a wildcard over every (recipient, sender) subject
    max_msgs_per_subject: int  # per recipient and sender
    max_bytes: int
    max_age: float
    max_msg_size: int
    replicas: int
    ack_wait: float
    max_ack_pending: int
    consumer_idle: float
    sender_bytes: int  # what one sender may publish through one relay per max_age


@dataclass(frozen=True, slots=True)
class NatsAuth:
    """How the relay proves itself to NATS, and whether it checks NATS's
    certificate. At most one way in: a credentials file (a user JWT and its
    nkey seed), an nkey seed file, a user with a password file, or a token
    file; secrets are read from files, never from the command line (where
    any local user can read them). ``insecure``: connect to a NATS that asks
    for no authentication at all (refused otherwise)."""

    creds: Path | None = None
    nkey_seed: Path | None = None
    user: str | None = None
    password_file: Path | None = None
    token_file: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False

    def __post_init__(self) -> None:
        ways = [
            self.creds is not None,
            self.nkey_seed is not None,
            self.user is not None,
            self.token_file is not None,
        ]
        if sum(ways) > 1:
            raise RelayError(
                "give one way to authenticate to NATS: --nats-creds, --nats-nkey-seed, "
                "--nats-user with --nats-password-file, or --nats-token-file"
            )
        if (self.user is None) != (self.password_file is None):
            raise RelayError("--nats-user and --nats-password-file go together")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise RelayError("--nats-tls-cert and --nats-tls-key go together")

    @property
    def authenticates(self) -> bool:
        return any(x is not None for x in (self.creds, self.nkey_seed, self.user, self.token_file))


@dataclass(frozen=True, slots=True)
class FleetConfig:
    url: str
    secret: bytes
    auth: NatsAuth = NatsAuth()
    replicas: int = 1  # copies of the stream in a NATS cluster
    # Mail a relay took but neither acked nor nakked (it died) is handed out again
    # after this long. Longer only delays recovery; shorter risks duplicates while
    # a slow peer is still being written to (duplicates are harmless above).
    ack_wait: float = 10.0
    in_flight: int = 256  # per recipient: handed to its outbox, not yet written
    pull_batch: int = 64
    # A pull request lingers this long for mail; each connected peer costs NATS
    # one request per this many seconds while it has none.
    pull_expires: float = 30.0
    consumer_idle: float = 600.0  # a recipient's consumer outlives its absence this long
    publish_batch: int = 256
    publish_queue_bytes: int = 64 << 20  # waiting for NATS; past it, mail waits here
    health_interval: float = 2.0
    call_timeout: float = 5.0  # any one call to NATS
    nak_delay: float = 1.0  # an outbox that refused mail is offered it again after this
    # The hot path (`pixie.relay.hotpath`): a relay's claim to a connected key
    # lapses unless renewed within this long (it is renewed every third of it).
    presence_lease: float = 30.0
    # Mail handed to another relay directly and not reported written within
    # this long goes to JetStream after all (a duplicate at worst).
    hot_deadline: float = 10.0
    hot_batch_bytes: int = 256 << 10  # one batch to one relay, past its first envelope

    def __post_init__(self) -> None:
        if not self.url.startswith(("nats://", "tls://", "ws://", "wss://")):
            raise RelayError(f"--nats must be nats://HOST:PORT, not {self.url!r:.80}")
        FleetKeys(self.secret)
        for name in (
            "replicas",
            "ack_wait",
            "in_flight",
            "pull_batch",
            "pull_expires",
            "consumer_idle",
            "publish_batch",
            "publish_queue_bytes",
            "health_interval",
            "call_timeout",
            "nak_delay",
            "presence_lease",
            "hot_deadline",
            "hot_batch_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
                raise RelayError(f"fleet {name} must be a positive number, not {value!r}")
        if not 1 <= self.replicas <= 5:
            raise RelayError(f"--nats-replicas must be from 1 to 5, not {self.replicas}")


# Of a recipient's mailbox bound (`MailboxLimits.max_envelopes`), what one
# sender's subject holds; of the stream's bytes, what one sender may publish
# through one relay in a mailbox lifetime.
SENDER_SHARE = 4
SENDER_BYTES_SHARE = 16


def stream_plan(config: FleetConfig, limits: MailboxLimits) -> StreamPlan:
    """The stream's bounds from the relay's own mailbox limits: for the whole
    stream the same bytes and the same age; per recipient and sender a quarter
    of a recipient's envelopes (the oldest of that sender's go first); per
    sender and relay a sixteenth of the stream's bytes per mailbox lifetime.
    A full stream takes nothing new rather than dropping what waits (see
    `natsbus.stream_config`), so no one's mail can push out another's."""
    return StreamPlan(
        name=STREAM,
        subjects=f"{SUBJECT_PREFIX}.*.*",
        max_msgs_per_subject=max(1, limits.max_envelopes // SENDER_SHARE),
        max_bytes=limits.total_bytes,
        max_age=limits.max_age,
        max_msg_size=MAX_PAYLOAD_BYTES,
        replicas=config.replicas,
        ack_wait=config.ack_wait,
        max_ack_pending=2 * config.in_flight,
        consumer_idle=config.consumer_idle,
        sender_bytes=max(relaywire.MAX_ENVELOPE_BYTES, limits.total_bytes // SENDER_BYTES_SHARE),
    )


__all__ = [
    "MAX_PAYLOAD_BYTES",
    "STREAM",
    "FleetConfig",
    "FleetConnection",
    "FleetKeys",
    "FleetOutbox",
    "NatsAuth",
    "StreamPlan",
    "pack",
    "read_secret",
    "stream_plan",
    "unpack",
]
