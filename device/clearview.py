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
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    and_,
    column,
    func,
    literal,
    select,
    table,
    text,
    union_all,
)
from sqlalchemy.orm import Session

from .db import Database
from .notes import ClearNote, Note, NoteKind, NoteTag, Zone, to_clear_note

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
        conditions: list[ColumnElement[bool]] = [self._clear()]
        if contact_id is not None:
            conditions.append(Note.contact_id == contact_id)
        if topic is not None:
            # The same normalisation tags get when they are written.
            tag = " ".join(unicodedata.normalize("NFC", topic).casefold().split())
            conditions.append(
                Note.n.in_(select(NoteTag.note_n).where(NoteTag.tag == tag).scalar_subquery())
            )
        effective = func.coalesce(Note.about_date, Note.updated_wall)
        if since is not None:
            conditions.append(effective >= since)
        if until is not None:
            conditions.append(effective < until)
        terms = query_terms(query)
        with self._db.reading() as session:
            if not terms:
                rows = session.scalars(
                    select(Note)
                    .where(*conditions)
                    .order_by(Note.updated_at.desc(), Note.id.desc())
                    .limit(limit)
                )
                return [ScoredNote(to_clear_note(r), 0) for r in rows]
            ranked = self._ranked(session, terms, conditions, limit)
            if not ranked:
                return []
            rows_by_n = {
                r.n: r
                for r in session.scalars(select(Note).where(Note.n.in_([n for n, _ in ranked])))
            }
            return [ScoredNote(to_clear_note(rows_by_n[n]), int(s)) for n, s in ranked]

    @staticmethod
    def _ranked(
        session: Session, terms: Sequence[str], conditions: list[ColumnElement[bool]], limit: int
    ) -> list[tuple[int, int]]:
        """One statement that matches, filters, scores and ranks inside SQLite.

        Each (term, field) pair is its own full-text query, returning a note at
        most once with that field's weight; the sum over pairs is the score.
        """
        fts = table("note_fts", column("rowid"))
        parts = []
        for i, term in enumerate(terms):
            for column_name, weight in WEIGHTS.items():
                # Terms are bare words (letters and digits only), so quoting
                # them makes a prefix query that cannot be FTS syntax.
                match = text(f"note_fts MATCH :q{i}_{column_name}").bindparams(
                    **{f"q{i}_{column_name}": f'{column_name} : "{term}"*'}
                )
                parts.append(
                    select(fts.c.rowid.label("n"), literal(weight).label("w")).where(match)
                )
        matches = union_all(*parts).subquery()
        score = func.sum(matches.c.w).label("score")
        stmt = (
            select(Note.n, score)
            .join(matches, matches.c.n == Note.n)
            .where(*conditions)
            .group_by(Note.n)
            .order_by(score.desc(), Note.updated_at.desc(), Note.id.desc())
            .limit(limit)
        )
        return [(int(n), int(s)) for n, s in session.execute(stmt)]

    def counts(self) -> dict[str, int]:
        with self._db.reading() as session:
            rows = session.execute(
                select(Note.kind, func.count()).where(self._clear()).group_by(Note.kind)
            ).all()
        return {str(kind): int(count) for kind, count in rows}
