"""ClearNotebook: the clear zone, read-only, holding no key.

This is everything the user-facing side (the UI, the CLI's display commands,
and the chat agent's check_notebook tool) can see of the Notebook. Every query
here filters to the clear zone before it does anything else, and this module
imports nothing that could open a sealed note: an import contract checks that,
so "the chat cannot reach the sealed zone" is a fact of the import graph.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    and_,
    func,
    select,
)

from pixie.device.store.db import Database
from pixie.device.store.notes import (
    CLEAR_COLUMNS,
    ClearNote,
    Note,
    NoteKind,
    Zone,
    clear_note_from_columns,
    to_clear_note,
)

TOP_RESULTS = 8
MAX_QUERY_TERMS = 16
# Weights of a query term found in each field: the title says what a note is
# about, a tag is a deliberate label, the body merely mentions.
WEIGHTS = {"title": 3, "tags": 2, "body": 1}

# Words that match nearly every note carry no signal; a query made only of them
# is kept as it is.
STOPWORDS = frozenset(
    "a an and are about at be did do does for from has have how i in is it me my of on or "
    "our s so t that the their them they this to was we what when where which who why will "
    "with you your".split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Split a query into the lowercase words the index matches by prefix.

    The folding copies the index's tokenizer (SQLite FTS5 unicode61 with
    remove_diacritics 2): simple lowercasing and dropped diacritics, so "Zoe"
    finds "Zoë" and the other way round. Full case folding or compatibility
    decomposition (ß to ss, ² to 2) would make terms the index never holds.
    """
    decomposed = unicodedata.normalize("NFD", query.lower())
    folded = unicodedata.normalize(
        "NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    )
    words = list(dict.fromkeys(_WORD.findall(folded)))
    meaningful = [w for w in words if w not in STOPWORDS]
    return (meaningful or words)[:MAX_QUERY_TERMS]


@dataclass(frozen=True, slots=True)
class ScoredNote:
    note: ClearNote
    score: int


_LIVE = "zone = 'clear' AND deleted = 0"
# A note's date for the window filters: what it is about, else when it changed.
_EFFECTIVE = "coalesce(about_date, updated_wall)"
_COLUMNS = ", ".join(f"note.{name}" for name in CLEAR_COLUMNS)


class ClearNotebook:
    """Clear-zone reads: `clear_notes`, `get_clear` and `search_clear`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def _clear() -> ColumnElement[bool]:
        return and_(Note.zone == Zone.CLEAR.value, Note.deleted.is_(False))

    def clear_notes(self, kind: NoteKind | None = None) -> list[ClearNote]:
        """Live clear notes, newest first."""
        stmt = select(Note).where(self._clear())
        if kind is not None:
            stmt = stmt.where(Note.kind == kind.value)
        stmt = stmt.order_by(Note.updated_at.desc(), Note.id.desc())
        with self._db.reading() as session:
            return [to_clear_note(row) for row in session.scalars(stmt)]

    def get_clear(self, note_id: str) -> ClearNote | None:
        """A live clear note by id, or None: sealed and missing look the same."""
        with self._db.reading() as session:
            row = session.scalar(select(Note).where(self._clear(), Note.id == note_id))
            return None if row is None else to_clear_note(row)

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

        Each query term adds 3 if it starts a word of the title, 2 of a tag,
        1 of the body; ties go to the newest note; the top ``limit`` return.
        With no terms, the filtered notes come back newest first.
        """
        # The hot path of check_notebook runs as one hand-written statement on
        # the driver: building and loading it through the ORM cost several
        # times what SQLite spends answering it. Every value is a parameter;
        # query terms are bare words, so quoting them cannot inject FTS syntax.
        #
        # Each filter is a set of row numbers read from an index alone (the
        # person from ix_note_contact_updated, the topic from note_tag, the
        # window from ix_note_effective_date), so no note row is touched
        # before the ranking needs it.
        # Two forms of each filter: a plain condition on the note row (when
        # there are no terms, the newest rows are read in index order), and a
        # set of row numbers read from an index alone (the person from
        # ix_note_contact_updated, the topic from note_tag, the window from
        # ix_note_effective_date), applied to the full-text hits before any
        # note row is touched.
        conditions: list[str] = []
        filters: list[str] = []
        params: list[object] = []
        if contact_id is not None:
            conditions.append("note.contact_id = ?")
            filters.append("n IN (SELECT n FROM note WHERE contact_id = ?)")
            params.append(contact_id)
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
        terms = query_terms(query)
        if not terms:
            sql = (
                f"SELECT 0, {_COLUMNS} FROM note WHERE {' AND '.join([_LIVE, *conditions])}"
                " ORDER BY note.updated_at DESC, note.id DESC LIMIT ?"
            )
            params.append(limit)
        else:
            # Each (term, field) pair is its own full-text query, returning a
            # note at most once with that field's weight; the sum is the score.
            # Only notes scoring at least the limit-th best score can make the
            # top list, so only those are joined to their rows and ordered by
            # recency (a common word matches a tenth of the Notebook; its
            # title matches are a handful).
            parts, match_params = [], []
            for term in terms:
                for column_name, weight in WEIGHTS.items():
                    parts.append(
                        f"SELECT rowid AS n, {weight} AS w FROM note_fts WHERE note_fts MATCH ?"
                    )
                    match_params.append(f'{column_name} : "{term}"*')
            where = f"WHERE {' AND '.join(filters)} " if filters else ""
            sql = (
                f"WITH m AS MATERIALIZED (SELECT n, sum(w) AS score FROM "
                f"({' UNION ALL '.join(parts)}) {where}GROUP BY n) "
                f"SELECT m.score, {_COLUMNS} FROM m JOIN note ON note.n = m.n "
                "WHERE note.zone = 'clear' AND note.deleted = 0 "
                "AND m.score >= coalesce((SELECT score FROM m ORDER BY score DESC "
                "LIMIT 1 OFFSET ?), 0) "
                "ORDER BY m.score DESC, note.updated_at DESC, note.id DESC LIMIT ?"
            )
            params = [*match_params, *params, max(limit, 1) - 1, limit]
        with self._db.reading() as session:
            rows = session.connection().exec_driver_sql(sql, tuple(params)).all()
        return [ScoredNote(clear_note_from_columns(r[1:]), int(r[0])) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._db.reading() as session:
            rows = session.execute(
                select(Note.kind, func.count()).where(self._clear()).group_by(Note.kind)
            ).all()
        return {str(kind): int(count) for kind, count in rows}
