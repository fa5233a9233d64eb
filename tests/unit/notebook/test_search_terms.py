"""The Notebook search's words: folding, stopwords and stems, and what they
do to a ranking (the 3/2/1 weights, the person's own page first, an honest
miss on the tool and on the command line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.node.keyed import Node
from pixie.device.notebook.clearview import search_terms
from pixie.device.notebook.store import Distilled
from pixie.device.notebook.terms import fold, query_terms, query_words, stem, words
from pixie.device.store.contacts import name_tag
from pixie.device.store.notes import NoteKind
from tests.support.cli import run_cli

# -- the words -------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["work", "works", "working", "worked", "Work", "WORKS", "Working"])
def test_every_form_of_work_has_one_stem(form: str) -> None:
    assert query_terms(form) == ["work"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("happy", "happiness"),
        ("hoping", "hoped"),
        ("studies", "study"),
        ("running", "runs"),
        ("dinners", "dinner"),
        ("possibility", "possible"),
    ],
)
def test_related_forms_meet(a: str, b: str) -> None:
    assert query_terms(a) == query_terms(b)


@pytest.mark.parametrize(("a", "b"), [("work", "worker"), ("run", "runner"), ("art", "article")])
def test_different_words_stay_apart(a: str, b: str) -> None:
    assert query_terms(a) != query_terms(b)


def test_case_and_accents_fold_away() -> None:
    assert words("Café ZOË naïve Ma\u00f1ana") == ["cafe", "zoe", "naive", "manana"]
    assert words("cafe\u0301") == ["cafe"]  # decomposed: the combining accent goes too
    assert fold("Straße") == "strasse"  # full case folding
    assert words("ﬁsh x²") == ["fish", "x2"]  # compatibility decomposition (NFKD)
    assert query_terms("CAFÉ") == query_terms("cafe") == query_terms("Cafe\u0301")


def test_stopwords_are_dropped_from_the_query() -> None:
    assert query_words("Where does Priya work now?") == ["priya", "work"]
    assert query_terms("Can you tell me what Ada said about the marathon?") == [
        "ada",
        "marathon",
    ]
    # a query of nothing but stopwords is kept whole, so it still searches
    assert query_words("who is it") == ["who", "is", "it"]
    # an apostrophe's "s" is a word of its own, and a stopword
    assert query_words("Priya's job") == ["priya", "job"]


def test_terms_are_unique_and_capped() -> None:
    assert query_terms("walks walking walked walk") == ["walk"]
    many = " ".join(f"word{i}" for i in range(40))
    assert len(query_terms(many)) == 16


def test_each_term_looks_its_words_up_by_prefixes_that_cover_every_form() -> None:
    (term,) = search_terms("happiness")
    assert term.stem == "happi"
    # "happy" does not start with "happi": the last letter is left off
    assert all("happy".startswith(p) or "happiness".startswith(p) for p in term.prefixes)
    assert any("happy".startswith(p) for p in term.prefixes)
    (die,) = search_terms("died")
    assert stem("dying") == die.stem and any("dying".startswith(p) for p in die.prefixes)


# -- the ranking -----------------------------------------------------------------------


def _note(
    node: Node,
    key: str,
    title: str,
    body: str,
    *,
    tags: tuple[str, ...] = (),
    contact: str | None = None,
    kind: NoteKind = NoteKind.CONVERSATION_DIGEST,
) -> str:
    item = Distilled(kind, key, title, body, contact, tags, key)
    return node.notebook.upsert_clear(item).note_id


def test_weights_stay_three_two_one_across_word_forms(node: Node) -> None:
    body = _note(node, "b", "Lunch", "She worked late again.")
    tag = _note(node, "t", "Lunch", "Nothing to see.", tags=("working",))
    title = _note(node, "ti", "Works outing", "Nothing to see.")
    all_three = _note(node, "a", "Working from home", "He works there.", tags=("work",))
    got = node.notebook.search_clear("work")
    assert [(r.note.id, r.score) for r in got] == [(all_three, 6), (title, 3), (tag, 2), (body, 1)]


def test_ties_go_to_the_newest(node: Node) -> None:
    first = _note(node, "1", "Dinner plans", "x")
    second = _note(node, "2", "Dinners out", "x")
    assert [r.note.id for r in node.notebook.search_clear("dinner")] == [second, first]


def test_the_person_page_comes_first_when_it_matches(node: Node) -> None:
    priya, _ = node.contacts.add("Priya Raman", [], now=0)
    page = _note(
        node,
        priya,
        "Priya Raman",
        "Work: lead data engineer at Helix Bio.",
        contact=priya,
        kind=NoteKind.PERSON,
    )
    email = _note(node, "mail:1", "How the new rota works", "Rota works, see you.", contact=priya)
    _note(node, "other", "Works outing", "Not about her.")
    got = node.notebook.search_clear("work", priya)
    # the page scores less than the email (body 1 against title 3 + body 1),
    # and still leads: it is the person's own page
    assert [(r.note.id, r.score) for r in got] == [(page, 1), (email, 4)]
    # without the person, the plain ranking
    assert [r.note.id for r in node.notebook.search_clear("work")][:1] == [email]
    # a page that does not match is not brought in
    assert [r.note.id for r in node.notebook.search_clear("rota", priya)] == [email]
    # with no words, the person's page leads the newest-first list
    assert [r.note.id for r in node.notebook.search_clear("", priya)] == [page, email]


def test_an_honest_miss(node: Node, tmp_path: Path) -> None:
    # an alias gives her a contact card, which follows her notes
    priya, _ = node.contacts.add("Priya Raman", ["Pri"], now=0)
    _note(node, "1", "Lunch with Priya", "We talked about her new job.", contact=priya)
    assert node.notebook.search_clear("xylophone") == []
    tool = CheckNotebookTool(node.notebook.clear_view(), node.contacts)
    answer = tool.lookup({"query": "xylophone", "person": "Priya"})
    assert answer.missed and answer.notes == ()
    first, *rest = answer.text.splitlines()
    assert first == 'No notes in the Notebook match "xylophone" about Priya.'
    # the contact card still follows for the model: it is not a note
    assert rest and rest[0].startswith("Contact card · Priya Raman")
    found = tool.lookup({"query": "new jobs", "person": "Priya"})
    assert not found.missed and found.text.startswith("1 note matching")


def test_the_command_line_prints_one_line_on_a_miss(node: Node) -> None:
    # an alias gives her a contact card, which follows her notes
    priya, _ = node.contacts.add("Priya Raman", ["Pri"], now=0)
    _note(node, "1", "Lunch with Priya", "We talked about her new job.", contact=priya)
    data = str(node.data.path)
    node.close()
    miss = run_cli("--data", data, "notebook", "search", "xylophone", "--person", "Priya")
    assert miss.code == 0
    assert miss.out == 'No notes in the Notebook match "xylophone" about Priya.\n'
    hit = run_cli("--data", data, "notebook", "search", "jobs", "--person", "Priya")
    assert hit.code == 0
    lines = hit.out.splitlines()
    assert lines[0] == '1 note matching "jobs" about Priya:'
    assert any(line.startswith("Contact card · Priya Raman") for line in lines)


def test_a_person_filter_finds_the_notes_that_name_them(node: Node) -> None:
    livia, _ = node.contacts.add("Lívia Souza", [], now=0)
    will, _ = node.contacts.add("Will Turner", [], now=0)
    swim = _note(node, "s", "Lívia swim lesson — weekly on Saturdays", "Swimmer 4 group.")
    school = _note(node, "t", "School", "Her teacher is Ms. Okafor; livia loves her.")
    tagged = _note(node, "g", "Group chat", "Plans.", tags=(name_tag("Lívia Souza"),))
    _note(node, "x", "Swim kit", "Goggles for the pool.")
    got = {r.note.id for r in node.notebook.search_clear("", livia)}
    assert got == {swim, school, tagged}  # by name, without accents, or by tag
    assert [r.note.id for r in node.notebook.search_clear("swim", livia)] == [swim]
    # A first name that is a common word is not taken for a mention of him.
    _note(node, "w", "Plans", "We will see.")
    full = _note(node, "wt", "Dinner", "Dinner with Will Turner on Friday.")
    assert [r.note.id for r in node.notebook.search_clear("", will)] == [full]


def test_their_notes_come_before_notes_that_only_name_them(node: Node) -> None:
    zoe, _ = node.contacts.add("Zoë Martin", [], now=0)
    theirs = _note(node, "c", "Chat", "A call about the garden.", contact=zoe)
    naming = _note(node, "n", "Call Zoë Martin about the call", "Call, call, call.")
    got = [r.note.id for r in node.notebook.search_clear("call", zoe)]
    assert got == [theirs, naming]  # although the note naming her scores more


def test_a_name_that_is_a_word_does_not_claim_every_note(node: Node) -> None:
    may, _ = node.contacts.add("May Chen", [], now=0)
    june, _ = node.contacts.add("June", [], now=0)
    _note(node, "m", "Plans", "We may go to the coast in June.")
    full = _note(node, "f", "Lunch", "Lunch with May Chen on Friday.")
    assert [r.note.id for r in node.notebook.search_clear("", may)] == [full]
    assert node.notebook.search_clear("", june) == []
