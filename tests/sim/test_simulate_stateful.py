"""The simulator driven by Hypothesis, one step per rule, so a failure shrinks.

The seed still decides the details of each step (which note, which bytes, which
fault strikes an envelope); Hypothesis decides which operation each step does
and how many steps there are, so a failing schedule shrinks to the few
operations that matter. Every step checks every invariant (`World.step`), and
teardown stops the faults and checks convergence.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from pixie.sim.world import OPERATIONS, InvariantViolated, World
from tests.support.simbroken import VARIANTS


class ChosenSteps(RuleBasedStateMachine):
    """Hypothesis picks every operation."""

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None
        self.failed = False  # a step already failed: teardown only cleans up

    @initialize(seed=st.integers(0, 2**16))
    def start(self, seed: int) -> None:
        self.world = World(seed)

    @rule(op=st.sampled_from(OPERATIONS), pick=st.integers(0, 2**16))
    def step(self, op: str, pick: int) -> None:
        self._step(op, pick)

    def _step(self, op: str | None, pick: int | None) -> None:
        assert self.world is not None
        try:
            self.world.step(op, pick)
        except BaseException:
            self.failed = True
            raise

    def teardown(self) -> None:
        if self.world is None:
            return
        try:
            if not self.failed:
                self.world.finish()
        finally:
            self.world.close()


class SimulatorMachine(ChosenSteps):
    """Hypothesis picks some operations, the seed the others."""

    @rule()
    def drawn_step(self) -> None:
        """A step whose operation the seed draws, as `scripts/simulate` does."""
        self._step(None, None)


# Hypothesis's explain phase re-runs failing cases under a tracer, which costs
# minutes here and adds nothing the simulator's own trace does not say.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)


@pytest.mark.slow
def test_simulator_as_a_state_machine() -> None:
    run_state_machine_as_test(
        SimulatorMachine,
        settings=settings(max_examples=15, stateful_step_count=25, phases=PHASES),
    )


@pytest.mark.slow
def test_state_machine_finds_and_shrinks_a_broken_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the body cleared before the ack, Hypothesis must find a failing
    schedule, and shrink it to a short one."""
    patch, invariant, _ = VARIANTS["clear_before_ack"]
    patch(monkeypatch)
    with pytest.raises(InvariantViolated) as caught:
        run_state_machine_as_test(
            ChosenSteps,
            settings=settings(
                phases=PHASES,
                max_examples=50,
                stateful_step_count=20,
                database=None,
                report_multiple_bugs=False,
            ),
        )
    assert caught.value.number == invariant
    # Shrunk: a note to offload and the offload itself, give or take a step.
    steps = [line for line in caught.value.__notes__ if "step(" in line]
    assert len(steps) <= 4, caught.value.__notes__
