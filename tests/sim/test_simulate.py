"""The deterministic simulator: a sweep of seeds, replay, and proof that it can fail.

The sweep runs the real stores and protocol cores under every fault the
simulator knows; each broken variant (`simbroken.py`) must be caught by the
invariant meant for it within a bounded number of seeds.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

import pytest

from pixie.device.notebook import nearby
from pixie.protocol import ids
from pixie.sim.__main__ import main, usable_cpus
from pixie.sim.results import RunResult, run_seed
from tests.support.simbroken import VARIANTS

SWEEP_SEEDS = 300
SWEEP_STEPS = 25
CHUNKS = 12
VARIANT_STEPS = 30


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seed_sweep_holds_every_invariant(chunk: int) -> None:
    size = SWEEP_SEEDS // CHUNKS
    for seed in range(chunk * size, (chunk + 1) * size):
        result = run_seed(seed, SWEEP_STEPS)
        assert result.ok, _explain(result)


@pytest.mark.parametrize("seed", [14, 38, 153, 6617])
def test_seeds_that_once_lost_a_note_now_hold(seed: int) -> None:
    """Each of these schedules once left a note nowhere: a release queued by a
    recall (or by a duplicate offload that lost a race) later dropped the very
    holding a new pointer relied on. `NoteOffloadService` now refuses that.
    In 6617 the release was a retry the network delayed past the note's next
    offload of the same body; the holder now ignores a release sent before the
    offload that last backed the holding."""
    result = run_seed(seed, 60)
    assert result.ok, _explain(result)


@pytest.mark.slow
def test_runs_exercise_what_they_claim_to() -> None:
    """Across a few seeds the schedule reaches every operation and fault, so a
    sweep that passes is not passing by doing nothing."""
    totals: dict[str, int] = {}
    cleared = verified = crashes = failed_sessions = lost = 0
    for seed in range(12):
        stats = run_seed(seed, 60).stats
        for op, n in stats["ops"].items():  # type: ignore[attr-defined]
            totals[op] = totals.get(op, 0) + n
        cleared += stats["offloads_cleared"]  # type: ignore[operator]
        verified += stats["fetches_verified"]  # type: ignore[operator]
        crashes += stats["crashes"]  # type: ignore[operator]
        failed_sessions += stats["sessions_failed"]  # type: ignore[operator]
        lost += stats["lost"]  # type: ignore[operator]
    assert set(totals) >= {"append", "distil", "edit", "sealed", "sync", "offload", "fetch"}
    assert {"crash", "partition", "clock"} <= set(totals)
    assert cleared > 0 and verified > 0 and crashes > 0 and failed_sessions > 0 and lost > 0


def test_a_seed_replays_exactly() -> None:
    """The same seed gives the same run: twice in a row, after another seed
    ran in between, and in another process. The digests cover every id,
    stamp and sealed byte, and the stats a hash of every envelope the relay
    carried, so "the same" means byte for byte."""
    runs = {seed: run_seed(seed, 40) for seed in (3, 17)}
    for seed, first in runs.items():
        second = run_seed(seed, 40)  # right after a run of another seed
        assert first.ok and first.trace == second.trace
        assert first.digests == second.digests and all(first.digests)
        assert first.stats == second.stats
    assert runs[3].trace != runs[17].trace
    assert runs[3].stats["relay_hash"] != runs[17].stats["relay_hash"]

    elsewhere = _subprocess("--seed", "17", "--steps", "40", "--json")
    assert elsewhere.returncode == 0, elsewhere.stderr
    line = json.loads(elsewhere.stdout.splitlines()[0])
    assert line == json.loads(json.dumps(runs[17].as_json(), sort_keys=True))


def test_the_simulator_leaves_the_process_alone() -> None:
    """Simulated time and the seed's entropy are handed in, never patched: a
    run neither reads nor moves the process's own id minter, and the real
    clock and randomness are the real ones throughout."""
    real = (time.time, time.time_ns, os.urandom)
    before = ids.DEFAULT_MINTER.state
    seen: list[tuple[object, ...]] = []
    run_seed(5, 30, trace=lambda _: seen.append((time.time, time.time_ns, os.urandom)))
    assert ids.DEFAULT_MINTER.state == before
    assert seen and all(now == real for now in seen)


@pytest.mark.slow
def test_a_violation_replays_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    patch, _, _ = VARIANTS["noop_bumps_clock"]
    patch(monkeypatch)
    failing = _first_failure(40, 30)
    again = run_seed(failing.seed, 30)
    assert (again.ok, again.step, again.invariant) == (False, failing.step, failing.invariant)
    assert again.trace == failing.trace


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_broken_variant_is_caught(monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    patch, invariant, bound = VARIANTS[variant]
    patch(monkeypatch)
    failing = _first_failure(bound, VARIANT_STEPS)
    assert failing.invariant == invariant, _explain(failing)


@pytest.mark.slow
def test_with_meaning_on_seeds_hold_and_a_sealed_leak_is_still_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`scripts/simulate` runs with search by meaning on (the default), where a
    search for the sealed canary's made-up word comes back with the nearest
    clear notes: those are no leak, so seeds must hold; a sealed write that
    lands in the clear zone must still fail invariant 7."""
    monkeypatch.setenv("PIXIE_EMBEDDINGS", "1")
    if not nearby.enabled():
        pytest.fail("the embedding model does not load here")
    for seed in range(8):
        result = run_seed(seed, 60)
        assert result.ok, _explain(result)
    patch, invariant, bound = VARIANTS["sealed_into_clear"]
    patch(monkeypatch)
    failing = _first_failure(bound, VARIANT_STEPS)
    assert failing.invariant == invariant == 7, _explain(failing)


@pytest.mark.slow
def test_a_lying_holder_is_caught() -> None:
    """A holder that acks bodies it never stored defeats every device-side gate;
    the simulator must notice the note that then exists nowhere."""
    for seed in range(40):
        result = run_seed(seed, VARIANT_STEPS, lies=True)
        if not result.ok:
            assert result.invariant == 1, _explain(result)
            return
    pytest.fail("a holder that acks without storing went unnoticed for 40 seeds")


def test_cli_runs_seeds_and_reports_json() -> None:
    code, out, err = _cli("--seeds", "2", "--first", "5", "--steps", "10", "--json", "--jobs", "1")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["seed"] for line in lines[:2]] == [5, 6]
    assert all(line["ok"] for line in lines[:2])
    assert lines[2]["summary"]["seeds"] == 2 and lines[2]["summary"]["violations"] == 0


def test_cli_reports_a_violation_with_its_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    patch, _, _ = VARIANTS["plaintext_envelopes"]
    patch(monkeypatch)
    code, out, _ = _cli("--seed", "0", "--steps", "20")
    assert code == 1
    assert "VIOLATION seed=0" in out and "invariant=6" in out
    assert "scripts/simulate --seed 0 --steps 20" in out


def test_jobs_report_what_one_job_does_and_each_seed_replays_alone() -> None:
    """Worker processes change how fast a sweep runs, never what it reports:
    the same JSON line per seed, in seed order, as one job gives, and a seed
    replayed alone (``--seed``) is the run it was inside the sweep."""
    flags = ["--seeds", "4", "--first", "15", "--steps", "12", "--json"]
    code, out, err = _cli(*flags, "--jobs", "1")
    assert code == 0, err
    one_job = out.splitlines()
    jobs = _subprocess(*flags, "--jobs", "2")
    assert jobs.returncode == 0, jobs.stderr
    two_jobs = jobs.stdout.splitlines()
    assert two_jobs[:-1] == one_job[:-1]
    assert [json.loads(line)["seed"] for line in two_jobs[:-1]] == [15, 16, 17, 18]
    summary = json.loads(two_jobs[-1])["summary"]
    assert (summary["seeds"], summary["violations"], summary["jobs"]) == (4, 0, 2)
    code, alone, err = _cli("--seed", "17", "--steps", "12", "--json")
    assert code == 0, err
    assert alone.splitlines()[0] == one_job[2]


def test_jobs_stop_at_the_first_violation_in_seed_order() -> None:
    """A lying holder is caught first at seed 32 (of 28..35) with 30 steps:
    with two workers the report is the same, seeds after it unreported, and
    it names the replay."""
    flags = ["--seeds", "8", "--first", "28", "--steps", "30", "--lying-holder"]
    code, out, _ = _cli(*flags, "--jobs", "1")
    jobs = _subprocess(*flags, "--jobs", "2")
    assert code == jobs.returncode == 1
    assert "VIOLATION seed=32 " in out and "invariant=1 " in out
    assert "scripts/simulate --seed 32 --steps 30 --trace" in out
    report, timing = out.rsplit("\n", 2)[0], out.splitlines()[-1]
    assert jobs.stdout.rsplit("\n", 2)[0] == report
    assert timing.startswith("5 seeds x 30 steps: 1 violated")
    assert jobs.stdout.splitlines()[-1].startswith("5 seeds x 30 steps: 1 violated")


def test_a_sweep_takes_a_job_per_usable_cpu_unless_it_traces() -> None:
    jobs = _subprocess("--seeds", "3", "--steps", "5", "--json")
    assert jobs.returncode == 0, jobs.stderr
    summary = json.loads(jobs.stdout.splitlines()[-1])["summary"]
    assert summary["jobs"] == min(usable_cpus(), 3)
    code, out, err = _cli("--seeds", "2", "--steps", "5", "--trace")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("2 seeds x 5 steps: all invariants held (")
    assert "jobs)" not in out.splitlines()[-1]  # one job: the summary names none


@pytest.mark.parametrize(
    "argv",
    [
        ["--seeds", "0"],
        ["--steps", "-1"],
        ["--seed", "x"],
        ["--seed", "1", "--seeds", "2"],
        ["--bogus"],
        ["--seeds", "2", "--jobs", "0"],
        ["--seeds", "2", "--jobs", "2", "--trace"],
    ],
)
def test_cli_bad_flags_are_one_line_and_exit_2(argv: list[str]) -> None:
    code, out, err = _cli(*argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("simulate: error:")


def _first_failure(bound: int, steps: int) -> RunResult:
    for seed in range(bound):
        result = run_seed(seed, steps)
        if not result.ok:
            return result
    pytest.fail(f"no violation within {bound} seeds")


def _explain(result: RunResult) -> str:
    tail = "\n".join(result.trace[-15:])
    where = f"seed {result.seed} step {result.step} invariant {result.invariant}"
    return f"{where}: {result.detail}\n{tail}"


def _subprocess(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pixie.sim", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()
