"""Telegram Desktop exports (``result.json``, "Export chat history" or
"Export Telegram data" in machine-readable JSON).

Two shapes: one chat (a top-level object with "name", "type", "id" and
"messages"), or the whole account (a top-level "chats": {"list": [...]}, with
"left_chats" likewise and "personal_information" naming the user).

Parsing: the file is parsed whole with the standard library's `json`, and a
file over 512 MiB is refused with a clear message. The standard library has
no incremental JSON parser; a hand-made one over the "messages" arrays would
have to track strings, escapes and nesting itself and still fall back to
buffering whenever an export put a chat's "messages" before its "id", or
"personal_information" after "chats". One exact parser with a size bound is
the robust choice: 512 MiB covers the exports of all but the heaviest
accounts (Telegram keeps media out of result.json), and the error a user sees
names the line and column `json` reports.

Each message becomes a MESSAGE event in thread "telegram:<chat id>", with id
``stable_id("telegram", chat id, message id)``. Service messages (joins,
pins, calls) are skipped. A message with media and no text says what it was
("[photo]", "[sticker 😀]", "[file: report.pdf]"). The contact is the chat's
name in a personal or bot chat, the sender in a group; a channel's posts and
saved messages name nobody. A message is the user's own when ``--me`` names
its sender (by name or by "user123" id), when its sender is the account in
``personal_information``, or, in a personal chat, when its sender is not the
chat's peer (a personal chat's id is the peer's user id).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

MAX_BYTES = 512 * 1024 * 1024
SNIFF_BYTES = 4096
PROGRESS_MESSAGES = 512
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
        """Every message of every chat in the export."""
        try:
            size = path.stat().st_size
            if size > MAX_BYTES:
                raise BadInput(
                    f"{path.name}: {size / 2**20:,.0f} MiB is more than the"
                    f" {MAX_BYTES // 2**20} MiB a Telegram export may be"
                )
            with path.open("rb") as stream:
                raw = stream.read(MAX_BYTES + 1)
        except OSError as exc:
            raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise BadInput(f"{where(path, f'line {line}')}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            place = f"line {exc.lineno}, column {exc.colno}"
            raise BadInput(f"{where(path, place)}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise BadInput(f"{path.name}: JSON nested too deeply") from None
        del raw
        chats = _chats(path, data)
        account = _Account(data.get("personal_information"), options)
        carded: set[str] = set()
        done = 0
        total = sum(len(m) for c in chats if isinstance(m := c.get("messages"), list)) or 1
        for chat in chats:
            for item in self._chat(path, chat, account, carded):
                if isinstance(item, NewEvent | Skipped):
                    done += 1
                    if progress is not None and done % PROGRESS_MESSAGES == 0:
                        progress(size * done // total, size)
                yield item
        if progress is not None:
            progress(size, size)

    def _chat(
        self, path: Path, chat: dict[str, Any], account: _Account, carded: set[str]
    ) -> Iterator[Item]:
        chat_id = chat.get("id")
        if not isinstance(chat_id, int | str) or isinstance(chat_id, bool):
            raise BadInput(f"{path.name}: not a Telegram export (a chat without an id)")
        kind = chat.get("type")
        messages = chat.get("messages")
        if not isinstance(messages, list):
            raise BadInput(f"{where(path, f'chat {chat_id}')}: its messages are not a list")
        chat_name = chat.get("name")
        peer: str | None = None
        if kind in PERSONAL and isinstance(chat_name, str) and chat_name.strip():
            peer = clean_name(chat_name)
        thread = f"{THREAD_PREFIX}{chat_id}"
        for number, message in enumerate(messages, 1):
            place = f"chat {chat_id}, message {number}"
            if not isinstance(message, dict):
                raise BadInput(f"{where(path, place)}: not an object")
            message_id = message.get("id")
            if not isinstance(message_id, int | str) or isinstance(message_id, bool):
                raise BadInput(f"{where(path, place)}: no message id")
            place = f"chat {chat_id}, message {message_id}"
            if message.get("type") == "service":
                yield Skipped("service message")
                continue
            at = _at(message, account.options)
            if at is None:
                raise BadInput(f"{where(path, place)}: no date")
            text = clean_text(_text(message.get("text")))
            media = _media(message)
            if media is not None:
                text = f"{media} {text}" if text else media
            if not text:
                yield Skipped("empty message")
                continue
            sender = message.get("from")
            sender = sender if isinstance(sender, str) and sender.strip() else None
            from_id = message.get("from_id")
            from_id = from_id if isinstance(from_id, str) else None
            if kind == SAVED or account.is_me(sender, from_id):
                mine = True
            elif kind in PERSONAL and from_id is not None:
                mine = from_id != f"user{chat_id}"
            else:
                mine = False
            contact: str | None
            if kind in PERSONAL:
                contact = peer
            elif kind in CHANNELS or kind == SAVED or mine or sender is None:
                contact = None
            else:
                try:
                    contact = clean_name(sender, "sender name")
                except BadInput as exc:
                    raise BadInput(f"{where(path, place)}: {exc}") from None
            if contact is not None and contact not in carded:
                carded.add(contact)
                yield ContactCard(name=contact)
            yield NewEvent(
                kind=EventKind.MESSAGE,
                at=at,
                text=fit_text(text),
                contact=contact,
                thread=thread,
                source=self.name,
                from_me=mine,
                id=stable_id("telegram", chat_id, message_id, at_us=at),
            )


def _chats(path: Path, data: object) -> list[dict[str, Any]]:
    """The chats of a single-chat or a full export."""
    if not isinstance(data, dict):
        raise BadInput(f"{path.name}: not a Telegram export (not a JSON object)")
    if "messages" in data:
        return [data]
    chats: list[dict[str, Any]] = []
    found = False
    for key in ("chats", "left_chats"):
        section = data.get(key)
        if section is None:
            continue
        listed = section.get("list") if isinstance(section, dict) else None
        if not isinstance(listed, list) or not all(isinstance(c, dict) for c in listed):
            raise BadInput(f"{path.name}: not a Telegram export ({key} holds no list of chats)")
        found = True
        chats.extend(listed)
    if not found:
        raise BadInput(f"{path.name}: not a Telegram export (no messages and no chats)")
    return chats


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

__all__ = ["IMPORTER", "MAX_BYTES", "TelegramImporter"]
