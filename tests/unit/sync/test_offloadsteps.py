"""The device's steps after a holder's verdict (`offloadsteps`) and the
intake of an envelope (`admitsteps`), read off the streams themselves: no
database, no I/O. `NoteOffloadService` and `PeerLink` under trio, and the
simulator at once, take these same streams."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from pixie.device.sync import admitsteps, offloadsteps
from pixie.device.sync.offloadsteps import (
    CHANGED_MEANWHILE,
    BeforeClear,
    Clear,
    Fetched,
    Forget,
    Offloaded,
    Orphan,
    Pointer,
    Restore,
)
from pixie.protocol.offload import Outcome, Verdict

NOTE = "0190a2b4-1111-7222-8333-444455556666"
HASH = "ab" * 32
BODY = b"the body, verified"


def take(steps: Generator[Any, Any, Any], answer: Callable[[Any], Any]) -> tuple[list[Any], Any]:
    """Every step of ``steps``, each answered by ``answer``, and the value it ends with."""
    taken: list[Any] = []
    reply: Any = None
    try:
        while True:
            step = steps.send(reply)
            taken.append(step)
            reply = answer(step)
    except StopIteration as end:
        return taken, end.value


def test_no_valid_ack_clears_nothing() -> None:
    for outcome in (Outcome.REFUSED, Outcome.TIMEOUT, Outcome.RELAY_DOWN, Outcome.WRONG_HASH):
        steps, ended = take(
            offloadsteps.after_offload(NOTE, HASH, Verdict(outcome, "no")), lambda _: True
        )
        assert steps == []
        assert ended == Offloaded(outcome, "no", False)


def test_a_valid_ack_clears_after_the_crash_point() -> None:
    steps, ended = take(
        offloadsteps.after_offload(NOTE, HASH, Verdict(Outcome.HELD, "acked")),
        lambda step: True if isinstance(step, Clear) else None,
    )
    assert steps == [BeforeClear(NOTE, HASH), Clear(NOTE, HASH)]
    assert ended == Offloaded(Outcome.HELD, "acked", True)


def test_a_body_that_changed_meanwhile_stays_and_its_copy_is_released_later() -> None:
    steps, ended = take(
        offloadsteps.after_offload(NOTE, HASH, Verdict(Outcome.HELD, "acked")),
        lambda step: False if isinstance(step, Clear) else None,
    )
    assert steps == [BeforeClear(NOTE, HASH), Clear(NOTE, HASH), Orphan(NOTE, HASH)]
    assert ended == Offloaded(Outcome.HELD, CHANGED_MEANWHILE, False)


def test_a_fetch_restores_only_for_a_recall_and_only_a_verified_body() -> None:
    pointer = Pointer(NOTE, HASH, "cd" * 32)
    fetched = Verdict(Outcome.FETCHED, "ok", body=BODY)
    steps, ended = take(offloadsteps.after_fetch(fetched), lambda _: True)
    assert (steps, ended) == ([], Fetched(fetched, BODY, False))
    steps, ended = take(offloadsteps.after_fetch(fetched, pointer), lambda _: True)
    assert (steps, ended) == ([Restore(pointer, BODY)], Fetched(fetched, BODY, True))
    steps, ended = take(offloadsteps.after_fetch(fetched, pointer), lambda _: False)
    assert ended.restored is False  # the note moved on while the body travelled
    failed = Verdict(Outcome.CORRUPT, "hash mismatch")
    steps, ended = take(offloadsteps.after_fetch(failed, pointer), lambda _: True)
    assert (steps, ended) == ([], Fetched(failed, None, False))


def test_a_release_is_forgotten_only_once_confirmed() -> None:
    steps, ended = take(
        offloadsteps.after_release(NOTE, HASH, Verdict(Outcome.RELEASED, "let go")),
        lambda _: None,
    )
    assert (steps, ended) == ([Forget(NOTE, HASH)], True)
    steps, ended = take(
        offloadsteps.after_release(NOTE, HASH, Verdict(Outcome.TIMEOUT, "no answer")),
        lambda _: None,
    )
    assert (steps, ended) == ([], False)


def test_the_screen_comes_before_any_opening() -> None:
    sender, envelope = b"s" * 32, b"x" * 100
    steps, ended = take(admitsteps.admitting(sender, envelope), lambda _: False)
    assert steps == [admitsteps.Screen(sender, 100, False)]
    assert ended == admitsteps.Unscreened(sender, 100)
    verdict = object()
    steps, ended = take(
        admitsteps.admitting(sender, envelope, strangers=True),
        lambda step: True if isinstance(step, admitsteps.Screen) else verdict,
    )
    assert steps == [
        admitsteps.Screen(sender, 100, True),
        admitsteps.Open(sender, envelope, True),
    ]
    assert ended is verdict
