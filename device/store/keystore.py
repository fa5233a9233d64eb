"""Where secret keys live: the system keychain, or a 0600 file apart from the data.

On a Mac (the Homebase) or a desktop with a keyring service, keys go to the
system keychain through `keyring`. Where no real keyring backend exists (a
headless Linux box, CI), each key is a 0600 file in a 0700 directory that is
*not* inside the data dir, so copying or backing up the data dir never copies
a key. Keys are never printed, logged, exported or synced; this module never
puts one in an exception message either.

Choose with ``PIXIE_KEYSTORE`` (``auto``, the default; ``keyring``; ``file``)
and place file keys with ``PIXIE_KEYS`` (default: the per-user config dir).

A data dir may hold its own keys instead (``pixie init --keys-in-data``): a
test vault, or a setup carried on a stick. They are then 0600 files in its
``keys`` folder, and that choice is the data dir's own: whoever opens the
folder uses its keys, whatever ``PIXIE_KEYSTORE`` says, and whoever copies
the folder copies its keys.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
from pathlib import Path
from typing import Protocol

import platformdirs

from pixie.device.errors import DeviceError

KEYSTORE_ENV = "PIXIE_KEYSTORE"
KEYS_ENV = "PIXIE_KEYS"
DATA_KEYS_DIR = "keys"  # a data dir's own key folder (``pixie init --keys-in-data``)
SERVICE = "pixie-memory"


class KeyStoreError(DeviceError):
    """The key store cannot be used (missing, unsafe permissions, unreadable)."""


class KeyStore(Protocol):
    def get(self, name: str) -> bytes | None: ...
    def put(self, name: str, key: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


class FileKeyStore:
    """One file per key, mode 0600, in a 0700 directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def describe(self) -> str:
        return f"files in {self.directory} (mode 0600)"

    def _path(self, name: str) -> Path:
        if not name.replace("-", "").replace(".", "").isalnum():
            raise KeyStoreError("bad key name")
        return self.directory / f"{name}.key"

    def get(self, name: str) -> bytes | None:
        path = self._path(name)
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise KeyStoreError(f"refusing key file {path}: readable by others (chmod 600 it)")
        try:
            return base64.b64decode(path.read_bytes(), validate=True)
        except ValueError:
            raise KeyStoreError(f"key file {path} is damaged") from None

    def put(self, name: str, key: bytes) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(name)
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        # O_EXCL with 0600 from the start: the key is never readable by others.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, base64.b64encode(key))
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def delete(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)


class KeyringKeyStore:
    """The system keychain via `keyring` (macOS Keychain, Secret Service, ...)."""

    def describe(self) -> str:
        import keyring

        backend = type(keyring.get_keyring()).__name__
        return f"the system keychain (service {SERVICE!r}, {backend})"

    def get(self, name: str) -> bytes | None:
        import keyring

        value = keyring.get_password(SERVICE, name)
        return None if value is None else base64.b64decode(value)

    def put(self, name: str, key: bytes) -> None:
        import keyring

        keyring.set_password(SERVICE, name, base64.b64encode(key).decode())

    def delete(self, name: str) -> None:
        import keyring
        import keyring.errors

        with contextlib.suppress(keyring.errors.PasswordDeleteError):
            keyring.delete_password(SERVICE, name)


def _real_keyring_available() -> bool:
    try:
        import keyring
        from keyring.backends import chainer, fail

        backend = keyring.get_keyring()
    except Exception:  # a broken keyring install means: no keyring
        return False
    if isinstance(backend, fail.Keyring):
        return False
    if isinstance(backend, chainer.ChainerBackend):
        return bool(backend.backends)
    return float(getattr(backend, "priority", 0)) >= 1


def describe_key_store(store: KeyStore) -> str:
    """Where ``store`` keeps keys, for a person: never a key itself."""
    describe = getattr(store, "describe", None)
    return str(describe()) if callable(describe) else type(store).__name__


def default_key_dir() -> Path:
    env = os.environ.get(KEYS_ENV)
    if env:
        return Path(env).expanduser()
    return platformdirs.user_config_path("pixie", appauthor=False) / "keys"


def data_keys(data: Path) -> FileKeyStore | None:
    """The key store of a data dir that holds its own keys, else None."""
    folder = data / DATA_KEYS_DIR
    return FileKeyStore(folder) if folder.is_dir() else None


def open_key_store(data: Path | None = None) -> KeyStore:
    """The key store for the data dir ``data``: its own keys if it holds
    them, else the one ``PIXIE_KEYSTORE`` chooses."""
    if data is not None and (own := data_keys(data)) is not None:
        return own
    choice = os.environ.get(KEYSTORE_ENV, "auto")
    if choice == "file":
        return FileKeyStore(default_key_dir())
    if choice == "keyring":
        if not _real_keyring_available():
            raise KeyStoreError("PIXIE_KEYSTORE=keyring but no system keyring is available")
        return KeyringKeyStore()
    if choice != "auto":
        raise KeyStoreError(f"{KEYSTORE_ENV} must be auto, keyring or file")
    return KeyringKeyStore() if _real_keyring_available() else FileKeyStore(default_key_dir())
