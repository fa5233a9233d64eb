"""Shared settings for the fuzzing tests (the `fuzz` marker).

Every fuzz test is bounded: a short run in the suite, a long one from
`./scripts/fuzz`, which raises the example count through PIXIE_FUZZ_EXAMPLES.
The contract each one checks is the same: a decoder or a live peer fed any bytes
either accepts them or raises its own package's error type; anything else (a
RecursionError, a KeyError, a crash of the process) fails the test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SHORT_EXAMPLES = 150


def examples(short: int = SHORT_EXAMPLES) -> int:
    """How many examples a fuzz test runs: ``short`` in the suite, or the long
    run's count when ``./scripts/fuzz`` sets PIXIE_FUZZ_EXAMPLES."""
    raw = os.environ.get("PIXIE_FUZZ_EXAMPLES", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else short


def fuzz_settings(short: int = SHORT_EXAMPLES) -> settings:
    """Hypothesis settings for one fuzz test (no deadline: CI machines vary)."""
    return settings(
        max_examples=examples(short),
        deadline=None,
        derandomize=not os.environ.get("PIXIE_FUZZ_EXAMPLES"),
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )
