"""One peer's local state, opened from its data dir: the pieces wired together."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .contacts import ContactBook
from .datadir import DataDir
from .db import Database
from .errors import DataDirError
from .grep import GrepMemoryTool
from .keystore import KeyStore
from .memlog import MemoryLog
from .mirror import MemoryTextMirror
from .notebook import NotebookStore


@dataclass
class Node:
    data: DataDir
    db: Database
    origin: str
    role: str
    name: str
    log: MemoryLog = field(init=False)
    contacts: ContactBook = field(init=False)
    mirror: MemoryTextMirror = field(init=False)
    grep: GrepMemoryTool = field(init=False)
    notebook: NotebookStore = field(init=False)
    key_store: KeyStore | None = None  # None: PIXIE_KEYSTORE decides, on first use

    def __post_init__(self) -> None:
        self.log = MemoryLog(self.db, self.origin)
        self.contacts = ContactBook(self.db)
        self.mirror = MemoryTextMirror(self.db)
        self.log.subscribe(self.mirror.on_commit)
        self.grep = GrepMemoryTool(self.mirror)
        self.notebook = NotebookStore(self.db, self.origin, self.log, key_store=self.key_store)

    @classmethod
    def open(cls, path: Path, key_store: KeyStore | None = None) -> Node:
        data = DataDir.open(path)
        db = Database(data.db_path)
        try:
            db.check_schema()
            meta = db.meta()
            if "origin" not in meta or "role" not in meta:
                raise DataDirError(f"{data.db_path} is missing its identity (origin, role)")
        except BaseException:
            db.dispose()
            raise
        return cls(
            data, db, meta["origin"], meta["role"], meta.get("name", meta["role"]), key_store
        )

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
