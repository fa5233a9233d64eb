"""Globally unique, time-sortable 128-bit identifiers (UUID version 7, RFC 9562).

Event ids are minted on whichever device writes the event and must never collide
across devices, so they carry 74 random bits; they lead with a millisecond
timestamp so that ids sort roughly by creation time, which keeps B-tree inserts
local and makes ties in time order deterministic on every replica.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

from .errors import ProtocolError

_HEX = "[0-9a-fA-F]"
_CANONICAL = re.compile(f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}")
_lock = threading.Lock()
_last_ms = 0
_last_counter = 0


def new_id(now_ms: int | None = None) -> str:
    """Mint a new UUIDv7 in canonical lowercase text form.

    Within one process, ids are strictly increasing: when two ids fall in the
    same millisecond, the 12-bit ``rand_a`` field acts as a counter (RFC 9562
    method 1); if it overflows we borrow the next millisecond.
    """
    global _last_ms, _last_counter
    with _lock:
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        if ms <= _last_ms:
            ms = _last_ms
            counter = _last_counter + 1
            if counter > 0xFFF:
                ms += 1
                counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        else:
            counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        _last_ms, _last_counter = ms, counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def id_text(raw: bytes) -> str:
    """16 bytes as canonical 8-4-4-4-12 text (what ``str(uuid.UUID(bytes=raw))``
    gives, without building a UUID object)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_ids(count: int, now_ms: int | None = None) -> list[str]:
    """Mint ``count`` ids at once (bulk imports): one entropy read, no UUID objects."""
    global _last_ms, _last_counter
    if count <= 0:
        return []
    entropy = os.urandom(10 * count)
    with _lock:
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        ms = max(ms, _last_ms)
        counter = _last_counter if ms == _last_ms else -1
        out: list[str] = []
        head = ms.to_bytes(6, "big")
        for i in range(count):
            counter += 1
            if counter > 0xFFF:
                ms, counter = ms + 1, 0
                head = ms.to_bytes(6, "big")
            j = 10 * i + 2
            # variant bits 10, then 62 random bits
            tail = bytes((0x80 | (entropy[j] & 0x3F),)) + entropy[j + 1 : j + 8]
            out.append(id_text(head + (0x7000 | counter).to_bytes(2, "big") + tail))
        _last_ms, _last_counter = ms, counter
    return out


def parse_id(text: str) -> str:
    """Validate an event id and return its canonical form.

    Any RFC 9562 UUID in canonical 8-4-4-4-12 text is accepted (ids that came
    from elsewhere need not be version 7); case is normalised to lowercase.
    """
    if not isinstance(text, str) or _CANONICAL.fullmatch(text) is None:
        raise ProtocolError(f"not a UUID in 8-4-4-4-12 form: {text!r:.60}")
    return text.lower()


def id_time_ms(event_id: str) -> int | None:
    """The millisecond timestamp inside a version-7 id, or None for other versions."""
    value = uuid.UUID(event_id)
    if value.version != 7:
        return None
    return value.int >> 80
