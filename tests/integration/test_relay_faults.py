"""Faults injected by the relay (`pixie relay --faults SPEC`).

Each fault is pinned with a ``#N`` rule, so every case is deterministic; the
probabilistic rules are checked for replaying exactly under one seed. Clients
run over memory streams as in test_relay.py, with the same barrier: a Ping
answered by a Pong proves the relay has handled everything sent before it, and
that the receiver's writer is serving its outbox (so it is live, and envelopes
for it are forwarded rather than mailboxed). Delays and reorder holds run on the
autojump clock, so nothing waits in wall time and no assertion depends on it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import trio
import trio.testing
from nacl.signing import SigningKey

from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.entry.main import build_parser
from pixie.protocol import relaywire as rw
from pixie.protocol.framing import MIN_ENVELOPE_BYTES
from pixie.relay import cli as relay_cli
from pixie.relay.errors import RelayError
from pixie.relay.logs import JsonFormatter
from pixie.relay.server import Relay, RelayConfig, fingerprint, serve_relay
from tests.support.cli import run_cli
from tests.support.relayclient import Client, captured_log, memory_client, send, tcp_client


def faulty(spec: str, seed: int | None = 0, **settings: Any) -> Relay:
    return Relay(RelayConfig(min_envelope_bytes=0, faults=spec, fault_seed=seed, **settings))


async def pair(relay: Relay, nursery: trio.Nursery) -> tuple[Client, Client]:
    """A sender and a receiver, both logged in, the receiver live."""
    a, b = memory_client(relay, nursery), memory_client(relay, nursery)
    await a.login()
    await b.login()
    assert await b.sync() == []
    return a, b


def numbered(n: int, size: int = 8) -> list[bytes]:
    return [b"%0*d" % (size, i) for i in range(1, n + 1)]


async def send_all(a: Client, b: Client, envelopes: list[bytes]) -> None:
    """Send ``envelopes`` to b in one write, and wait until the relay has routed them."""
    await a.send(*(send(b, e) for e in envelopes))
    assert await a.sync() == []


def delivered(messages: list[rw.RelayMessage]) -> list[bytes]:
    assert all(isinstance(m, rw.Deliver) for m in messages), messages
    return [m.envelope for m in messages if isinstance(m, rw.Deliver)]


def accounted(stats: dict[str, Any]) -> bool:
    """Every envelope taken in, and every copy a duplicate made, is delivered,
    dropped for a counted reason (a drop fault among them), or still held."""
    faults = stats["faults"]
    made = stats["envelopes_in"] + faults.get("duplicate", 0)
    dropped = sum(n for reason, n in stats["drops"].items() if reason != "pong")
    held = stats["mailbox_envelopes"] + stats["outbox_frames"] + stats["fault_held"]
    gone = stats["envelopes_delivered"] + dropped + faults.get("drop", 0)
    return bool(made == gone + held)


# -- each fault, on the N-th envelope ----------------------------------------------


async def test_drop_loses_exactly_the_nth_envelope(nursery: trio.Nursery) -> None:
    relay = faulty("drop=#2")
    a, b = await pair(relay, nursery)
    envelopes = numbered(4)
    await send_all(a, b, envelopes)
    assert delivered(await b.sync()) == [envelopes[0], *envelopes[2:]]
    stats = relay.stats()
    assert stats["faults"] == {"drop": 1}
    assert stats["envelopes_in"] == 4
    assert stats["envelopes_delivered"] == 3
    assert accounted(stats)


async def test_duplicate_delivers_the_nth_envelope_twice(nursery: trio.Nursery) -> None:
    relay = faulty("duplicate=#1")
    a, b = await pair(relay, nursery)
    envelopes = numbered(3)
    await send_all(a, b, envelopes)
    assert delivered(await b.sync()) == [envelopes[0], *envelopes]
    stats = relay.stats()
    assert stats["faults"] == {"duplicate": 1}
    assert stats["envelopes_delivered"] == 4
    assert accounted(stats)


async def test_reorder_lets_the_next_envelope_overtake(nursery: trio.Nursery) -> None:
    relay = faulty("reorder=#1")
    a, b = await pair(relay, nursery)
    e1, e2, e3 = numbered(3)
    await send_all(a, b, [e1, e2, e3])
    assert delivered(await b.sync()) == [e2, e1, e3]
    stats = relay.stats()
    assert stats["faults"] == {"reorder": 1}
    assert stats["fault_held"] == 0
    assert accounted(stats)


async def test_a_reordered_envelope_nothing_overtakes_still_arrives(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    relay = faulty("reorder=#2")
    a, b = await pair(relay, nursery)
    e1, e2 = numbered(2)
    await send_all(a, b, [e1, e2])
    assert delivered(await b.sync()) == [e1]  # e2 waits for an envelope to overtake it
    assert relay.stats()["fault_held"] == 1
    assert await b.envelope() == e2  # none comes: it goes once its hold is over
    assert await b.sync() == []
    stats = relay.stats()
    assert stats["fault_held"] == 0
    assert accounted(stats)


async def test_an_envelope_to_another_recipient_does_not_overtake(
    nursery: trio.Nursery,
) -> None:
    relay = faulty("reorder=#1", reorder_hold=3600.0)
    a, b = await pair(relay, nursery)
    c = memory_client(relay, nursery)
    await c.login()
    assert await c.sync() == []
    await a.send(send(b, b"held"), send(c, b"to c"))
    assert await a.sync() == []
    assert delivered(await c.sync()) == [b"to c"]
    assert relay.stats()["fault_held"] == 1
    await a.send(send(b, b"overtakes"))
    assert await b.envelopes(2) == [b"overtakes", b"held"]


async def test_delay_delivers_the_nth_envelope_late(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    relay = faulty("delay=#1@0.2")
    a, b = await pair(relay, nursery)
    e1, e2 = numbered(2)
    await send_all(a, b, [e1, e2])
    # The sender's frames are all routed and its Pong came back: e1 waits in the
    # relay, not in the sender's read loop.
    assert relay.stats()["fault_held"] == 1
    assert await b.envelopes(2) == [e2, e1]
    assert await b.sync() == []
    stats = relay.stats()
    assert stats["faults"] == {"delay": 1}
    assert stats["fault_held"] == 0
    assert accounted(stats)


async def test_a_delayed_envelope_releases_what_reorder_held(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    relay = faulty("delay=#1@0.2,reorder=#2")
    a, b = await pair(relay, nursery)
    e1, e2 = numbered(2)
    await send_all(a, b, [e1, e2])
    assert relay.stats()["fault_held"] == 2
    assert await b.envelopes(2) == [e1, e2]  # e2 was held until e1 came out of its delay
    assert relay.stats()["faults"] == {"delay": 1, "reorder": 1}


async def test_a_delayed_envelope_for_a_recipient_gone_away_is_dropped_and_counted(
    nursery: trio.Nursery,
) -> None:
    relay = faulty("delay=#1@3600")
    a, b = await pair(relay, nursery)
    await send_all(a, b, [b"late"])
    assert relay.stats()["fault_held"] == 1
    await b.close()
    await trio.testing.wait_all_tasks_blocked()  # the relay has seen b go and closed up
    stats = relay.stats()
    assert stats["connections_authenticated"] == 1
    assert stats["fault_held"] == 0
    assert stats["drops"]["closed"] == 1
    assert accounted(stats)


async def test_faults_count_envelopes_forwarded_live_and_leave_mailboxes_alone(
    nursery: trio.Nursery,
) -> None:
    relay = faulty("drop=#1")
    a, b = await pair(relay, nursery)
    away = SigningKey.generate()
    await a.send(rw.Send(bytes(away.verify_key), b"mailboxed"))
    await send_all(a, b, [b"first live", b"second live"])
    assert delivered(await b.sync()) == [b"second live"]
    c = memory_client(relay, nursery, away)
    assert await c.login() == 1
    assert delivered(await c.sync()) == [b"mailboxed"]
    assert accounted(relay.stats())


async def test_control_frames_are_never_faulted(nursery: trio.Nursery) -> None:
    relay = faulty("drop=1")  # every envelope
    a, b = await pair(relay, nursery)  # Welcome, Ping and Pong all came through
    await send_all(a, b, numbered(5))
    for _ in range(3):
        assert await b.sync() == []
    stats = relay.stats()
    assert stats["faults"] == {"drop": 5}
    assert stats["envelopes_delivered"] == 0
    assert accounted(stats)


async def test_runs_from_the_fast_decoder_are_faulted_one_by_one(nursery: trio.Nursery) -> None:
    # Many Sends of one size to one recipient in one read reach the relay as a run;
    # with a plan in force each is still its own request.
    relay = faulty("duplicate=#3,drop=#7")
    a, b = await pair(relay, nursery)
    envelopes = numbered(10, size=100)
    await send_all(a, b, envelopes)
    want = envelopes[:3] + envelopes[2:6] + envelopes[7:]
    assert delivered(await b.sync()) == want
    stats = relay.stats()
    assert stats["faults"] == {"drop": 1, "duplicate": 1}
    assert accounted(stats)


# -- probabilities and seeds ----------------------------------------------------------

MIXED = "drop=0.15,delay=0.15@0.5,duplicate=0.15,reorder=0.15"


async def mixed_run(nursery: trio.Nursery, seed: int) -> tuple[list[bytes], dict[str, int]]:
    relay = faulty(MIXED, seed)
    a, b = await pair(relay, nursery)
    envelopes = numbered(60)
    await send_all(a, b, envelopes)
    faults = relay.stats()["faults"]
    got = await b.envelopes(len(envelopes) - faults["drop"] + faults["duplicate"])
    assert await b.sync() == []
    stats = relay.stats()
    assert stats["fault_held"] == 0
    assert accounted(stats)
    await a.close()
    await b.close()
    return got, faults


async def test_a_seed_replays_the_same_faults(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    first = await mixed_run(nursery, seed=2024)
    assert await mixed_run(nursery, seed=2024) == first
    got, faults = first
    assert all(faults[name] > 0 for name in ("drop", "delay", "duplicate", "reorder")), faults
    assert got != numbered(60)


async def test_probability_zero_never_strikes(nursery: trio.Nursery) -> None:
    relay = faulty("drop=0,duplicate=0", seed=None)
    a, b = await pair(relay, nursery)
    envelopes = numbered(20)
    await send_all(a, b, envelopes)
    assert delivered(await b.sync()) == envelopes
    assert relay.stats()["faults"] == {"drop": 0, "duplicate": 0}


# -- without a plan ---------------------------------------------------------------------


async def test_without_a_plan_the_relay_has_no_fault_state(nursery: trio.Nursery) -> None:
    tagged = RelayConfig(min_envelope_bytes=0)
    for relay in (Relay(tagged), Relay(RelayConfig(min_envelope_bytes=0, faults=" , "))):
        assert relay._router.faults is None
        a, b = await pair(relay, nursery)
        await send_all(a, b, numbered(3))
        assert delivered(await b.sync()) == numbered(3)
        stats = relay.stats()
        assert "faults" not in stats
        assert "fault_held" not in stats


# -- logs -------------------------------------------------------------------------------


async def test_the_plan_and_each_fault_are_logged_without_envelope_bytes(
    nursery: trio.Nursery,
) -> None:
    secret = b"the-sealed-envelope-nobody-logs"
    with captured_log(JsonFormatter()) as log:
        relay = faulty("duplicate=#1,drop=#2", seed=5)
        a, b = await pair(relay, nursery)
        await send_all(a, b, [secret, secret])
        assert delivered(await b.sync()) == [secret, secret]
        relay.log_stats()
    text = log.getvalue()
    for forbidden in (secret, a.public, b.public):
        assert forbidden.hex() not in text
        assert repr(forbidden)[2:-1] not in text
    lines = [json.loads(line) for line in text.splitlines()]
    plan = next(line for line in lines if line["event"] == "faults")
    assert (plan["plan"], plan["seed"]) == ("duplicate=#1,drop=#2", 5)
    struck = [line for line in lines if line["event"] == "fault"]
    assert [line["fault"] for line in struck] == ["duplicate", "drop"]
    for line in struck:
        assert line["key"] == fingerprint(a.public)
        assert line["to"] == fingerprint(b.public)
        assert line["size"] == len(secret)
    assert lines[-1]["event"] == "stats"
    assert lines[-1]["faults"] == {"drop": 1, "duplicate": 1}


# -- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("bogus=1", "unknown fault 'bogus'"),
        ("drop=2", "not in [0, 1]"),
        ("delay=0.5", "needs a duration"),
        ("drop=0.1@3", "takes no duration"),
        ("drop", "expected NAME=P"),
        ("reorder=#0", "count from #1"),
        ("drop=#1,drop=#2", "given twice"),
        ("delay=0.5@0", "duration must be above 0"),
    ],
)
def test_cli_bad_fault_specs_are_one_line_and_exit_2(spec: str, fragment: str) -> None:
    result = run_cli("relay", "--listen", "127.0.0.1:0", "--faults", spec)
    assert result.code == 2
    assert result.err.startswith("pixie: error: ")
    assert fragment in result.err
    assert result.err.count("\n") == 1
    assert result.out == ""


def test_cli_bad_fault_seed_is_refused() -> None:
    result = run_cli(
        "relay", "--listen", "127.0.0.1:0", "--faults", "drop=0.5", "--fault-seed", "x"
    )
    assert result.code == 2
    assert result.err.startswith("pixie: error: ")
    assert result.err.count("\n") == 1


async def test_cli_bad_fault_spec_through_the_real_binary() -> None:
    command = [sys.executable, "-m", "pixie.entry.main", "relay", "--listen", "127.0.0.1:0"]
    with trio.fail_after(60):
        done = await trio.run_process(
            [*command, "--faults", "bogus=1"], capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 2
    assert done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith("pixie: error: ")
    assert "unknown fault" in err
    assert err.count("\n") == 1


def test_a_fault_spec_in_config_is_checked_when_the_config_is_made() -> None:
    with pytest.raises(RelayError, match="unknown fault"):
        RelayConfig(faults="bogus=1")
    with pytest.raises(RelayError, match="reorder_hold"):
        RelayConfig(reorder_hold=0)


async def test_cli_faults_reach_a_relay_that_a_device_client_talks_to() -> None:
    args = build_parser().parse_args(
        ["relay", "--listen", "127.0.0.1:0", "--faults", "duplicate=#1", "--fault-seed", "7"]
    )
    config = relay_cli.config_from_args(args)
    assert (config.faults, config.fault_seed) == ("duplicate=#1", 7)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_relay, config)
        receiver = await tcp_client(port)
        await receiver.login()
        assert await receiver.sync() == []
        sender = await RelayClient.connect(RelayAddress("127.0.0.1", port), SigningKey.generate())
        # Envelopes of the smallest sealed size: the relay runs with its defaults.
        once, twice = (word.ljust(MIN_ENVELOPE_BYTES, b".") for word in (b"once", b"twice"))
        await sender.send(receiver.public, once)
        await sender.send(receiver.public, twice)
        assert await receiver.envelopes(3) == [once, once, twice]
        await sender.aclose()
        await receiver.close()
        nursery.cancel_scope.cancel()
