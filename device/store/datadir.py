"""Where a peer keeps its state, and how that place is created and checked.

The data dir comes from ``--data``, else ``PIXIE_DATA``, else the per-user data
directory platformdirs gives for this OS (``~/.local/share/pixie`` on Linux,
``~/Library/Application Support/pixie`` on a Mac). Keys never live in it.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from pixie.device.errors import BadInput, DataDirError
from pixie.device.store.db import SCHEMA_VERSION, Database, Meta
from pixie.device.store.holdings import Holding  # noqa: F401  (its tables are created here too)
from pixie.device.store.keystore import KeyStore, open_key_store
from pixie.device.store.marks import DistillMark  # noqa: F401  (its table is created here too)
from pixie.device.store.memlog import MEMLOG_DDL
from pixie.device.store.notes import NOTEBOOK_DDL
from pixie.device.store.siblings import Sibling  # noqa: F401  (its tables are created here too)
from pixie.protocol.identity import new_identity
from pixie.protocol.timestamps import now_us

DATA_ENV = "PIXIE_DATA"
DB_NAME = "pixie.db"
CONFIG_NAME = "config.toml"
ROLES = ("device", "homebase")

_CONFIG_TEMPLATE = """\
# Pixie Memory settings for this data dir. Flags and PIXIE_* environment
# variables override what is written here. Secrets never belong in this file.
"""


def identity_key_name(origin: str) -> str:
    return f"{origin}-identity"


def resolve_data_dir(flag: str | None) -> Path:
    if flag:
        path = Path(flag).expanduser()
    elif env := os.environ.get(DATA_ENV):
        path = Path(env).expanduser()
    else:
        path = platformdirs.user_data_path("pixie", appauthor=False)
    if _SURROGATE.search(str(path)):
        # Bytes that are not UTF-8 reach Python as lone surrogates, which
        # pixie could neither print nor record.
        raise BadInput(f"the data dir path {str(path)!r:.80} is not valid UTF-8")
    if "\x00" in str(path):
        raise BadInput("the data dir path contains a NUL character")
    return path


_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class DataDir:
    path: Path

    @property
    def db_path(self) -> Path:
        return self.path / DB_NAME

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_NAME

    @classmethod
    def init(
        cls, path: Path, *, name: str | None, role: str, key_store: KeyStore | None = None
    ) -> DataDir:
        """Create a fresh data dir and this peer's identity key; all or nothing.

        The identity's private half goes to the key store, never to the data dir.
        """
        try:
            return cls._init(path, name=name, role=role, key_store=key_store)
        except OSError as exc:  # a name too long, a parent we may not write to
            raise DataDirError(
                f"cannot create a data dir at {path}: {exc.strerror or exc}"
            ) from None

    @classmethod
    def _init(
        cls, path: Path, *, name: str | None, role: str, key_store: KeyStore | None
    ) -> DataDir:
        if role not in ROLES:
            raise BadInput(f"unknown role {role!r} (device or homebase)")
        if path.exists() and not path.is_dir():
            raise DataDirError(f"{path} exists and is not a directory")
        if (path / DB_NAME).exists():
            raise DataDirError(f"{path} already holds a Pixie data dir")
        created_dir = not path.exists()
        partial = path / (DB_NAME + ".partial")
        keys = key_store or open_key_store()
        origin = uuid.uuid4().hex
        identity = new_identity()
        key_name = identity_key_name(origin)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            for stale in path.glob(DB_NAME + ".partial*"):
                stale.unlink()
            db = Database(partial, create=True)
            try:
                db.create_schema(MEMLOG_DDL + NOTEBOOK_DDL)
                with db.writing() as session:
                    session.add_all(
                        [
                            Meta(key="schema_version", value=str(SCHEMA_VERSION)),
                            Meta(key="origin", value=origin),
                            Meta(key="identity", value=bytes(identity.verify_key).hex()),
                            Meta(key="role", value=role),
                            Meta(key="name", value=name or role),
                            Meta(key="created_at", value=str(now_us())),
                        ]
                    )
            finally:
                db.dispose()
            keys.put(key_name, bytes(identity))
            if not (path / CONFIG_NAME).exists():
                (path / CONFIG_NAME).write_text(_CONFIG_TEMPLATE, encoding="utf-8")
            partial.replace(path / DB_NAME)
        except BaseException:
            keys.delete(key_name)
            for leftover in path.glob(DB_NAME + ".partial*"):
                leftover.unlink(missing_ok=True)
            if created_dir:
                shutil.rmtree(path, ignore_errors=True)
            raise
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> DataDir:
        try:
            return cls._open(path)
        except OSError as exc:  # a name too long, a directory we may not enter
            raise DataDirError(f"cannot open {path}: {exc.strerror or exc}") from None

    @classmethod
    def _open(cls, path: Path) -> DataDir:
        if not path.exists():
            raise DataDirError(f"no Pixie data dir at {path} (run `pixie init` first)")
        if not path.is_dir():
            raise DataDirError(f"{path} is not a directory")
        if not (path / DB_NAME).is_file():
            raise DataDirError(f"{path} is not an initialised Pixie data dir (no {DB_NAME})")
        return cls(path)
