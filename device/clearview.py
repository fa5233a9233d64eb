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

from .db import Database
from .notes import (
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


_MATCH = "note_fts MATCH ?"
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
        where = ["note.zone = 'clear'", "note.deleted = 0"]
        params: list[object] = []
        if contact_id is not None:
            where.append("note.contact_id = ?")
            params.append(contact_id)
        if topic is not None:
            # The same normalisation tags get when they are written.
            where.append("note.n IN (SELECT note_n FROM note_tag WHERE tag = ?)")
            params.append(" ".join(unicodedata.normalize("NFC", topic).casefold().split()))
        if since is not None:
            where.append("coalesce(note.about_date, note.updated_wall) >= ?")
            params.append(since)
        if until is not None:
            where.append("coalesce(note.about_date, note.updated_wall) < ?")
            params.append(until)
        terms = query_terms(query)
        if not terms:
            sql = (
                f"SELECT 0, {_COLUMNS} FROM note WHERE {' AND '.join(where)}"
                " ORDER BY note.updated_at DESC, note.id DESC LIMIT ?"
            )
            params.append(limit)
        else:
            # Each (term, field) pair is its own full-text query, returning a
            # note at most once with that field's weight; the sum is the score.
            parts, match_params = [], []
            for term in terms:
                for column_name, weight in WEIGHTS.items():
                    parts.append(
                        f"SELECT rowid AS n, {weight} AS w FROM note_fts WHERE note_fts MATCH ?"
                    )
                    match_params.append(f'{column_name} : "{term}"*')
            sql = (
                f"SELECT m.score, {_COLUMNS} FROM (SELECT n, sum(w) AS score FROM "
                f"({' UNION ALL '.join(parts)}) GROUP BY n) AS m JOIN note ON note.n = m.n "
                f"WHERE {' AND '.join(where)} "
                "ORDER BY m.score DESC, note.updated_at DESC, note.id DESC LIMIT ?"
            )
            params = [*match_params, *params, limit]
        with self._db.reading() as session:
            rows = session.connection().exec_driver_sql(sql, tuple(params)).all()
        return [ScoredNote(clear_note_from_columns(r[1:]), int(r[0])) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._db.reading() as session:
            rows = session.execute(
                select(Note.kind, func.count()).where(self._clear()).group_by(Note.kind)
            ).all()
        return {str(kind): int(count) for kind, count in rows}
