"""Kill -9 soak: random processes die mid-work, and nothing acknowledged is lost.

A relay, a Homebase (`pixie run`) and a device run as separate processes on
loopback. Each round the device does one thing (imports a batch of events,
adds notes, syncs, offloads, fetches or recalls) while a randomly chosen
process (the relay, the Homebase, or the device command itself) is killed with
SIGKILL at a random moment; whatever died is restarted. After every round:

- every event and note whose command succeeded is on the device;
- every offloaded note is readable: its body is here or the Homebase holds the
  exact bytes (checked in its database by hash, as the serve gate does);

and at the end, with faults stopped, one sync leaves both digests equal.

    python scripts/soak.py [--kills 200] [--seed S] [--dir DIR]
    ./scripts/soak [ARGS...]

Exit status 0 if every check held; the first violation is printed with its
round, and the seed replays the same choices.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PIXIE = [sys.executable, "-m", "pixie.entry.main"]
ACTIONS = ("import", "notes", "sync", "offload", "fetch", "recall")


class Violation(Exception):
    pass


@dataclass
class Soak:
    tmp: Path
    rng: random.Random
    port: int
    env: dict[str, str]
    relay: subprocess.Popen[bytes] | None = None
    homebase: subprocess.Popen[bytes] | None = None
    events: set[str] = field(default_factory=set)  # texts of acknowledged events
    notes: set[str] = field(default_factory=set)  # ids of acknowledged notes
    kills: dict[str, int] = field(default_factory=dict)
    counter: int = 0

    @property
    def phone(self) -> Path:
        return self.tmp / "phone"

    @property
    def mac(self) -> Path:
        return self.tmp / "mac"

    def pixie(self, data: Path, *args: str, stdin: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*PIXIE, "--data", str(data), *args],
            env=self.env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def must(self, data: Path, *args: str) -> str:
        proc = self.pixie(data, *args)
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise Violation(f"`pixie {' '.join(args)}` failed: {err.strip()[:300]}")
        return out

    # -- the processes ----------------------------------------------------------------

    def start_relay(self) -> None:
        self.relay = subprocess.Popen(
            [*PIXIE, "relay", "--listen", f"127.0.0.1:{self.port}"],
            env=self.env,
            stderr=(self.tmp / "relay.log").open("ab"),
        )
        _wait_port(self.port)

    def start_homebase(self) -> None:
        self.homebase = subprocess.Popen(
            [*PIXIE, "--data", str(self.mac), "run", "--interval", "5"],
            env=self.env,
            stderr=(self.tmp / "homebase.log").open("ab"),
        )

    def setup(self) -> None:
        self.start_relay()
        self.must(self.phone, "init", "--name", "phone")
        self.must(self.mac, "init", "--role", "homebase", "--name", "mac")
        inviter = self.pixie(self.mac, "invite", "--relay", f"127.0.0.1:{self.port}")
        assert inviter.stdout is not None
        code = inviter.stdout.readline().strip()
        self.must(self.phone, "pair", code)
        if inviter.wait(timeout=60) != 0:
            raise Violation("pairing failed")
        self.start_homebase()

    def stop(self) -> None:
        for proc in (self.homebase, self.relay):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()

    # -- one round --------------------------------------------------------------------

    def round(self, n: int) -> None:
        action = self.rng.choice(ACTIONS)
        victim = self.rng.choice(("relay", "homebase", "device"))
        delay = self.rng.uniform(0.0, 2.5)
        command, pending = self._start(action)
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and command.poll() is None:
            time.sleep(0.01)
        target = {"relay": self.relay, "homebase": self.homebase, "device": command}[victim]
        if target is not None and target.poll() is None:
            target.kill()
            target.wait()
            self.kills[victim] = self.kills.get(victim, 0) + 1
        out, _ = command.communicate(timeout=120)
        if command.returncode == 0:
            self._acknowledged(action, pending, out)
        if self.relay is None or self.relay.poll() is not None:
            self.start_relay()
        if self.homebase is None or self.homebase.poll() is not None:
            self.start_homebase()
        self.check(n, action, victim)

    def _start(self, action: str) -> tuple[subprocess.Popen[str], list[str]]:
        if action == "import":
            texts = [f"soak event {self._next()}" for _ in range(self.rng.randint(1, 200))]
            lines = "".join(
                json.dumps({"kind": "journal", "at": "2026-01-01T10:00:00Z", "text": t}) + "\n"
                for t in texts
            )
            proc = self.pixie(self.phone, "log", "import", "-", stdin=lines)
            assert proc.stdin is not None
            try:
                proc.stdin.write(lines)
                proc.stdin.close()
            except BrokenPipeError:
                pass
            proc.stdin = None  # written whole (a 64 KiB pipe holds every batch)
            return proc, texts
        if action == "notes":
            title = f"soak note {self._next()}"
            return self.pixie(
                self.phone, "notebook", "add", "--kind", "guidance", "--title", title,
                "--body", f"{title}: " + "words " * self.rng.randint(1, 400),
            ), []  # fmt: skip
        if action == "sync":
            return self.pixie(self.phone, "sync", "--timeout", "10"), []
        resident, offloaded = self._notes()
        if action == "offload" and resident:
            note = self.rng.choice(resident)
            return self.pixie(self.phone, "offload", note, "--timeout", "5"), [note]
        if action in ("fetch", "recall") and offloaded:
            note = self.rng.choice(offloaded)
            return self.pixie(self.phone, action, note, "--timeout", "5"), [note]
        return self.pixie(self.phone, "status"), []

    def _acknowledged(self, action: str, pending: list[str], out: str) -> None:
        if action == "import":
            self.events.update(pending)
        elif action == "notes":
            self.notes.add(out.strip())

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _notes(self) -> tuple[list[str], list[str]]:
        rows = _query(
            self.phone / "pixie.db",
            "SELECT id, holder FROM note WHERE zone = 'clear' AND deleted = 0",
        )
        return [i for i, h in rows if h is None], [i for i, h in rows if h is not None]

    # -- the checks ---------------------------------------------------------------------

    def check(self, n: int, action: str, victim: str) -> None:
        where = f"round {n} ({action}, killed {victim})"
        texts = {t for (t,) in _query(self.phone / "pixie.db", "SELECT text FROM memory_event")}
        lost = self.events - texts
        if lost:
            raise Violation(f"{where}: {len(lost)} acknowledged events missing")
        ids = {i for (i,) in _query(self.phone / "pixie.db", "SELECT id FROM note")}
        if self.notes - ids:
            raise Violation(f"{where}: acknowledged notes missing: {sorted(self.notes - ids)}")
        held = {
            (note, chash): body
            for note, chash, body in _query(
                self.mac / "pixie.db", "SELECT note_id, content_hash, body FROM holding"
            )
        }
        parked = _query(
            self.phone / "pixie.db",
            "SELECT id, content_hash FROM note WHERE holder IS NOT NULL AND deleted = 0",
        )
        for note, chash in parked:
            body = held.get((note, chash))
            if body is None or hashlib.sha256(body).hexdigest() != chash:
                raise Violation(f"{where}: note {note} exists nowhere (offloaded, not held)")

    def converge(self) -> None:
        # A fresh Homebase, so no reconnect backoff left by relay kills delays it.
        if self.homebase is not None and self.homebase.poll() is None:
            self.homebase.send_signal(signal.SIGTERM)
            self.homebase.wait(timeout=30)
        self.start_homebase()
        for _ in range(3):
            proc = self.pixie(self.phone, "sync", "--json", "--timeout", "30")
            proc.communicate(timeout=180)
            if proc.returncode == 0:
                break
        a = json.loads(self.must(self.phone, "status", "--json"))["digest"]
        b = json.loads(self.must(self.mac, "status", "--json"))["digest"]
        if a != b:
            raise Violation(f"digests differ after the final sync: {a[:16]} vs {b[:16]}")
        for note in self._notes()[1]:
            self.must(self.phone, "fetch", note, "--timeout", "20")


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Violation(f"the relay did not come up on port {port}")


def run(kills: int, seed: int, directory: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="pixie-soak-", dir=directory) as name:
        tmp = Path(name)
        env = {**os.environ, "PIXIE_KEYSTORE": "file", "PIXIE_KEYS": str(tmp / "keys")}
        soak = Soak(tmp, random.Random(seed), _free_port(), env)
        started = time.monotonic()
        n = 0
        try:
            soak.setup()
            while sum(soak.kills.values()) < kills:
                n += 1
                soak.round(n)
            soak.converge()
        except Violation as exc:
            print(f"soak seed {seed}: VIOLATION: {exc}", file=sys.stderr)
            return 1
        finally:
            soak.stop()
        minutes = (time.monotonic() - started) / 60
        print(
            f"soak seed {seed}: {sum(soak.kills.values())} kills "
            f"({', '.join(f'{k} {v}' for k, v in sorted(soak.kills.items()))}) in {n} rounds, "
            f"{minutes:.1f} min; {len(soak.events)} acknowledged events and "
            f"{len(soak.notes)} notes all present; every offloaded note held; digests equal"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    return run(args.kills, seed, args.dir)


if __name__ == "__main__":
    sys.exit(main())
