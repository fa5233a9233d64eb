"""Telegram Desktop exports (``result.json``, "Export chat history" or
"Export Telegram data" in machine-readable JSON).

Two shapes: one chat (a top-level object with "name", "type", "id" and
"messages"), or the whole account (a top-level "chats": {"list": [...]}, with
"left_chats" likewise and "personal_information" naming the user).

Parsing streams, with the standard library alone: a full export can be
hundreds of megabytes, so the file is never parsed whole. A small walker
steps through the containers that matter token by token (the top-level
object, "chats" and "left_chats" with their "list", each chat object and its
"messages" array) and hands every other value, one message at a time, to
`json.JSONDecoder.raw_decode` over a buffer that holds little more than that
value. `json` still does all the decoding of strings, numbers and escapes;
the walker only finds the boundaries between values, so the two cannot
disagree on what the text says, and memory stays at about one megabyte plus
the largest single message (a value over 64 MiB is refused). Values the
importer does not need ("contacts", "other_data", ...) are skipped the same
way without being held whole. Errors name the line and column. What streaming
cannot know early is handled explicitly: a chat whose "messages" come before
its "id" has those messages held until the chat ends, and the account's
"personal_information" is expected before "chats", as Telegram writes it (if
it came later, the user's own messages are still known by ``--me`` and, in
personal chats, by not being the peer).

Each message becomes a MESSAGE event in thread "telegram:<chat id>", with id
``stable_id("telegram", chat id, message id)``. Service messages (joins,
pins, calls) are skipped. A message with media and no text says what it was
("[photo]", "[sticker 😀]", "[file: report.pdf]"). The contact is the chat's
name in a personal or bot chat, the sender in a group; a channel's posts and
saved messages name nobody. A message is the user's own when ``--me`` names
its sender (by name or by "user123" id), when its sender is the account in
``personal_information``, or, in a personal chat, when its sender is not the
chat's peer: neither the peer's id (a personal chat's id is the peer's user
id) nor the chat's name.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    ImportOptions,
    Item,
    Progress,
    Skipped,
    clean_text,
    fit_text,
    stable_id,
    to_us,
    where,
)
from pixie.device.store.contacts import ContactCard, clean_name
from pixie.device.store.memlog import EventKind, NewEvent

SNIFF_BYTES = 4096
CHUNK = 1024 * 1024  # characters read at a time
MAX_VALUE_CHARS = 64 * 1024 * 1024  # one message (or other value) at most
MAX_INT_DIGITS = 40  # ids, times and sizes are far shorter
MAX_DEPTH = 64
PROGRESS_VALUES = 512
THREAD_PREFIX = "telegram:"

PERSONAL = frozenset({"personal_chat", "bot_chat"})
CHANNELS = frozenset({"public_channel", "private_channel"})
SAVED = "saved_messages"

_TYPICAL = re.compile(rb'"date_unixtime"|"personal_information"|"type"\s*:\s*"personal_chat"')
_CONTAINER = re.compile(rb'"messages"|"chats"')


def _text(value: object) -> str:
    """A message's "text": a string, or a list of strings and entities."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    parts: list[str] = []
    for part in value:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
                href = part.get("href")
                if part.get("type") == "text_link" and isinstance(href, str) and href != text:
                    parts.append(f" ({href})")
    return "".join(parts)


def _media(message: dict[str, Any]) -> str | None:
    """What a message carried besides text, as a short bracketed phrase."""
    kind = message.get("media_type")
    name = message.get("file_name")
    if not isinstance(name, str) or not name.strip():
        file = message.get("file")
        name = file.rsplit("/", 1)[-1] if isinstance(file, str) and not file.startswith("(") else ""
    if "photo" in message:
        return "[photo]"
    if kind == "sticker":
        emoji = message.get("sticker_emoji")
        return f"[sticker {emoji}]" if isinstance(emoji, str) and emoji else "[sticker]"
    if kind == "voice_message":
        return "[voice message]"
    if kind == "video_message":
        return "[video message]"
    if kind == "animation":
        return "[GIF]"
    if kind == "video_file":
        return f"[video: {name}]" if name else "[video]"
    if kind == "audio_file":
        title = " - ".join(
            str(message[k]) for k in ("performer", "title") if isinstance(message.get(k), str)
        )
        return f"[audio: {title or name}]" if title or name else "[audio]"
    if "file" in message or name:
        return f"[file: {name}]" if name else "[file]"
    poll = message.get("poll")
    if isinstance(poll, dict):
        return f"[poll: {poll.get('question', '')}]".replace(": ]", "]")
    if "location_information" in message:
        return "[location]"
    contact = message.get("contact_information")
    if isinstance(contact, dict):
        who = " ".join(
            str(contact[k]) for k in ("first_name", "last_name") if contact.get(k)
        ).strip()
        return f"[contact: {who}]" if who else "[contact]"
    return None


class _Account:
    """Who the user is, by what the full export's personal_information says."""

    def __init__(self, info: object, options: ImportOptions) -> None:
        self.options = options
        self.user_id: str | None = None
        names: list[str] = []
        if isinstance(info, dict):
            if isinstance(info.get("user_id"), int | str):
                self.user_id = f"user{info['user_id']}"
            first, last = info.get("first_name"), info.get("last_name")
            full = " ".join(p for p in (first, last) if isinstance(p, str) and p.strip())
            # The full name and the phone: a first name alone would make
            # every namesake in a group the user.
            phone = info.get("phone_number")
            names = [n for n in (full, phone) if isinstance(n, str) and n.strip()]
        self.mine = ImportOptions(me=tuple(names)) if names else None

    def is_me(self, name: str | None, from_id: str | None) -> bool:
        bare = from_id[4:] if from_id and from_id.startswith("user") else None
        if self.options.is_me(name, from_id, bare):
            return True
        if self.user_id is not None and from_id == self.user_id:
            return True
        return self.mine is not None and self.mine.is_me(name)


class _JsonStream:
    """One JSON text read piece by piece: the containers this importer walks
    into are stepped through token by token, every other value is decoded
    whole by `json` from a buffer that holds little more than that value."""

    def __init__(self, path: Path, stream: IO[bytes], progress: Progress | None) -> None:
        self.path = path
        self.stream = stream
        self.progress = progress
        self.size = _size(stream)
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.json = json.JSONDecoder(parse_int=_short_int)
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.read_bytes = 0
        self.lines_before = 0  # line breaks in the text dropped from the buffer
        self.line_start = 0  # where the buffer's first line starts (<= 0)
        self.values = 0

    def _fill(self, at_least: int = 1) -> None:
        if self.pos > CHUNK:  # drop what was read, remembering its lines
            dropped = self.buf[: self.pos]
            breaks = dropped.count("\n")
            if breaks:
                self.lines_before += breaks
                self.line_start = dropped.rfind("\n") + 1 - self.pos
            else:
                self.line_start -= self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        while not self.eof and at_least > 0:
            try:
                raw = self.stream.read(max(CHUNK, at_least))
            except OSError as exc:
                raise BadInput(f"cannot read {self.path.name}: {exc.strerror}") from None
            self.read_bytes += len(raw)
            try:
                text = self.decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                line = self.lines_before + self.buf.count("\n") + raw.count(b"\n", 0, exc.start)
                raise BadInput(f"{where(self.path, f'line {line + 1}')}: not UTF-8 text") from None
            self.eof = not raw
            self.buf += text
            at_least -= len(text)

    def place(self, pos: int) -> str:
        """ "line L, column C" of a position in the buffer."""
        breaks = self.buf.count("\n", 0, pos)
        if breaks:
            column = pos - self.buf.rfind("\n", 0, pos)
            return f"line {self.lines_before + breaks + 1}, column {column}"
        return f"line {self.lines_before + 1}, column {pos - self.line_start + 1}"

    def fail(self, why: str, pos: int | None = None) -> NoReturn:
        where_ = self.place(self.pos if pos is None else pos)
        raise BadInput(f"{where(self.path, where_)}: not valid JSON ({why})")

    def peek(self) -> str:
        """The next character that is not white space; "" at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self._fill()

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.fail(f"expected {char!r}" if self.peek() else "unexpected end")
        self.pos += 1

    def value(self) -> Any:
        """The next value, whole."""
        self.peek()
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    self.fail(exc.msg, exc.pos)
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    self.fail(f"one value longer than {MAX_VALUE_CHARS // 2**20} MiB")
                self._fill(len(self.buf) - self.pos)  # at least double what is held
                continue
            except RecursionError:
                self.fail("nested too deeply")
            except _LongNumber:
                self.fail(f"a number of more than {MAX_INT_DIGITS} digits")
            if end == len(self.buf) and not self.eof:
                self._fill()  # a number cut by the buffer's end would read short
                continue
            self.pos = end
            self.values += 1
            if self.progress is not None and self.values % PROGRESS_VALUES == 0:
                self.progress(min(self.read_bytes, self.size), self.size)
            return value

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here; the caller consumes each
        key's value before asking for the next key."""
        self.expect("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            if self.peek() != '"':
                self.fail("expected a key")
            key = self.value()
            self.expect(":")
            yield key
            char = self.peek()
            self.pos += 1
            if char == "}":
                return
            if char != ",":
                self.fail("expected ',' or '}'", self.pos - 1)

    def elements(self) -> Iterator[None]:
        """Once for each element of the array that starts here, which the
        caller consumes."""
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield
            char = self.peek()
            self.pos += 1
            if char == "]":
                return
            if char != ",":
                self.fail("expected ',' or ']'", self.pos - 1)

    def skip(self, depth: int = 0) -> None:
        """Past the next value, without holding a large container whole."""
        if depth > MAX_DEPTH:
            self.fail("nested too deeply")
        char = self.peek()
        if char == "{":
            for _key in self.members():
                self.skip(depth + 1)
        elif char == "[":
            for _ in self.elements():
                self.skip(depth + 1)
        else:
            self.value()

    def end(self) -> None:
        if self.peek():
            self.fail("more after the end of the export")


class _Chat:
    """One chat's metadata and what its messages become."""

    def __init__(self, path: Path, meta: dict[str, Any], account: _Account, carded: set[str]):
        self.path = path
        self.account = account
        self.carded = carded
        chat_id = meta.get("id")
        if not isinstance(chat_id, int | str) or isinstance(chat_id, bool):
            raise BadInput(f"{path.name}: not a Telegram export (a chat without an id)")
        self.id = chat_id
        self.kind = meta.get("type")
        name = meta.get("name")
        self.name = name if isinstance(name, str) else None
        self.peer: str | None = None
        if self.kind in PERSONAL and isinstance(name, str) and name.strip():
            self.peer = clean_name(name)
        self.thread = f"{THREAD_PREFIX}{chat_id}"

    def message(self, number: int, message: object) -> Iterator[Item]:
        path, kind = self.path, self.kind
        place = f"chat {self.id}, message {number}"
        if not isinstance(message, dict):
            raise BadInput(f"{where(path, place)}: not an object")
        message_id = message.get("id")
        if not isinstance(message_id, int | str) or isinstance(message_id, bool):
            raise BadInput(f"{where(path, place)}: no message id")
        place = f"chat {self.id}, message {message_id}"
        if message.get("type") == "service":
            yield Skipped("service message")
            return
        at = _at(message, self.account.options)
        if at is None:
            raise BadInput(f"{where(path, place)}: no date")
        text = clean_text(_text(message.get("text")))
        media = _media(message)
        if media is not None:
            text = f"{media} {text}" if text else media
        if not text:
            yield Skipped("empty message")
            return
        sender = message.get("from")
        sender = sender if isinstance(sender, str) and sender.strip() else None
        from_id = message.get("from_id")
        from_id = from_id if isinstance(from_id, str) else None
        if kind == SAVED or self.account.is_me(sender, from_id):
            mine = True
        elif kind in PERSONAL and (from_id is not None or sender is not None):
            # Two people talk here: whoever is not the peer is the user.
            mine = from_id != f"user{self.id}" and sender != self.name
        else:
            mine = False
        contact: str | None
        if kind in PERSONAL:
            contact = self.peer
        elif kind in CHANNELS or kind == SAVED or mine or sender is None:
            contact = None
        else:
            try:
                contact = clean_name(sender, "sender name")
            except BadInput as exc:
                raise BadInput(f"{where(path, place)}: {exc}") from None
        if contact is not None and contact not in self.carded:
            self.carded.add(contact)
            yield ContactCard(name=contact)
        yield NewEvent(
            kind=EventKind.MESSAGE,
            at=at,
            text=fit_text(text),
            contact=contact,
            thread=self.thread,
            source=TelegramImporter.name,
            from_me=mine,
            id=stable_id("telegram", self.id, message_id, at_us=at),
        )


class _Walk:
    """The export's structure, walked: the top-level object (a chat itself, or
    the account with its chat lists), each chat, each message."""

    def __init__(self, path: Path, reader: _JsonStream, options: ImportOptions) -> None:
        self.path = path
        self.reader = reader
        self.account = _Account(None, options)
        self.options = options
        self.carded: set[str] = set()
        self.chats = 0

    def export(self) -> Iterator[Item]:
        reader = self.reader
        first = reader.peek()
        if first != "{":
            if first and first in '["-0123456789tfn':
                raise BadInput(f"{self.path.name}: not a Telegram export (not a JSON object)")
            reader.fail("not a JSON text" if first else "empty")
        yield from self.chat(top=True)
        reader.end()
        if not self.chats:
            raise BadInput(f"{self.path.name}: not a Telegram export (no messages and no chats)")

    def chat(self, top: bool = False) -> Iterator[Item]:
        """A chat object (or the top-level object, which may be one)."""
        reader = self.reader
        meta: dict[str, Any] = {}
        held: list[Any] | None = None  # messages met before the chat's id
        for key in reader.members():
            if key in ("name", "type", "id"):
                meta[key] = reader.value()
            elif key == "messages":
                self.chats += 1
                if reader.peek() != "[":
                    raise BadInput(f"{self.path.name}: not a Telegram export (messages not a list)")
                if "id" in meta:
                    chat = _Chat(self.path, meta, self.account, self.carded)
                    for number, _ in enumerate(reader.elements(), 1):
                        yield from chat.message(number, reader.value())
                else:
                    held = reader.value()
            elif top and key in ("chats", "left_chats"):
                yield from self.section(key)
            elif top and key == "personal_information":
                self.account = _Account(reader.value(), self.options)
            else:
                reader.skip()
        if held is not None:
            chat = _Chat(self.path, meta, self.account, self.carded)
            for number, message in enumerate(held, 1):
                yield from chat.message(number, message)

    def section(self, name: str) -> Iterator[Item]:
        reader = self.reader
        if reader.peek() != "{":
            raise BadInput(f"{self.path.name}: not a Telegram export ({name} holds no list)")
        for key in reader.members():
            if key != "list":
                reader.skip()
                continue
            if reader.peek() != "[":
                raise BadInput(f"{self.path.name}: not a Telegram export ({name} holds no list)")
            for _ in reader.elements():
                if reader.peek() != "{":
                    raise BadInput(
                        f"{self.path.name}: not a Telegram export (a chat not an object)"
                    )
                yield from self.chat()
            self.chats += 1


class TelegramImporter:
    """A Telegram Desktop JSON export: one chat, or the whole account."""

    name = "telegram"
    units = ("message", "messages")

    def sniff(self, path: Path) -> bool:
        """A regular file named result.json, or a .json whose first 4 KiB hold
        "messages" or "chats" with a key only Telegram exports write."""
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return False  # opening a pipe would wait for, or take, its bytes
            if path.name.lower() == "result.json":
                return True
            if path.suffix.lower() != ".json":
                return False
            with path.open("rb") as stream:
                start = stream.read(SNIFF_BYTES)
        except OSError:
            return False
        return bool(_CONTAINER.search(start) and _TYPICAL.search(start))

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every message of every chat in the export, streaming."""
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
        with stream:
            reader = _JsonStream(path, stream, progress)
            yield from _Walk(path, reader, options).export()
            if progress is not None:
                progress(reader.size, reader.size)


class _LongNumber(ValueError):
    """An integer longer than any id or time an export holds."""


def _short_int(text: str) -> int:
    """An integer of the export, refused past `MAX_INT_DIGITS` digits (Python
    refuses past 4,300 with an error of its own, and converting even those
    costs time growing with their square)."""
    if len(text) > MAX_INT_DIGITS + 1:  # a sign may lead
        raise _LongNumber(text[:20])
    return int(text)


def _size(stream: IO[bytes]) -> int:
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):
        return 0


def _at(message: dict[str, Any], options: ImportOptions) -> int | None:
    unix = message.get("date_unixtime")
    if isinstance(unix, str) and unix.isdigit():
        return int(unix) * 1_000_000
    if isinstance(unix, int) and not isinstance(unix, bool):
        return unix * 1_000_000
    date = message.get("date")
    if isinstance(date, str):
        try:
            return to_us(dt.datetime.fromisoformat(date), options.tz)
        except ValueError:
            return None
    return None


IMPORTER = TelegramImporter()

__all__ = ["IMPORTER", "TelegramImporter"]
