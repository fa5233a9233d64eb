"""``pixie keys``: where this peer's keys live, and a passphrase-sealed backup of them.

    pixie keys where
    pixie keys export FILE [--passphrase-file F] [--strength S] [--force]
    pixie keys import FILE [--passphrase-file F]

The keys never appear on screen, in a log or in an error; the backup file is
sealed (see `pixie.device.store.keybackup`) and written with mode 0600. An
import checks that the backup belongs to this data dir (its origin, and its
identity against the public half the data dir records; the seal key against
the fingerprint the Notebook records) and writes nothing unless every key
fits: a key the store already holds with other bytes is refused, not replaced.
"""

from __future__ import annotations

import argparse
import getpass
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from pixie.device.cli.common import data_path, emit_json, json_flag, read_small_text
from pixie.device.cli.nodes import open_node
from pixie.device.errors import BadInput, DeviceError
from pixie.device.notebook.seal import key_fingerprint
from pixie.device.notebook.sealed import SEAL_FINGERPRINT_KEY, seal_key_name
from pixie.device.store.keybackup import (
    DEFAULT_STRENGTH,
    MAX_FILE_BYTES,
    STRENGTHS,
    KeyBackup,
    check_passphrase,
    open_backup,
    seal_backup,
)
from pixie.device.store.keystore import KeyStore, describe_key_store, open_key_store
from pixie.device.store.provision import identity_key_name
from pixie.protocol.identity import identity_from_seed

MAX_PASSPHRASE_FILE_BYTES = 4096


def _labels(origin: str) -> dict[str, str]:
    return {identity_key_name(origin): "identity", seal_key_name(origin): "Notebook seal"}


def _passphrase(args: argparse.Namespace, *, confirm: bool) -> str:
    """From --passphrase-file (its first line), else asked on the terminal."""
    if args.passphrase_file is not None:
        path = Path(args.passphrase_file)
        first = read_small_text(path, MAX_PASSPHRASE_FILE_BYTES, str(path)).splitlines()
        if not first or not first[0]:
            raise BadInput(f"{path}: the first line (the passphrase) is empty")
        return first[0]
    if not sys.stdin.isatty():
        raise BadInput("no terminal to ask for the passphrase on: give --passphrase-file")
    passphrase = getpass.getpass("Passphrase: ")
    if confirm:
        check_passphrase(passphrase)
        if getpass.getpass("Passphrase again: ") != passphrase:
            raise BadInput("the two passphrases differ")
    return passphrase


def cmd_keys_where(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        origin = node.origin
    store = open_key_store(data_path(args))
    present = {label: store.get(name) is not None for name, label in _labels(origin).items()}
    where = describe_key_store(store)
    if args.json:
        emit_json({"key_store": where, "present": present})
    else:
        print(f"keys: {where}")
        for label, here in present.items():
            print(f"  {label}: {'present' if here else 'absent'}")
    return 0


def cmd_keys_export(args: argparse.Namespace) -> int:
    target = Path(args.file)
    if target.exists() or target.is_symlink():
        if not args.force:
            raise BadInput(f"{target} exists (give --force to replace it)")
        _check_replaceable(target)
    if not target.parent.is_dir():
        raise BadInput(f"{target.parent} is not a directory")
    with open_node(args) as node:
        origin = node.origin
        identity = node.db.meta().get("identity", "")
    store = open_key_store(data_path(args))
    keys: dict[str, bytes] = {}
    for name in _labels(origin):
        value = store.get(name)
        if value is not None:
            keys[name] = value
    if identity_key_name(origin) not in keys:
        raise DeviceError("this peer's identity key is not in the key store: nothing to back up")
    passphrase = _passphrase(args, confirm=True)
    data = seal_backup(KeyBackup(origin, identity, keys), passphrase, strength=args.strength)
    _write_private(target, data)
    labels = [_labels(origin)[n] for n in keys]
    if args.json:
        emit_json({"file": str(target), "keys": labels})
    else:
        print(f"exported {len(keys)} key{'s' if len(keys) != 1 else ''} ({', '.join(labels)})")
        print(f"to {target}; without its passphrase the file opens nothing")
    return 0


def cmd_keys_import(args: argparse.Namespace) -> int:
    source = Path(args.file)
    data = read_small_text(source, MAX_FILE_BYTES, str(source)).encode()
    with open_node(args) as node:
        origin = node.origin
        meta = node.db.meta()
    passphrase = _passphrase(args, confirm=False)
    backup = open_backup(data, passphrase, name=source.name)
    if backup.origin != origin:
        raise BadInput(
            f"{source.name} holds the keys of another data dir"
            f" (origin {backup.origin[:8]}, this one is {origin[:8]})"
        )
    _check(backup, meta)
    store = open_key_store(data_path(args))
    added = _put_all(store, backup.keys)
    labels = _labels(origin)
    if args.json:
        emit_json(
            {
                "imported": [labels.get(n, n) for n in added],
                "key_store": describe_key_store(store),
            }
        )
    else:
        kept = len(backup.keys) - len(added)
        names = ", ".join(labels.get(n, n) for n in added) or "none"
        print(f"imported {len(added)} key{'s' if len(added) != 1 else ''} ({names})", end="")
        print(f", {kept} already present" if kept else "")
        print(f"keys: {describe_key_store(store)}")
    return 0


def _check(backup: KeyBackup, meta: dict[str, str]) -> None:
    origin = backup.origin
    seed = backup.keys.get(identity_key_name(origin))
    if seed is None:
        raise BadInput("the backup holds no identity key")
    try:
        public = bytes(identity_from_seed(seed).verify_key).hex()
    except (ValueError, TypeError):  # a seed of the wrong size
        raise BadInput("the backup's identity key is damaged") from None
    if public != meta.get("identity") or public != backup.identity:
        raise BadInput("the backup's identity is not this data dir's identity")
    seal = backup.keys.get(seal_key_name(origin))
    recorded = meta.get(SEAL_FINGERPRINT_KEY)
    if seal is not None and recorded is not None and key_fingerprint(seal) != recorded:
        raise BadInput("the backup's Notebook seal key is not the one this Notebook uses")
    unknown = set(backup.keys) - set(_labels(origin))
    if unknown:
        raise BadInput("the backup holds keys this version does not know")


def _put_all(store: KeyStore, keys: dict[str, bytes]) -> list[str]:
    """Put every key not present; all or nothing. Returns the names put."""
    missing: list[str] = []
    for name, value in keys.items():
        have = store.get(name)
        if have is None:
            missing.append(name)
        elif have != value:
            raise BadInput(
                "the key store already holds a different key for this data dir; nothing was changed"
            )
    done: list[str] = []
    try:
        for name in missing:
            store.put(name, keys[name])
            done.append(name)
    except BaseException:
        for name in done:
            store.delete(name)
        raise
    return done


def _write_private(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` with mode 0600, whole or not at all.

    Written to a temporary file of a fresh random name beside it (created
    with O_EXCL, so it is ours), synced, then renamed over ``target``. Only
    a regular file is ever replaced: a device, a pipe, a folder or a symbolic
    link at ``target`` is refused, --force or not. Nothing is removed but
    the temporary file this call created."""
    _check_replaceable(target)
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    except OSError as exc:
        raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _check_replaceable(target)  # again: it may have changed meanwhile
        tmp.replace(target)
        _sync_folder(target.parent)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None
        raise


def _check_replaceable(target: Path) -> None:
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise BadInput(f"{target} is not a regular file: refusing to replace it")


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: not every system lets a folder
    be opened for that)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``keys where``, ``keys export`` and ``keys import``."""
    keys = sub.add_parser("keys", parents=[common], help="where the keys live; back them up")
    keysub = keys.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = keysub.add_parser("where", parents=[common], help="where this peer's keys are kept")
    json_flag(p)
    p.set_defaults(func=cmd_keys_where)

    p = keysub.add_parser(
        "export", parents=[common], help="write the keys to FILE, sealed under a passphrase"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--passphrase-file", metavar="F", help="read the passphrase from F's first line")
    p.add_argument(
        "--strength",
        choices=list(STRENGTHS),
        default=DEFAULT_STRENGTH,
        help=f"how hard the passphrase is stretched (Argon2id; default {DEFAULT_STRENGTH})",
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    json_flag(p)
    p.set_defaults(func=cmd_keys_export)

    p = keysub.add_parser(
        "import", parents=[common], help="restore this data dir's keys from a backup FILE"
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--passphrase-file", metavar="F", help="read the passphrase from F's first line")
    json_flag(p)
    p.set_defaults(func=cmd_keys_import)
