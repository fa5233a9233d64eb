"""``pixie relay``: run the ciphertext-only relay until SIGINT or SIGTERM.

Flags argparse can judge (an address, a number, a file that must exist) are
refused there; what only shows later (a TLS pair that does not load, an address
that cannot be bound, a NATS server that does not answer) raises `RelayError`.
Either way the entry point prints one line and exits 2, before the relay
accepts anything.

With ``--nats nats://HOST:PORT`` the relay joins a fleet sharing that NATS
(`pixie.relay.fleet`); the NATS client runs on trio-asyncio's loop inside the
relay's trio run (see `pixie.relay.natsbus` for why).
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import ssl
from functools import partial
from pathlib import Path
from typing import Any

import trio

from pixie.protocol.faults import RELAY_FAULTS
from pixie.protocol.relaywire import MAX_ENVELOPE_BYTES

from .errors import RelayError
from .fleet import FleetConfig, NatsAuth, read_secret
from .logs import configure_logging, event
from .mailbox import MailboxLimits
from .server import Relay, RelayConfig

_DEFAULT = RelayConfig()
_DEFAULT_MAIL = MailboxLimits()
_DEFAULT_FLEET_ACK_WAIT = 10.0  # `FleetConfig.ack_wait`
_DEFAULT_HOT_DEADLINE = 10.0  # `FleetConfig.hot_deadline`
# How many seconds of the steady rate a client may send at once.
BURST_SECONDS = 4.0


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT``, or ``:PORT`` for every interface."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT, not {text!r:.80}")
    if any(c.isspace() or c in "[]/" for c in host):
        raise argparse.ArgumentTypeError(f"bad host in {text!r:.80}")
    return host, int(port)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {text!r:.40}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r:.40}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r:.40}") from None


def _existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r:.200}")
    return path


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server-side TLS context from PEM files, or `RelayError` naming what is wrong."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
        raise RelayError(f"cannot use TLS certificate {cert} with key {key}: {reason}") from None
    return context


def config_from_args(args: argparse.Namespace) -> RelayConfig:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise RelayError("--tls-cert and --tls-key go together")
    context = None if args.tls_cert is None else tls_context(args.tls_cert, args.tls_key)
    host, port = args.listen
    return RelayConfig(
        host=host or None,
        port=port,
        ssl_context=context,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        envelopes_per_second=args.envelopes_per_second,
        envelope_burst=max(1.0, args.envelopes_per_second * BURST_SECONDS),
        bytes_per_second=args.bytes_per_second,
        byte_burst=max(float(MAX_ENVELOPE_BYTES), args.bytes_per_second * BURST_SECONDS),
        mailbox=MailboxLimits(
            max_envelopes=args.mailbox_envelopes,
            max_bytes=args.mailbox_bytes,
            max_age=args.mailbox_age,
            total_bytes=args.mailbox_total_bytes,
            max_recipients=_DEFAULT_MAIL.max_recipients,
        ),
        stats_interval=args.stats_interval,
        faults=args.faults,
        fault_seed=args.fault_seed,
    )


# Flags that mean something only with --nats.
_NATS_ONLY = (
    "--fleet-secret-file",
    "--nats-creds",
    "--nats-nkey-seed",
    "--nats-user",
    "--nats-password-file",
    "--nats-token-file",
    "--nats-tls-ca",
    "--nats-tls-cert",
    "--nats-tls-key",
    "--nats-insecure",
)


# How the relay logs in to NATS and checks it: each a file (secrets never go
# on the command line, where any local user can read them).
_NATS_FILES = (
    ("--nats-creds", "a NATS credentials file (user JWT and nkey seed) to connect with"),
    ("--nats-nkey-seed", "a NATS nkey seed file"),
    ("--nats-password-file", "the NATS user's password, one line"),
    ("--nats-token-file", "a NATS token, one line"),
    (
        "--nats-tls-ca",
        "check NATS's certificate against this CA (PEM); tls:// URLs use the system's",
    ),
    ("--nats-tls-cert", "client certificate (PEM)"),
    ("--nats-tls-key", "client private key (PEM)"),
)


def fleet_from_args(args: argparse.Namespace) -> FleetConfig | None:
    if args.nats is None:
        given = [
            name
            for name in _NATS_ONLY
            if getattr(args, name.removeprefix("--").replace("-", "_")) not in (None, False)
        ]
        if given:
            raise RelayError(f"{given[0]} goes with --nats")
        return None
    return FleetConfig(
        url=args.nats,
        secret=read_secret(args.fleet_secret_file),
        replicas=args.nats_replicas,
        ack_wait=args.nats_ack_wait,
        hot_deadline=args.nats_hot_deadline,
        auth=NatsAuth(
            creds=args.nats_creds,
            nkey_seed=args.nats_nkey_seed,
            user=args.nats_user,
            password_file=args.nats_password_file,
            token_file=args.nats_token_file,
            tls_ca=args.nats_tls_ca,
            tls_cert=args.nats_tls_cert,
            tls_key=args.nats_tls_key,
            insecure=args.nats_insecure,
        ),
    )


async def run_relay(
    config: RelayConfig, port_file: Path | None = None, fleet: FleetConfig | None = None
) -> int:
    """Serve until SIGINT or SIGTERM, then close every connection and log final stats."""
    try:
        listeners = await trio.open_tcp_listeners(config.port, host=config.host)
    except OSError as exc:
        where = f"{config.host or '*'}:{config.port}"
        raise RelayError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    if fleet is None:
        return await _serve(Relay(config), listeners, port_file)
    # Imported here: a relay without a fleet never loads the asyncio bridge.
    import trio_asyncio

    from .member import FleetMember

    async with trio_asyncio.open_loop():
        joined = await FleetMember.open(fleet, config.mailbox)
        try:
            return await _serve(Relay(config, fleet=joined), listeners, port_file)
        finally:
            await joined.close()


async def _serve(relay: Relay, listeners: list[trio.SocketListener], port_file: Path | None) -> int:
    failure: RelayError | None = None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(partial(relay.serve, listeners=listeners))
            try:
                if port_file is not None:
                    write_port_file(port_file, port)
            except RelayError as exc:
                failure = exc
            else:
                async for signum in signals:
                    event(logging.INFO, "shutting_down", signal=signal.Signals(signum).name)
                    break
            relay.shutdown()
    if failure is not None:
        raise failure
    return 0


def write_port_file(path: Path, port: int) -> None:
    # Written whole, then renamed into place: a reader never sees half a number.
    partial_file = path.with_name(path.name + ".partial")
    try:
        partial_file.write_text(f"{port}\n", encoding="ascii")
        partial_file.replace(path)
    except OSError as exc:
        raise RelayError(f"cannot write --port-file {path}: {exc.strerror or exc}") from None


def cmd_relay(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    fleet = fleet_from_args(args)
    configure_logging(json_lines=args.json_logs)
    return trio.run(run_relay, config, args.port_file, fleet)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pixie relay`` on the top-level subparsers."""
    p = sub.add_parser(
        "relay",
        parents=[common],
        help="run the relay that forwards sealed envelopes between keys",
        description="Forward sealed envelopes between peer keys. The relay holds no key "
        "and can open no envelope; clients prove their key before sending or receiving.",
    )
    p.add_argument(
        "--listen",
        required=True,
        type=parse_listen,
        metavar="HOST:PORT",
        help="address to listen on (:PORT for every interface; port 0 picks one)",
    )
    p.add_argument("--tls-cert", type=_existing_file, metavar="FILE", help="PEM certificate")
    p.add_argument("--tls-key", type=_existing_file, metavar="FILE", help="PEM private key")
    p.add_argument("--json-logs", action="store_true", help="log JSON Lines instead of text")
    p.add_argument(
        "--stats-interval",
        type=_positive_float,
        default=_DEFAULT.stats_interval,
        metavar="SECONDS",
        help=f"seconds between stats log lines (default {_DEFAULT.stats_interval:g})",
    )
    p.add_argument(
        "--port-file",
        type=Path,
        metavar="FILE",
        help="write the bound port here once listening (for --listen HOST:0)",
    )
    p.add_argument(
        "--max-connections",
        type=_positive_int,
        default=_DEFAULT.max_connections,
        metavar="N",
        help=(
            "connections at once; a newcomer then evicts the longest-open connection "
            "that has carried no envelope, or is refused as busy "
            f"(default {_DEFAULT.max_connections})"
        ),
    )
    p.add_argument(
        "--idle-timeout",
        type=_positive_float,
        default=_DEFAULT.idle_timeout,
        metavar="SECONDS",
        help="close a client silent this long; it is pinged halfway "
        f"(default {_DEFAULT.idle_timeout:g})",
    )
    p.add_argument(
        "--envelopes-per-second",
        type=_positive_float,
        default=_DEFAULT.envelopes_per_second,
        metavar="N",
        help="per-client envelope rate; envelopes over it are dropped "
        f"(default {_DEFAULT.envelopes_per_second:g})",
    )
    p.add_argument(
        "--bytes-per-second",
        type=_positive_float,
        default=_DEFAULT.bytes_per_second,
        metavar="N",
        help=f"per-client byte rate (default {_DEFAULT.bytes_per_second:.0f})",
    )
    p.add_argument(
        "--mailbox-envelopes",
        type=_positive_int,
        default=_DEFAULT_MAIL.max_envelopes,
        metavar="N",
        help=f"envelopes held per offline recipient (default {_DEFAULT_MAIL.max_envelopes})",
    )
    p.add_argument(
        "--mailbox-bytes",
        type=_positive_int,
        default=_DEFAULT_MAIL.max_bytes,
        metavar="N",
        help=f"bytes held per offline recipient (default {_DEFAULT_MAIL.max_bytes})",
    )
    p.add_argument(
        "--mailbox-age",
        type=_positive_float,
        default=_DEFAULT_MAIL.max_age,
        metavar="SECONDS",
        help=f"how long an envelope waits before it is dropped (default {_DEFAULT_MAIL.max_age:g})",
    )
    p.add_argument(
        "--mailbox-total-bytes",
        type=_positive_int,
        default=_DEFAULT_MAIL.total_bytes,
        metavar="N",
        help=f"bytes held for all recipients together (default {_DEFAULT_MAIL.total_bytes})",
    )
    p.add_argument(
        "--faults",
        default="",
        metavar="SPEC",
        help="inject faults into forwarding, for testing: comma-separated NAME=RULE, "
        f"NAME one of {', '.join(RELAY_FAULTS)}, RULE a probability P, P@SECONDS "
        "(delay), or #N for exactly the N-th envelope (e.g. drop=0.1,delay=0.5@0.3)",
    )
    p.add_argument(
        "--fault-seed",
        type=_seed,
        metavar="INT",
        help="seed the fault dice for a reproducible run (default: random, logged at start)",
    )
    p.add_argument(
        "--nats",
        metavar="nats://HOST:PORT",
        help="join a relay fleet sharing this NATS server or cluster (JetStream on); "
        "peers may then connect to any relay of the fleet. Needs the fleet secret "
        "in PIXIE_FLEET_SECRET or --fleet-secret-file",
    )
    p.add_argument(
        "--fleet-secret-file",
        type=_existing_file,
        metavar="FILE",
        help="the fleet secret (the same on every relay; at least 16 bytes), which "
        "hides recipient keys in NATS subject names",
    )
    p.add_argument(
        "--nats-replicas",
        type=_positive_int,
        default=1,
        metavar="N",
        help="copies JetStream keeps of waiting mail, in a NATS cluster (default 1)",
    )
    p.add_argument(
        "--nats-ack-wait",
        type=_positive_float,
        default=_DEFAULT_FLEET_ACK_WAIT,
        metavar="SECONDS",
        help="mail a relay took from JetStream but never wrote (it died) is handed out "
        f"again after this long (default {_DEFAULT_FLEET_ACK_WAIT:g})",
    )
    p.add_argument(
        "--nats-hot-deadline",
        type=_positive_float,
        default=_DEFAULT_HOT_DEADLINE,
        metavar="SECONDS",
        help="mail handed to the relay its recipient is on, and not reported written "
        "within this long (that relay died or froze), goes to JetStream after all "
        f"(default {_DEFAULT_HOT_DEADLINE:g})",
    )
    for flag, what in _NATS_FILES:
        p.add_argument(flag, type=_existing_file, metavar="FILE", help=what)
    p.add_argument("--nats-user", metavar="USER", help="a NATS user (with --nats-password-file)")
    p.add_argument(
        "--nats-insecure",
        action="store_true",
        help="connect to a NATS that asks for no authentication (refused otherwise): "
        "only for one that nothing but this machine can reach",
    )
    p.set_defaults(func=cmd_relay)
