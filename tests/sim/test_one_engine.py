"""The simulator and the trio drivers take the same steps: the intake of an
envelope (`admitsteps`), the dispatch of a sync message (`syncsteps`), of a
holder request (`holdsteps`, with the faults struck into its stream) and of
a holder's verdict on the device (`offloadsteps`) are written once, and the
simulator holds no copy of them.

Two checks: a run of seeds goes through those functions (a spy counts the
calls), and the source of `sim/world.py` calls none of the table's or the
holder core's decisions directly, while the drivers call the same step
functions the simulator does.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pixie.device.sync import admitsteps, offloadsteps, syncsteps
from pixie.homebase import holding, holdsteps
from pixie.sim.results import run_seed
from tests.support import ROOT

STEPS = {
    "syncsteps.receive",
    "syncsteps.open_ours",
    "syncsteps.after_ours",
    "holdsteps.answer",
    "holdsteps.faulted",
    "admitsteps.admitting",
    "offloadsteps.after_offload",
    "offloadsteps.after_fetch",
    "offloadsteps.after_release",
}
# What the steps decide: the simulator must not reach past them.
DECISIONS = {
    "route",
    "settle",
    "take_held",
    "hold",
    "serve",
    "let_go",
    "store",
    "compare_and_clear",
    "orphaned",
    "restore",
    "released",
}


def _calls(path: Path) -> set[str]:
    """``module.function`` and ``.method`` names called in ``path`` (a method
    of ``self`` only in the first form: the world's own ``settle`` is not the
    table's)."""
    called: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            value = node.func.value
            if isinstance(value, ast.Name):
                called.add(f"{value.id}.{node.func.attr}")
            if not (isinstance(value, ast.Name) and value.id == "self"):
                called.add(f".{node.func.attr}")  # on anything but the world itself
    return called


def test_a_run_of_seeds_takes_the_shared_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    counts: Counter[str] = Counter()

    def spy(module: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    spy(syncsteps, "receive")
    spy(syncsteps, "after_ours")
    spy(syncsteps, "open_ours")
    spy(holdsteps, "answer")
    spy(holdsteps, "faulted")
    spy(holding.HolderCore, "run")
    spy(admitsteps, "admitting")
    spy(offloadsteps, "after_offload")
    spy(offloadsteps, "after_fetch")
    spy(offloadsteps, "after_release")
    for seed in range(6):
        assert run_seed(seed, 60).ok
    taken = ("receive", "open_ours", "after_ours", "answer", "faulted", "run", "admitting")
    assert all(counts[name] > 0 for name in taken)
    assert counts["after_offload"] + counts["after_fetch"] + counts["after_release"] > 0


def test_the_simulator_holds_no_copy_of_the_dispatch() -> None:
    world = _calls(ROOT / "sim" / "world.py")
    assert world >= STEPS | {".run"}
    assert not {f".{name}" for name in DECISIONS} & world
    driver = _calls(ROOT / "device" / "sync" / "driver.py")
    assert {"syncsteps.receive", "syncsteps.open_ours", "syncsteps.after_ours"} <= driver
    holder = _calls(ROOT / "homebase" / "holder.py")
    assert {"holdsteps.answer", "holdsteps.faulted"} <= holder
    link = ROOT / "device" / "sync" / "peers.py"
    assert "admitting" in {
        n.id for n in ast.walk(ast.parse(link.read_text())) if isinstance(n, ast.Name)
    }
    offload = _calls(ROOT / "device" / "sync" / "offload.py")
    assert {
        "offloadsteps.after_offload",
        "offloadsteps.after_fetch",
        "offloadsteps.after_release",
    } <= offload
