"""The labelled memory questions: deterministic, every kind present, gold events
that exist and really state the answer, abstention without gold, two stable and
disjoint halves, and a sample life left exactly as it was."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
from collections import Counter
from functools import cache

import pytest

from tests.testkit import questions
from tests.testkit.questions import KINDS, Question, all_questions, load
from tests.testkit.samplelife import CONTACTS, Event, generate, write_jsonl

EVENTS = 2000

# The JSON lines of `write_jsonl(seed=7, events=500)` as the generator made them
# before questions were derived from it: deriving them must change nothing.
SAMPLELIFE_500_SHA256 = "123c013c949e825f1762980f1ad2b03f31a8e283d928a22af3aa180e4f1ca9f0"


@cache
def life(seed: int = 7, events: int = EVENTS) -> dict[str, Event]:
    return {e["id"]: e for e in generate(seed, events)}


@cache
def full(seed: int = 7, events: int = EVENTS) -> tuple[Question, ...]:
    return tuple(all_questions(seed, events))


def test_the_same_seed_gives_the_same_questions() -> None:
    again = all_questions(7, EVENTS)
    assert [q.as_json() for q in again] == [q.as_json() for q in full()]
    other = all_questions(11, EVENTS)
    assert [q.gold_event_ids for q in other] != [q.gold_event_ids for q in full()]


def test_every_kind_is_present_and_the_set_is_the_right_size() -> None:
    kinds = Counter(q.kind for q in full())
    assert set(kinds) == set(KINDS)
    assert all(kinds[k] >= 5 for k in KINDS), kinds
    big = all_questions(7, 5000)
    assert 100 <= len(big) <= 300
    assert set(Counter(q.kind for q in big)) == set(KINDS)


def test_questions_and_ids_are_unique() -> None:
    qs = full()
    assert len({q.question for q in qs}) == len(qs)
    assert len({q.qid for q in qs}) == len(qs)


def test_gold_events_exist_and_state_the_answer() -> None:
    events = life()
    for q in full():
        if q.kind == "abstention":
            continue
        assert q.gold_event_ids, q.question
        assert list(q.gold_event_ids) == sorted(
            q.gold_event_ids, key=lambda i: (events[i]["at"], i)
        )
        if q.kind == "multi":
            assert len(q.gold_event_ids) >= 2, q.question
        for event_id in q.gold_event_ids:
            event = events.get(event_id)
            assert event is not None, (q.question, event_id)
            said = f"{event['text']} {event.get('contact', '')}".casefold()
            if q.evidence:
                assert any(w.casefold() in said for w in q.evidence), (q.question, event["text"])


def test_a_person_question_names_a_sample_contact() -> None:
    shorts = {c.short for c in CONTACTS}
    for q in full():
        assert q.query.text.strip()
        if q.query.person is not None:
            assert q.query.person in shorts, q.question


def test_knowledge_updates_point_at_the_newest_value_only() -> None:
    events = life()
    by_question = {q.question: q for q in full()}
    job = by_question["Where does Priya work now?"]
    texts = [events[i]["text"] for i in job.gold_event_ids]
    assert all("Helix Bio" in t for t in texts)
    assert not any("interview" in t for t in texts)  # the job hunt is the old value
    marathon = by_question["Is Ada still training for the Lyon marathon?"]
    assert not any("weeks to go" in events[i]["text"] for i in marathon.gold_event_ids)


def test_temporal_gold_is_the_latest_of_its_kind() -> None:
    events = life()
    ordered = list(events.values())
    for c in CONTACTS:
        q = next(
            (x for x in full() if x.question == f"When did I last hear from {c.short} by phone?"),
            None,
        )
        if q is None:
            continue
        (gold,) = q.gold_event_ids
        calls = [e for e in ordered if e["kind"] in ("call", "voicemail")]
        latest = [e for e in calls if e.get("contact") == c.name][-1]
        assert gold == latest["id"]


def test_abstention_has_no_gold_and_was_never_planted() -> None:
    text = "\n".join(e["text"] for e in life().values())
    abstention = [q for q in full() if q.kind == "abstention"]
    assert abstention
    for q in abstention:
        assert q.gold_event_ids == ()
        for word in q.evidence:
            assert not re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE), q.question


def test_halves_are_disjoint_complete_and_stable() -> None:
    tuning = load(7, EVENTS)
    held = load(7, EVENTS, held_out=True)
    assert tuning and held
    assert not {q.qid for q in tuning} & {q.qid for q in held}
    assert {q.qid for q in tuning} | {q.qid for q in held} == {q.qid for q in full()}
    assert all(not q.held_out for q in tuning) and all(q.held_out for q in held)
    assert [q.qid for q in load(7, EVENTS)] == [q.qid for q in tuning]
    # The half depends on the question alone, not on the seed or the size.
    other = {q.question: q.held_out for q in all_questions(11, 1000)}
    for q in full():
        if q.question in other:
            assert other[q.question] is q.held_out


def test_the_default_is_the_tuning_half() -> None:
    assert [q.qid for q in load(7, EVENTS)] == [q.qid for q in full() if not q.held_out]


def sample_hash() -> str:
    out = io.StringIO()
    write_jsonl(out, seed=7, events=500)
    return hashlib.sha256(out.getvalue().encode()).hexdigest()


def test_the_sample_life_is_unchanged() -> None:
    assert questions.all_questions  # imported
    assert sample_hash() == SAMPLELIFE_500_SHA256
    all_questions(7, 500)
    assert sample_hash() == SAMPLELIFE_500_SHA256


@pytest.mark.slow
def test_the_sample_life_is_unchanged_from_a_fresh_interpreter() -> None:
    code = (
        "import hashlib, io; from tests.testkit.samplelife import write_jsonl; "
        "b = io.StringIO(); write_jsonl(b, seed=7, events=500); "
        "print(hashlib.sha256(b.getvalue().encode()).hexdigest())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == SAMPLELIFE_500_SHA256
