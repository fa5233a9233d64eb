"""ClearNotebook: the clear zone, read-only, holding no key.

This is everything the user-facing side (the UI, the CLI's display commands,
and the chat agent's check_notebook tool) can see of the Notebook. Every query
here filters to the clear zone before it does anything else, and this module
imports nothing that could open a sealed note: an import contract checks that,
so "the chat cannot reach the sealed zone" is a fact of the import graph.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pixie.device.errors import DeviceError
from pixie.device.notebook import meaning, nearby
from pixie.device.notebook.terms import (
    MAX_QUERY_TERMS,
    STOPWORDS,
    query_terms,
    query_words,
    stem,
    stems,
    token_stems,
    words,
)
from pixie.device.store import config
from pixie.device.store.contacts import name_tag
from pixie.device.store.notes import (
    CLEAR_COLUMNS,
    ClearNote,
    NoteKind,
    clear_note_from_columns,
)
from pixie.device.store.plaindb import DriverAccess

TOP_RESULTS = 8
# Of notes whose titles differ only in dates and numbers ("Call with Ada, 3 May
# 2026", "Call with Ada, 9 Jun 2026"), at most this many take places in the top
# list while others that match are left out; the rest come in only to fill it.
MAX_ALIKE = 2
# How many of the best matches the top list is chosen from.
POOL = 4 * TOP_RESULTS
# Weights of a query term found in each field: the title says what a note is
# about, a tag is a deliberate label, the body merely mentions.
WEIGHTS = {"title": 3, "tags": 2, "body": 1}

# The highest character: a range [p, p + _TOP) of index terms holds exactly
# those that start with p (SQLite and FTS5 both compare text as UTF-8 bytes).
_TOP = "\U0010ffff"
# Stems the English Snowball stemmer gives only by exception, to words that do
# not start with the stem's first letters.
_IRREGULAR = {"die": ("dying",), "lie": ("lying",), "tie": ("tying",)}


def _index_form(text: str) -> list[str]:
    """Words as the full-text index holds them (SQLite FTS5's unicode61 with
    remove_diacritics 2: plain lowercasing, diacritics dropped, no
    compatibility decomposition), so a word in a note is found as written even
    where the index and `terms.fold` disagree (ß, ligatures, superscripts)."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(unicodedata.normalize("NFC", bare))


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _prefixes(term: str) -> set[str]:
    """Index-term prefixes that cover every word whose stem is ``term``.

    A stem is the start of its word except for its last letter where the
    stemmer substitutes one ("happy" -> "happi", "hoping" -> "hope",
    "possibility" -> "possibl", "skies" -> "sky"), and a few listed
    exceptions ("dying" -> "die")."""
    cut = term[:-1] if len(term) > 1 and term[-1] in "eily" else term
    return {cut, *_IRREGULAR.get(term, ())}


@dataclass(frozen=True, slots=True)
class Term:
    """One stem of the query and the words the index holds for it."""

    stem: str
    prefixes: frozenset[str]


def search_terms(query: str) -> list[Term]:
    """The query's stems, each with the index prefixes to look its words up by."""
    by_stem: dict[str, set[str]] = {}
    for word in query_words(query):
        by_stem.setdefault(stem(word), set())
    for written in _index_form(query):
        for word in words(written):
            found = by_stem.get(stem(word))
            if found is not None:
                found.add(written)
    return [Term(s, _outermost(_prefixes(s) | found)) for s, found in by_stem.items()]


def _outermost(prefixes: set[str]) -> frozenset[str]:
    """The prefixes that no shorter one of them already covers."""
    return frozenset(p for p in prefixes if not any(q != p and p.startswith(q) for q in prefixes))


_DATE_WORDS = frozenset(
    w
    for name in (
        "monday tuesday wednesday thursday friday saturday sunday january february march "
        "april may june july august september october november december"
    ).split()
    for w in (name, name[:3])
) | {"sept", "tues", "thur", "thurs"}


def title_shape(title: str) -> str:
    """A title without its dates and numbers: what notes of one kind of thing
    share ("call with ada lovelace"). Empty for a title of nothing else."""
    return " ".join(w for w in words(title) if not w[0].isdigit() and w not in _DATE_WORDS)


def varied(ranked: list[tuple[bool, str]], limit: int) -> list[int]:
    """Which of ``ranked`` (each: whether it is the person's own page, its
    title), best first, make a top list of ``limit``: in rank order, each
    unless MAX_ALIKE of the same title shape are in already; then, if places
    are left, the best of those passed over. Positions, in rank order."""
    chosen: list[int] = []
    passed: list[int] = []
    seen: dict[str, int] = {}
    for i, (own, title) in enumerate(ranked):
        shape = title_shape(title)
        if own or not shape:
            chosen.append(i)
            continue
        if seen.get(shape, 0) >= MAX_ALIKE:
            passed.append(i)
            continue
        seen[shape] = seen.get(shape, 0) + 1
        chosen.append(i)
    chosen = chosen[:limit]
    return sorted(chosen + passed[: limit - len(chosen)])


@dataclass(frozen=True, slots=True)
class ScoredNote:
    note: ClearNote
    score: int
    by_meaning: bool = False  # matched no query term: near the query in meaning


log = logging.getLogger("pixie.notebook")

_LIVE = "zone = 'clear' AND deleted = 0"
# The full-text index's vocabulary, one row per word it holds: a view of the
# index, kept in the connection's temporary schema (nothing is written to the
# database file).
_VOCAB_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.note_vocab USING fts5vocab(main, note_fts, row)"
)
# A contact's own page: a Person note filed under the contact. Read through
# the identity index, which holds one row per Person note (one per contact),
# not the contact index: a person may have thousands of other notes. The "+"
# keeps the planner off the contact index.
_OWN_PAGE = (
    "SELECT n FROM note WHERE kind = 'person' AND zone = 'clear' "
    "AND identity_key IS NOT NULL AND deleted = 0 AND +contact_id = ?"
)
_VOCAB_RANGE = "SELECT term FROM temp.note_vocab WHERE term >= ? AND term < ?"
# A note's date for the window filters: what it is about, else when it changed.
_EFFECTIVE = "coalesce(about_date, updated_wall)"
_COLUMNS = ", ".join(f"note.{name}" for name in CLEAR_COLUMNS)
_CONTACT_NAME = "SELECT name FROM contact WHERE id = ?"
# Names that are also common words, months or weekdays: no note "names" May
# Chen for saying "may", nor June for a date in June.
_COMMON = STOPWORDS | frozenset(
    "january february march april may june july august september october november "
    "december monday tuesday wednesday thursday friday saturday sunday will mark grace "
    "rose hope joy faith bill pat art frank sue dawn summer autumn winter spring work "
    "home family".split()
)
# A person's notes (parameters: contact id, their name tag), as a condition on
# the note row and as a set of row numbers; and the notes that only name them
# (parameters: the full-text query for their name, contact id, name tag).
_THEIRS = (
    "note.n IN (SELECT n FROM note WHERE contact_id = ? "
    "UNION ALL SELECT note_n FROM note_tag WHERE tag = ?)"
)
_THEIRS_IN = (
    "n IN (SELECT n FROM note WHERE contact_id = ? UNION SELECT note_n FROM note_tag WHERE tag = ?)"
)
# Notes tagged with a person's name and not filed under them (parameters:
# name tag, contact id).
_TAGGED_ONLY = (
    "note.n IN (SELECT note_n FROM note_tag WHERE tag = ?) AND coalesce(note.contact_id, '') != ?"
)
_NAMING = (
    "(note.n IN (SELECT rowid FROM note_fts WHERE note_fts MATCH ?) "
    "AND coalesce(note.contact_id, '') != ? "
    "AND note.n NOT IN (SELECT note_n FROM note_tag WHERE tag = ?))"
)
_NAMING_IN = (
    "n IN (SELECT rowid FROM note_fts WHERE note_fts MATCH ? "
    "EXCEPT SELECT n FROM note WHERE contact_id = ? "
    "EXCEPT SELECT note_n FROM note_tag WHERE tag = ?)"
)


class ClearNotebook:
    """Clear-zone reads: `clear_notes`, `get_clear` and `search_clear`."""

    def __init__(
        self, db: DriverAccess, *, meaning: bool | None = None, settings: Path | None = None
    ) -> None:
        self._db = db
        # The places term matches leave, filled by meaning (`nearby`); None:
        # on where the model loads and neither PIXIE_EMBEDDINGS nor the data
        # dir's settings (``settings``: its config file) turn it off, decided
        # at the first search with terms (finding out imports the libraries).
        self._meaning = meaning
        self._settings = settings

    def _meaning_on(self) -> bool:
        if self._meaning is None:
            self._meaning = not self._turned_off() and nearby.enabled()
        return self._meaning

    def _turned_off(self) -> bool:
        return self._settings is not None and config.meaning_off(self._settings)

    def meaning_off(self) -> bool:
        """Whether search by meaning is turned off (by the settings or the
        environment), without finding out whether the model would load.
        Raises BadInput for a setting that is neither on nor off."""
        return self._meaning is False or nearby.switched_off() or self._turned_off()

    def meaning_on(self) -> bool:
        """Whether searches here use meaning: not turned off, and the model
        loads (finding out imports the libraries, once)."""
        return self._meaning_on()

    def clear_notes(self, kind: NoteKind | None = None) -> list[ClearNote]:
        """Live clear notes, newest first."""
        # On the driver, the columns a ClearNote is made of: loading ORM rows
        # cost several times the query.
        where, params = (_LIVE, ()) if kind is None else (f"{_LIVE} AND kind = ?", (kind.value,))
        with self._db.reading(plain=True) as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM note WHERE {where} ORDER BY updated_at DESC, id DESC",
                params,
            ).fetchall()
        return [clear_note_from_columns(r) for r in rows]

    def get_clear(self, note_id: str) -> ClearNote | None:
        """A live clear note by id, or None: sealed and missing look the same."""
        with self._db.reading(plain=True) as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM note WHERE {_LIVE} AND id = ?", (note_id,)
            ).fetchone()
        return None if row is None else clear_note_from_columns(row)

    def search_clear(
        self,
        query: str = "",
        contact_id: str | None = None,
        topic: str | None = None,
        since: int | None = None,
        until: int | None = None,
        limit: int = TOP_RESULTS,
    ) -> list[ScoredNote]:
        """Filter first (zone, person, topic, date window), then rank what is left.

        Query and notes meet on word stems (see `terms`). Each query term adds
        3 if a word of the title has its stem, 2 a word of a tag, 1 a word of
        the body; notes scoring 0 are dropped; ties go to the newest note; the
        top ``limit`` return, chosen from the best `POOL` so that notes whose
        titles differ only in dates and numbers (a call digest a week, a
        recurring appointment) take at most MAX_ALIKE places while other
        matches wait (`varied`), in score order still. With a person, that
        person's own page (their Person note) comes first whenever it is among
        the matches, and the person's other notes follow by score. With no terms, the filtered notes
        come back newest first, the person's own page leading.

        A person filter runs in two stages: their notes (filed under them,
        or tagged with their name as a source they shared with others is),
        ranked as above with their page leading; then, for the places left,
        the notes that only name them, ranked the same way. The words of
        their name leave the query when others remain, their page keeping
        the 3 the name gave its title (`_without_their_name`).

        With meaning on (`nearby`), one thing changes and nothing else: when
        fewer than ``limit`` notes match any term, the nearest other notes
        that pass the same filters fill the places left, after every term
        match, with score 0 and ``by_meaning`` set. Which notes match, their
        scores and their order are the term ranking's alone (ties newest
        first: breaking them by meaning instead cost the sample life's "when"
        questions a third of their recall, which leans on recency).
        """
        # The hot path of check_notebook runs as one hand-written statement on
        # the driver: building and loading it through the ORM cost several
        # times what SQLite spends answering it. Every value is a parameter;
        # index terms are bare words inside double quotes, so they cannot
        # inject FTS syntax.
        #
        # Two forms of each filter: a plain condition on the note row (when
        # there are no terms, the newest rows are read in index order), and a
        # set of row numbers read from an index alone (the person from
        # ix_note_contact_updated, the topic from note_tag, the window from
        # ix_note_effective_date), applied to the full-text hits before any
        # note row is touched.
        conditions: list[str] = []
        filters: list[str] = []
        params: list[object] = []
        if topic is not None:
            # The same normalisation tags get when they are written.
            conditions.append("note.n IN (SELECT note_n FROM note_tag WHERE tag = ?)")
            filters.append("n IN (SELECT note_n FROM note_tag WHERE tag = ?)")
            params.append(" ".join(unicodedata.normalize("NFC", topic).casefold().split()))
        for value, op in ((since, ">="), (until, "<")):
            if value is not None:
                conditions.append(f"{_EFFECTIVE} {op} ?")
                filters.append(f"n IN (SELECT n FROM note WHERE {_LIVE} AND {_EFFECTIVE} {op} ?)")
                params.append(value)
        terms = search_terms(query)
        unnamed = False  # whether the person's name was taken out of the terms
        name = ""
        if contact_id is not None:
            with self._db.reading(plain=True) as conn:
                row = conn.execute(_CONTACT_NAME, (contact_id,)).fetchone()
            name = " ".join(str(row[0] or "").split()) if row is not None else ""
            if terms:
                query, kept = _without_their_name(name, query, terms)
                unnamed, terms = len(kept) < len(terms), kept
        near: bytes | None = None
        if terms and self._meaning_on():
            try:
                nearby.refresh(self._db, nearby.SEARCH_REFRESH)
                near = meaning.embed_query(query)
            except (DeviceError, sqlite3.Error, OSError) as exc:
                # A database that cannot be written now (locked, read-only)
                # or a model that cannot load: the word ranking still answers.
                log.warning("search by meaning skipped: %s", type(exc).__name__)
                near = None
        # Straight to the driver: several small statements per search, and
        # each costs less than SQLAlchemy's wrapping of it.
        with self._db.reading(plain=True) as conn:
            return self._search(
                conn,
                terms,
                near,
                contact_id,
                conditions,
                filters,
                params,
                limit,
                name=name,
                unnamed=unnamed,
            )

    def _search(
        self,
        conn: Any,
        terms: list[Term],
        near: bytes | None,
        contact_id: str | None,
        conditions: list[str],
        filters: list[str],
        params: list[object],
        limit: int,
        *,
        name: str = "",
        unnamed: bool = False,
    ) -> list[ScoredNote]:
        # With a person, two stages: their notes (filed under them, or of a
        # source they shared with others, which carries their name as a
        # tag: no one contact owns a group chat or a meeting of three), then,
        # for the places those leave, notes that only name them (a daughter
        # who never writes is in her parents' notes).
        stages: list[tuple[list[str], list[str], list[object]]] = [(conditions, filters, params)]
        broad = (conditions, params)
        tag = ""
        if contact_id is not None:
            tag, named = _tag_and_name(name)
            theirs = (
                [_THEIRS, *conditions],
                [_THEIRS_IN, *filters],
                [contact_id, tag, *params],
            )
            naming = (
                [_NAMING, *conditions],
                [_NAMING_IN, *filters],
                [named, contact_id, tag, *params],
            )
            stages = [theirs, naming]
            broad = (
                [f"({_THEIRS} OR {_NAMING})", *conditions],
                [contact_id, tag, named, contact_id, tag, *params],
            )
        found: list[ScoredNote] = []
        taken: set[int] = set()
        own: list[int] = []
        if contact_id is not None:
            own = [int(n) for (n,) in conn.execute(_OWN_PAGE, (contact_id,))]
        for stage, (stage_conditions, stage_filters, stage_params) in enumerate(stages):
            room = limit - len(found)
            if room <= 0:
                break
            if not terms:
                if contact_id is not None and stage == 0:
                    rows = self._their_newest(conn, contact_id, tag, conditions, params, own, room)
                else:
                    rows = self._newest(conn, stage_conditions, stage_params, own, room)
                found += [ScoredNote(clear_note_from_columns(r[1:]), int(r[0])) for r in rows]
            else:
                ranked = self._ranked(
                    conn, terms, stage_filters, stage_params, own, room, unnamed=unnamed
                )
                found += [ScoredNote(clear_note_from_columns(r[2:]), int(r[1])) for r in ranked]
                taken |= {r[0] for r in ranked}
            own = []  # the person's page leads the first stage only
        if terms and near is not None and len(found) < limit:
            index = nearby.index_for(self._db)
            found += self._by_meaning(conn, index, near, *broad, taken, limit - len(found))
        return found

    @classmethod
    def _their_newest(
        cls,
        conn: Any,
        contact_id: str,
        tag: str,
        conditions: list[str],
        params: list[object],
        own: list[int],
        limit: int,
    ) -> list[Any]:
        """A person's newest notes, their page leading: those filed under
        them (read down the contact's index) and those tagged with their
        name (``tag``, as `_tag_and_name` gives it), each newest first,
        merged. One statement over both would sort every note of theirs to
        return eight."""
        filed = cls._newest(
            conn, ["note.contact_id = ?", *conditions], [contact_id, *params], own, limit
        )
        tagged = cls._newest(
            conn, [_TAGGED_ONLY, *conditions], [tag, contact_id, *params], [], limit
        )
        lead = [r for r in filed if r[2] == "person" and r[6] == contact_id and r[3] is not None]
        lead = lead[: len(own)]
        rest = [r for r in filed if r not in lead] + tagged
        rest.sort(key=lambda r: (r[11], r[1]), reverse=True)
        return (lead + rest)[:limit]

    @staticmethod
    def _by_meaning(
        conn: Any,
        index: nearby.MeaningIndex,
        near: bytes,
        conditions: list[str],
        params: list[object],
        taken: set[int],
        limit: int,
    ) -> list[ScoredNote]:
        """The notes nearest the query in meaning that pass the filters and
        are not among ``taken``, for the places term matches left."""
        allowed: set[int] | None = None
        if conditions:
            where = " AND ".join([_LIVE, *conditions])
            allowed = {int(n) for (n,) in conn.execute(f"SELECT n FROM note WHERE {where}", params)}
        nearest = index.nearest(conn, near, allowed, taken, limit)
        if not nearest:
            return []
        whole = _rows_by_n(conn, [n for n, _ in nearest], live=True)
        return [
            ScoredNote(clear_note_from_columns(whole[n]), 0, by_meaning=True)
            for n, _ in nearest
            if n in whole
        ]

    @staticmethod
    def _newest(
        conn: Any, conditions: list[str], params: list[object], own: list[int], limit: int
    ) -> list[Any]:
        """The filtered notes, newest first, the person's own page leading."""
        where = " AND ".join([_LIVE, *conditions])
        first: list[Any] = []
        if own:
            marks = ", ".join("?" * len(own))
            first = conn.execute(
                f"SELECT 0, {_COLUMNS} FROM note WHERE {where} AND note.n IN ({marks}) "
                "ORDER BY note.updated_at DESC, note.id DESC LIMIT ?",
                (*params, *own, limit),
            ).fetchall()
            where += f" AND note.n NOT IN ({marks})"
            params = [*params, *own]
        rest = conn.execute(
            f"SELECT 0, {_COLUMNS} FROM note WHERE {where}"
            " ORDER BY note.updated_at DESC, note.id DESC LIMIT ?",
            (*params, max(limit - len(first), 0)),
        ).fetchall()
        return [*first, *rest]

    @staticmethod
    def _ranked(
        conn: Any,
        terms: list[Term],
        filters: list[str],
        params: list[object],
        own: list[int],
        limit: int,
        *,
        unnamed: bool = False,
    ) -> list[Any]:
        # The index holds words as written; each term's words are looked up
        # in its vocabulary by prefix ranges and kept if their stem is the
        # term, so every form of a stem matches and no word matches by
        # prefix alone.
        conn.execute(_VOCAB_DDL)
        parts: list[str] = []
        match_params: list[object] = []
        for term in terms:
            found: set[str] = set()
            for prefix in term.prefixes:
                for (token,) in conn.execute(_VOCAB_RANGE, (prefix, prefix + _TOP)):
                    if term.stem in token_stems(token):
                        found.add(token)
            if not found:
                continue
            phrases = " OR ".join(f'"{token}"' for token in sorted(found))
            # Each (term, field) pair is its own full-text query, returning a
            # note at most once with that field's weight; the sum is the score.
            for column_name, weight in WEIGHTS.items():
                parts.append(
                    f"SELECT rowid AS n, {weight} AS w FROM note_fts WHERE note_fts MATCH ?"
                )
                match_params.append(f"{column_name} : ({phrases})")
        if unnamed and own:
            # The person's name was taken out of the query (see
            # `_without_their_name`): their own page keeps the title weight
            # the name gave it, as one more term found in its title.
            marks = ", ".join("?" * len(own))
            parts.append(f"SELECT n, {WEIGHTS['title']} AS w FROM note WHERE n IN ({marks})")
            match_params += own
        if not parts:
            return []
        # Only notes scoring at least the pool-th best score can make the top
        # list (besides the person's own page), so only those are joined to
        # their rows and ordered by recency (a common word matches a tenth of
        # the Notebook; its title matches are a handful). The top list is
        # chosen from that pool (`varied`).
        where = f"WHERE {' AND '.join(filters)} " if filters else ""
        marks = ", ".join("?" * len(own))
        # The pool is ranked on the few columns ranking needs; only the notes
        # chosen from it are then read whole.
        sql = (
            f"WITH m AS MATERIALIZED (SELECT n, sum(w) AS score FROM "
            f"({' UNION ALL '.join(parts)}) {where}GROUP BY n) "
            f"SELECT m.n, m.score, note.title, m.n IN ({marks}) AS own "
            "FROM m JOIN note ON note.n = m.n "
            "WHERE note.zone = 'clear' AND note.deleted = 0 "
            "AND (m.score >= coalesce((SELECT score FROM m ORDER BY score DESC "
            f"LIMIT 1 OFFSET ?), 0) OR m.n IN ({marks})) "
            "ORDER BY own DESC, m.score DESC, note.updated_at DESC, note.id DESC LIMIT ?"
        )
        pool = max(limit, 1) * (POOL // TOP_RESULTS)
        every = [*match_params, *params, *own, pool - 1, *own, pool]
        ranked = conn.execute(sql, tuple(every)).fetchall()
        picked = [ranked[i] for i in varied([(bool(r[3]), r[2] or "") for r in ranked], limit)]
        if not picked:
            return []
        whole = _rows_by_n(conn, [r[0] for r in picked])
        return [(r[0], r[1], *whole[r[0]]) for r in picked]

    def counts(self) -> dict[str, int]:
        """Live clear notes by kind."""
        with self._db.reading(plain=True) as conn:
            rows = conn.execute(f"SELECT kind, count(*) FROM note WHERE {_LIVE} GROUP BY kind")
            return {str(kind): int(count) for kind, count in rows}


def _without_their_name(name: str, query: str, terms: list[Term]) -> tuple[str, list[Term]]:
    """The query without the filtered person's name, when it holds more.

    Every note a person filter lets through is about that person, so
    their name in the query says nothing about which of those notes
    answers it; scored as a term, it only ranks the notes with the name
    in their title (every one of their chat digests) above the note that
    holds the question's other words ("kitchen cabinets Claire" about
    Claire: the journal entry on the cabinets, which names her in its
    body, fell behind eight digests titled with her name). So the name's
    words are dropped from the terms and from the text embedded for the
    meaning ranking, unless nothing else is left ("Claire" about Claire
    still searches for her name). Their own page, titled with the name,
    keeps what the name gave it (`_ranked`'s ``unnamed``) and so still leads."""
    theirs = stems(name)
    kept = [t for t in terms if t.stem not in theirs]
    if not kept or len(kept) == len(terms):
        return query, terms
    rest = " ".join(w for w in query.split() if not stems(w) & theirs)
    return rest, kept


def _tag_and_name(name: str) -> tuple[str, str]:
    """The tag a note of several people carries for a contact of this name,
    and a full-text query for notes that name them: their full name, or their
    first name where it is no common word ("Will", "May" are not)."""
    # Never the empty tag: a nameless contact matches by its id alone;
    # nor a one-word name that is a word ("June" is also every note
    # tagged with the month).
    tag = name_tag(name) or "\x00"
    if " " not in tag and tag in _COMMON:
        tag = "\x00"
    names = [w for w in words(name)]
    phrases = [" ".join(names)] if names else []
    if len(names) == 1 and names[0] in _COMMON:
        phrases = []  # a one-word name that is a word ("June", "Work"): no mentions
    if len(names) > 1 and len(names[0]) > 2 and names[0] not in _COMMON:
        phrases.append(names[0])
    # Each phrase quoted: bare words inside double quotes, as the
    # ranking's own terms are, so a name cannot inject FTS syntax.
    query = " OR ".join(f'"{p}"' for p in phrases) or '"\x01"'
    return tag, "{title body} : (" + query + ")"


def _rows_by_n(conn: Any, ns: list[int], *, live: bool = False) -> dict[int, tuple[Any, ...]]:
    """The whole rows (`_COLUMNS`) of the notes numbered ``ns``, by number;
    with ``live``, only those still live in the clear zone."""
    marks = ", ".join("?" * len(ns))
    where = f"{_LIVE} AND " if live else ""
    sql = f"SELECT note.n, {_COLUMNS} FROM note WHERE {where}note.n IN ({marks})"
    return {row[0]: tuple(row[1:]) for row in conn.execute(sql, tuple(ns))}


# The query's words and stems come from `terms`; these names are the search's
# public face, re-exported so callers keep one place to import them from.
__all__ = [
    "MAX_ALIKE",
    "MAX_QUERY_TERMS",
    "POOL",
    "STOPWORDS",
    "TOP_RESULTS",
    "WEIGHTS",
    "ClearNotebook",
    "ScoredNote",
    "Term",
    "query_terms",
    "search_terms",
    "title_shape",
    "varied",
]
