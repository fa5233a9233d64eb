"""Meaning-level retrieval over the clear zone: which notes sit near a query.

Word search meets a note only on shared stems. This index keeps a meaning
vector (`meaning`, a static embedding model shipped in a wheel) for every
clear note, in the derived note_meaning table (`store.meanings`), and answers
"which of these notes are nearest this query". `ClearNotebook.search_clear`
uses it in one place only, so the spec's ranking stands: when fewer than the
top list's places match any query term, the nearest other notes that pass
the filters fill the places left, after every term match, marked "by
meaning".

Vectors are made for the clear zone alone (`store.meanings.stale` reads no
other): a sealed note's meaning is never computed. They are made in batches
by `refresh`, which a distillation pass calls at its end, and a search calls
for at most `SEARCH_REFRESH` notes first (an edit, a pin, a note merged from
a sibling), so a new note is found by meaning on the next search. The
vectors of the whole clear zone are held as one matrix per process, read
again only when the table's generation moves.

`PIXIE_EMBEDDINGS=0` (or ``off``) turns it all off: searches are then exactly
the term ranking, and nothing is embedded.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import TYPE_CHECKING

from pixie.device.notebook import meaning
from pixie.device.store import meanings
from pixie.device.store.plaindb import DriverAccess

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

ENV = "PIXIE_EMBEDDINGS"
BATCH = 256  # notes embedded per write transaction
SEARCH_REFRESH = 512  # notes a search embeds at most before it looks
# A note below this similarity never fills a place: the vectors of texts that
# share nothing still sit a little apart from orthogonal.
MIN_SIMILARITY = 0.02


def switched_off() -> bool:
    """Whether the environment turns meaning-level retrieval off (no import,
    no file read: cheap enough for any path)."""
    return os.environ.get(ENV, "").strip().casefold() in ("0", "off", "no", "false")


def enabled() -> bool:
    """Whether meaning-level retrieval is on: not turned off, and the model
    can be loaded here."""
    return not switched_off() and meaning.available()


def preload() -> None:
    """Start loading the model in the background unless turned off (see
    `meaning.preload`): for a caller that will embed after other work."""
    if not switched_off():
        meaning.preload()


def refresh(db: DriverAccess, limit: int | None = None) -> int:
    """Embed the clear notes whose vector is missing or stale, at most
    ``limit`` (all when None); how many were embedded. The notes are read,
    embedded outside any write lock, and written with the stamp they had
    when read: a note changed meanwhile keeps a stale vector, which the next
    refresh replaces. (A deleted note's vector goes with it, by a trigger.)"""
    with db.reading(plain=True) as conn:
        top = meanings.writes(conn)
        if top and top == meanings.seen(conn):
            return 0  # no note written since everything was embedded
    done = 0
    caught_up = False
    while limit is None or done < limit:
        want = BATCH if limit is None else min(BATCH, limit - done)
        with db.reading(plain=True) as conn:
            rows = meanings.stale(conn, meaning.MODEL_NAME, want)
        if not rows:
            caught_up = True
            break
        vectors = meaning.embed([text for _, _, text in rows])
        with db.writing(plain=True, durable=False) as conn:  # derived data: no fsync owed
            meanings.put(
                conn,
                meaning.MODEL_NAME,
                [(n, stamp, vec) for (n, stamp, _), vec in zip(rows, vectors, strict=True)],
            )
        done += len(rows)
        if len(rows) < want:
            caught_up = True
            break
    if caught_up:
        with db.writing(plain=True, durable=False) as conn:  # derived data: no fsync owed
            meanings.mark_seen(conn, top)
    return done


class MeaningIndex:
    """The clear zone's vectors as one matrix, and the nearest notes to a
    query among a set of candidates. One per database per process."""

    def __init__(self, db: DriverAccess) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._ns: npt.NDArray[np.int64] | None = None
        self._matrix: npt.NDArray[np.float32] | None = None
        self._row: dict[int, int] = {}

    def _current(self, conn: sqlite3.Connection) -> None:
        generation = meanings.generation(conn)
        if generation == self._generation and self._matrix is not None:
            return
        import numpy as np

        found = meanings.every(conn, meaning.MODEL_NAME)
        ns = np.fromiter((n for n, _ in found), dtype=np.int64, count=len(found))
        matrix = meaning.unpack(b"".join(vec for _, vec in found))
        self._ns, self._matrix = ns, matrix
        self._row = {int(n): i for i, n in enumerate(ns)}
        self._generation = generation

    def nearest(
        self,
        conn: sqlite3.Connection,
        query: bytes,
        allowed: set[int] | None,
        exclude: set[int],
        k: int,
    ) -> list[tuple[int, float]]:
        """The ``k`` notes nearest ``query`` (at least MIN_SIMILARITY), among
        ``allowed`` (every note with a vector when None), none of ``exclude``.
        One product over the whole matrix, the rest masked out, and a partial
        sort: no copy of the matrix, no loop over its rows."""
        import numpy as np

        if k <= 0:
            return []
        with self._lock:
            self._current(conn)
            assert self._matrix is not None and self._ns is not None
            if not len(self._ns):
                return []
            sims = self._matrix @ meaning.unpack(query)[0]
            if allowed is not None:
                wanted = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
                sims[~np.isin(self._ns, wanted)] = -np.inf
            if exclude:
                gone = np.fromiter(exclude, dtype=np.int64, count=len(exclude))
                sims[np.isin(self._ns, gone)] = -np.inf
            k = min(k, len(sims))
            top = np.argpartition(-sims, k - 1)[:k]
            top = top[np.argsort(-sims[top], kind="stable")]
            return [(int(self._ns[i]), float(sims[i])) for i in top if sims[i] >= MIN_SIMILARITY]


_INDEXES: dict[int, MeaningIndex] = {}
_INDEXES_LOCK = threading.Lock()


def index_for(db: DriverAccess) -> MeaningIndex:
    """The one index of ``db`` in this process."""
    with _INDEXES_LOCK:
        found = _INDEXES.get(id(db))
        if found is None or found._db is not db:
            found = _INDEXES[id(db)] = MeaningIndex(db)
        return found


__all__ = [
    "ENV",
    "MIN_SIMILARITY",
    "MeaningIndex",
    "enabled",
    "index_for",
    "preload",
    "refresh",
    "switched_off",
]
