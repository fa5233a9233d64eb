"""Benchmarks for the Notebook: check_notebook latency and the seal's AES-GCM.

Every figure comes with a baseline measured in the same run on the same
machine, so the numbers mean something on any box:

* check_notebook at 10k and 100k clear notes (targets: p50 <= 5 ms and
  <= 50 ms). The notes are built through the real write path,
  ``NotebookStore.upsert_clear`` (and ``add_user_note`` / ``pin_spark``), one
  durable transaction each, and the build rate is reported too. Queries are a
  realistic mix sent through ``CheckNotebookTool.call``: a person and a word, a
  topic and a word, two words, a person alone, a days_back window. Each type
  gets p50 and p95. Baseline: the same filters and the query's words (folded,
  stopwords dropped, not stemmed) as prefixes in one raw sqlite3 FTS5
  statement over the same database file (newest 8, no weighting), which is
  about the least work an answer can take. check_notebook does more: it looks
  each query stem's word forms up in the index's vocabulary (fts5vocab, by
  prefix ranges) and scores every (term, field) pair.
* AES-GCM seal + open through ``NotebookSeal`` against raw ``cryptography``
  ``AESGCM`` encrypt + decrypt of the same buffers with the same associated
  data (1 KiB, 16 KiB, 256 KiB). Target: >= 0.8x the raw throughput.

Sizes are checkpoints of one growing Notebook: the notes for 10k are the first
10k of the notes for 100k. Each query type's line also says what share of the
notes its words match before any filter: search_clear's cost follows that.

NotebookSeal keeps the nonce and the ciphertext apart (two columns), so
neither sealing nor opening copies the ciphertext; what it adds over raw
AESGCM is a call, a cached associated-data lookup and the length checks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import repo_root  # noqa: F401 (tests.testkit is not installed)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.node.keyed import Node
from pixie.device.notebook import nearby
from pixie.device.notebook.clearview import ClearNotebook
from pixie.device.notebook.seal import NONCE_BYTES, NotebookSeal
from pixie.device.notebook.store import Distilled
from pixie.device.notebook.terms import query_words
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from pixie.device.store.plaindb import sqlite_uri
from pixie.device.store.provision import create_data_dir
from pixie.protocol.timestamps import now_us
from tests.testkit.samplelife import CONTACTS

DAY_US = 86_400_000_000
TARGET_P50_MS = {10_000: 5.0, 100_000: 50.0}
SEAL_TARGET = 0.8
SEAL_SIZES = (1024, 16 * 1024, 256 * 1024)

# -- a realistic corpus ------------------------------------------------------------

TOPICS = sorted({t for c in CONTACTS for t in c.topics} | {"work", "health", "travel"})
COMMON = (
    "the and to of a in that it with for on was is you we at my this be have so but not "
    "they are had all just about from out if up one when there what will can like would "
    "time day week then now back going got get good really think know said told see went "
    "want need next last new still also maybe after before tomorrow tonight weekend "
    "morning evening"
).split()
# The words the queries use, spread over the middle of the frequency curve
# (ranks 100 to about 1,500 of some 6,000): each is in roughly 2-12% of notes.
THEMED = (
    "marathon training run race lyon train trip flight hotel booked dinner lunch "
    "restaurant birthday party cake gift present garden tomatoes roses piano lesson "
    "concert tickets doctor appointment dentist tooth deadline project meeting boss "
    "interview salary rent flat moving boxes kids school holiday beach climbing wall "
    "gym football match book novel library dog cat vet recipe pasta wine coffee "
    "market bike walk rain sunny weekend plans visit family mum sister"
).split()


def _syllable_words(rng: Random, count: int) -> list[str]:
    """A long tail of made-up words, so the index has a realistic vocabulary size."""
    onsets = "b c d f g h j k l m n p r s t v w z br cr dr gr pr st tr ch sh".split()
    vowels = "a e i o u ai ea io ou".split()
    out: set[str] = set()
    while len(out) < count:
        n = rng.choice((2, 2, 3, 3, 4))
        out.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(n)))
    return sorted(out)


@dataclass
class Corpus:
    rng: Random
    words: list[str] = field(init=False)
    cum: list[float] = field(init=False)

    def __post_init__(self) -> None:
        tail = _syllable_words(self.rng, 6000)
        self.words = COMMON + tail
        for i, word in enumerate(THEMED):
            self.words.insert(100 + 15 * i, word)
        total = 0.0
        self.cum = []
        for rank in range(1, len(self.words) + 1):  # Zipf, s = 1
            total += 1.0 / rank
            self.cum.append(total)

    def sentence(self, extra: Sequence[str] = ()) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(6, 16))
        for word in extra:
            words.insert(self.rng.randrange(len(words) + 1), word)
        return " ".join(words).capitalize() + self.rng.choice((".", ".", ".", "!", "?"))

    def body(self, mentions: Sequence[str] = (), lo: int = 200, hi: int = 800) -> str:
        target = self.rng.randint(lo, hi)
        parts = [self.sentence(mentions)]
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(self.sentence())
        text = " ".join(parts)
        return text if len(text) <= hi else text[: text.rindex(" ", 0, hi)]

    def themed(self, k: int) -> list[str]:
        return self.rng.sample(THEMED, k)

    def tags(self) -> tuple[str, ...]:
        return tuple(self.rng.sample(TOPICS, self.rng.choice((0, 1, 1, 2, 2, 3))))


# -- building the Notebook through the real API ------------------------------------


@dataclass
class Builder:
    node: Node
    corpus: Corpus
    now: int
    contact_ids: list[str] = field(default_factory=list)
    count: int = 0
    serial: int = 0
    seconds: float = 0.0
    recent_rates: list[float] = field(default_factory=list)  # notes/s per 1,000 notes
    batch: int = 1  # notes per upsert_many transaction (1: upsert_clear, one each)
    pending: list[Distilled] = field(default_factory=list)

    def start(self) -> None:
        """A dozen contacts, their person pages, standing guidance and about_you."""
        t0 = time.perf_counter()
        nb = self.node.notebook
        for c in CONTACTS:
            cid, _ = self.node.contacts.add(c.name, list(c.aliases), now=self.now)
            self.contact_ids.append(cid)
            body = self.corpus.body([c.short, c.city, *c.topics[:2]])
            nb.upsert_clear(Distilled(NoteKind.PERSON, cid, c.name, body, cid, c.topics[:3]))
        for title in (
            "Keep answers short",
            "Reply in English",
            "Never share my address",
            "Remind me about birthdays",
            "Ask before booking anything",
        ):
            nb.add_user_note(NoteKind.GUIDANCE, title, self.corpus.body(lo=60, hi=200))
        nb.add_user_note(NoteKind.ABOUT_YOU, "About me", self.corpus.body(["Porto", "piano"]))
        self.count = len(CONTACTS) + 6
        self.seconds += time.perf_counter() - t0

    def grow_to(self, size: int) -> None:
        nb = self.node.notebook
        rng = self.corpus.rng
        t_block = time.perf_counter()
        while self.count < size:
            self.serial += 1
            who = rng.choices(range(len(CONTACTS)), weights=[c.weight for c in CONTACTS])[0]
            contact = CONTACTS[who]
            about = self.now - rng.randrange(3 * 365 * DAY_US)
            words = self.corpus.themed(2)
            mentions = [contact.short, *words]
            roll = rng.random()
            t0 = time.perf_counter()
            if roll < (0.03 if self.batch == 1 else 0.003):
                self._pin(who, mentions)
            else:
                if roll < 0.68:
                    kind, key, title = (
                        NoteKind.CONVERSATION_DIGEST,
                        f"thread:{contact.thread}:{self.serial}",
                        f"{contact.short}: {words[0]} and {words[1]}",
                    )
                elif roll < 0.84:
                    kind, key, title = (
                        NoteKind.POST_DIGEST,
                        f"post:{self.serial}",
                        f"{contact.short} posted about {words[0]}",
                    )
                else:
                    kind, key, title = (
                        NoteKind.CALL_DIGEST,
                        f"call:{self.serial}",
                        f"Call with {contact.short} about {words[0]}",
                    )
                cid = self.contact_ids[who] if rng.random() < 0.9 else None
                item = Distilled(
                    kind,
                    key,
                    title,
                    self.corpus.body(mentions),
                    cid,
                    self.corpus.tags(),
                    source_ref=key,
                    about_date=about,
                )
                if self.batch == 1:
                    nb.upsert_clear(item)
                else:
                    self.pending.append(item)
                    if len(self.pending) >= self.batch or self.count + 1 >= size:
                        nb.upsert_many(self.pending)
                        self.pending.clear()
            self.seconds += time.perf_counter() - t0
            self.count += 1
            if self.count % 1000 == 0:
                now = time.perf_counter()
                self.recent_rates.append(1000 / (now - t_block))
                t_block = now

    def flush(self) -> None:
        if self.pending:
            t0 = time.perf_counter()
            self.node.notebook.upsert_many(self.pending)
            self.pending.clear()
            self.seconds += time.perf_counter() - t0

    def _pin(self, who: int, mentions: Sequence[str]) -> None:
        contact = CONTACTS[who]
        at = self.now - self.corpus.rng.randrange(365 * DAY_US)
        text = self.corpus.body(mentions)
        event = NewEvent(EventKind.MESSAGE, at, text, contact=contact.name, thread=contact.thread)
        event_id = self.node.log.append([event], now=at).ids[0]
        self.node.notebook.pin_spark(event_id, self.corpus.tags())


# -- queries ---------------------------------------------------------------------------


def query_mix() -> dict[str, list[dict[str, Any]]]:
    return {
        "person + word": [
            {"person": "Ada", "query": "marathon"},
            {"person": "Priya", "query": "interview"},
            {"person": "Zoë", "query": "birthday"},
            {"person": "Jimmy", "query": "garden"},
            {"person": "Mum", "query": "doctor"},
        ],
        "topic + word": [
            {"topic": "travel", "query": "lyon"},
            {"topic": "health", "query": "appointment"},
            {"topic": "work", "query": "deadline"},
            {"topic": "family", "query": "cake"},
            {"topic": "music", "query": "concert"},
        ],
        "two words": [
            {"query": "birthday dinner"},
            {"query": "marathon training"},
            {"query": "piano lesson"},
            {"query": "flight hotel"},
            {"query": "rent flat"},
        ],
        "person, empty query": [
            {"person": "Priya Raman"},
            {"person": "Inés"},
            {"person": "Marco"},
            {"person": "Hannah Schmidt"},
            {"person": "Kenji"},
        ],
        "days_back window": [
            {"days_back": 7},
            {"days_back": 30},
            {"days_back": 90},
            {"days_back": 14, "query": "dinner"},
            {"days_back": 365, "query": "climbing"},
        ],
    }


def raw_baseline(db_path: Path, node: Node, now: int) -> Callable[[Mapping[str, Any]], list[str]]:
    """One raw sqlite3 statement per query: the same filters and prefix terms."""
    con = sqlite3.connect(sqlite_uri(Path(db_path), "ro"), uri=True, check_same_thread=False)
    resolved: dict[str, str] = {}

    def run(args: Mapping[str, Any]) -> list[str]:
        where = ["n.zone = 'clear'", "n.deleted = 0"]
        params: list[object] = []
        if "person" in args:
            person = args["person"]
            if person not in resolved:  # resolution is the tool's work, not the baseline's
                resolved[person] = node.contacts.resolve(person)
            where.append("n.contact_id = ?")
            params.append(resolved[person])
        if "topic" in args:
            where.append("n.n IN (SELECT note_n FROM note_tag WHERE tag = ?)")
            params.append(" ".join(str(args["topic"]).casefold().split()))
        if "days_back" in args:
            where.append("coalesce(n.about_date, n.updated_wall) >= ?")
            params.append(now - int(args["days_back"]) * DAY_US)
        terms = query_words(str(args.get("query", "")))
        if terms:
            match = " OR ".join(f'"{t}"*' for t in terms)
            sql = (
                "SELECT n.id FROM note_fts JOIN note AS n ON n.n = note_fts.rowid "
                f"WHERE note_fts MATCH ? AND {' AND '.join(where)} "
                "ORDER BY n.updated_at DESC LIMIT 8"
            )
            params.insert(0, match)
        else:
            sql = (
                f"SELECT n.id FROM note AS n WHERE {' AND '.join(where)} "
                "ORDER BY n.updated_at DESC LIMIT 8"
            )
        return [r[0] for r in con.execute(sql, params)]

    return run


def term_matches(db_path: Path, args: Mapping[str, Any]) -> int | None:
    """How many notes the query's terms match, before any filter (None: no terms).

    search_clear fetches every one of them, so this is what its cost follows.
    """
    terms = query_words(str(args.get("query", "")))
    if not terms:
        return None
    con = sqlite3.connect(sqlite_uri(Path(db_path), "ro"), uri=True)
    try:
        match = " OR ".join(f'"{t}"*' for t in terms)
        (count,) = con.execute("SELECT count(*) FROM note_fts WHERE note_fts MATCH ?", (match,))
        return int(count[0])
    finally:
        con.close()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def measure_queries(
    tool: CheckNotebookTool,
    raw: Callable[[Mapping[str, Any]], list[str]],
    runs: int,
    db_path: Path,
    notes: int,
    mix: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, dict[str, float | None]]:
    mix = mix or query_mix()
    for variants in mix.values():  # warm: page cache, statement caches, resolution
        for args in variants:
            answer = tool.call(args)
            assert not answer.startswith("No notes are filed"), (args, answer)
            raw(args)
    tool_ms: dict[str, list[float]] = {name: [] for name in mix}
    raw_ms: dict[str, list[float]] = {name: [] for name in mix}
    for i in range(runs):
        for name, variants in mix.items():  # interleaved, so drift hits every type alike
            args = variants[i % len(variants)]
            t0 = time.perf_counter()
            tool.call(args)
            t1 = time.perf_counter()
            raw(args)
            t2 = time.perf_counter()
            tool_ms[name].append((t1 - t0) * 1000)
            raw_ms[name].append((t2 - t1) * 1000)
    shares: dict[str, float | None] = {}
    for name, variants in mix.items():
        counts = [term_matches(db_path, args) for args in variants]
        known = [c for c in counts if c is not None]
        shares[name] = 100 * statistics.mean(known) / notes if known else None
    out: dict[str, dict[str, float | None]] = {}
    every_tool = [v for vs in tool_ms.values() for v in vs]
    every_raw = [v for vs in raw_ms.values() for v in vs]
    for name, values in [*tool_ms.items(), ("overall", every_tool)]:
        base = raw_ms[name] if name != "overall" else every_raw
        out[name] = {
            "terms_match_pct_of_notes": shares.get(name),
            "p50_ms": percentile(values, 0.5),
            "p95_ms": percentile(values, 0.95),
            "raw_p50_ms": percentile(base, 0.5),
            "raw_p95_ms": percentile(base, 0.95),
            "p50_vs_raw": percentile(values, 0.5) / percentile(base, 0.5),
        }
    return out


def measure_meaning(
    node: Node,
    raw: Callable[[Mapping[str, Any]], list[str]],
    runs: int,
    size: int,
    log: Callable[[str], None],
) -> dict[str, Any] | None:
    """check_notebook with meaning on: the vectors made for every note (timed,
    as a distillation pass makes them), then the same mix, and queries whose
    words match no note, where the nearest notes fill all eight places."""
    if not nearby.enabled():
        return None
    log(f"  embedding {size:,} notes ...")
    t0 = time.perf_counter()
    embedded = nearby.refresh(node.db)
    seconds = time.perf_counter() - t0
    tool = CheckNotebookTool(ClearNotebook(node.db, meaning=True), node.contacts)
    mix = query_mix()
    mix["by meaning only"] = [
        {"query": "gift ideas"},
        {"query": "feeling unwell"},
        {"query": "where she lives now"},
        {"person": "Ada", "query": "present"},
        {"topic": "travel", "query": "holiday abroad"},
    ]
    queries = measure_queries(tool, raw, runs, node.db.path, size, mix)
    return {"embedded": embedded, "embed_s": seconds, "queries": queries}


def bench_notebook(
    where: Path,
    sizes: Sequence[int],
    runs: int,
    seed: int,
    build_batch: int,
    log: Callable[[str], None],
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Grow one Notebook through each size in turn; yield the figures at each."""
    data = where / "notebook-bench"
    create_data_dir(data, name="bench", role="device")
    with Node.open(data, key_store=FileKeyStore(where / "keys")) as node:
        builder = Builder(node, Corpus(Random(seed)), now_us(), batch=build_batch)
        builder.start()
        # The spec's term ranking alone; meaning is measured after it.
        tool = CheckNotebookTool(ClearNotebook(node.db, meaning=False), node.contacts)
        raw = raw_baseline(node.db.path, node, builder.now)
        for size in sorted(sizes):
            how = "upsert_clear" if build_batch == 1 else f"upsert_many({build_batch:,})"
            log(f"building to {size:,} clear notes through {how} ...")
            builder.grow_to(size)
            builder.flush()
            counts = node.notebook.counts()
            assert counts["clear"] == size, counts
            log(f"  built {size:,} notes in {builder.seconds:.0f} s; measuring ...")
            queries = measure_queries(tool, raw, runs, node.db.path, size)
            meaning = measure_meaning(node, raw, runs, size, log)
            rates = builder.recent_rates
            yield (
                size,
                {
                    "notes": size,
                    "db_mb": node.db.path.stat().st_size / 1e6,
                    "build_s": builder.seconds,
                    "built_through": how,
                    "build_notes_per_s": size / builder.seconds,
                    "build_first_1k_notes_per_s": rates[0] if rates else None,
                    "build_last_1k_notes_per_s": rates[-1] if rates else None,
                    "target_p50_ms": TARGET_P50_MS.get(size),
                    "queries": queries,
                    "meaning": meaning,
                },
            )
    shutil.rmtree(data)


# -- upserts -------------------------------------------------------------------------------


def raw_commit_ms(where: Path, count: int = 200) -> float:
    """One durable raw sqlite3 commit (WAL, synchronous=FULL) of a 500-byte row."""
    con = sqlite3.connect(where / "floor.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    body = "x" * 500
    t0 = time.perf_counter()
    for i in range(count):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT OR REPLACE INTO t (id, body) VALUES (?, ?)", (i, body))
        con.execute("COMMIT")
    seconds = (time.perf_counter() - t0) / count
    con.close()
    return 1000 * seconds


def bench_upserts(where: Path, notes: int, batch: int, seed: int) -> dict[str, Any]:
    """Upserts/s one durable transaction each, and through upsert_many in batches
    (new notes, then every note changed, then every note again unchanged)."""
    data = where / "upsert-bench"
    create_data_dir(data, name="bench", role="device")
    corpus = Corpus(Random(seed))
    out: dict[str, Any] = {"notes": notes, "batch": batch}
    with Node.open(data, key_store=FileKeyStore(where / "keys")) as node:
        nb = node.notebook

        def items(prefix: str, count: int, salt: str = "") -> list[Distilled]:
            return [
                Distilled(
                    NoteKind.CALL_DIGEST,
                    f"{prefix}:{i}",
                    f"Call {i} about {THEMED[i % len(THEMED)]}",
                    corpus.body() + salt,
                    None,
                    corpus.tags(),
                    source_ref=f"{prefix}:{i}",
                    about_date=1_700_000_000_000_000 + i,
                )
                for i in range(count)
            ]

        single = items("single", 300)
        t0 = time.perf_counter()
        for item in single:
            nb.upsert_clear(item)
        single_s = (time.perf_counter() - t0) / len(single)
        out["single_notes_per_s"] = 1 / single_s
        out["single_ms"] = 1000 * single_s
        for phase, made in (
            ("batched_new", items("b", notes)),
            ("batched_changed", items("b", notes, " Changed.")),
            ("batched_unchanged", items("b", notes, " Changed.")),
        ):
            t0 = time.perf_counter()
            for i in range(0, len(made), batch):
                nb.upsert_many(made[i : i + batch])
            out[f"{phase}_notes_per_s"] = len(made) / (time.perf_counter() - t0)
        out["raw_commit_ms"] = raw_commit_ms(where)
    shutil.rmtree(data)
    return out


def report_upserts(r: Mapping[str, Any]) -> Iterator[str]:
    yield (
        f"Notebook upserts ({r['notes']:,} notes, upsert_many in batches of {r['batch']:,}; "
        f"baseline: one durable raw sqlite3 commit {r['raw_commit_ms']:.2f} ms):"
    )
    yield (
        f"  one durable transaction each: {r['single_notes_per_s']:.0f} notes/s "
        f"({r['single_ms']:.2f} ms each -> {r['single_ms'] / r['raw_commit_ms']:.1f}x the commit)"
    )
    for phase in ("new", "changed", "unchanged"):
        yield f"  batched, {phase}: {r[f'batched_{phase}_notes_per_s']:.0f} notes/s"


# -- the seal ---------------------------------------------------------------------------


def _batch_seconds(fn: Callable[[], object], iterations: int) -> float:
    t0 = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - t0) / iterations


def bench_seal(runs: int) -> dict[str, dict[str, float]]:
    key = AESGCM.generate_key(bit_length=256)
    seal = NotebookSeal(key)
    raw = AESGCM(key)
    note_id, zone = "01930000-0000-7000-8000-000000000000", "sealed"
    # the associated data NotebookSeal binds a sealed note with (see seal.py)
    aad = b"pixie-notebook-seal\x00" + note_id.encode() + b"\x00" + zone.encode()
    results: dict[str, dict[str, float]] = {}
    for size in SEAL_SIZES:
        buf = os.urandom(size)

        def through_seal(buf: bytes = buf) -> None:
            nonce, sealed = seal.seal(note_id, zone, buf)
            if seal.open(note_id, zone, nonce, sealed) != buf:
                raise AssertionError("seal round trip")

        def through_raw(buf: bytes = buf) -> None:
            nonce = os.urandom(NONCE_BYTES)
            sealed = raw.encrypt(nonce, buf, aad)
            if raw.decrypt(nonce, sealed, aad) != buf:
                raise AssertionError("raw round trip")

        # batches of about 20 ms, alternating, each side's median batch
        per_op = _batch_seconds(through_raw, 20)
        iterations = max(5, int(0.02 / max(per_op, 1e-9)))
        seal_t: list[float] = []
        raw_t: list[float] = []
        for _ in range(max(5, runs // 10)):
            raw_t.append(_batch_seconds(through_raw, iterations))
            seal_t.append(_batch_seconds(through_seal, iterations))
        t_seal, t_raw = statistics.median(seal_t), statistics.median(raw_t)
        results[f"{size // 1024}KiB"] = {
            "bytes": size,
            "seal_mb_per_s": size / t_seal / 1e6,
            "raw_mb_per_s": size / t_raw / 1e6,
            "seal_us_per_round_trip": t_seal * 1e6,
            "raw_us_per_round_trip": t_raw * 1e6,
            "ratio": t_raw / t_seal,
            "target": SEAL_TARGET,
        }
    return results


# -- the report ---------------------------------------------------------------------------


def report_notebook(size: int, r: Mapping[str, Any]) -> Iterator[str]:
    target = r["target_p50_ms"]
    overall = r["queries"]["overall"]
    rates = ""
    if r["build_first_1k_notes_per_s"] is not None:
        rates = (
            f", {r['build_first_1k_notes_per_s']:.0f}/s for the first 1k, "
            f"{r['build_last_1k_notes_per_s']:.0f}/s for the last 1k"
        )
    yield (
        f"check_notebook at {size:,} clear notes ({r['db_mb']:.0f} MB database; built "
        f"through {r['built_through']} in {r['build_s']:.0f} s, "
        f"{r['build_notes_per_s']:.0f} notes/s overall{rates}):"
    )
    verdict = ""
    if target is not None:
        ok = "ok" if overall["p50_ms"] <= target else "MISSED"
        verdict = f" (target p50 <= {target:g} ms: {ok})"
    yield (
        f"  overall p50 {overall['p50_ms']:.2f} ms, p95 {overall['p95_ms']:.2f} ms{verdict}; "
        f"raw sqlite3 p50 {overall['raw_p50_ms']:.2f} ms -> {overall['p50_vs_raw']:.1f}x"
    )
    width = max(len(name) for name in r["queries"])
    for name, q in r["queries"].items():
        if name == "overall":
            continue
        share = q["terms_match_pct_of_notes"]
        matched = f"   terms match {share:4.1f}% of notes" if share is not None else ""
        yield (
            f"  {name:<{width}}  p50 {q['p50_ms']:7.2f} ms  p95 {q['p95_ms']:7.2f} ms"
            f"   raw p50 {q['raw_p50_ms']:6.2f} ms -> {q['p50_vs_raw']:5.1f}x{matched}"
        )


def report_meaning(r: Mapping[str, Any]) -> Iterator[str]:
    m = r.get("meaning")
    if not m:
        return
    target = r["target_p50_ms"]
    overall = m["queries"]["overall"]
    verdict = ""
    if target is not None:
        verdict = (
            f" (target p50 <= {target:g} ms: {'ok' if overall['p50_ms'] <= target else 'MISSED'})"
        )
    yield (
        f"  with meaning on ({m['embedded']:,} notes embedded in {m['embed_s']:.1f} s, "
        f"{1000 * m['embed_s'] / max(m['embedded'], 1):.2f} ms a note): overall p50 "
        f"{overall['p50_ms']:.2f} ms, p95 {overall['p95_ms']:.2f} ms{verdict}"
    )
    only = m["queries"]["by meaning only"]
    yield (
        f"    by meaning only (eight places filled by the nearest notes): p50 "
        f"{only['p50_ms']:.2f} ms, p95 {only['p95_ms']:.2f} ms"
    )


def report_seal(results: Mapping[str, Mapping[str, float]]) -> Iterator[str]:
    yield f"AES-GCM seal + open, NotebookSeal vs raw AESGCM (target >= {SEAL_TARGET}x):"
    for name, r in results.items():
        verdict = "ok" if r["ratio"] >= SEAL_TARGET else "MISSED"
        yield (
            f"  {name:>6}: {r['seal_mb_per_s']:8.0f} MB/s vs {r['raw_mb_per_s']:8.0f} MB/s "
            f"-> {r['ratio']:.2f}x {verdict}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=200, help="calls per query type and size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temporary directory)"
    )
    parser.add_argument(
        "--build-batch",
        type=int,
        default=1,
        help="notes per upsert_many transaction when building (1: upsert_clear, one "
        "durable transaction per note; more: batched, and pins ten times rarer)",
    )
    parser.add_argument(
        "--upserts", type=int, default=20_000, help="notes for the upsert benchmark (0: skip)"
    )
    parser.add_argument("--batch", type=int, default=2000, help="upsert_many batch size")
    parser.add_argument("--no-seal", action="store_true", help="skip the AES-GCM benchmark")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or (any(s < 100 for s in args.sizes) and args.sizes != [0]):
        parser.error("--runs must be >= 1 and every size >= 100 (or --sizes 0: none)")
    if args.build_batch < 1 or args.batch < 1:
        parser.error("--build-batch and --batch must be >= 1")

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pixie-bench-nb-", dir=args.dir) as tmpname:
        tmp = Path(tmpname)
        results["where"] = str(tmp)
        if not args.no_seal:
            results["seal"] = bench_seal(args.runs)
            if not args.json:
                print("\n".join(report_seal(results["seal"])), flush=True)
        if args.upserts:
            results["upserts"] = bench_upserts(tmp, args.upserts, args.batch, args.seed)
            if not args.json:
                print("\n".join(report_upserts(results["upserts"])), flush=True)
        notebook: dict[str, Any] = {}
        results["check_notebook"] = notebook
        sizes = [] if args.sizes == [0] else args.sizes
        for size, r in bench_notebook(tmp, sizes, args.runs, args.seed, args.build_batch, log):
            notebook[str(size)] = r
            if not args.json:
                print("\n".join([*report_notebook(size, r), *report_meaning(r)]), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
