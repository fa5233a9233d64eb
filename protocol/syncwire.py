"""What siblings say to each other during a sync session: the messages and their codec.

A sync message travels as the payload of a peer ``Sync`` message, inside a
sealed envelope (see `peerwire.py` and `envelope.py`). Every message is a
msgpack array whose first item is its type code and whose second is the
8-byte session id. One strict decoder: bounded lengths, exact arity, every
field checked, frozen dataclasses out, `ProtocolError` for anything else.

Records are what converges: log events, note versions (a clear note with its
fields, or a sealed note as opaque nonce and ciphertext) and contacts.

Log events travel by the thousand, so a batch carries them as columns (one
array per field, see `EventColumns`): the ids as one binary string, the fields
that repeat (origin, kind, contact, thread) as a table of distinct values and
one index per event, the rest as plain arrays. The decoder checks each column
whole, with builtins, to the same bounds as every other field; a table holds
each value once and every entry is used, and no id appears twice in a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from types import NoneType
from typing import Any

import msgpack

from .errors import ProtocolError, shown
from .hlc import Stamp
from .ids import id_text
from .packing import unpack
from .reconcile import FINGERPRINT_BYTES, TAG_BYTES, Part, Range, tags
from .syncmessages import (
    _CODES,
    DETAIL_CHARS,
    DETAIL_FIELDS,
    DIGEST_BYTES,
    MAX_BIN,
    MAX_BODY_CHARS,
    MAX_CIPHERTEXT,
    MAX_DETAIL_AT,
    MAX_DETAIL_FIELD_CHARS,
    MAX_KIND_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_NEED,
    MAX_ORIGINS,
    MAX_RANGES,
    MAX_REASON_CHARS,
    MAX_RECORDS,
    MAX_SEQ,
    MAX_SHORT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    SESSION_BYTES,
    Abort,
    Ack,
    Batch,
    Check,
    ClearFields,
    ContactEntry,
    DetailEntry,
    EventColumns,
    Hello,
    LogEvent,
    Marks,
    NoteVersion,
    Records,
    Repair,
    SyncMessage,
    _id16,
)
from .validate import (
    array,
    binary,
    boolean,
    coded_column,
    column,
    integer,
    integer_column,
    optional_text,
    optional_text_column,
    text,
    text_column,
)


def _hex16(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ProtocolError(f"not a 128-bit hex id: {shown(text, 60)}")
    return raw


def _coded(column: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """A column as its distinct values (in order of first use) and one index per item."""
    table = list(dict.fromkeys(column))
    index = {value: i for i, value in enumerate(table)}
    return table, list(map(index.__getitem__, column))


def _events_fields(e: EventColumns) -> list[Any]:
    origins, origin_of = _coded(e.origins)
    kinds, kind_of = _coded(e.kinds)
    contacts, contact_of = _coded(e.contact_ids)
    threads, thread_of = _coded(e.threads)
    return [
        e.id_bytes(),
        origins,
        origin_of,
        e.seqs,
        kinds,
        kind_of,
        e.ats,
        [_hex16(c) for c in contacts],
        contact_of,
        threads,
        thread_of,
        e.sources,
        e.from_me,
        e.texts,
    ]


def _note_fields(n: NoteVersion) -> list[Any]:
    stamp = Stamp.decode(n.stamp)
    flags = (1 if n.user_edited else 0) | (2 if n.deleted else 0)
    clear = None
    if n.clear is not None:
        c = n.clear
        clear = [
            c.kind,
            c.identity_key,
            c.title,
            c.body,
            _hex16(c.contact_id),
            list(c.tags),
            c.source_ref,
            c.about_date,
            c.created_at,
        ]
    return [
        _id16(n.id),
        stamp.wall_ms,
        stamp.counter,
        stamp.origin,
        bytes.fromhex(n.content_hash),
        flags,
        clear,
        n.nonce,
        n.ciphertext,
    ]


def _contact_fields(c: ContactEntry) -> list[Any]:
    fields: list[Any] = [_hex16(c.id), c.name, list(c.aliases)]
    if c.details:
        fields.append([[d.field, d.value, d.at] for d in c.details])
    return fields


def _records_fields(r: Records) -> list[Any]:
    return [
        [_contact_fields(c) for c in r.contacts],
        _events_fields(r.event_columns),
        [_note_fields(n) for n in r.notes],
    ]


def _marks_fields(m: Marks) -> list[Any]:
    notes = []
    for origin, stamp_text in m.notes:
        stamp = Stamp.decode(stamp_text)
        notes.append([origin, stamp.wall_ms, stamp.counter])
    return [[[o, s] for o, s in m.log], notes, m.contacts]


def _range_fields(r: Range) -> list[Any]:
    return [int(r.part), r.depth, r.prefix, r.data]


def encode(message: SyncMessage) -> bytes:
    code = _CODES[type(message)]
    match message:
        case Hello(_, reply, digest, count, marks, streaming, repair):
            fields: list[Any] = [reply, digest, count, _marks_fields(marks), streaming]
            if repair:
                fields.append([_range_fields(r) for r in repair])
        case Batch(_, number, last, records):
            fields = [number, last, _records_fields(records)]
        case Check(_, digest, count):
            fields = [digest, count]
        case Repair(_, ranges, need):
            fields = [[_range_fields(r) for r in ranges], b"".join(need)]
        case Abort(_, reason):
            fields = [reason[:MAX_REASON_CHARS]]
        case Ack(_, number):
            fields = [number]
    packed: bytes = msgpack.packb([code, message.session, *fields], use_bin_type=True)
    if len(packed) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"sync message of {len(packed)} bytes is over {MAX_MESSAGE_BYTES}")
    return packed


# -- decoding -----------------------------------------------------------------------------


def _opt_hex16(value: Any, what: str) -> str | None:
    return None if value is None else binary(value, what, size=16).hex()


def _origin(value: Any) -> str:
    if not isinstance(value, str):
        raise ProtocolError("origin must be text")
    return _checked_origin(value)


@lru_cache(maxsize=256)
def _checked_origin(text: str) -> str:
    # A handful of origins recur in every batch: check each once.
    try:
        Stamp(0, 0, text)
    except ProtocolError:
        raise ProtocolError(f"bad origin {shown(text, 70)}") from None
    return text


EVENT_COLUMNS = 14


def _event_kind(value: Any) -> str:
    return text(value, "event kind", MAX_KIND_CHARS)


def _contact_id(value: Any) -> str | None:
    return _opt_hex16(value, "contact id")


def _thread(value: Any) -> str | None:
    return optional_text(value, "thread", MAX_SHORT_CHARS)


# Where the 32 hex digits of an id go in its 36-character text (one more for a separator).
_HEX_AT = [j + (j >= 8) + (j >= 12) + (j >= 16) + (j >= 20) for j in range(32)]
_ID_SLOT = b"-" * 36 + b" "


def _id_texts(raw: bytes) -> tuple[str, ...]:
    """16-byte ids (concatenated) as canonical 8-4-4-4-12 texts, each as `id_text` gives."""
    digits = raw.hex().encode()
    out = bytearray(_ID_SLOT * (len(raw) // 16))
    for j, at in enumerate(_HEX_AT):
        out[at::37] = digits[j::32]
    return tuple(out.decode().split())


def _events(f: Any) -> EventColumns:
    f = array(f, "events", EVENT_COLUMNS, exact=EVENT_COLUMNS)
    raw = binary(f[0], "event ids", limit=16 * MAX_RECORDS)
    n, odd = divmod(len(raw), 16)
    if odd:
        raise ProtocolError("event ids must be 16 bytes each")
    ids = _id_texts(raw)
    if len(set(ids)) != n:
        raise ProtocolError("an event id appears twice in one batch")
    columns = EventColumns(
        ids=ids,
        origins=coded_column(f[1], f[2], "origin", n, _origin, MAX_RECORDS),
        seqs=integer_column(f[3], "seq", n, 1, MAX_SEQ, MAX_RECORDS),
        kinds=coded_column(f[4], f[5], "event kind", n, _event_kind, MAX_RECORDS),
        ats=integer_column(f[6], "event time", n, -(1 << 62), 1 << 62, MAX_RECORDS),
        contact_ids=coded_column(f[7], f[8], "contact id", n, _contact_id, MAX_RECORDS),
        threads=coded_column(f[9], f[10], "thread", n, _thread, MAX_RECORDS),
        sources=optional_text_column(f[11], "source", n, MAX_SHORT_CHARS, MAX_RECORDS),
        from_me=tuple(column(f[12], "from_me", n, {bool, NoneType}, MAX_RECORDS)),
        texts=text_column(f[13], "event text", n, MAX_TEXT_CHARS, MAX_RECORDS),
    )
    object.__setattr__(columns, "id_blob", raw)
    return columns


def _note(f: Any) -> NoteVersion:
    f = array(f, "note", 9, exact=9)
    stamp = Stamp(
        integer(f[1], "stamp wall", 0, 10**15 - 1),
        integer(f[2], "stamp counter", 0, 10**6 - 1),
        _origin(f[3]),
    )
    flags = integer(f[5], "note flags", 0, 3)
    content_hash = binary(f[4], "content hash", size=32).hex()
    clear = None
    nonce = ciphertext = None
    if f[6] is not None:
        c = array(f[6], "clear note", 9, exact=9)
        tags = tuple(text(t, "tag", MAX_TAG_CHARS) for t in array(c[5], "tags", MAX_TAGS))
        clear = ClearFields(
            kind=text(c[0], "note kind", MAX_KIND_CHARS),
            identity_key=optional_text(c[1], "identity key", MAX_SHORT_CHARS),
            title=text(c[2], "title", MAX_SHORT_CHARS),
            body=None if c[3] is None else text(c[3], "body", MAX_BODY_CHARS),
            contact_id=_opt_hex16(c[4], "contact id"),
            tags=tags,
            source_ref=optional_text(c[6], "source ref", MAX_SHORT_CHARS),
            about_date=None if c[7] is None else integer(c[7], "about date", -(1 << 62), 1 << 62),
            created_at=integer(c[8], "created at", -(1 << 62), 1 << 62),
        )
        if f[7] is not None or f[8] is not None:
            raise ProtocolError("a clear note carries no ciphertext")
    else:
        nonce = binary(f[7], "nonce", size=12)
        ciphertext = binary(f[8], "ciphertext", limit=MAX_CIPHERTEXT)
        if flags & 1:
            raise ProtocolError("a sealed note is never user-edited")
    return NoteVersion(
        id=id_text(binary(f[0], "note id", size=16)),
        stamp=stamp.encode(),
        content_hash=content_hash,
        user_edited=bool(flags & 1),
        deleted=bool(flags & 2),
        clear=clear,
        nonce=nonce,
        ciphertext=ciphertext,
    )


def _detail(f: Any) -> DetailEntry:
    f = array(f, "contact detail", 3, exact=3)
    field = text(f[0], "contact detail field", MAX_DETAIL_FIELD_CHARS)
    limit = DETAIL_CHARS.get(field)
    if limit is None:
        raise ProtocolError(f"contact detail field must be one of {', '.join(DETAIL_FIELDS)}")
    return DetailEntry(
        field,
        text(f[1], f"contact {field}", limit),
        integer(f[2], "contact detail time", -MAX_DETAIL_AT, MAX_DETAIL_AT),
    )


def _contact(f: Any) -> ContactEntry:
    f = array(f, "contact", 4)
    if len(f) < 3:
        raise ProtocolError("contact must have 3 or 4 items")
    aliases = tuple(text(a, "alias", MAX_SHORT_CHARS) for a in array(f[2], "aliases", 64))
    details: tuple[DetailEntry, ...] = ()
    if len(f) == 4:
        details = tuple(_detail(d) for d in array(f[3], "contact details", len(DETAIL_FIELDS)))
        if len({d.field for d in details}) != len(details):
            raise ProtocolError("a contact detail field appears twice")
    return ContactEntry(
        binary(f[0], "contact id", size=16).hex(),
        text(f[1], "contact name", MAX_SHORT_CHARS),
        aliases,
        details,
    )


def _records(f: Any) -> Records:
    f = array(f, "records", 3, exact=3)
    return Records(
        contacts=tuple(_contact(c) for c in array(f[0], "contacts", MAX_RECORDS)),
        events=_events(f[1]),
        notes=tuple(_note(n) for n in array(f[2], "notes", MAX_RECORDS)),
    )


def _marks(f: Any) -> Marks:
    f = array(f, "marks", 3, exact=3)
    log = []
    for item in array(f[0], "log marks", MAX_ORIGINS):
        pair = array(item, "log mark", 2, exact=2)
        log.append((_origin(pair[0]), integer(pair[1], "log mark", 0)))
    notes = []
    for item in array(f[1], "note marks", MAX_ORIGINS):
        triple = array(item, "note mark", 3, exact=3)
        origin = _origin(triple[0])
        stamp = Stamp(
            integer(triple[1], "mark wall", 0, 10**15 - 1),
            integer(triple[2], "mark counter", 0, 10**6 - 1),
            origin,
        )
        notes.append((origin, stamp.encode()))
    if len({o for o, _ in log}) != len(log) or len({o for o, _ in notes}) != len(notes):
        raise ProtocolError("an origin appears twice in the marks")
    return Marks(
        tuple(log), tuple(notes), binary(f[2], "contacts fingerprint", size=FINGERPRINT_BYTES)
    )


MAX_RANGE_BYTES = TAG_BYTES * MAX_NEED  # the data of one range, at most


def _range(f: Any) -> Range:
    f = array(f, "range", 4, exact=4)
    part = integer(f[0], "range part", 0, max(Part))
    depth = integer(f[1], "range depth", 0, 1 << 8)
    prefix = integer(f[2], "range prefix", 0, (1 << 64) - 1)
    data = binary(f[3], "range data", limit=MAX_RANGE_BYTES)
    return Range(Part(part), depth, prefix, data).check()


def _ranges(value: Any) -> tuple[Range, ...]:
    return tuple(_range(r) for r in array(value, "ranges", MAX_RANGES))


def _need(value: Any) -> tuple[bytes, ...]:
    raw = binary(value, "need", limit=TAG_BYTES * MAX_NEED)
    if len(raw) % TAG_BYTES:
        raise ProtocolError(f"needed tags must be {TAG_BYTES} bytes each")
    return tuple(t.to_bytes(TAG_BYTES, "big") for t in tags(raw))


def decode(data: bytes) -> SyncMessage:
    """Decode one sync message, or raise `ProtocolError`. Never a half-built message."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"sync message of {len(data)} bytes is over {MAX_MESSAGE_BYTES}")
    items = unpack(
        data,
        "sync message",
        max_bin=MAX_BIN,
        max_str=4 * MAX_TEXT_CHARS,
        max_array=max(MAX_RECORDS, MAX_RANGES, MAX_NEED),
    )
    if not isinstance(items, list) or len(items) < 2:
        raise ProtocolError("a sync message must be an array of at least 2 items")
    code, session, *f = items
    session = binary(session, "session id", size=SESSION_BYTES)
    arity = {1: (5, 6), 2: (3,), 3: (2,), 7: (2,), 5: (1,), 6: (1,)}
    if isinstance(code, bool) or not isinstance(code, int) or code not in arity:
        raise ProtocolError(f"unknown sync message type {shown(code)}")
    if len(f) not in arity[code]:
        raise ProtocolError(f"sync message type {code} has {len(f)} fields")
    if code == 1:
        repair = _ranges(f[5]) if len(f) == 6 else ()
        hello = Hello(
            session,
            boolean(f[0], "reply"),
            binary(f[1], "digest", size=DIGEST_BYTES),
            integer(f[2], "count"),
            _marks(f[3]),
            boolean(f[4], "streaming"),
            repair,
        )
        if repair and (not hello.reply or hello.streaming):
            raise ProtocolError("only a Hello reply that streams nothing carries repair ranges")
        return hello
    if code == 2:
        return Batch(session, integer(f[0], "batch number"), boolean(f[1], "last"), _records(f[2]))
    if code == 3:
        return Check(session, binary(f[0], "digest", size=DIGEST_BYTES), integer(f[1], "count"))
    if code == 7:
        return Repair(session, _ranges(f[0]), _need(f[1]))
    if code == 6:
        return Ack(session, integer(f[0], "acked batch"))
    return Abort(session, text(f[0], "reason", MAX_REASON_CHARS))


__all__ = [
    "Abort",
    "Ack",
    "Batch",
    "Check",
    "ClearFields",
    "ContactEntry",
    "DetailEntry",
    "EventColumns",
    "Hello",
    "LogEvent",
    "Marks",
    "NoteVersion",
    "Records",
    "Repair",
    "SyncMessage",
    "decode",
    "encode",
]
