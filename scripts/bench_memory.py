"""Memory-quality benchmark: retrieval recall of the agent's memory tools.

In the style of LongMemEval's retrieval metric. The labelled questions come
from `tests.testkit.questions`, which derives them from what the sample life
planted (never from what the system made of it): each has a kind (single fact,
multi-session, knowledge update, temporal, abstention), a query (plain words, a
person filter, sometimes a days-back window) and the ids of the log events that
state the answer.

One run builds a data dir from the sample life, imports it, runs a full offline
distillation pass, and then asks every question of:

* ``check_notebook@8``: the Notebook search the tool runs (top 8 notes, title,
  tags and body weighted 3/2/1, words meeting on their stems, at most two of
  one title shape while other matches wait), with the
  question's person and window. A note counts as holding a gold event if it
  was distilled from it. Notes carry only a reference to their source, so the
  benchmark records, for every distillation request, the events it actually
  showed the distiller (a source's newest lines and any earlier lines it
  kept, not all of them) and which notes the commit of its answer wrote, and
  credits each written note with that request's events, whatever the kind of
  request (conversation, post, call, journal, calendar, or any added later).
  Two rules narrow the credit by whose words they are, not by kind: a note
  about the user (about-you) gets the user's own lines of a request that has
  any, else all its lines (a journal is all the user's); a person's page
  written from a request with several other people gets that person's own
  lines. A note written by several requests gets the union;
* ``grep_memory@12``: the tool itself over the log's text mirror, with the
  query's key words OR-ed into one escaped pattern (``key_words`` and
  ``fallback_pattern`` from the agent's tools);
* ``two-step@8``: exactly what the chat loop does: the Notebook first; only if
  it returns no note, grep_memory on ``fallback_query`` (the query's key
  words, or the question's when the query has none: with two or more, the
  memories where two of the first four meet; with one, that word); the first
  8 of what was returned count, and the model is handed both texts as the
  loop joins them;
* ``BM25@8``, the baseline, computed in the same run: SQLite FTS5 ``bm25()``
  over an in-memory table of the raw event texts (and contact names), the
  query's words minus the stopword list the Notebook used before it stemmed
  (kept here so the baseline stays as it was) OR-ed as prefixes.

Reported per method and question kind: recall (share of questions where any
gold event is among what was returned: for the Notebook, any event credited to
any of the 8 notes returned, however many events a note holds), the mean share of gold events found,
and the context handed to the model (characters / 4 as a token estimate, median
and p95). Recall is not defined for abstention questions; for them the figure
is the share where the method returned nothing (no tool exposes a score
threshold: the Notebook's scores are raw term-weight sums, grep has none).

The tuning half of the questions by default; ``--held-out`` for the other.

    python scripts/bench_memory.py [--seed 7] [--events 5000] [--held-out] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import repo_root  # noqa: F401 (tests.testkit is not installed)
import trio

from pixie.device.agent.chat import FALLBACK_NOTE
from pixie.device.agent.grep import SNIPPET_CHARS, GrepMemoryTool, clip
from pixie.device.agent.tools import CheckNotebookTool, fallback_pattern, fallback_query, key_words
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import NotFound
from pixie.device.ingest.jsonl import read_events
from pixie.device.node.keyed import Node
from pixie.device.notebook.clearview import TOP_RESULTS
from pixie.device.notebook.store import UpsertOutcome
from pixie.device.store.contacts import clean_name
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.notes import ClearNote, NoteKind
from pixie.device.store.provision import create_data_dir
from pixie.protocol.timestamps import format_date, parse_time
from tests.testkit import questions as qset
from tests.testkit.samplelife import DEFAULT_END, Event, generate, write_jsonl

METHODS = ("check_notebook@8", "grep_memory@12", "two-step@8", "BM25@8")
COLUMNS = (*qset.KINDS, "overall")
TWO_STEP_K = 8
BM25_K = 8
DAY_US = 86_400_000_000
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


# The Notebook's stopwords before it stemmed: the BM25 baseline keeps them, so
# it stays the baseline it was.
BM25_STOPWORDS = frozenset(
    "a an and are about at be did do does for from has have how i in is it me my of on or "
    "our s so t that the their them they this to was we what when where which who why will "
    "with you your".split()
)


def bm25_words(text: str) -> list[str]:
    """The query's words minus the baseline's stopwords, as typed."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return [w for w in words if _fold(w) not in BM25_STOPWORDS] or words


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# -- the data dir and the distillation pass ----------------------------------------------


class Recording:
    """The built-in distiller, remembering every request and its answer."""

    name = "offline"

    def __init__(self) -> None:
        self.inner = OfflineDistiller()
        self.seen: list[tuple[Any, Any]] = []

    async def answer(self, request: Any) -> object:
        result = await self.inner.answer(request)
        self.seen.append((request, result))
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


def record_commits(service: NotetakingService, recording: Recording) -> list[tuple[Any, Any]]:
    """Each commit of the pass, as (the request answered, the upsert results).

    The service asks for one answer and commits it before the next source, so
    the request a commit belongs to is the last one the distiller saw."""
    written: list[tuple[Any, Any]] = []
    inner = service.commit

    def commit(*args: Any, **kwargs: Any) -> Any:
        results = inner(*args, **kwargs)
        written.append((recording.seen[-1][0], results))
        return results

    service.commit = commit  # type: ignore[method-assign]
    said = service.commit_agent_said

    def commit_said(found: Any, top: int) -> Any:
        # What the agent told the user about a contact, merged into their
        # page: each page is credited with the answers that said it.
        results = said(found, top)
        for one in found:
            written.append((one, results))
        return results

    service.commit_agent_said = commit_said  # type: ignore[method-assign]
    return written


@dataclass
class Provenance:
    """Which events each note was distilled from (see the module docstring)."""

    by_note: dict[str, set[str]] = field(default_factory=dict)
    unmatched_lines: int = 0

    def of(self, note: ClearNote) -> set[str]:
        return self.by_note.get(note.id, set())


def event_us(event: Event) -> int:
    return parse_time(event["at"])


def _credited(note: ClearNote, request: Any, shown: Sequence[tuple[str, Any]]) -> set[str]:
    """The events of ``request`` a note it wrote is credited with."""
    if note.kind is NoteKind.ABOUT_YOU:
        mine = {i for i, line in shown if line.from_me}
        return mine or {i for i, _ in shown}
    if note.kind is NoteKind.PERSON and len(request.participants) > 1:
        return {i for i, line in shown if line.speaker == note.title}
    return {i for i, _ in shown}


def provenance(
    events: Sequence[Event], written: Iterable[tuple[Any, Any]], view: Any
) -> Provenance:
    by_at: dict[int, list[Event]] = {}
    for e in events:
        by_at.setdefault(event_us(e), []).append(e)
    prov = Provenance()
    for request, results in written:
        shown: list[tuple[str, Any]] = []
        for line in (*getattr(request, "earlier", ()), *request.lines):
            head = line.text.rstrip("…")[:40]
            match = [e for e in by_at.get(line.at, ()) if e["text"].strip().startswith(head)]
            if not match:
                prov.unmatched_lines += 1
                continue
            shown.append((match[0]["id"], line))
        about = getattr(request, "contact_id", None)
        for result in results:
            if result.outcome is UpsertOutcome.KEPT_USER_EDIT:
                continue
            note = view.get_clear(result.note_id)
            if note is None or (about is not None and note.contact_id != about):
                continue
            prov.by_note.setdefault(note.id, set()).update(_credited(note, request, shown))
    return prov


def build(where: Path, seed: int, events: int) -> tuple[Node, list[Event], Provenance, float]:
    keys = FileKeyStore(where / "keys")
    create_data_dir(where / "device", name="bench", role="device", key_store=keys)
    node = Node.open(where / "device", key_store=keys)
    text = io.StringIO()
    write_jsonl(text, seed=seed, events=events)
    node.log.append(read_events(io.BytesIO(text.getvalue().encode())), now=0)
    life = list(generate(seed, events))
    recording = Recording()
    service = NotetakingService(node.db, node.notebook, LLMRouter((recording,)))
    written = record_commits(service, recording)
    t0 = time.perf_counter()
    trio.run(service.run_pass)
    seconds = time.perf_counter() - t0
    return node, life, provenance(life, written, node.notebook.clear_view()), seconds


# -- the methods -----------------------------------------------------------------------


@dataclass
class Outcome:
    """One method's answer to one question."""

    ids: list[str]  # gold-comparable event ids, in the order returned (deduplicated)
    text: str  # what the model would be handed
    returned: int  # how many items came back
    top_score: float | None = None

    @property
    def tokens(self) -> int:
        return math.ceil(len(self.text) / 4)


def _ordered(groups: Iterable[Iterable[str]]) -> list[str]:
    out: dict[str, None] = {}
    for group in groups:
        for i in sorted(group):
            out.setdefault(i, None)
    return list(out)


class Methods:
    def __init__(self, node: Node, life: Sequence[Event], prov: Provenance, now_us: int) -> None:
        self.node = node
        self.prov = prov
        self.now_us = now_us
        self.view = node.notebook.clear_view()
        self.tool = CheckNotebookTool(self.view, node.contacts, now=lambda: now_us)
        self.grep = GrepMemoryTool(node.mirror)
        self.unresolved: set[str] = set()
        self.fts = sqlite3.connect(":memory:")
        self.fts.execute(
            "CREATE VIRTUAL TABLE ev USING fts5(contact, text, "
            "tokenize = 'unicode61 remove_diacritics 2')"
        )
        self.events = list(life)
        self.fts.executemany(
            "INSERT INTO ev(rowid, contact, text) VALUES (?, ?, ?)",
            [(n, e.get("contact", ""), e["text"]) for n, e in enumerate(self.events)],
        )

    def notebook(self, q: qset.Question) -> Outcome:
        query = q.query
        if query.person is not None:
            try:
                self.node.contacts.resolve(clean_name(query.person, "person"))
            except NotFound:
                self.unresolved.add(query.person)
        # The tool's own answer: its person resolution, its notes, its text.
        answer = self.tool.answer(query.text, query.person, None, query.days_back)
        text, found = answer.text, list(answer.notes)
        assert len(found) <= TOP_RESULTS
        ids = _ordered(self.prov.of(s.note) for s in found)
        top = float(found[0].score) if found else None
        return Outcome(ids, text, len(found), top)

    def grep_memory(self, q: qset.Question) -> Outcome:
        result = self.grep.run(fallback_pattern(key_words(q.query.text)))
        return Outcome([h.event_id for h in result.hits], result.render(), len(result.hits))

    def two_step(self, q: qset.Question, first: Outcome) -> Outcome:
        """What the chat loop does with a check_notebook call (see chat.py)."""
        if first.returned:
            return first
        pattern = fallback_query(q.query.text, q.question)
        if pattern is None:
            return first
        result = self.grep.run(pattern)
        hits = [h.event_id for h in result.hits][:TWO_STEP_K]
        return Outcome(hits, first.text + FALLBACK_NOTE + result.render(), len(hits))

    def bm25(self, q: qset.Question) -> Outcome:
        words = [_fold(w) for w in bm25_words(q.query.text)]
        match = " OR ".join(f'"{w}"*' for w in words)
        rows = self.fts.execute(
            "SELECT rowid, bm25(ev) FROM ev WHERE ev MATCH ? ORDER BY bm25(ev), rowid DESC LIMIT ?",
            (match, BM25_K),
        ).fetchall()
        lines = [f"{len(rows)} best matches (BM25):"]
        ids = []
        for rowid, _score in rows:
            e = self.events[rowid]
            ids.append(e["id"])
            who = f" · {e['contact']}" if "contact" in e else ""
            body = clip(" ".join(e["text"].split()), 0, 0, SNIPPET_CHARS)
            lines.append(f"- {format_date(event_us(e))} · {e['kind']}{who}: {body}")
        top = -float(rows[0][1]) if rows else None
        return Outcome(ids, "\n".join(lines), len(rows), top)


# -- scoring ---------------------------------------------------------------------------


def score(q: qset.Question, out: Outcome, k: int) -> dict[str, Any]:
    gold = set(q.gold_event_ids)
    got = set(out.ids[:k])
    row: dict[str, Any] = {
        "tokens": out.tokens,
        "returned": out.returned,
        "nothing": not out.returned,
    }
    if out.top_score is not None:
        row["top_score"] = out.top_score
    if gold:
        found = gold & got
        row["hit"] = bool(found)
        row["gold_found"] = len(found) / len(gold)
    terms = answer_terms(q)
    if terms:
        shown = out.text.casefold()
        row["answer_shown"] = any(t in shown for t in terms)
    return row


def answer_terms(q: qset.Question) -> list[str]:
    """The question's evidence words that its query does not already contain:
    whether the returned text shows one of them is a check on what the model
    actually gets to read (a note can be distilled from a gold event and still
    not quote it). None for temporal and abstention questions."""
    if q.kind in ("temporal", "abstention"):
        return []
    asked = f"{q.query.text} {q.query.person or ''}".casefold()
    return [w.casefold() for w in q.evidence if w and w.casefold() not in asked]


def bench(args: argparse.Namespace, where: Path) -> dict[str, Any]:
    os.environ["PIXIE_KEYSTORE"] = "file"
    os.environ["PIXIE_KEYS"] = str(where / "keys")
    questions = qset.load(args.seed, args.events, held_out=args.held_out)
    t0 = time.perf_counter()
    node, life, prov, distill_s = build(where, args.seed, args.events)
    build_s = time.perf_counter() - t0
    try:
        end_us = parse_time(f"{DEFAULT_END.isoformat()}T18:00:00Z")
        methods = Methods(node, life, prov, end_us)
        per_q = []
        for q in questions:
            nb = methods.notebook(q)
            gr = methods.grep_memory(q)
            two = methods.two_step(q, nb)
            bm = methods.bm25(q)
            per_q.append(
                {
                    "qid": q.qid,
                    "kind": q.kind,
                    "question": q.question,
                    "query": q.query.as_json(),
                    "gold": len(q.gold_event_ids),
                    # every event credited to the top 8 notes: a note is the
                    # unit returned, and a person page alone may hold dozens
                    "check_notebook@8": score(q, nb, len(nb.ids)),
                    "grep_memory@12": score(q, gr, len(gr.ids)),
                    "two-step@8": score(q, two, len(two.ids)),
                    "BM25@8": score(q, bm, BM25_K),
                }
            )
        notes = methods.view.counts()
        unresolved = sorted(methods.unresolved)
    finally:
        node.close()
    return {
        "seed": args.seed,
        "events": args.events,
        "half": "held-out" if args.held_out else "tuning",
        "questions": len(questions),
        "by_kind": {k: sum(1 for q in questions if q.kind == k) for k in qset.KINDS},
        "build_seconds": round(build_s, 2),
        "distill_seconds": round(distill_s, 2),
        "notes": notes,
        "unmatched_request_lines": prov.unmatched_lines,
        "unresolved_persons": unresolved,
        "summary": summarise(per_q),
        "per_question": per_q,
    }


def _pct(values: Sequence[float]) -> float | None:
    return round(100 * statistics.fmean(values), 1) if values else None


def _p95(values: Sequence[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def summarise(per_q: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in METHODS:
        cells: dict[str, Any] = {}
        for column in COLUMNS:
            rows = [
                r[method]
                for r in per_q
                if (column == "overall" and r["kind"] != "abstention") or r["kind"] == column
            ]
            if column == "abstention":
                cell: dict[str, Any] = {"abstained": _pct([r["nothing"] for r in rows])}
            else:
                shown = [r["answer_shown"] for r in rows if "answer_shown" in r]
                cell = {
                    "recall": _pct([r["hit"] for r in rows]),
                    "gold_found": _pct([r["gold_found"] for r in rows]),
                    "answer_shown": _pct(shown),
                    "answer_shown_n": len(shown),
                }
            tokens = [r["tokens"] for r in rows]
            cell["n"] = len(rows)
            cell["tokens_median"] = statistics.median(tokens) if tokens else None
            cell["tokens_p95"] = _p95(tokens) if tokens else None
            cells[column] = cell
        all_tokens = [r[method]["tokens"] for r in per_q]
        cells["all"] = {
            "tokens_median": statistics.median(all_tokens) if all_tokens else None,
            "tokens_p95": _p95(all_tokens) if all_tokens else None,
            "returned_nothing": _pct([r[method]["nothing"] for r in per_q]),
        }
        out[method] = cells
    return out


def _cell(value: Any, width: int) -> str:
    text = "—" if value is None else f"{value:.1f}%" if isinstance(value, float) else str(value)
    return text.rjust(width)


def render(r: dict[str, Any]) -> list[str]:
    s = r["summary"]
    kinds = ", ".join(f"{n} {k}" for k, n in r["by_kind"].items())
    w, first = 13, 18
    header = "".ljust(first) + "".join(c.rjust(w) for c in COLUMNS)
    lines = [
        f"memory retrieval: sample life seed {r['seed']}, {r['events']:,} events, "
        f"{r['half']} half: {r['questions']} questions ({kinds})",
        f"  offline distillation pass {r['distill_seconds']:.1f} s; notes: "
        + ", ".join(f"{n} {k}" for k, n in sorted(r["notes"].items())),
    ]
    if r["unresolved_persons"]:
        lines.append(
            "  person filters the contact book could not resolve (check_notebook then looks for "
            "the one person page tagged with the name): " + ", ".join(r["unresolved_persons"])
        )
    lines += [
        "",
        "recall: any gold event among what came back (abstention: share that returned nothing;"
        " overall: the four answerable kinds)",
        header,
    ]
    for method in METHODS:
        cells = s[method]
        row = method.ljust(first)
        for column in COLUMNS:
            key = "abstained" if column == "abstention" else "recall"
            row += _cell(cells[column][key], w)
        lines.append(row)
    lines += ["", "mean share of each question's gold events found", header]
    for method in METHODS:
        cells = s[method]
        row = method.ljust(first)
        for column in COLUMNS:
            value = None if column == "abstention" else cells[column]["gold_found"]
            row += _cell(value, w)
        lines.append(row)
    shown_n = s[METHODS[0]]["overall"]["answer_shown_n"]
    lines += [
        "",
        f"answer words shown in the returned text ({shown_n} single, multi and update "
        "questions whose answer words are not in the query)",
        header,
    ]
    for method in METHODS:
        cells = s[method]
        row = method.ljust(first)
        for column in COLUMNS:
            value = None if column == "abstention" else cells[column]["answer_shown"]
            row += _cell(value, w)
        lines.append(row)
    lines += [
        "",
        "context handed to the model, tokens (characters / 4): median / p95 "
        "(overall: every question)",
        header,
    ]
    for method in METHODS:
        cells = s[method]
        row = method.ljust(first)
        for column in COLUMNS:
            c = cells["all"] if column == "overall" else cells[column]
            row += f"{c['tokens_median']:g}/{c['tokens_p95']}".rjust(w)
        lines.append(row)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--events", type=int, default=5000, help="sample-life size (default 5000)")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="score the held-out half of the questions (default: the tuning half)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: temp)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 300:
        parser.error("--events must be at least 300")
    with tempfile.TemporaryDirectory(prefix="pixie-bench-memory-", dir=args.dir) as tmp:
        results = bench(args, Path(tmp))
    print(
        json.dumps(results, indent=2, ensure_ascii=False)
        if args.json
        else "\n".join(render(results))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
