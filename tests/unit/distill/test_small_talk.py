"""The small-talk check and the lines, days and pages the distiller reads
back: each fast form gives what the plain one gives."""

from __future__ import annotations

import io
import json

import pytest

from pixie.device.distill import offline_words, pages
from pixie.device.distill.contract import Fact, FactKind
from pixie.device.distill.extract import sentences
from pixie.device.errors import BadInput
from pixie.device.store.notes import clean_tags
from tests.testkit.samplelife import write_jsonl


def _sample_texts() -> list[str]:
    out = io.StringIO()
    write_jsonl(out, seed=5, events=1500)
    texts = [json.loads(line)["text"] for line in out.getvalue().splitlines()]
    split = [s for t in texts for s in sentences(t)]
    return texts + split


HANDPICKED = [
    "ok",
    "OK!!",
    "hey it's maria",
    "Hello, this is Dr. Reyes",
    "ana here",
    "bye",
    "see you then, bye!",
    "Sounds good",
    "talk again soon",
    "we have to run",
    "call me back when you can",
    "I finished the Lyon marathon in 3:58",
    "hi",
    "hi there you",
    "hi there you lot again",
    "thanks for the book",
    "nobody said bye to me",
    "   ",
    "",
]


def test_small_talk_is_what_one_of_its_patterns_finds() -> None:
    texts = HANDPICKED + _sample_texts()
    found = 0
    for text in texts:
        lowered = " ".join(text.casefold().split())
        plain = any(p.search(lowered) for p in offline_words._SMALL_TALK)
        assert offline_words._is_small_talk(text) is plain, text
        found += plain
    assert 0 < found < len(texts)  # both answers occur


def test_fact_lines_days_and_pages_read_back_alike_however_often() -> None:
    fact = Fact(FactKind.WORK, "works at Helix Bio", 1_772_409_600_000_000)
    line = pages.fact_line(fact)
    assert pages.fact_line(fact) == line
    assert pages.parse_fact_line(line) == pages.parse_fact_line(line) == fact
    page = pages.PersonPage((fact,), ("You write often",), ("a question",))
    body = pages.render_person_page(page)
    assert pages.parse_person_page(body) == page
    assert pages.parse_person_page(body) is pages.parse_person_page(body)
    about = pages.render_about_you([fact])
    first = pages.parse_about_you(about)
    first.append(Fact(FactKind.NOTE, "changed by a caller"))
    assert pages.parse_about_you(about) == [fact]  # a caller's list is its own


@pytest.mark.parametrize("bad", ["", "   ", "no/slashes", "x" * 41, " " + "y" * 200])
def test_a_bad_tag_is_refused_every_time(bad: str) -> None:
    for _ in range(2):
        with pytest.raises(BadInput):
            clean_tags([bad])


def test_tags_clean_alike_however_often() -> None:
    spaced = "Long" + " " * 300 + "Run"  # long, but short once its spaces collapse
    for _ in range(2):
        assert clean_tags(["Running", "running", spaced, "Café"]) == (
            "running",
            "long run",
            "café",
        )
