"""Fault plans: the ``--faults SPEC`` of `pixie run` (on a Homebase) and `pixie relay`.

A SPEC is a comma-separated list of ``NAME=RULE``. A rule is one of:

- ``P``: a probability in [0, 1], drawn afresh for every request;
- ``P@SECONDS``: the same, for faults that take a duration (delays);
- ``#N``: exactly the N-th request (counting from 1), and no other;
- ``#N@SECONDS``: the N-th request, with a duration.

Each side knows its own names; an unknown name, a repeated name, a probability
outside [0, 1], a duration on a fault that takes none (or none on one that
needs it), or anything else malformed is a `FaultSpecError` with one line
saying what is wrong. Draws come from one `random.Random`, seeded when given,
so a test can replay a run of faults exactly.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MAX_SPEC_CHARS = 1000
MAX_DELAY_SECONDS = 3600.0

# name -> whether the fault takes a duration
HOLDER_FAULTS: Mapping[str, bool] = {
    "ack-timeout": False,  # never answer an offload request
    "ack-delay": True,  # answer it, late
    "refuse": False,  # refuse it
    "ack-wrong-hash": False,  # ack naming another content hash
    "ack-wrong-id": False,  # ack naming another note
    "crash-before-commit": False,  # exit without storing or answering
    "crash-after-commit": False,  # store durably, then exit without answering
    "corrupt-serve": False,  # serve a fetched body with one byte changed
}
RELAY_FAULTS: Mapping[str, bool] = {
    "drop": False,  # an envelope vanishes
    "delay": True,  # an envelope arrives late
    "duplicate": False,  # an envelope arrives twice
    "reorder": False,  # an envelope is held back and overtaken by the next one
}


class FaultSpecError(ValueError):
    """A SPEC that cannot be used; the message is one line for the user."""


_RULE = re.compile(r"(?:(?P<p>[0-9.]+)|#(?P<n>[0-9]+))(?:@(?P<s>[0-9.]+))?")


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    probability: float = 0.0
    nth: int | None = None  # the N-th request only, when set
    seconds: float = 0.0

    def describe(self) -> str:
        rule = f"#{self.nth}" if self.nth is not None else f"{self.probability:g}"
        return f"{self.name}={rule}" + (f"@{self.seconds:g}" if self.seconds else "")


@dataclass
class FaultPlan:
    """The faults in force, and the dice that decide when they strike."""

    faults: dict[str, Fault] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    counts: dict[str, int] = field(default_factory=dict)  # requests seen per fault
    fired: dict[str, int] = field(default_factory=dict)  # times each fault struck

    def __bool__(self) -> bool:
        return bool(self.faults)

    def strikes(self, name: str) -> Fault | None:
        """Count one request for fault ``name``; the fault if it strikes this one."""
        fault = self.faults.get(name)
        if fault is None:
            return None
        seen = self.counts[name] = self.counts.get(name, 0) + 1
        if fault.nth is not None:
            hit = seen == fault.nth
        else:
            hit = fault.probability > 0 and self.rng.random() < fault.probability
        if hit:
            self.fired[name] = self.fired.get(name, 0) + 1
            return fault
        return None

    def first_strike(self, names: Iterable[str]) -> Fault | None:
        """Of ``names`` (in order), the first that strikes this request. Every
        fault named is counted, so ``#N`` rules count requests, not survivors."""
        struck: Fault | None = None
        for name in names:
            hit = self.strikes(name)
            if struck is None:
                struck = hit
        return struck

    def describe(self) -> str:
        return ",".join(f.describe() for f in self.faults.values()) or "none"


def parse_faults(spec: str, known: Mapping[str, bool], *, seed: int | None = None) -> FaultPlan:
    """The plan a SPEC describes, for a side whose fault names are ``known``."""
    if len(spec) > MAX_SPEC_CHARS:
        raise FaultSpecError(f"fault spec is longer than {MAX_SPEC_CHARS} characters")
    faults: dict[str, Fault] = {}
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        name, eq, rule = part.partition("=")
        name = name.strip()
        if not eq:
            raise FaultSpecError(f"fault {part!r:.60}: expected NAME=P, NAME=P@SECONDS or NAME=#N")
        if name not in known:
            names = ", ".join(sorted(known))
            raise FaultSpecError(f"unknown fault {name!r:.40}; this side knows: {names}")
        if name in faults:
            raise FaultSpecError(f"fault {name} is given twice")
        match = _RULE.fullmatch(rule.strip())
        if match is None:
            raise FaultSpecError(
                f"fault {name}: bad rule {rule!r:.40} (use P, P@SECONDS, #N or #N@SECONDS)"
            )
        probability, nth = 0.0, None
        if match["n"] is not None:
            nth = int(match["n"])
            if nth < 1:
                raise FaultSpecError(f"fault {name}: requests count from #1")
        else:
            probability = _number(match["p"], name, "probability")
            if not 0.0 <= probability <= 1.0:
                raise FaultSpecError(f"fault {name}: probability {rule} is not in [0, 1]")
        seconds = 0.0
        if match["s"] is not None:
            if not known[name]:
                raise FaultSpecError(f"fault {name} takes no duration (drop the @SECONDS)")
            seconds = _number(match["s"], name, "duration")
            if not 0.0 < seconds <= MAX_DELAY_SECONDS:
                raise FaultSpecError(
                    f"fault {name}: duration must be above 0 and at most {MAX_DELAY_SECONDS:g} s"
                )
        elif known[name]:
            raise FaultSpecError(f"fault {name} needs a duration: {name}=P@SECONDS")
        faults[name] = Fault(name, probability, nth, seconds)
    return FaultPlan(faults, random.Random(seed))


def _number(text: str, name: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FaultSpecError(f"fault {name}: {what} {text!r:.20} is not a number") from None
    if not math.isfinite(value):
        raise FaultSpecError(f"fault {name}: {what} must be finite")
    return value


__all__ = [
    "HOLDER_FAULTS",
    "RELAY_FAULTS",
    "Fault",
    "FaultPlan",
    "FaultSpecError",
    "parse_faults",
]
