"""Memory quality on lives this code did not write: tests/fixtures/lives/.

Each life is imported from its export files exactly as `pixie import` reads
them (its `life.json` gives the owner's --me, --tz and the moment the
questions are asked), distilled by the built-in distiller, and asked its
labelled questions (see tests/fixtures/lives/README.md) through:

* ``check_notebook@8``: the tool with the arguments the question's author
  wrote for a sensible model (``ask``);
* ``planner@8``: the offline chat's own calls for the question's words
  (`chat.plan_calls`, with its follow-up for a person it finds nothing on),
  the first 8 notes of all of them;
* ``grep_memory@12``: the tool over the log's text mirror, the ``ask`` query's
  key words OR-ed into one pattern;
* ``two-step@8``: what the chat loop does: check_notebook (``ask``) first, and
  grep_memory on the fallback query when no note matched a term (the log's
  hits, then the notes near in meaning, as the loop shows them); the first 8
  items count;
* ``BM25@8``, the baseline: SQLite FTS5 ``bm25()`` over the raw event texts.

Each method runs with meaning on (the default) and off (``PIXIE_EMBEDDINGS=0``,
the term ranking alone); the grep and BM25 methods do not depend on it.

A question is answered when one returned item (a note as the tool shows it,
its body clipped as the model reads it; a grep hit; an event) holds every
string of one of the question's answer alternatives. An abstention question
passes when no returned item holds any alternative (nothing returned, or an
honest miss); the share that returned nothing at all is reported beside it.

The tuning half by default; ``--held-out`` runs the other half and prints
its summary only, never its questions; ``--probes`` runs the probes, further
questions written while tuning about what the two halves do not ask (they
are tuning questions, not held out).

    python scripts/bench_lives.py [--held-out | --probes] [--life NAME] [--json] [--show]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sqlite3
import sys
import tempfile
import time
import unicodedata
import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from pixie.device.agent.chat import FALLBACK_NOTE, plan_calls
from pixie.device.agent.grep import SNIPPET_CHARS, GrepMemoryTool, clip
from pixie.device.agent.tools import (
    CheckNotebookTool,
    fallback_pattern,
    fallback_query,
    key_words,
    label,
    shown_body,
)
from pixie.device.distill.offline import OfflineDistiller
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.ingest import registry
from pixie.device.ingest.base import ImportOptions
from pixie.device.ingest.load import load
from pixie.device.node.keyed import Node
from pixie.device.notebook import nearby
from pixie.device.notebook.clearview import TOP_RESULTS, ClearNotebook, ScoredNote
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.provision import create_data_dir

LIVES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "lives"
KINDS = ("single", "multi", "update", "temporal", "abstention", "meaning")
METHODS = ("check_notebook@8", "planner@8", "grep_memory@12", "two-step@8", "BM25@8")
BM25_K = 8
TWO_STEP_K = 8


@dataclass(frozen=True)
class Question:
    qid: str
    kind: str
    question: str
    ask: dict[str, Any]
    answer: list[list[str]]


@dataclass
class Returned:
    """What one method handed the model: its items' texts, one per item."""

    items: list[str]
    text: str

    def holds(self, answer: Sequence[Sequence[str]]) -> bool:
        folded = [_fold(item) for item in self.items]
        return any(
            all(_fold(part) in item for part in alternative)
            for alternative in answer
            for item in folded
        )


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def _questions(life: Path, half: str) -> list[Question]:
    raw = json.loads((life / f"{half}.json").read_text())
    return [
        Question(
            q["id"],
            q["kind"],
            q["question"],
            {k: v for k, v in q["ask"].items() if v is not None},
            q["answer"],
        )
        for q in raw
    ]


def _now_us(life: dict[str, Any]) -> int:
    return int(dt.datetime.fromisoformat(life["now"]).timestamp() * 1_000_000)


def build(life_dir: Path, where: Path) -> tuple[Node, dict[str, Any], PassReport, float]:
    """The life imported and distilled in a new data dir."""
    life = json.loads((life_dir / "life.json").read_text())
    keys = FileKeyStore(where / "keys")
    create_data_dir(where / "device", name=life["name"], role="device", key_store=keys)
    node = Node.open(where / "device", key_store=keys)
    now = _now_us(life)
    options = ImportOptions(me=tuple(life["me"]), tz=zoneinfo.ZoneInfo(life["tz"]), now_us=now)
    t0 = time.perf_counter()
    for name in life["imports"]:
        path = life_dir / name
        importer = registry.for_path(path)
        load(node.log, importer.read(path, options, None))
    import_s = time.perf_counter() - t0
    service = NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),)), now=lambda: now
    )
    report = trio.run(service.run_pass)
    return node, life, report, import_s


def _note_item(scored: ScoredNote, query: str) -> str:
    """A note as the tool shows it to the model (its body cut as shown)."""
    note = scored.note
    body = shown_body(note.body or "", query)
    return f"{label(note.kind, note.title)} ({', '.join(note.tags)}) {body}"


class Methods:
    def __init__(self, node: Node, now: int, meaning: bool) -> None:
        self.node = node
        view = ClearNotebook(node.db, meaning=meaning)
        self.tool = CheckNotebookTool(view, node.contacts, now=lambda: now)
        self.grep = GrepMemoryTool(node.mirror)
        self.fts = sqlite3.connect(":memory:")
        self.fts.execute(
            "CREATE VIRTUAL TABLE ev USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')"
        )
        self.texts = [r.text for r in node.log.all_records() if r.kind != "agent_chat_user"]
        self.fts.executemany(
            "INSERT INTO ev(rowid, text) VALUES (?, ?)", list(enumerate(self.texts))
        )

    def notebook(self, q: Question) -> Returned:
        answer = self.tool.lookup(q.ask)
        return Returned([_note_item(s, answer.query) for s in answer.notes], answer.text)

    def planner(self, q: Question) -> Returned:
        items: list[str] = []
        texts: list[str] = []
        seen: set[str] = set()
        for args in plan_calls(q.question, self.node.contacts):
            answers = [self.tool.lookup(args)]
            if answers[0].missed and "person" in args and "query" in args:
                answers.append(self.tool.lookup({k: v for k, v in args.items() if k != "query"}))
            for answer in answers:
                texts.append(answer.text)
                for s in answer.notes:
                    if s.note.id not in seen and len(items) < TOP_RESULTS:
                        seen.add(s.note.id)
                        items.append(_note_item(s, answer.query))
        return Returned(items, "\n".join(texts))

    def grep_memory(self, q: Question) -> Returned:
        words = key_words(q.ask.get("query", "") or q.question)
        result = self.grep.run(fallback_pattern(words)) if words else None
        if result is None:
            return Returned([], "")
        return Returned([h.snippet for h in result.hits], result.render())

    def two_step(self, q: Question) -> Returned:
        answer = self.tool.lookup(q.ask)
        first = Returned([_note_item(s, answer.query) for s in answer.notes], answer.text)
        if not answer.missed:
            return first
        pattern = fallback_query(q.ask.get("query", ""), q.question)
        if pattern is None:
            return first
        result = self.grep.run(pattern)
        hits = [h.snippet for h in result.hits]
        # As the chat loop shows them: the log's hits before notes that are
        # only near the query in meaning.
        items = (hits + first.items)[:TWO_STEP_K]
        return Returned(items, FALLBACK_NOTE + result.render() + "\n" + first.text)

    def bm25(self, q: Question) -> Returned:
        words = [w for w in key_words(q.ask.get("query", "") or q.question)]
        if not words:
            return Returned([], "")
        match = " OR ".join('"' + w.replace('"', "") + '"*' for w in words)
        rows = self.fts.execute(
            "SELECT rowid FROM ev WHERE ev MATCH ? ORDER BY bm25(ev), rowid DESC LIMIT ?",
            (match, BM25_K),
        ).fetchall()
        items = [clip(" ".join(self.texts[r].split()), 0, 0, SNIPPET_CHARS) for (r,) in rows]
        return Returned(items, "\n".join(items))


def grade(q: Question, got: Returned) -> dict[str, Any]:
    if q.kind == "abstention":
        return {"pass": not got.holds(q.answer), "nothing": not got.items}
    return {"pass": got.holds(q.answer), "nothing": not got.items}


def ask_all(
    node: Node, now: int, questions: Sequence[Question], meaning: bool
) -> list[dict[str, Any]]:
    methods = Methods(node, now, meaning)
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        results = {
            "check_notebook@8": methods.notebook(q),
            "planner@8": methods.planner(q),
            "grep_memory@12": methods.grep_memory(q),
            "two-step@8": methods.two_step(q),
            "BM25@8": methods.bm25(q),
        }
        rows.append(
            {
                "id": q.qid,
                "kind": q.kind,
                "question": q.question,
                "seconds": time.perf_counter() - t0,
                **{m: grade(q, r) for m, r in results.items()},
                "_returned": results,
            }
        )
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for method in METHODS:
        by_kind: dict[str, Any] = {}
        for kind in (*KINDS, "overall"):
            chosen = [r for r in rows if kind == "overall" or r["kind"] == kind]
            if not chosen:
                continue
            passed = sum(r[method]["pass"] for r in chosen)
            by_kind[kind] = {"pass": passed, "of": len(chosen), "share": passed / len(chosen)}
            if kind == "abstention":
                by_kind[kind]["nothing"] = sum(r[method]["nothing"] for r in chosen)
        out[method] = by_kind
    return out


def table(summary: dict[str, dict[str, Any]]) -> Iterator[str]:
    kinds = [k for k in (*KINDS, "overall") if k in summary[METHODS[0]]]
    yield f"{'method':<18}" + "".join(f"{k:>13}" for k in kinds)
    for method in METHODS:
        cells = []
        for k in kinds:
            c = summary[method][k]
            cells.append(f"{c['pass']:>3}/{c['of']:<3} {c['share']:.2f}")
        yield f"{method:<18}" + "".join(f"{c:>13}" for c in cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true", help="the held-out half (summary only)")
    parser.add_argument(
        "--probes",
        action="store_true",
        help="the probes: questions written while tuning, beyond both halves (not held out)",
    )
    parser.add_argument("--life", action="append", help="only this life (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show", action="store_true", help="each tuning question's outcome")
    args = parser.parse_args()
    names = args.life or sorted(p.name for p in LIVES.iterdir() if (p / "life.json").is_file())
    if args.held_out and args.probes:
        parser.error("--held-out and --probes are two different sets; give one")
    half = "held_out" if args.held_out else "probes" if args.probes else "tuning"
    report: dict[str, Any] = {"half": half.replace("_", "-"), "lives": {}}
    every: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="pixie-lives-") as tmp:
        os.environ["PIXIE_KEYSTORE"] = "file"
        os.environ["PIXIE_KEYS"] = str(Path(tmp) / "keys")
        for name in names:
            questions = _questions(LIVES / name, half)
            node, life, distilled, import_s = build(LIVES / name, Path(tmp) / name)
            now = _now_us(life)
            try:
                entry: dict[str, Any] = {
                    "questions": len(questions),
                    "events": len(node.log.all_records()),
                    "notes": sum(node.notebook.clear_view().counts().values()),
                    "import_seconds": round(import_s, 2),
                    "distill": distilled.as_json(),
                }
                for meaning in (True, False):
                    if meaning and not nearby.enabled():
                        continue
                    rows = ask_all(node, now, questions, meaning)
                    every[meaning] += rows
                    key = "with_meaning" if meaning else "terms_only"
                    entry[key] = summarise(rows)
                    entry[key + "_p50_ms"] = round(
                        1000 * sorted(r["seconds"] for r in rows)[len(rows) // 2], 2
                    )
                    if args.show and not args.held_out:
                        entry[key + "_questions"] = [
                            {k: v for k, v in r.items() if k != "_returned"} for r in rows
                        ]
                        if not args.json:
                            print(f"\n## {name}, {key}")
                            for r in rows:
                                marks = " ".join(
                                    f"{m.split('@')[0]}:{'Y' if r[m]['pass'] else '-'}"
                                    for m in METHODS
                                )
                                print(f"{r['id']:<14} {r['kind']:<10} {marks}  {r['question']}")
                report["lives"][name] = entry
            finally:
                node.close()
    for meaning, rows in every.items():
        if rows:
            report["all_with_meaning" if meaning else "all_terms_only"] = summarise(rows)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    label = "probes" if half == "probes" else f"{report['half']} half"
    print(f"Hand-written lives, {label}")
    for name, entry in report["lives"].items():
        d = entry["distill"]
        print(
            f"\n{name}: {entry['events']} events, {entry['notes']} notes, "
            f"{entry['questions']} questions; import {entry['import_seconds']} s, "
            f"distil {d['seconds']} s ({d['distilled']} sources, {d['embedded']} embedded)"
        )
    for meaning in (True, False):
        key = "all_with_meaning" if meaning else "all_terms_only"
        if key in report:
            print(f"\nAll lives, {'with meaning' if meaning else 'terms only'}:")
            for line in table(report[key]):
                print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
