"""LLMRouter: which model distils a source, and what happens when one fails.

The router holds an ordered list of backends: an OpenAI-compatible
chat-completions endpoint when one is configured, then the built-in offline
distiller, which needs no network and always answers. Every answer, whoever
gave it, is checked against `RESULT_SCHEMA` with its size bounds before
anything else sees it. An answer that is invalid, truncated, oversized or late
never reaches the Notebook: the router logs why (a reason and sizes, never the
content) and asks the next backend.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from pixie.device.distill.contract import (
    Backend,
    BackendFailure,
    DistillRequest,
    DistillResult,
    Failure,
    NoBackendAnswered,
)
from pixie.device.distill.prompt import SchemaViolation, parse_result

log = logging.getLogger("pixie.llm")

TRIP_AFTER = 3  # consecutive failures after which a backend sits out the rest of a pass


@dataclass(frozen=True, slots=True)
class Routed:
    result: DistillResult
    backend: str  # the backend whose answer this is
    failures: tuple[tuple[str, Failure], ...]  # backends asked before it, and why they failed


@dataclass
class LLMRouter:
    """Backends in order of preference; the first valid answer wins.

    A backend that fails TRIP_AFTER sources in a row, or fails in a way that
    will not change (a 401, an unknown model), sits out the rest of the pass,
    so a dead endpoint costs one short wait per pass rather than one per source.
    """

    backends: tuple[Backend, ...]
    trip_after: int = TRIP_AFTER
    calls: Counter[str] = field(default_factory=Counter)  # answers asked for, per backend
    _strikes: Counter[str] = field(default_factory=Counter)
    _benched: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("a router needs at least one backend")
        names = [b.name for b in self.backends]
        if len(set(names)) != len(names):
            raise ValueError(f"backend names repeat: {names}")

    def new_pass(self) -> None:
        """Forget the last pass's counts and benched backends."""
        self.calls.clear()
        self._strikes.clear()
        self._benched.clear()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    @property
    def answers_now(self) -> bool:
        """Whether every backend still in this pass answers without waiting
        (`distill_now` may be used): the built-in distiller alone, or behind a
        benched endpoint. A backend that waits on anything (a network, a
        model) has no ``answer_now`` and goes through `distill`."""
        return all(
            callable(getattr(b, "answer_now", None))
            for b in self.backends
            if b.name not in self._benched
        )

    async def distill(self, request: DistillRequest) -> Routed:
        failures: list[tuple[str, Failure]] = []
        for backend in self.backends:
            if backend.name in self._benched:
                continue
            self.calls[backend.name] += 1
            try:
                result = _checked(await backend.answer(request))
            except BackendFailure as failure:
                self._failed(backend.name, request, failure, failures)
                continue
            return self._answered(result, backend.name, failures)
        raise _none_answered(failures)

    def distill_now(self, request: DistillRequest) -> Routed:
        """`distill`, on this thread, for a router whose backends all answer
        at once (see `answers_now`): the same order, checks, counts and
        benching."""
        failures: list[tuple[str, Failure]] = []
        for backend in self.backends:
            if backend.name in self._benched:
                continue
            self.calls[backend.name] += 1
            try:
                result = _checked(backend.answer_now(request))  # type: ignore[attr-defined]
            except BackendFailure as failure:
                self._failed(backend.name, request, failure, failures)
                continue
            return self._answered(result, backend.name, failures)
        raise _none_answered(failures)

    def _answered(
        self, result: DistillResult, name: str, failures: list[tuple[str, Failure]]
    ) -> Routed:
        self._strikes[name] = 0
        return Routed(result, name, tuple(failures))

    def _failed(
        self,
        name: str,
        request: DistillRequest,
        failure: BackendFailure,
        failures: list[tuple[str, Failure]],
    ) -> None:
        failures.append((name, failure.reason))
        # A source the built-in distiller broke on says nothing of the next
        # one: no strike, so it never sits out the pass for it.
        if failure.reason is not Failure.BROKEN:
            self._strikes[name] += 1
        benched = failure.permanent or self._strikes[name] >= self.trip_after
        log.warning(
            "backend %s gave no usable answer for a %s of %d lines (%s)%s",
            name,
            request.kind.value,
            len(request.lines),
            failure,
            "; it sits out the rest of this pass" if benched else "",
        )
        if benched:
            self._benched.add(name)

    async def aclose(self) -> None:
        for backend in self.backends:
            await backend.aclose()


def _checked(answer: object) -> DistillResult:
    try:
        return parse_result(answer)
    except SchemaViolation as exc:
        raise BackendFailure(Failure.SCHEMA, str(exc)) from None


def _none_answered(failures: list[tuple[str, Failure]]) -> NoBackendAnswered:
    return NoBackendAnswered(
        "no backend gave a usable answer ("
        + ", ".join(f"{name}: {reason.value}" for name, reason in failures)
        + ")"
    )


__all__ = ["TRIP_AFTER", "LLMRouter", "Routed"]
