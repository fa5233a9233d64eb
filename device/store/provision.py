"""Creating a data dir: the database, its identity, and the identity key.

Kept apart from `datadir` so that opening a data dir, which chat, MCP and
distillation do, needs nothing that can reach the key store.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from sqlalchemy import bindparam, insert

from pixie.device.errors import BadInput, DataDirError
from pixie.device.store.datadir import CONFIG_NAME, DB_NAME, ROLES, DataDir
from pixie.device.store.db import Database, Meta, driver_sql
from pixie.device.store.holdings import Holding  # noqa: F401  (its tables are created here too)
from pixie.device.store.itemindex import ITEM_INDEX_DDL
from pixie.device.store.keystore import KeyStore, open_key_store
from pixie.device.store.marks import DistillMark  # noqa: F401  (its table is created here too)
from pixie.device.store.meanings import MEANINGS_DDL
from pixie.device.store.memlog import MEMLOG_DDL
from pixie.device.store.notetable import NOTEBOOK_DDL
from pixie.device.store.siblings import Sibling  # noqa: F401  (its tables are created here too)
from pixie.device.store.version import SCHEMA_VERSION
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy, is_system
from pixie.protocol.identity import identity_from_seed, new_identity

_CONFIG_TEMPLATE = """\
# Pixie Memory settings for this data dir. Flags and PIXIE_* environment
# variables override what is written here. Secrets never belong in this file.
"""


def identity_key_name(origin: str) -> str:
    return f"{origin}-identity"


def create_data_dir(
    path: Path,
    *,
    name: str | None,
    role: str,
    key_store: KeyStore | None = None,
    clock: Clock = SYSTEM_CLOCK,
    entropy: Entropy = SYSTEM_ENTROPY,
) -> DataDir:
    """Create a fresh data dir and this peer's identity key; all or nothing.

    The identity's private half goes to the key store, never to the data dir.
    The origin is drawn from ``entropy`` and the creation time read from
    ``clock``; the identity key is libsodium's own unless ``entropy`` is not
    the system's, which then gives the key's seed (a seeded data dir is the
    same data dir every time).
    """
    try:
        return _create(
            path, name=name, role=role, key_store=key_store, clock=clock, entropy=entropy
        )
    except OSError as exc:  # a name too long, a parent we may not write to
        raise DataDirError(f"cannot create a data dir at {path}: {exc.strerror or exc}") from None


_META_INSERT_SQL = driver_sql(insert(Meta).values(key=bindparam("key"), value=bindparam("value")))


def _create(
    path: Path,
    *,
    name: str | None,
    role: str,
    key_store: KeyStore | None,
    clock: Clock,
    entropy: Entropy,
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
    origin = uuid.UUID(bytes=entropy.token_bytes(16), version=4).hex
    identity = new_identity() if is_system(entropy) else identity_from_seed(entropy.token_bytes(32))
    key_name = identity_key_name(origin)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in path.glob(DB_NAME + ".partial*"):
            stale.unlink()
        db = Database(partial, create=True)
        try:
            db.create_schema(MEMLOG_DDL + NOTEBOOK_DDL + MEANINGS_DDL + ITEM_INDEX_DDL)
            facts = [
                ("schema_version", str(SCHEMA_VERSION)),
                ("origin", origin),
                ("identity", bytes(identity.verify_key).hex()),
                ("role", role),
                ("name", name or role),
                ("created_at", str(clock.now_us())),
            ]
            with db.writing() as session:
                # One statement for the six rows (the ORM's unit of work cost
                # more than the rest of creating the database).
                session.connection().exec_driver_sql(_META_INSERT_SQL, facts)
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
    return DataDir(path)


__all__ = ["create_data_dir", "identity_key_name"]
