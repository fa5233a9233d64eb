"""ClearNode: one peer's local state without its keys, the pieces wired together."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from pixie.device.errors import DataDirError
from pixie.device.notebook.clear import ClearNotebookStore
from pixie.device.store import statedigest
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.datadir import DataDir, has_identity
from pixie.device.store.db import Database
from pixie.device.store.memlog import MemoryLog
from pixie.device.store.mirror import MIRROR_FOLDER, MemoryTextMirror
from pixie.device.store.replica import recompute_digest
from pixie.device.store.siblings import SiblingBook
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.digest import Fingerprint
from pixie.protocol.ids import IdMinter, minter_for

# A peer's public key as the data dir records it: 32 bytes in lowercase hex.


@dataclass
class ClearNode:
    """The log, mirror, contacts, siblings and the clear Notebook of one data dir.

    ``clock`` and ``entropy`` are where the log and the Notebook read the time
    and draw randomness (event and note ids, stamps, pin times); both share one
    id minter, ``ids``. The defaults are the system's.
    """

    data: DataDir
    db: Database
    origin: str
    role: str
    name: str
    log: MemoryLog = field(init=False)
    contacts: ContactBook = field(init=False)
    mirror: MemoryTextMirror = field(init=False)
    notebook: ClearNotebookStore = field(init=False)
    siblings: SiblingBook = field(init=False)
    ids: IdMinter = field(init=False)
    clock: Clock = field(default=SYSTEM_CLOCK, kw_only=True)
    entropy: Entropy = field(default=SYSTEM_ENTROPY, kw_only=True)

    def __post_init__(self) -> None:
        self.ids = minter_for(self.clock, self.entropy)
        self.log = MemoryLog(
            self.db, self.origin, clock=self.clock, entropy=self.entropy, ids=self.ids
        )
        self.contacts = ContactBook(self.db)
        self.mirror = MemoryTextMirror(self.db, self.data.path / MIRROR_FOLDER)
        self.log.subscribe(self.mirror.on_commit, wants_rows=self.mirror.is_built)
        self.notebook = self._notebook()
        self.siblings = SiblingBook(self.db)

    def _notebook(self) -> ClearNotebookStore:
        return ClearNotebookStore(
            self.db,
            self.origin,
            self.log,
            clock=self.clock,
            entropy=self.entropy,
            ids=self.ids,
            settings=self.data.config_path,
        )

    def digest(self) -> Fingerprint:
        """The state digest as maintained on every write."""
        return statedigest.current(self.db)

    def recompute_digest(self) -> Fingerprint:
        """The state digest rebuilt from every event and note version."""
        return recompute_digest(self.db)

    def public_key(self) -> bytes:
        return bytes.fromhex(self.db.meta()["identity"])

    @staticmethod
    def _open_parts(path: Path) -> tuple[DataDir, Database, dict[str, str]]:
        data = DataDir.open(path)
        db = Database(data.db_path)
        try:
            db.check_schema()
            meta = db.meta()
            if not has_identity(meta):
                raise DataDirError(
                    f"{data.db_path} is missing its identity (origin, role, public key)"
                )
        except BaseException:
            db.dispose()
            raise
        return data, db, meta

    @classmethod
    def open_clear(
        cls, path: Path, *, clock: Clock = SYSTEM_CLOCK, entropy: Entropy = SYSTEM_ENTROPY
    ) -> Self:
        """Open a data dir with no way to its keys."""
        data, db, meta = cls._open_parts(path)
        return cls(
            data,
            db,
            meta["origin"],
            meta["role"],
            meta.get("name", meta["role"]),
            clock=clock,
            entropy=entropy,
        )

    def close(self) -> None:
        self.mirror.close()
        self.db.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ClearNode"]
