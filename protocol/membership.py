"""An account's members: signed records of who joined and who was removed.

An account is its peers: a phone, a laptop, a Homebase, each with an identity
key. Pairing two of them is a conversation between those two; everyone else
learns of it from a membership record that one of them signs and writes into
its memory log, which syncs like any other event (insert-if-absent, digests,
repair). A sibling that was away at pairing time learns the new peer at its
next sync, from whichever sibling it meets.

A record says "add" or "remove" one key (with the name, role and relay it
goes by), when (microseconds, the signer's clock) and who signs it. Its id is
derived from its bytes, so one record written on two peers is one event.

What the records mean is `members`, a function of the set of records alone,
so every peer holding the same records agrees:

- records are taken in order of (time, id);
- an "add" counts if its signer is a member at that point, or adds itself
  (the founders of an account written before records existed);
- a "remove" counts if its signer is a member at that point; the key removed
  is out for good: no later record adds it again or counts when it signs.

A record whose signature fails, or that does not decode within its bounds,
counts for nothing. What a removed peer already holds stays with it; it
cannot sync with any member again (each refuses its envelopes from the sync
at which it learns of the removal on).

Sans-IO: bytes and keys in, records and a member set out.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgpack
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey

from .errors import ProtocolError
from .identity import PUBLIC_KEY_BYTES, verify_key
from .ids import id_text

PREFIX = "pixie-membership:"
ADD = "add"
REMOVE = "remove"
ACTIONS = (ADD, REMOVE)
MAX_NAME_CHARS = 200  # as the sibling table holds
MAX_ROLE_CHARS = 16
MAX_RELAY_CHARS = 300
MAX_RECORD_CHARS = 2_048  # of the event text: the record, base64
_SIGNATURE_BYTES = 64
_CONTEXT = b"pixie membership record v1\x00"


@dataclass(frozen=True, slots=True)
class Record:
    action: str  # ADD or REMOVE
    key: bytes  # the member's identity key
    name: str
    role: str
    relay: str
    at: int  # microseconds, the signer's clock
    signer: bytes
    signature: bytes = b""

    def body(self) -> bytes:
        """The bytes the signature covers."""
        fields = [self.action, self.key, self.name, self.role, self.relay, self.at, self.signer]
        packed: bytes = msgpack.packb(fields, use_bin_type=True)
        return _CONTEXT + packed

    def text(self) -> str:
        """The record as an event's text."""
        packed = msgpack.packb(
            [
                self.action,
                self.key,
                self.name,
                self.role,
                self.relay,
                self.at,
                self.signer,
                self.signature,
            ],
            use_bin_type=True,
        )
        return PREFIX + base64.b64encode(packed).decode("ascii")

    @property
    def id(self) -> str:
        """The event id of this record: from a digest of its text."""
        raw = bytearray(hashlib.sha256(self.text().encode("ascii")).digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x80  # version 8: a custom id
        raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 9562 variant
        return id_text(bytes(raw))


def sign(
    identity: SigningKey,
    action: str,
    key: bytes,
    *,
    name: str,
    role: str,
    relay: str,
    at: int,
) -> Record:
    """A record of ``action`` on ``key``, signed by ``identity``."""
    unsigned = Record(action, key, name, role, relay, at, bytes(identity.verify_key))
    _check(unsigned)
    return Record(
        action,
        key,
        name,
        role,
        relay,
        at,
        unsigned.signer,
        identity.sign(unsigned.body()).signature,
    )


def decode(text: str) -> Record:
    """The record an event's text holds, its signature checked; raises
    `ProtocolError` for anything else."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise ProtocolError("not a membership record")
    if len(text) > MAX_RECORD_CHARS:
        raise ProtocolError("membership record too long")
    try:
        raw = base64.b64decode(text[len(PREFIX) :].encode("ascii"), validate=True)
        fields = msgpack.unpackb(raw, raw=False, strict_map_key=True, max_bin_len=256)
    except Exception:  # binascii, msgpack and unicode errors alike: it is not a record
        raise ProtocolError("membership record does not decode") from None
    if not isinstance(fields, list) or len(fields) != 8:
        raise ProtocolError("membership record has the wrong shape")
    action, key, name, role, relay, at, signer, signature = fields
    if not (
        isinstance(key, bytes)
        and isinstance(signer, bytes)
        and isinstance(signature, bytes)
        and len(signature) == _SIGNATURE_BYTES
    ):
        raise ProtocolError("membership record has the wrong shape")
    record = Record(action, key, name, role, relay, at, signer, signature)
    _check(record)
    try:
        verify_key(signer).verify(record.body(), signature)
    except BadSignatureError:
        raise ProtocolError("membership record signature does not verify") from None
    return record


def _check(record: Record) -> None:
    if record.action not in ACTIONS:
        raise ProtocolError("membership record names no known action")
    if len(record.key) != PUBLIC_KEY_BYTES or len(record.signer) != PUBLIC_KEY_BYTES:
        raise ProtocolError("membership record keys are 32 bytes")
    for value, limit in (
        (record.name, MAX_NAME_CHARS),
        (record.role, MAX_ROLE_CHARS),
        (record.relay, MAX_RELAY_CHARS),
    ):
        if not isinstance(value, str) or len(value) > limit:
            raise ProtocolError("membership record field out of bounds")
    if not isinstance(record.at, int) or isinstance(record.at, bool) or not 0 <= record.at < 2**62:
        raise ProtocolError("membership record time out of range")


@dataclass
class Members:
    """What a set of records says: who is in, who was removed (and by which record)."""

    members: dict[bytes, Record] = field(default_factory=dict)
    removed: dict[bytes, Record] = field(default_factory=dict)


def members(records: Iterable[Record]) -> Members:
    """The account's members as the records say (see the module's rules)."""
    out = Members()
    for record in sorted(set(records), key=lambda r: (r.at, r.id)):
        signer_in = record.signer in out.members
        if record.signer in out.removed or record.key in out.removed:
            continue
        if record.action == ADD:
            if signer_in or record.signer == record.key:
                out.members[record.key] = record
        elif signer_in:
            out.members.pop(record.key, None)
            out.removed[record.key] = record
    return out


__all__ = [
    "ADD",
    "MAX_RECORD_CHARS",
    "PREFIX",
    "REMOVE",
    "Members",
    "Record",
    "decode",
    "members",
    "sign",
]
