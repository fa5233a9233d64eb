"""A power cut inside distillation's write transaction, for the tests of what
a pass that stops there leaves behind."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pixie.device.notebook import store as notebook_module

POWER_CUT = "power cut"


def cut_power_in_write(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """Make the ``nth`` `NotebookStore.upsert_with` of the test fail inside its
    transaction (after its notes are upserted, before it commits), so it rolls
    back and the pass stops with RuntimeError(POWER_CUT). Undo it with
    ``monkeypatch.undo()`` or a ``monkeypatch.context()``."""
    original = notebook_module.NotebookStore.upsert_with
    calls = 0

    def failing(
        self: notebook_module.NotebookStore,
        build: Callable[..., object],
        then: Callable[..., object],
    ) -> object:
        nonlocal calls
        calls += 1
        if calls == nth:

            def crash(*_: object) -> None:
                raise RuntimeError(POWER_CUT)

            return original(self, build, crash)  # type: ignore[arg-type]
        return original(self, build, then)  # type: ignore[arg-type]

    monkeypatch.setattr(notebook_module.NotebookStore, "upsert_with", failing)
