"""Where a peer keeps its state, and how that place is created and checked.

The data dir comes from ``--data``, else ``PIXIE_DATA``, else the per-user data
directory platformdirs gives for this OS (``~/.local/share/pixie`` on Linux,
``~/Library/Application Support/pixie`` on a Mac). Keys do not live in it,
unless it was made to hold its own (``pixie init --keys-in-data``: see
`pixie.device.store.keystore`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from pixie.device.errors import BadInput, DataDirError
from pixie.protocol.validate import has_lone_surrogate

DATA_ENV = "PIXIE_DATA"
DB_NAME = "pixie.db"
CONFIG_NAME = "config.toml"
ROLES = ("device", "homebase")
_IDENTITY = re.compile(r"[0-9a-f]{64}")


def has_identity(meta: dict[str, str]) -> bool:
    """Whether a database's meta rows name this peer whole: an origin, a
    role, and a public key (64 hex digits)."""
    return (
        bool(meta.get("origin"))
        and meta.get("role") in ROLES
        and bool(_IDENTITY.fullmatch(str(meta.get("identity", ""))))
    )


def resolve_data_dir(flag: str | None) -> Path:
    if flag:
        path = Path(flag).expanduser()
    elif env := os.environ.get(DATA_ENV):
        path = Path(env).expanduser()
    else:
        path = platformdirs.user_data_path("pixie", appauthor=False)
    if has_lone_surrogate(str(path)):
        # Bytes that are not UTF-8 reach Python as lone surrogates, which
        # pixie could neither print nor record.
        raise BadInput(f"the data dir path {str(path)!r:.80} is not valid UTF-8")
    if "\x00" in str(path):
        raise BadInput("the data dir path contains a NUL character")
    return path


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
