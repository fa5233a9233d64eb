"""``pixie keys``: where the keys live, a passphrase-sealed backup, and moving a
data dir to new hardware without pairing again. Keys never reach the screen
or the backup in the clear; every refusal is one line, exit 2, and changes
nothing in the key store."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from pixie.device.node.keyed import Node
from pixie.device.notebook.sealed import seal_key_name
from pixie.device.store.keybackup import KeyBackup, open_backup, seal_backup
from pixie.device.store.keystore import FileKeyStore
from pixie.device.store.notes import SealedKind
from pixie.device.store.provision import identity_key_name
from tests.support.cli import CliResult, run_cli

PASSPHRASE = "correct horse battery staple"
FAST = ("--strength", "interactive")  # the moderate default takes ~1 s a derivation


@pytest.fixture
def phrase(tmp_path: Path) -> Path:
    path = tmp_path / "phrase.txt"
    path.write_text(PASSPHRASE + "\n")
    return path


def key_files() -> dict[str, bytes]:
    keys = Path(os.environ["PIXIE_KEYS"])
    return {p.name: p.read_bytes() for p in sorted(keys.glob("*.key"))} if keys.is_dir() else {}


def seal_something(data: Path) -> None:
    with Node.open(data) as node:
        node.notebook.record_sealed(SealedKind.HUDDLE_PREP, title="prep", body="the canary")


def test_init_and_status_say_where_the_keys_live(tmp_path: Path) -> None:
    data = tmp_path / "d"
    init = run_cli("--data", str(data), "init")
    assert init.code == 0, init.err
    assert f"keys: files in {os.environ['PIXIE_KEYS']} (mode 0600)" in init.out
    status = run_cli("--data", str(data), "status", "--json")
    assert status.json()["keys"].startswith("files in ")  # type: ignore[index]
    where = run_cli("--data", str(data), "keys", "where")
    assert "identity: present" in where.out and "Notebook seal: absent" in where.out


def test_a_data_dir_may_hold_its_own_keys_and_says_so_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "vault"
    init = run_cli("--data", str(data), "init", "--keys-in-data")
    assert init.code == 0, init.err
    own = data / "keys"
    assert f"keys: files in {own} (mode 0600)" in init.out
    (warning,) = init.err.splitlines()
    assert warning.startswith("pixie: warning: this data dir holds its own secret keys")
    assert key_files() == {}  # nothing left behind in the user's key folder
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    assert [stat.S_IMODE(p.stat().st_mode) for p in own.glob("*.key")] == [0o600]
    seal_something(data)  # the seal key is minted in the data dir's folder too
    assert len(list(own.glob("*.key"))) == 2 and key_files() == {}
    # The folder is whole: moved elsewhere, with the user's own key store
    # somewhere else again, it opens, says where its keys are, and unseals.
    moved = tmp_path / "moved"
    data.rename(moved)
    monkeypatch.setenv("PIXIE_KEYS", str(tmp_path / "elsewhere"))
    where = run_cli("--data", str(moved), "keys", "where")
    assert where.code == 0, where.err
    assert f"keys: files in {moved / 'keys'}" in where.out and "identity: present" in where.out
    status = run_cli("--data", str(moved), "status", "--json")
    assert status.json()["keys"] == f"files in {moved / 'keys'} (mode 0600)"  # type: ignore[index]
    with Node.open(moved) as node:
        assert bytes(node.identity().verify_key).hex() == node.db.meta()["identity"]
        (found,) = node.notebook.sealed_notes_for_huddle_reasoning()
        assert found.body == "the canary"


def test_by_default_no_keys_live_in_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert run_cli("--data", str(data), "init").code == 0
    assert not (data / "keys").exists() and len(key_files()) == 1


def test_export_then_import_on_new_hardware_restores_sync_and_the_sealed_zone(
    data_dir: Path, phrase: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seal_something(data_dir)
    before = key_files()
    backup = tmp_path / "keys.pixie"
    out = run_cli(
        "--data", str(data_dir), "keys", "export", str(backup), "--passphrase-file", str(phrase),
        *FAST,
    )  # fmt: skip
    assert out.code == 0, out.err
    assert "exported 2 keys (identity, Notebook seal)" in out.out
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    text = backup.read_text()
    for key in before.values():  # neither a key nor its base64 is in the file
        assert key.strip().decode() not in text
        assert base64.b64decode(key).hex() not in text

    # The data dir copied to a machine whose key store is empty.
    monkeypatch.setenv("PIXIE_KEYS", str(tmp_path / "new-machine-keys"))
    assert key_files() == {}
    lost = run_cli("--data", str(data_dir), "keys", "where")
    assert "identity: absent" in lost.out
    back = run_cli(
        "--data", str(data_dir), "keys", "import", str(backup), "--passphrase-file", str(phrase)
    )
    assert back.code == 0, back.err
    assert "imported 2 keys (identity, Notebook seal)" in back.out
    assert key_files() == before
    with Node.open(data_dir) as node:
        node.identity()  # the data dir's own identity again
        (note,) = node.notebook.sealed_notes_for_huddle_reasoning()
        assert note.body == "the canary"
    again = run_cli(
        "--data", str(data_dir), "keys", "import", str(backup), "--passphrase-file", str(phrase)
    )
    assert again.code == 0 and "imported 0 keys (none), 2 already present" in again.out


def export(data: Path, phrase: Path, target: Path) -> None:
    done = run_cli(
        "--data", str(data), "keys", "export", str(target), "--passphrase-file", str(phrase), *FAST
    )
    assert done.code == 0, done.err


def refused(data: Path, backup: Path, phrase: Path, message: str) -> None:
    before = key_files()
    out = run_cli(
        "--data", str(data), "keys", "import", str(backup), "--passphrase-file", str(phrase)
    )
    assert out.code == 2, out.out
    assert message in out.err and len(out.err.strip().splitlines()) == 1, out.err
    assert "Traceback" not in out.err
    assert key_files() == before


def test_a_wrong_passphrase_or_a_damaged_file_is_refused(
    data_dir: Path, phrase: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "keys.pixie"
    export(data_dir, phrase, backup)
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("not the passphrase at all\n")
    refused(data_dir, backup, wrong, "wrong passphrase, or the backup is damaged")

    doc = json.loads(backup.read_text())
    sealed = bytearray(base64.b64decode(doc["ciphertext"]))
    sealed[5] ^= 1
    doc["ciphertext"] = base64.b64encode(bytes(sealed)).decode()
    flipped = tmp_path / "flipped.pixie"
    flipped.write_text(json.dumps(doc))
    refused(data_dir, flipped, phrase, "wrong passphrase, or the backup is damaged")

    # The KDF's parameters are bound to the seal: weakening them breaks it.
    doc = json.loads(backup.read_text())
    doc["header"]["opslimit"] += 1
    weakened = tmp_path / "weakened.pixie"
    weakened.write_text(json.dumps(doc))
    refused(data_dir, weakened, phrase, "wrong passphrase, or the backup is damaged")

    doc["header"]["memlimit"] = 1 << 40  # a hostile file may not make us spend 1 TiB
    hostile = tmp_path / "hostile.pixie"
    hostile.write_text(json.dumps(doc))
    refused(data_dir, hostile, phrase, "key derivation limits out of range")

    junk = tmp_path / "junk.pixie"
    junk.write_bytes(b"\x00\xffnot json")
    refused(data_dir, junk, phrase, "junk.pixie is not UTF-8 text")
    junk.write_text("not json")
    refused(data_dir, junk, phrase, "junk.pixie: not a Pixie key backup (not JSON)")
    other = tmp_path / "other.json"
    other.write_text('{"header": {"format": "something-else"}}')
    refused(data_dir, other, phrase, "other.json: not a Pixie key backup")
    refused(data_dir, tmp_path / "missing.pixie", phrase, "cannot read")


def test_a_backup_of_another_data_dir_is_refused(
    data_dir: Path, phrase: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    assert run_cli("--data", str(other), "init").code == 0
    backup = tmp_path / "other.pixie"
    export(other, phrase, backup)
    refused(data_dir, backup, phrase, "holds the keys of another data dir")


def test_a_store_holding_a_different_key_is_left_alone(
    data_dir: Path, phrase: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "keys.pixie"
    seal_something(data_dir)
    export(data_dir, phrase, backup)
    with Node.open(data_dir) as node:
        origin = node.origin
    store = FileKeyStore(Path(os.environ["PIXIE_KEYS"]))
    store.put(seal_key_name(origin), bytes(32))  # not the key the Notebook was sealed with
    refused(data_dir, backup, phrase, "already holds a different key")


def test_a_forged_backup_with_a_foreign_seal_key_is_refused(
    data_dir: Path, phrase: Path, tmp_path: Path
) -> None:
    seal_something(data_dir)
    with Node.open(data_dir) as node:
        origin, identity = node.origin, node.db.meta()["identity"]
    store = FileKeyStore(Path(os.environ["PIXIE_KEYS"]))
    seed = store.get(identity_key_name(origin))
    assert seed is not None
    forged = KeyBackup(
        origin, identity, {identity_key_name(origin): seed, seal_key_name(origin): bytes(32)}
    )
    path = tmp_path / "forged.pixie"
    path.write_bytes(seal_backup(forged, PASSPHRASE, strength="interactive"))
    store.delete(seal_key_name(origin))
    refused(data_dir, path, phrase, "Notebook seal key is not the one this Notebook uses")


def test_export_refuses_weak_passphrases_existing_files_and_a_missing_terminal(
    data_dir: Path, tmp_path: Path
) -> None:
    short = tmp_path / "short.txt"
    short.write_text("hunter2\n")
    target = tmp_path / "keys.pixie"
    out = run_cli(
        "--data", str(data_dir), "keys", "export", str(target), "--passphrase-file", str(short)
    )
    assert out.code == 2 and "at least 10 characters" in out.err
    assert not target.exists()
    target.write_text("precious")
    good = tmp_path / "good.txt"
    good.write_text(PASSPHRASE)
    out = run_cli(
        "--data", str(data_dir), "keys", "export", str(target), "--passphrase-file", str(good)
    )
    assert out.code == 2 and "exists (give --force" in out.err
    assert target.read_text() == "precious"
    out = run_cli("--data", str(data_dir), "keys", "export", str(tmp_path / "k"), stdin=b"x\n")
    assert out.code == 2 and "no terminal" in out.err


def test_the_backup_round_trips_and_never_prints_a_key() -> None:
    backup = KeyBackup("o" * 32, "ab" * 32, {"o-identity": b"\x01" * 32})
    sealed = seal_backup(backup, PASSPHRASE, strength="interactive")
    assert open_backup(sealed, PASSPHRASE) == backup
    assert "\\x01" not in repr(backup) and "01010101" not in repr(backup)


def test_export_with_force_replaces_only_a_regular_file_and_removes_nothing_else(
    data_dir: Path, tmp_path: Path
) -> None:
    """--force renamed over whatever FILE was (a device became a regular
    file) and removed a `.FILE.partial` it had not made."""
    good = tmp_path / "good.txt"
    good.write_text(PASSPHRASE)

    def export(target: Path) -> CliResult:
        return run_cli(
            "--data", str(data_dir), "keys", "export", str(target),
            "--passphrase-file", str(good), "--strength", "interactive", "--force",
        )  # fmt: skip

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    for target in (fifo, folder, link):
        out = export(target)
        assert out.code == 2 and "is not a regular file" in out.err, out.err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and folder.is_dir() and link.is_symlink()
    assert not (tmp_path / "elsewhere").exists()
    if Path("/dev/null").exists():  # a device, as the attack used /dev/full
        out = export(Path("/dev/null"))
        assert out.code == 2 and "is not a regular file" in out.err
        assert stat.S_ISCHR(Path("/dev/null").lstat().st_mode)
    # A regular file is replaced; a partial file someone else left stays.
    target = tmp_path / "keys.pixie"
    target.write_text("old backup")
    theirs = tmp_path / ".keys.pixie.partial"
    theirs.write_text("not ours")
    out = export(target)
    assert out.code == 0, out.err
    assert target.read_bytes() != b"old backup" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert theirs.read_text() == "not ours"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".keys")) == [
        ".keys.pixie.partial"
    ]
