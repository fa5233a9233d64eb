"""The holder's steps (`pixie.homebase.holdsteps`): what each request takes, and
what each fault makes of it, read off the stream itself (no database, no I/O).

The trio `Holder` and the simulator run these same streams; here a tiny
driver plays the data dir's answers.
"""

from __future__ import annotations

import pytest

from pixie.homebase import holdsteps
from pixie.homebase.holdsteps import (
    Crash,
    Delay,
    Faulted,
    Hold,
    LetGo,
    Read,
    Refuse,
    Reply,
    Serve,
    Step,
)
from pixie.protocol.clock import SeededEntropy
from pixie.protocol.offload import body_hash
from pixie.protocol.peerwire import (
    FetchRequest,
    HolderRefusal,
    OffloadAck,
    OffloadRequest,
    Release,
    Released,
)

ME = b"k" * 32
NOTE = "0190a2b4-1111-7222-8333-444455556666"
BODY = b"what the body says"
OFFLOAD = OffloadRequest(b"r" * 16, NOTE, body_hash(BODY), BODY)
FETCH = FetchRequest(b"f" * 16, NOTE, body_hash(BODY))
RELEASE = Release(b"x" * 16, NOTE, body_hash(BODY))


def play(steps: holdsteps.Steps, **answers: object) -> list[Step]:
    """Every step ``steps`` takes, each sent what ``answers`` names for its
    kind (by class name; None otherwise)."""
    taken: list[Step] = []
    result: object = None
    while True:
        try:
            step = steps.send(result)
        except StopIteration:
            return taken
        taken.append(step)
        result = answers.get(type(step).__name__)


def test_each_request_takes_its_steps_and_a_refusal_ends_it() -> None:
    assert play(holdsteps.answer(ME, OFFLOAD, 3)) == [
        Hold(ME, OFFLOAD, 3),
        Reply(OffloadAck(OFFLOAD.request, NOTE, OFFLOAD.content_hash)),
    ]
    assert play(holdsteps.answer(ME, OFFLOAD, 3), Hold="bad hash") == [
        Hold(ME, OFFLOAD, 3),
        Refuse(ME, OFFLOAD, "bad hash"),
    ]
    assert play(holdsteps.answer(ME, FETCH, 4), Read=(BODY, "")) == [
        Read(FETCH),
        Serve(FETCH, BODY),
    ]
    assert play(holdsteps.answer(ME, FETCH, 4), Read=(None, "not held")) == [
        Read(FETCH),
        Refuse(ME, FETCH, "not held"),
    ]
    assert play(holdsteps.answer(ME, RELEASE, 5)) == [
        LetGo(ME, RELEASE, 5),
        Reply(Released(RELEASE.request, NOTE, RELEASE.content_hash)),
    ]
    assert play(holdsteps.answer(ME, RELEASE, 5), LetGo="not yours") == [
        LetGo(ME, RELEASE, 5),
        Refuse(ME, RELEASE, "not yours"),
    ]


def _offload_with(fault: str, seconds: float = 0.0, **answers: object) -> list[Step]:
    picked: list[str] = []

    def pick(stage: str) -> tuple[str, float] | None:
        picked.append(stage)
        return (fault, seconds) if stage == holdsteps.OFFLOAD else None

    steps = holdsteps.faulted(holdsteps.answer(ME, OFFLOAD, 3), pick, SeededEntropy(1))
    taken = play(steps, **answers)
    assert picked == [holdsteps.OFFLOAD]  # once, at the Hold
    return taken


def test_faults_before_the_commit_never_store_and_never_ack_a_stored_body() -> None:
    assert _offload_with("crash-before-commit") == [Crash("crash before commit")]
    assert _offload_with("ack-timeout") == [Faulted("ack-timeout", NOTE)]
    assert _offload_with("refuse") == [
        Faulted("refuse", NOTE),
        Reply(HolderRefusal(OFFLOAD.request, "refused (injected fault)")),
    ]
    # The lying holder (the simulator's): an ack with no Hold before it.
    lie = _offload_with(holdsteps.ACK_UNSTORED)
    assert not any(isinstance(s, Hold) for s in lie)
    assert lie[-1] == Reply(holdsteps.ack(OFFLOAD))


def test_faults_after_the_commit_rewrite_or_delay_the_ack() -> None:
    assert _offload_with("crash-after-commit") == [
        Hold(ME, OFFLOAD, 3),
        Faulted("crash-after-commit", NOTE),
        Crash("crash after commit, before the ack"),
    ]
    # A refused Hold is refused, whatever the fault.
    assert _offload_with("crash-after-commit", Hold="bad")[-1] == Refuse(ME, OFFLOAD, "bad")
    assert _offload_with("ack-delay", 0.25) == [
        Hold(ME, OFFLOAD, 3),
        Faulted("ack-delay", NOTE),
        Delay(0.25),
        Reply(holdsteps.ack(OFFLOAD)),
    ]
    *_, wrong_hash = _offload_with("ack-wrong-hash")
    assert isinstance(wrong_hash, Reply) and isinstance(wrong_hash.message, OffloadAck)
    assert wrong_hash.message.note_id == NOTE
    assert wrong_hash.message.content_hash != OFFLOAD.content_hash
    *_, wrong_id = _offload_with("ack-wrong-id")
    assert isinstance(wrong_id, Reply) and isinstance(wrong_id.message, OffloadAck)
    assert wrong_id.message.note_id != NOTE
    assert wrong_id.message.content_hash == OFFLOAD.content_hash


@pytest.mark.parametrize("body", [BODY, b""])
def test_a_corrupt_serve_flips_a_bit_of_what_is_served(body: bytes) -> None:
    def pick(stage: str) -> tuple[str, float] | None:
        return ("corrupt-serve", 0.0) if stage == holdsteps.SERVE else None

    steps = holdsteps.faulted(holdsteps.answer(ME, FETCH, 4), pick)
    taken = play(steps, Read=(body, ""))
    assert taken[:2] == [Read(FETCH), Faulted("corrupt-serve", NOTE)]
    served = taken[2]
    assert isinstance(served, Serve) and served.body != body
    assert len(served.body) == max(len(body), 1)


def test_no_fault_picked_leaves_the_stream_as_it_was() -> None:
    for request, answers in (
        (OFFLOAD, {}),
        (FETCH, {"Read": (BODY, "")}),
        (RELEASE, {}),
    ):
        plain = play(holdsteps.answer(ME, request, 7), **answers)  # type: ignore[arg-type]
        faulted = holdsteps.faulted(holdsteps.answer(ME, request, 7), lambda stage: None)
        assert play(faulted, **answers) == plain  # type: ignore[arg-type]
