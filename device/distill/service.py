"""NotetakingService: the distill loop that writes the Notebook's clear zone.

A pass finds the sources that gained material since their watermark, and for
each asks the model `LLMRouter` resolves for a small structured result:

* a conversation thread (messages), at most its MAX_LINES most recent
  messages: a conversation digest, and for a one-to-one thread a person page
  for the contact;
* a post, or a call transcript or voicemail (everything filed under one
  source id): a post or call digest, with a reference back to the source;
* a journal entry (everything filed under one source id): a dated journal
  digest; a calendar entry: an appointment note whose title and tags carry
  its day in the words people ask with ("2026-03-14", "saturday", "march");
* from any of them, durable facts the user stated about themselves, merged
  into the about_you singleton: the newest fact of a kind that holds one value
  (home, work, ...) replaces an older one, other facts accumulate.

A person page (`pages`) has three sections: who they are (dated facts, and
their contact card's details), your read on the relationship, and open
threads. A one-to-one thread rewrites the read and the open threads; any
source whose one other person already has a page (a call, a post, a calendar
entry) adds the facts it states to that page. Facts already on a page are
merged with new ones, never dropped for want of repetition: a pass shows a
model only a thread's newest lines, plus the older new lines that state a
fact (`make_request`'s ``earlier``).

A request carries one source's events and nothing else: no other thread, no
note, nothing sealed (this module never reads the sealed zone; it writes clear
notes only, through `ClearNotebookStore.upsert_with`). Every result lands by
identity (a digest by its source id, a person page by its contact), so a
re-run updates in place, leaves identical notes untouched and never writes over
a note the user edited.

Watermarks are local row numbers of the memory log (rows are never removed,
and a row merged from a sibling gets a new, higher number, so "new since" is a
plain comparison). Each source's mark commits in the same transaction as the
notes derived from it: a crash mid-pass redoes at most the source it was in,
and never skips one. A pass with a backlog (more than GROUP_BACKLOG sources,
as after an import) and only the built-in distiller commits its sources in
groups of up to MAX_GROUP instead: each source is still read, distilled and
merged against the notes as the sources before it left them, and its mark
commits with exactly its notes, but a crash redoes at most the group it was
in (`NotetakingService.distill_group`). A second mark, the scan watermark,
lets a pass look only at rows it has not yet looked at; it moves only after a
pass in which every source succeeded.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import trio
from sqlalchemy.orm import Session

from pixie.device.distill.contract import (
    DistillRequest,
    DistillResult,
    NoBackendAnswered,
    SourceKind,
)
from pixie.device.distill.offline_mail import is_automated
from pixie.device.distill.pages import (
    merge_page,
)
from pixie.device.distill.router import LLMRouter, Routed
from pixie.device.distill.series import DAY_US
from pixie.device.errors import BadInput
from pixie.device.notebook import nearby
from pixie.device.notebook.clear import (
    ClearNotebookStore,
    Distilled,
    UpsertOutcome,
    UpsertResult,
)
from pixie.device.store import distillreads as reads
from pixie.device.store.contacts import name_key
from pixie.device.store.db import Database, driver_of
from pixie.device.store.distillreads import CHUNK
from pixie.protocol.timestamps import now_us

if TYPE_CHECKING:
    from pixie.device.node.clear import ClearNode
from pixie.device.distill.agentsaid import (
    AGENT_SAID_KEY,
    AGENT_SAID_REF,
    AGENT_SCAN,
    AgentSaid,
    agent_statements,
    cap_agent_facts,
)
from pixie.device.distill.digests import build_request, digest_items
from pixie.device.distill.factory import llm_settings, router_for
from pixie.device.distill.journal import merge_week
from pixie.device.distill.loading import (
    GROUP_BACKLOG,
    MAX_GROUP,
    MAX_GROUP_SECONDS,
    SERIES_PREFIX,
    Scan,
    Unread,
    load_source,
    month_items,
    peek_filed,
)
from pixie.device.distill.people import (
    about_you_item,
    group_pages,
    other_pages,
    page_item,
    person_items,
)
from pixie.device.distill.posts import merge_post
from pixie.device.distill.sources import (
    DISTILLED_KINDS,
    SCAN_KEY,
    SOURCE_ORDER,
    Loaded,
    Source,
    count_phrase,
    log,
    source_of,
)
from pixie.device.distill.stored import (
    GROUP_KEY,
    GroupCache,
    GroupConflict,
    dated_facts,
    page_base,
    stored_page,
)

T = TypeVar("T")


@dataclass
class PassReport:
    distilled: Counter[str] = field(default_factory=Counter)  # sources, by kind
    skipped: int = 0  # candidates their watermark already covered
    failed: int = 0
    fallbacks: int = 0  # sources a later backend had to answer
    model_calls: dict[str, int] = field(default_factory=dict)  # answers asked for, by backend
    notes: Counter[str] = field(default_factory=Counter)  # by UpsertOutcome
    seconds: float = 0.0
    embedded: int = 0  # notes given a meaning vector after the pass

    @property
    def sources(self) -> int:
        return sum(self.distilled.values())

    @property
    def calls(self) -> int:
        return sum(self.model_calls.values())

    @property
    def written(self) -> int:
        return self.notes[UpsertOutcome.CREATED] + self.notes[UpsertOutcome.UPDATED]

    def as_json(self) -> dict[str, Any]:
        return {
            "distilled": self.sources,
            "threads": self.distilled[SourceKind.CONVERSATION],
            "posts": self.distilled[SourceKind.POST],
            "calls": self.distilled[SourceKind.CALL],
            "journals": self.distilled[SourceKind.JOURNAL],
            "calendar": self.distilled[SourceKind.CALENDAR],
            "mail": self.distilled[SourceKind.MAIL],
            "model_calls": self.calls,
            "calls_by_backend": dict(sorted(self.model_calls.items())),
            "fallbacks": self.fallbacks,
            "failed": self.failed,
            "notes_written": self.written,
            "notes": {o.value: self.notes[o] for o in UpsertOutcome},
            "embedded": self.embedded,
            "seconds": round(self.seconds, 3),
        }

    def render(self) -> str:
        if not self.sources and not self.failed:
            return f"nothing new to distill ({self.calls} model calls, 0 notes written)"
        by = ", ".join(f"{n} {name}" for name, n in sorted(self.model_calls.items()))
        kept = self.notes[UpsertOutcome.KEPT_USER_EDIT]
        done = self.distilled
        text = (
            f"distilled {count_phrase(self.distilled[SourceKind.CONVERSATION], 'thread')}, "
            f"{count_phrase(self.distilled[SourceKind.POST], 'post')}, "
            f"{count_phrase(self.distilled[SourceKind.CALL], 'call')}, "
            f"{count_phrase(done[SourceKind.JOURNAL], 'journal entry', 'journal entries')}, "
            f"{count_phrase(done[SourceKind.CALENDAR], 'calendar entry', 'calendar entries')}"
            " and "
            f"{count_phrase(self.distilled[SourceKind.MAIL], 'mail thread')}"
            " with "
            f"{count_phrase(self.calls, 'model call')} ({by}); notes: {self.written} written "
            f"({self.notes[UpsertOutcome.CREATED]} new, {self.notes[UpsertOutcome.UPDATED]} "
            f"updated), {self.notes[UpsertOutcome.UNCHANGED]} unchanged, "
            f"{kept} kept as you edited them"
        )
        if self.fallbacks:
            text += f"; {count_phrase(self.fallbacks, 'source')} fell back to a later backend"
        if self.failed:
            text += f"; {self.failed} failed (see the log) and will be tried again"
        return text


_Answered = dict[str, tuple[Loaded, Routed]]


@dataclass
class _Done:
    """What `NotetakingService.distill_now` did with one source."""

    loaded: Loaded | None = None  # None: its watermark covered it
    routed: Routed | None = None
    results: list[UpsertResult] = field(default_factory=list)
    failed: str | None = None  # why nothing was written, for the log


def _notes_for(
    session: Session, loaded: Loaded, request: DistillRequest, result: DistillResult
) -> list[Distilled]:
    """What ``result`` gives for ``loaded``'s source, merged with what is
    stored, read in ``session``'s write transaction."""
    items = digest_items(loaded, request, result)
    if loaded.months:
        items += month_items(loaded, items[0])
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    if loaded.source.kind is SourceKind.POST:
        items = [merge_post(session, items[0], loaded.rows[0][2])]
    facts = dated_facts(result.facts, newest)
    about = about_you_item(session, facts) if facts else None
    pages: list[Distilled] = []
    # Mail no person wrote says nothing about a person, whatever a model made
    # of it: its digest, and nothing on anyone's page.
    if not (loaded.source.kind is SourceKind.MAIL and all(is_automated(r[5]) for r in loaded.rows)):
        pages = person_items(session, loaded, request, result)
        pages += group_pages(session, loaded, request)
        pages += other_pages(session, loaded, result, pages)
    if loaded.source.kind is SourceKind.JOURNAL:
        pages.append(merge_week(session, loaded, result))
    return items + pages + ([about] if about is not None else [])


def _mark(session: Session, loaded: Loaded) -> None:
    """Move ``loaded``'s source watermark, in the caller's transaction."""
    reads.set_mark(driver_of(session, flush=False), loaded.source.mark_key, loaded.newest_n)


class NotetakingService:
    """Runs distillation passes for one data dir.

    The core of a pass is synchronous and small; this driver runs its
    database steps on one worker-thread lane (SQLite calls block) and awaits
    the router, so `pixie run` keeps syncing while a pass waits on a model.
    When every backend answers at once (the built-in distiller), a source
    (or a group of them) is read, distilled and committed in one hop.
    """

    def __init__(
        self,
        db: Database,
        notebook: ClearNotebookStore,
        router: LLMRouter,
        *,
        lane: trio.CapacityLimiter | None = None,
        now: Callable[[], int] = now_us,
    ) -> None:
        self.db = db
        self.notebook = notebook
        self.router = router
        self.lane = lane or trio.CapacityLimiter(1)
        self.now = now  # for a repeating entry's next occurrence
        # Answers a group transaction had in hand for a source it left to the
        # next one (see `distill_group`), by the source's mark key.
        self._answered: _Answered = {}

    @classmethod
    def for_node(
        cls,
        node: ClearNode,
        flags: dict[str, Any] | None = None,
        *,
        offline_only: bool = False,
    ) -> NotetakingService:
        """A service with the backends the settings in force name (flags, then
        PIXIE_* variables, then the data dir's [llm] table). Refuses bad
        settings before anything runs."""
        settings = llm_settings(node.data.config_path, flags)
        return cls(node.db, node.notebook, router_for(settings, offline_only=offline_only))

    async def run_pass(
        self,
        *,
        everything: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> PassReport:
        """Distil every source with new material (``everything``: every source,
        watermarks aside; identical results still write nothing). ``progress``
        hears (done, total) after each candidate source."""
        started = time.perf_counter()
        report = PassReport()
        self.router.new_pass()
        self._answered.clear()
        try:
            view = self.notebook.clear_view()
            meaning_off = view.meaning_off()  # a bad setting stops the pass before any write
            scan = await self._db(self.scan, everything)
            total = len(scan.candidates)
            if total and not meaning_off:
                # The notes written are embedded at the end; the model loads
                # meanwhile (while a model's answers are awaited, for one).
                nearby.preload()
            done = 0
            while done < total:
                if total > GROUP_BACKLOG and self.router.answers_now:
                    group = scan.candidates[done : done + MAX_GROUP]
                    dones = await self._db(self.distill_group, group, scan.since, everything)
                    for (source, _), one in zip(group, dones, strict=False):
                        self._tally(source, one, report)
                    finished = len(dones)
                else:
                    source, new_rows = scan.candidates[done]
                    await self._one(source, new_rows, scan, everything, report)
                    finished = 1
                for n in range(done + 1, done + finished + 1):
                    if progress is not None:
                        progress(n, total)
                done += finished
            said, top = await self._db(self.read_agent_said, everything)
            if top:
                for result in await self._db(self.commit_agent_said, said, top):
                    report.notes[result.outcome] += 1
            if not report.failed and scan.top > scan.since:
                await self._db(self.advance_scan, scan.top)
            if report.written and not meaning_off and view.meaning_on():
                # The new notes' meaning vectors, in batches on the lane, so
                # the first search after a pass need not make them.
                report.embedded = await self._db(nearby.refresh, self.db)
        finally:
            report.model_calls = dict(self.router.calls)
            report.seconds = time.perf_counter() - started
            await self.router.aclose()
        return report

    async def _one(
        self,
        source: Source,
        new_rows: tuple[int, ...],
        scan: Scan,
        everything: bool,
        report: PassReport,
    ) -> None:
        if self.router.answers_now:
            done = await self._db(self.distill_now, source, new_rows, scan.since, everything)
            self._tally(source, done, report)
            return
        loaded = await self._db(self.load, source, new_rows, scan.since, everything)
        if loaded is None:
            report.skipped += 1
            return
        request = build_request(loaded)
        try:
            routed = await self.router.distill(request)
        except NoBackendAnswered as exc:
            report.failed += 1
            log.warning("could not distil a %s (%s)", source.kind.value, exc)
            return
        try:
            results = await self._db(self.commit, loaded, request, routed.result)
        except BadInput:
            # Not the message: it may quote what was refused.
            report.failed += 1
            log.warning("the Notebook refused the notes of a %s", source.kind.value)
            return
        self._count(source, routed, results, report)

    def _tally(self, source: Source, done: _Done, report: PassReport) -> None:
        if done.loaded is None:
            report.skipped += 1
        elif done.failed is not None or done.routed is None:
            report.failed += 1
            log.warning("%s", done.failed)
        else:
            self._count(source, done.routed, done.results, report)

    @staticmethod
    def _count(
        source: Source, routed: Routed, results: Sequence[UpsertResult], report: PassReport
    ) -> None:
        report.distilled[source.kind] += 1
        report.fallbacks += bool(routed.failures)
        for result in results:
            report.notes[result.outcome] += 1

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self.lane)

    # -- the synchronous steps, each one transaction -----------------------------

    def scan(self, everything: bool = False) -> Scan:
        """The sources with rows past the scan watermark, in a fixed order."""
        with self.db.reading() as session:
            conn = driver_of(session, flush=False)
            since = 0 if everything else (reads.mark_of(conn, SCAN_KEY) or 0)
            top = reads.newest_n(conn)
            found: dict[str, tuple[Source, list[int]]] = {}
            first: dict[str, int] = {}
            for ref in self._due_series(conn):
                thread = ref[len(SERIES_PREFIX) :]
                due = Source(SourceKind.CALENDAR, ref, thread=thread, again=True)
                found[due.mark_key] = (due, [])
                first[due.mark_key] = 0
            for n, event_id, kind, thread, contact_id, src in reads.scan(
                conn, since, DISTILLED_KINDS
            ):
                source = source_of(kind, event_id, thread, contact_id, src)
                if source is None:
                    continue
                entry = found.get(source.mark_key)
                if entry is None:
                    found[source.mark_key] = entry = (source, [])
                    first[source.mark_key] = n
                if source.kind is not SourceKind.CONVERSATION:
                    entry[1].append(n)
        # Kind by kind, and within a kind in the order of the log: a newer
        # source's notes are written later, and so win ties in a search.
        ordered = sorted(
            found.values(),
            key=lambda e: (SOURCE_ORDER[e[0].kind], first[e[0].mark_key], e[0].key),
        )
        return Scan(since, top, tuple((s, tuple(ns)) for s, ns in ordered))

    def load(
        self, source: Source, new_rows: tuple[int, ...], since: int, everything: bool = False
    ) -> Loaded | None:
        """The source's newest events, or None if its watermark covers them."""
        if source.thread is None and source.contact_id is None and 0 < len(new_rows) <= CHUNK:
            # Most sources: one statement, and no session.
            loaded = peek_filed(self.db, source, new_rows, since, everything)
            if not isinstance(loaded, Unread):
                return loaded
        with self.db.reading() as session:
            return load_source(
                driver_of(session, flush=False), source, new_rows, since, everything, self.now()
            )

    def commit(
        self, loaded: Loaded, request: DistillRequest, result: DistillResult
    ) -> list[UpsertResult]:
        """Upsert what ``result`` gives and move the source's watermark, in one
        durable transaction."""
        return self.notebook.upsert_with(
            lambda session: _notes_for(session, loaded, request, result),
            lambda session, _results: _mark(session, loaded),
        )

    def distill_now(
        self,
        source: Source,
        new_rows: tuple[int, ...],
        since: int,
        everything: bool = False,
        answered: _Answered | None = None,
    ) -> _Done:
        """`load`, the router's answer and `commit`, one after the other on
        this thread, for a router whose backends all answer at once
        (`LLMRouter.answers_now`): one worker-thread hop a source instead of
        two and a trip through the event loop. The transactions are the same
        as on the way through the loop: the source's notes and its watermark
        commit together, or (the backends could not distil it, or the
        Notebook refused its notes) nothing is written."""
        done = _Done()
        done.loaded = self.load(source, new_rows, since, everything)
        if done.loaded is None:
            return done
        request = build_request(done.loaded)
        try:
            done.routed = self._answer(done.loaded, request, answered)
        except NoBackendAnswered as exc:
            done.failed = f"could not distil a {source.kind.value} ({exc})"
            return done
        try:
            done.results = self.commit(done.loaded, request, done.routed.result)
        except BadInput:
            # Not the message: it may quote what was refused.
            done.failed = f"the Notebook refused the notes of a {source.kind.value}"
        return done

    def distill_group(
        self, group: Sequence[tuple[Source, tuple[int, ...]]], since: int, everything: bool
    ) -> list[_Done]:
        """`distill_now` for the first sources of ``group`` (at least one), in
        one durable transaction: each source is read, distilled and merged
        in turn, against the notes as the sources before it in the group
        left them (`GroupCache`), and every watermark commits with exactly its
        source's notes. A group ends at MAX_GROUP sources, after
        MAX_GROUP_SECONDS, or before a source that reads a note an earlier
        one left in a state the group does not follow; that source starts
        the next group. If the Notebook refuses the notes of any source, the
        group is done again one source a transaction (the answers already
        given are used again, never asked for twice)."""
        taken: list[tuple[_Done, int]] = []  # each source's outcome and its number of items
        answered: _Answered = {}

        def build(session: Session) -> list[Distilled]:
            conn = driver_of(session, flush=False)
            written = session.info[GROUP_KEY] = GroupCache()
            items: list[Distilled] = []
            started = time.perf_counter()
            for source, new_rows in group:
                if taken and time.perf_counter() - started > MAX_GROUP_SECONDS:
                    break
                done = _Done(
                    loaded=load_source(conn, source, new_rows, since, everything, self.now())
                )
                if done.loaded is None:
                    taken.append((done, 0))
                    continue
                request = build_request(done.loaded)
                try:
                    done.routed = self._answer(done.loaded, request, answered)
                except NoBackendAnswered as exc:
                    done.failed = f"could not distil a {source.kind.value} ({exc})"
                    taken.append((done, 0))
                    continue
                try:
                    found = _notes_for(session, done.loaded, request, done.routed.result)
                except GroupConflict:
                    self._answered[source.mark_key] = (done.loaded, done.routed)
                    break
                written.wrote(found)
                items += found
                taken.append((done, len(found)))
            return items

        def then(session: Session, results: Sequence[UpsertResult]) -> None:
            at = 0
            for done, count in taken:
                done.results = list(results[at : at + count])
                at += count
                if done.loaded is not None and done.routed is not None and done.failed is None:
                    _mark(session, done.loaded)

        try:
            self.notebook.upsert_with(build, then)
        except BadInput:
            # Every source taken, or (refused while it was being merged) the
            # first: a pass always moves on.
            redone: list[_Done] = []
            for i, (source, rows) in enumerate(group[: max(len(taken), 1)]):
                if i < len(taken) and taken[i][0].failed is not None:
                    redone.append(taken[i][0])  # not distilled: nothing to do again
                else:
                    redone.append(self.distill_now(source, rows, since, everything, answered))
            return redone
        return [done for done, _ in taken]

    def _answer(
        self, loaded: Loaded, request: DistillRequest, answered: _Answered | None
    ) -> Routed:
        """The router's answer for ``loaded``: the one it gave for the very
        same source earlier in this pass, if there is one."""
        key = loaded.source.mark_key
        for cache in (answered, self._answered):
            earlier = cache.pop(key, None) if cache is not None else None
            if earlier is not None and earlier[0] == loaded:
                return earlier[1]
        routed = self.router.distill_now(request)
        if answered is not None:
            answered[key] = (loaded, routed)
        return routed

    def read_agent_said(self, everything: bool = False) -> tuple[list[AgentSaid], int]:
        """What agent answers past their watermark say about contacts (see
        `agent_statements`), and the newest row looked at (0: none)."""
        with self.db.reading() as session:
            conn = driver_of(session, flush=False)
            since = 0 if everything else (reads.mark_of(conn, AGENT_SAID_KEY) or 0)
            rows = reads.agent_answers(conn, since, AGENT_SCAN)
            if not rows:
                return [], 0
            names, aliases = reads.every_name(conn)
            known = {name_key(n): cid for cid, n in names.items()}
            for key, cid in aliases:
                known.setdefault(key, cid)
        return agent_statements(rows, names, known), rows[-1][0]

    def commit_agent_said(self, said: Sequence[AgentSaid], top: int) -> list[UpsertResult]:
        """Merge what the agent said into each contact's page (made if need
        be) and move the watermark to ``top``, in one durable transaction."""

        def build(session: Session) -> list[Distilled]:
            items = []
            for one in said:
                stored = stored_page(session, one.contact_id)
                if stored is not None and stored.body is None:
                    continue  # parked on the Homebase
                page = cap_agent_facts(
                    merge_page(page_base(session, one.contact_id, stored), one.facts)
                )
                stored_tags = tuple(json.loads(stored.tags)) if stored and stored.tags else ()
                items.append(
                    page_item(
                        one.contact_id,
                        (stored.title if stored else None) or one.name,
                        page,
                        stored_tags,
                        stored.source_ref if stored is not None else AGENT_SAID_REF,
                        keep_tags=stored is not None,
                    )
                )
            return items

        def then(session: Session, _results: Sequence[UpsertResult]) -> None:
            reads.set_mark(driver_of(session, flush=False), AGENT_SAID_KEY, top)

        return self.notebook.upsert_with(build, then)

    def advance_scan(self, top: int) -> None:
        # Bookkeeping: losing it to a power cut costs a rescan, never a source
        # (each source's own mark is durable).
        with self.db.writing(durable=False) as session:
            reads.set_mark(driver_of(session, flush=False), SCAN_KEY, top)

    def has_new_material(self) -> bool:
        """Whether a pass would find anything to look at (cheap)."""
        with self.db.reading() as session:
            conn = driver_of(session, flush=False)
            since = reads.mark_of(conn, SCAN_KEY) or 0
            return reads.any_since(conn, since, DISTILLED_KINDS) or bool(
                self._due_series(conn, limit=1)
            )

    def _due_series(self, conn: sqlite3.Connection, *, limit: int = 1000) -> list[str]:
        """The source references of repeating entries whose next day has
        passed (`distillreads.due_series`)."""
        return reads.due_series(conn, SERIES_PREFIX, self.now() - DAY_US, DAY_US, limit=limit)
