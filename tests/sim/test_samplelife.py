"""The sample-life generator: reproducible, well-formed, and rich enough to demo on."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
import unicodedata
import uuid
from collections import Counter
from itertools import islice, pairwise
from pathlib import Path

import pytest

import pixie
from tests.testkit.samplelife import (
    CONTACTS,
    DEFAULT_END,
    KINDS,
    MAX_TEXT_CHARS,
    USER_FACTS,
    Event,
    generate,
    main,
    write_jsonl,
)

REQUIRED = {"id", "kind", "at", "text"}
OPTIONAL = {"contact", "thread", "source", "from_me"}
AT_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
SOURCE_PREFIX = {"call": "call", "voicemail": "voicemail", "post": "post", "calendar": "cal"}
NAMES = {c.name for c in CONTACTS}
BY_THREAD = {c.thread: c for c in CONTACTS}


def dumps(event: Event) -> str:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def at_ms(at: str) -> int:
    when = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    return int(when.timestamp()) * 1000


def jsonl(seed: int = 7, events: int = 2000, end: dt.date | None = None, years: float = 3.0) -> str:
    out = io.StringIO()
    write_jsonl(out, seed=seed, events=events, end=end, years=years)
    return out.getvalue()


# -- determinism --------------------------------------------------------------


def test_same_arguments_give_the_same_events() -> None:
    first = list(generate(seed=11, events=800))
    again = list(generate(seed=11, events=800))
    assert first == again
    assert [dumps(e) for e in first] == [dumps(e) for e in again]


def test_different_seeds_give_different_events() -> None:
    texts = {seed: [e["text"] for e in generate(seed=seed, events=200)] for seed in (1, 2, -1, -2)}
    assert len({tuple(t) for t in texts.values()}) == 4  # -1 does not replay 1
    ids_1 = {e["id"] for e in generate(seed=1, events=200)}
    ids_2 = {e["id"] for e in generate(seed=2, events=200)}
    assert not ids_1 & ids_2


def test_default_end_is_a_fixed_date_not_today() -> None:
    default = list(generate(events=100))
    assert default == list(generate(events=100, end=dt.date(2026, 11, 30)))
    assert dt.date(2026, 11, 30) == DEFAULT_END
    assert default != list(generate(events=100, end=dt.date(2026, 12, 1)))


def test_output_does_not_depend_on_hash_randomisation(tmp_path: Path) -> None:
    # Two interpreters with different string hashing must write the same bytes.
    roots = [str(Path(p).parent) for p in pixie.__path__]
    path = os.pathsep.join(p for p in [*roots, os.environ.get("PYTHONPATH", "")] if p)
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"life-{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path}
        subprocess.run(
            [sys.executable, "-m", "tests.testkit.samplelife", "--events", "400", "--out", out],
            check=True,
            env=env,
            timeout=60,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0].decode("utf-8") == jsonl(events=400)


# -- schema -------------------------------------------------------------------


@pytest.mark.parametrize("seed", [7, 12345])
def test_every_event_follows_the_schema(seed: int) -> None:
    events = list(generate(seed=seed, events=3000))
    assert len(events) == 3000
    sources: dict[str, list[int]] = {}
    previous_at, previous_ms = "", -1
    ids = set()
    for index, event in enumerate(events):
        assert REQUIRED <= event.keys() <= REQUIRED | OPTIONAL, event
        assert all(value is not None for value in event.values())
        kind = event["kind"]
        assert kind in KINDS and kind != "spark"

        at = event["at"]
        assert isinstance(at, str) and AT_RE.fullmatch(at), at
        assert at >= previous_at  # same-format UTC strings sort as times do
        previous_at = at

        raw = event["id"]
        assert isinstance(raw, str)
        parsed = uuid.UUID(raw)
        assert str(parsed) == raw  # canonical lowercase 8-4-4-4-12
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        ms = parsed.int >> 80
        assert ms // 1000 * 1000 == at_ms(at)  # the id carries the event's own time
        assert ms > previous_ms  # so ids sort by time too
        previous_ms = ms
        ids.add(raw)

        text = event["text"]
        assert isinstance(text, str) and 1 <= len(text) <= MAX_TEXT_CHARS
        assert text == text.strip()

        contact = event.get("contact")
        assert contact is None or contact in NAMES

        thread = event.get("thread")
        from_me = event.get("from_me")
        if kind == "message":
            assert isinstance(thread, str) and isinstance(from_me, bool)
            if thread.startswith("t-"):
                assert contact == BY_THREAD[thread].name  # 1:1: always the other person
            else:
                assert thread.startswith("g-")
                assert (contact is None) == from_me  # groups name whoever else speaks
        else:
            assert thread is None

        source = event.get("source")
        if kind in SOURCE_PREFIX:
            assert isinstance(source, str)
            prefix, _, number = source.partition(":")
            assert prefix == SOURCE_PREFIX[kind] and number.isdigit()
            sources.setdefault(prefix, []).append(int(number))
        else:
            assert source is None

        if kind == "post":
            assert isinstance(from_me, bool) and (contact is None) == from_me
        elif kind != "message":
            assert from_me is None
        if kind in ("call", "voicemail"):
            assert contact is not None
        if kind in ("journal", "agent_chat_user", "agent_chat_agent"):
            assert contact is None
        if kind == "agent_chat_user":
            assert events[index + 1]["kind"] == "agent_chat_agent"
        if kind == "agent_chat_agent":
            assert events[index - 1]["kind"] == "agent_chat_user"
    assert len(ids) == len(events)
    for numbers in sources.values():
        assert numbers == list(range(1, len(numbers) + 1))  # call:1, call:2, ...


def test_events_fill_their_window() -> None:
    end = dt.date(2024, 6, 30)
    events = list(generate(events=2000, end=end, years=2.0))
    end_ms = at_ms("2024-06-30T18:00:00Z")
    span = round(2.0 * 365.25 * 86_400_000)
    times = [at_ms(e["at"]) for e in events]
    assert end_ms - span <= times[0] and times[-1] <= end_ms
    assert times[0] < end_ms - 0.95 * span  # starts near the beginning...
    assert times[-1] > end_ms - 0.05 * span  # ...and runs up to the end
    months = {e["at"][:7] for e in events}
    assert len(months) >= 22  # spread out, not bunched at one end
    hours = Counter(int(e["at"][11:13]) for e in events)
    assert sum(hours[h] for h in range(2, 7)) < 0.03 * len(events)  # people sleep


def test_call_transcripts_are_long_multi_turn_conversations() -> None:
    calls = [e for e in generate(events=5000) if e["kind"] == "call"]
    assert len(calls) > 100
    for call in calls:
        lines = call["text"].split("\n")
        short = next(c.short for c in CONTACTS if c.name == call["contact"])
        speakers = {line.split(": ", 1)[0] for line in lines}
        assert speakers == {"Me", short}
        assert len(lines) >= 4
    assert sum(len(c["text"]) for c in calls) / len(calls) > 250
    assert max(len(c["text"]) for c in calls) > 700


# -- content --------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_small_runs_show_every_kind_contact_and_fact(seed: int) -> None:
    events = list(generate(seed=seed, events=300))
    assert {e["kind"] for e in events} == set(KINDS)
    assert {e.get("contact") for e in events} - {None} == NAMES
    journal = " ".join(e["text"] for e in events if e["kind"] == "journal")
    for fact in USER_FACTS:
        assert fact in journal


def test_kind_mix_is_roughly_realwrite_life() -> None:
    counts = Counter(e["kind"] for e in generate(seed=3, events=20_000))
    share = {kind: counts[kind] / 20_000 for kind in KINDS}
    assert 0.55 < share["message"] < 0.70
    assert 0.07 < share["journal"] < 0.13
    assert 0.05 < share["post"] < 0.11
    assert 0.04 < share["calendar"] < 0.10
    assert 0.03 < share["call"] < 0.07
    assert 0.015 < share["voicemail"] < 0.045
    assert share["agent_chat_user"] == pytest.approx(share["agent_chat_agent"])
    assert 0.025 < share["agent_chat_user"] + share["agent_chat_agent"] < 0.06


def test_user_facts_recur_in_journal_and_own_messages() -> None:
    events = list(generate(events=2000))
    journal = [e["text"] for e in events if e["kind"] == "journal"]
    mine = [e["text"] for e in events if e["kind"] == "message" and e["from_me"]]
    theirs = [e["text"] for e in events if e["kind"] == "message" and not e["from_me"]]
    for fact in USER_FACTS:
        assert sum(fact in text for text in journal) >= 3, fact
        assert any(fact in text for text in mine), fact
        assert not any(fact in text for text in theirs), fact  # only the user says them


def test_messages_come_in_threads_with_both_sides() -> None:
    messages = [e for e in generate(events=3000) if e["kind"] == "message"]
    by_thread = Counter(e["thread"] for e in messages)
    assert {c.thread for c in CONTACTS} <= by_thread.keys()
    groups = [t for t in by_thread if t.startswith("g-")]
    assert groups
    for group in groups:
        speakers = {e.get("contact") for e in messages if e["thread"] == group} - {None}
        assert len(speakers) >= 2
    assert 0.3 < sum(bool(e["from_me"]) for e in messages) / len(messages) < 0.7
    # Bursts: most messages follow another in the same thread within the hour.
    close = sum(
        1
        for a, b in pairwise(messages)
        if a["thread"] == b["thread"] and at_ms(b["at"]) - at_ms(a["at"]) < 3_600_000
    )
    assert close > 0.5 * len(messages)


def test_personal_facts_recur_and_follow_the_timeline() -> None:
    events = list(generate(events=6000))
    texts = [e["text"] for e in events]
    assert sum("Biscuit" in t for t in texts) > 20  # Jimmy's dog
    assert sum("marathon" in t for t in texts) > 20  # Ada's marathon in Lyon
    # Priya hunts for a job first and has the new one after: never the other way.
    hunting = [e["at"] for e in events if re.search(r"interview|job hunting", e["text"])]
    new_job = [e["at"] for e in events if "new job" in e["text"]]
    assert hunting and new_job
    assert max(hunting) < min(new_job)


def test_contacts_are_a_distinct_dozen() -> None:
    assert len(CONTACTS) == 12
    assert len(NAMES) == 12
    aliases = [a.casefold() for c in CONTACTS for a in (c.name, *c.aliases)]
    assert len(aliases) == len(set(aliases))  # an alias resolves to one person
    assert sum(not c.name.isascii() for c in CONTACTS) >= 2
    for contact in CONTACTS:
        assert unicodedata.is_normalized("NFC", contact.name)
        assert contact.aliases and contact.relationship and contact.city
        assert 3 <= len(contact.topics) <= 4
        assert contact.facts


def test_agent_answers_match_thewrite_life() -> None:
    events = list(generate(events=4000))
    pairs = [
        (q["text"], a["text"])
        for q, a in pairwise(events)
        if q["kind"] == "agent_chat_user" and a["kind"] == "agent_chat_agent"
    ]
    assert len(pairs) > 30
    for question, answer in pairs:
        if question.startswith("Who is "):
            alias = question.removeprefix("Who is ").removesuffix(" again?")
            person = next(c for c in CONTACTS if alias in c.aliases)
            assert person.name in answer and person.relationship in answer
        if question.startswith("Where do I work"):
            assert "Northwind Labs" in answer


# -- streaming and the command line ----------------------------------------------


def test_generation_is_lazy_and_checks_arguments_up_front() -> None:
    huge = generate(events=10**9)  # would never finish if it built a list
    assert len(list(islice(huge, 50))) == 50
    with pytest.raises(ValueError, match="events"):
        generate(events=-1)
    with pytest.raises(ValueError, match="years"):
        generate(years=0)
    with pytest.raises(ValueError, match="milliseconds"):
        generate(events=10**6, years=1e-6)
    assert list(generate(events=0)) == []
    assert len(list(generate(events=1))) == 1


def test_write_jsonl_writes_one_json_dumps_line_per_event() -> None:
    out = io.StringIO()
    count = write_jsonl(out, seed=5, events=5000, end=dt.date(2025, 1, 1), years=1.5)
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    events = list(generate(seed=5, events=5000, end=dt.date(2025, 1, 1), years=1.5))
    assert count == len(events) == len(lines) - 1
    assert lines[:-1] == [dumps(e) for e in events]
    assert any(not line.isascii() for line in lines)  # names kept as UTF-8, not \\u escapes


def test_main_writes_the_same_as_write_jsonl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = jsonl(seed=3, events=600, end=dt.date(2025, 2, 1), years=1.0)
    argv = ["--seed", "3", "--events", "600", "--end", "2025-02-01", "--years", "1"]
    out = tmp_path / "life.jsonl"
    assert main([*argv, "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == expected
    assert main(argv) == 0
    assert capsys.readouterr().out == expected


def test_main_defaults_match_generate_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out == jsonl()
    assert len(jsonl().splitlines()) == 2000


def test_main_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--years", "100"]) == 2  # would start before 1970
    assert "1970" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--events", "-3"])
    with pytest.raises(SystemExit):
        main(["--end", "30/11/2026"])


def test_module_is_usable_as_a_script() -> None:
    """``python -m`` runs the generator and prints what `main` prints."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.testkit.samplelife", "--events", "5"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 5
    assert lines == jsonl(events=5).splitlines()
    assert all(json.loads(line)["kind"] for line in lines)
