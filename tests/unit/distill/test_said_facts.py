"""What a person says of their own life reaches their page, in the third person.

The built-in distiller reads fixed patterns (work, home, family, ...); besides
those, a person's own sentences that state something (not a question, a
greeting, an arrangement, or what a pattern already read) are kept as dated
"Also" facts, a few per source, each once however often it is said, and the
answer stays within the bound on person facts.
"""

from __future__ import annotations

from pixie.device.distill.contract import (
    MAX_PERSON_FACTS,
    ME,
    FactKind,
    Line,
    SourceKind,
    make_request,
)
from pixie.device.distill.offline import distill
from pixie.device.distill.offline_talk import SAID_FACTS
from pixie.device.distill.pages import fact_line, parse_fact_line
from pixie.device.distill.prompt import parse_result

DAY = 86_400_000_000
T0 = 1_772_409_600_000_000  # 2 Mar 2026, 00:00 UTC


def said_facts(answer: dict[str, object]) -> list[tuple[str, str | None]]:
    facts = answer["person_facts"]
    assert isinstance(facts, list)
    return [(f["text"], f["date"]) for f in facts if f["kind"] == FactKind.OTHER.value]


def test_a_call_keeps_what_they_said_of_themselves() -> None:
    transcript = "\n".join(
        [
            "Me: Hi Ada, how are you?",
            "Ada: Oh hey! I was just thinking about you.",
            "Ada: I finished the Lyon marathon in 3:58!! My knee is sore after the long run.",
            "Me: Amazing, I'm so proud of you.",
            "Ada: I work at Inria now. Did I tell you?",  # a pattern's fact: once
            "Ada: Dinner Friday at 19:30?",  # an arrangement and a question
            "Ada: Want to do dinner Friday at 19:30.",  # an arrangement
            "Ada: Talk soon, bye!",
        ]
    )
    request = make_request(
        SourceKind.CALL,
        "Call with Ada Lovelace",
        None,
        ["Ada Lovelace"],
        [Line(T0, "Ada Lovelace", False, transcript, "call")],
    )
    answer = distill(request)
    assert sorted(said_facts(answer)) == [  # most telling first; here, in any order
        ("finished the Lyon marathon in 3:58", "2026-03-02"),
        ("their knee is sore after the long run", "2026-03-02"),
    ]
    facts = answer["person_facts"]
    assert isinstance(facts, list)
    assert {"kind": "work", "text": "works at Inria", "date": "2026-03-02"} in facts
    # nothing the user said, no small talk, no arrangement
    texts = " ".join(t for t, _ in said_facts(answer))
    assert "proud" not in texts and "thinking about you" not in texts
    assert "Dinner" not in texts and "dinner" not in texts
    parse_result(answer)  # within every bound


def test_a_sentence_said_again_is_one_fact_and_a_source_gives_a_few() -> None:
    lines = [
        Line(T0 + i * DAY, "Kenji", False, "Made ramen from scratch, the broth took 12 hours.")
        for i in range(3)
    ]
    news = [
        "Reading Middlemarch now, slow start.",
        "The orchestra finally tuned the new harpsichord.",
        "My sister moved her bakery to Braga last month.",
        "Conductor wants the cellos louder in the slow movement.",
        "Booked flights to Osaka for the spring festival.",
        "Our landlord repainted the whole staircase green.",
    ]
    lines += [Line(T0 + (10 + i) * DAY, "Kenji", False, text) for i, text in enumerate(news)]
    lines.append(Line(T0 + 30 * DAY, ME, True, "I love the cello, my teacher is strict."))
    request = make_request(SourceKind.CONVERSATION, "Kenji", "Kenji", ["Kenji"], lines)
    answer = distill(request)
    said = said_facts(answer)
    assert len(said) == SAID_FACTS
    assert [t for t, _ in said].count("Made ramen from scratch, the broth took 12 hours") <= 1
    assert not any("cello" in t for t, _ in said)  # the user's words are not Kenji's
    facts = answer["person_facts"]
    assert isinstance(facts, list) and len(facts) <= MAX_PERSON_FACTS
    parse_result(answer)


def test_an_also_line_reads_back_as_written() -> None:
    request = make_request(
        SourceKind.POST,
        "Zoë's post",
        None,
        ["Zoë Martin"],
        [Line(T0, "Zoë Martin", False, "The new flat has a tiny garden; Leo is obsessed!", "post")],
    )
    ((text, day),) = said_facts(distill(request))
    assert (text, day) == ("The new flat has a tiny garden, Leo is obsessed", "2026-03-02")
    parsed = parse_result(distill(request)).person_facts
    (fact,) = [f for f in parsed if f.kind is FactKind.OTHER]
    assert parse_fact_line(fact_line(fact)) == fact
