"""A backup of a peer's secret keys: one file, encrypted under a passphrase.

The keys (the identity, and the Notebook's seal key once the sealed zone has
been used) live only in the key store, never in the data dir, so a data dir
copied to new hardware opens but cannot sync or read its sealed notes. A key
backup carries them across: `seal_backup` writes them under a key stretched
from a passphrase, `open_backup` reads them back.

The format is JSON so a person can see what the file is::

    {"header": {"format": "pixie-keys", "version": 1, "kdf": "argon2id",
                "opslimit": 3, "memlimit": 268435456, "salt": "<base64>"},
     "nonce": "<base64>", "ciphertext": "<base64>"}

The key comes from the passphrase through Argon2id (libsodium's, through
PyNaCl, which the wire already uses: memory-hard, the current recommendation
for passwords), the plaintext is sealed with XChaCha20-Poly1305 (an AEAD with
a random 192-bit nonce) and the header is its associated data, so changing
the KDF's parameters or salt breaks the seal rather than weakening it. The
plaintext (JSON) names the data dir's origin and identity, so a backup is
never applied to the wrong data dir. A file from elsewhere cannot make this
code spend unbounded memory or time: its KDF limits are checked against
libsodium's "sensitive" ceiling before anything is derived.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

import nacl.bindings
import nacl.exceptions
import nacl.pwhash

from pixie.device.errors import BadInput
from pixie.protocol.clock import SYSTEM_ENTROPY, Entropy

FORMAT = "pixie-keys"
VERSION = 1
MAX_FILE_BYTES = 64 * 1024
MIN_PASSPHRASE_CHARS = 10
MAX_PASSPHRASE_BYTES = 1024
MAX_KEYS = 16
MAX_KEY_BYTES = 256

_ARGON = nacl.pwhash.argon2id
# name -> (opslimit, memlimit): libsodium's three published settings.
STRENGTHS: dict[str, tuple[int, int]] = {
    "interactive": (_ARGON.OPSLIMIT_INTERACTIVE, _ARGON.MEMLIMIT_INTERACTIVE),
    "moderate": (_ARGON.OPSLIMIT_MODERATE, _ARGON.MEMLIMIT_MODERATE),
    "sensitive": (_ARGON.OPSLIMIT_SENSITIVE, _ARGON.MEMLIMIT_SENSITIVE),
}
DEFAULT_STRENGTH = "moderate"
_SALT_BYTES = _ARGON.SALTBYTES
_NONCE_BYTES = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
_KEY_BYTES = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_KEYBYTES


@dataclass(frozen=True)
class KeyBackup:
    """What a backup holds: whose keys (the data dir's origin and identity's
    public half, hex) and the keys by their key-store name."""

    origin: str
    identity: str
    keys: dict[str, bytes]

    def __repr__(self) -> str:  # never a key in a log line or a traceback
        return f"KeyBackup(origin={self.origin!r}, keys={sorted(self.keys)!r})"


def check_passphrase(passphrase: str) -> bytes:
    """The passphrase as bytes, refused if it is too short to protect keys."""
    if len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise BadInput(f"the passphrase must be at least {MIN_PASSPHRASE_CHARS} characters")
    raw = passphrase.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PASSPHRASE_BYTES:
        raise BadInput(f"the passphrase must be at most {MAX_PASSPHRASE_BYTES} bytes")
    return raw


def seal_backup(
    backup: KeyBackup,
    passphrase: str,
    *,
    strength: str = DEFAULT_STRENGTH,
    entropy: Entropy = SYSTEM_ENTROPY,
) -> bytes:
    """The backup file's bytes: ``backup`` sealed under ``passphrase``."""
    if strength not in STRENGTHS:
        raise BadInput(f"unknown strength {strength!r} (one of {', '.join(STRENGTHS)})")
    secret = check_passphrase(passphrase)
    opslimit, memlimit = STRENGTHS[strength]
    salt = entropy.token_bytes(_SALT_BYTES)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "kdf": "argon2id",
        "opslimit": opslimit,
        "memlimit": memlimit,
        "salt": _b64(salt),
    }
    key = _ARGON.kdf(_KEY_BYTES, secret, salt, opslimit=opslimit, memlimit=memlimit)
    plain = json.dumps(
        {
            "origin": backup.origin,
            "identity": backup.identity,
            "keys": {name: _b64(value) for name, value in sorted(backup.keys.items())},
        },
        sort_keys=True,
    ).encode()
    nonce = entropy.token_bytes(_NONCE_BYTES)
    sealed = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plain, _aad(header), nonce, key
    )
    document = {"header": header, "nonce": _b64(nonce), "ciphertext": _b64(sealed)}
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def open_backup(data: bytes, passphrase: str, *, name: str = "the backup") -> KeyBackup:
    """The keys in a backup file's bytes; `BadInput` naming ``name`` for a file
    that is not one, is damaged, or was sealed under another passphrase."""
    if len(data) > MAX_FILE_BYTES:
        raise BadInput(f"{name}: larger than any key backup ({MAX_FILE_BYTES // 1024} KiB)")
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput(f"{name}: not a Pixie key backup (not JSON)") from None
    header = _field(document, "header", dict, name)
    if header.get("format") != FORMAT:
        raise BadInput(f"{name}: not a Pixie key backup")
    if header.get("version") != VERSION or header.get("kdf") != "argon2id":
        raise BadInput(f"{name}: a key backup of a format this version cannot read")
    opslimit = _field(header, "opslimit", int, name)
    memlimit = _field(header, "memlimit", int, name)
    ceiling_ops, ceiling_mem = STRENGTHS["sensitive"]
    floor_ops, floor_mem = STRENGTHS["interactive"]
    if not (floor_ops <= opslimit <= ceiling_ops and floor_mem <= memlimit <= ceiling_mem):
        raise BadInput(f"{name}: key derivation limits out of range")
    salt = _bytes(header, "salt", name, _SALT_BYTES)
    nonce = _bytes(document, "nonce", name, _NONCE_BYTES)
    sealed = _bytes(document, "ciphertext", name, None)
    secret = passphrase.encode("utf-8", "surrogatepass")
    if not secret or len(secret) > MAX_PASSPHRASE_BYTES:
        raise BadInput("wrong passphrase, or the backup is damaged")
    key = _ARGON.kdf(_KEY_BYTES, secret, salt, opslimit=opslimit, memlimit=memlimit)
    try:
        plain = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            sealed, _aad(header), nonce, key
        )
    except nacl.exceptions.CryptoError:
        raise BadInput("wrong passphrase, or the backup is damaged") from None
    try:
        inner = json.loads(plain)
        origin = _field(inner, "origin", str, name)
        identity = _field(inner, "identity", str, name)
        keys = _field(inner, "keys", dict, name)
        if not 0 < len(keys) <= MAX_KEYS:
            raise BadInput(f"{name}: holds no keys, or too many")
        decoded = {str(k): _bytes(keys, k, name, None) for k in keys}
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput(f"{name}: damaged inside") from None
    if any(not 0 < len(v) <= MAX_KEY_BYTES for v in decoded.values()):
        raise BadInput(f"{name}: a key of an impossible size")
    return KeyBackup(origin, identity, decoded)


def _aad(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _field(obj: object, key: str, kind: type, name: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadInput(f"{name}: not a Pixie key backup ({key!r} missing or malformed)")
    return value


def _bytes(obj: dict[str, Any], key: str, name: str, size: int | None) -> bytes:
    text = _field(obj, key, str, name)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{name}: not a Pixie key backup ({key!r} is not base64)") from None
    if size is not None and len(raw) != size:
        raise BadInput(f"{name}: not a Pixie key backup ({key!r} has the wrong length)")
    return raw


__all__ = [
    "DEFAULT_STRENGTH",
    "MAX_FILE_BYTES",
    "STRENGTHS",
    "KeyBackup",
    "check_passphrase",
    "open_backup",
    "seal_backup",
]
