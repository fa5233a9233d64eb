"""One seed run to its end, and what it says: passed, or which invariant
broke at which step, with the trace, both peers' digests and the counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pixie.sim import invariants
from pixie.sim.invariants import InvariantViolated
from pixie.sim.world import World


def run_seed(
    seed: int,
    steps: int,
    *,
    base: Path | None = None,
    lies: bool = False,
    trace: Callable[[str], None] | None = None,
    peers: int = 2,
) -> RunResult:
    """Run one seed to the end (or to its first violation) and say how it went."""
    world = World(seed, base=base, lies=lies, trace=trace, peers=peers)
    try:
        try:
            for _ in range(steps):
                world.step()
            world.finish()
        except InvariantViolated as exc:
            return RunResult.failed(world, exc.number, exc.detail)
        except Exception as exc:  # an error escaping real code is a finding too
            return RunResult.failed(world, 0, f"{type(exc).__name__}: {exc}")
        return RunResult.passed(world)
    finally:
        world.close()


@dataclass(frozen=True)
class RunResult:
    seed: int
    ok: bool
    step: int
    invariant: int | None
    detail: str
    trace: tuple[str, ...]
    digests: tuple[str, str]
    stats: dict[str, object]

    @classmethod
    def passed(cls, world: World) -> RunResult:
        return cls(
            world.seed,
            True,
            world.tick,
            None,
            "",
            tuple(world.trace),
            _digests(world),
            _stats(world),
        )

    @classmethod
    def failed(cls, world: World, number: int, detail: str) -> RunResult:
        world.note(f"VIOLATION of invariant {number}: {detail}")
        return cls(
            world.seed,
            False,
            world.tick,
            number,
            detail,
            tuple(world.trace),
            _digests(world),
            _stats(world),
        )

    @property
    def invariant_name(self) -> str:
        return "" if self.invariant is None else invariants.NAMES[self.invariant]

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "seed": self.seed,
            "ok": self.ok,
            "step": self.step,
            "digests": list(self.digests),
            "stats": self.stats,
        }
        if not self.ok:
            out.update(
                invariant=self.invariant,
                invariant_name=self.invariant_name,
                detail=self.detail,
                trace=list(self.trace[-30:]),
            )
        return out


def _digests(world: World) -> tuple[str, str]:
    try:
        return (
            world.device.node.digest().digest().hex(),
            world.homebase.node.digest().digest().hex(),
        )
    except Exception:  # a world that broke mid-crash
        return ("", "")


def _stats(world: World) -> dict[str, object]:
    s = world.stats
    return {
        "ops": dict(sorted(s.ops.items())),
        "refused": s.refused,
        "crashes": s.crashes,
        "envelopes": world.relay.carried_envelopes,
        "relay_bytes": world.relay.carried_bytes,
        "relay_hash": world.relay.carried_hash.hex(),
        "lost": world.relay.lost,
        "rejected_envelopes": s.rejected_envelopes,
        "sessions": s.sessions,
        "sessions_failed": s.sessions_failed,
        "offloads_cleared": s.offloads_cleared,
        "fetches_verified": s.fetches_verified,
        "fetches_refused": s.fetches_refused,
        "recalls": s.recalls,
        "releases": s.releases,
        "plan": world.drawn.as_json(),
    }


__all__ = ["RunResult", "run_seed"]
