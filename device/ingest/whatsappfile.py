"""Where a WhatsApp chat's text is: a ``.txt``, or the chat member of a
``.zip`` (``_chat.txt`` on iOS, "WhatsApp Chat with NAME.txt" on Android),
read as lines or as blocks of whole lines, with the limits every read keeps
(a line's length, UTF-8, a zip's inflation ratio), and the chat's name when
the file's own name gives it ("WhatsApp Chat with Ada.zip",
"WhatsApp Chat - Ada/_chat.txt").
"""

from __future__ import annotations

import contextlib
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pixie.device.errors import BadInput
from pixie.device.ingest.base import Progress, where

MAX_LINE_BYTES = 1024 * 1024
BLOCK_BYTES = 1024 * 1024  # read at a time by the first pass
# A chat in a zip may inflate this many times its compressed size, or up to
# `ZIP_RATIO_FREE` bytes whatever its ratio.
MAX_ZIP_RATIO = 100
ZIP_RATIO_FREE = 64 * 1024 * 1024
PROGRESS_LINES = 2048

CHAT_FILE = re.compile(
    r"(?:WhatsApp[- ]Chat(?:\s+with|\s+mit|\s+-)|Chat de WhatsApp con|Conversa do WhatsApp com"
    r"|Discussion WhatsApp avec|Chat WhatsApp con)\s+(?P<name>.+?)(?:\s\(\d+\))?",
    re.IGNORECASE,
)
CHAT_MEMBER = "_chat.txt"


def chat_name(name: str) -> str | None:
    m = CHAT_FILE.fullmatch(Path(name).stem.strip())
    return m.group("name").strip() if m else None


class Source:
    """Where the chat's text is: a .txt, or a member of a .zip; ``named``:
    the chat's name if the file's name gives it (the .zip's, the .txt's, a
    bare ``_chat.txt``'s folder's), else None."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.member: str | None = None
        if path.suffix.lower() == ".zip":
            try:
                with zipfile.ZipFile(path) as archive:
                    self.member = chat_member(archive.namelist())
                    if self.member is not None:
                        info = archive.getinfo(self.member)
                        self.size = info.file_size
                        _check_ratio(path, info)
            except (OSError, zipfile.BadZipFile, ValueError) as exc:
                raise BadInput(f"{path.name}: not a readable zip archive ({exc})") from None
            if self.member is None:
                raise BadInput(f"{path.name}: no WhatsApp chat (.txt) inside the archive")
            self.named = chat_name(path.name) or chat_name(self.member.rsplit("/", 1)[-1])
        else:
            try:
                self.size = path.stat().st_size
            except OSError as exc:
                raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
            self.named = chat_name(path.name)
            if self.named is None and path.name == CHAT_MEMBER:
                self.named = chat_name(path.parent.name)

    @property
    def bare_chat(self) -> bool:
        """Whether the chat is a ``_chat.txt`` (iOS), whose own name says
        nothing of the chat's."""
        return (self.member or self.path.name).rsplit("/", 1)[-1] == CHAT_MEMBER

    def at(self, number: int) -> str:
        place = f"line {number}" if self.member is None else f"{self.member}, line {number}"
        return where(self.path, place)

    @contextlib.contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        try:
            if self.member is None:
                with self.path.open("rb") as stream:
                    yield stream
            else:
                with zipfile.ZipFile(self.path) as archive, archive.open(self.member) as member:
                    yield member
        except (OSError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
            raise BadInput(f"cannot read {self.path.name}: {exc}") from None

    def lines(self, progress: Progress | None, done: int, total: int) -> Iterator[tuple[int, str]]:
        """(number, text) of every line, decoded, without its line end."""
        with self.open() as stream:
            number = 0
            read = 0
            while True:
                raw = stream.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                number += 1
                read += len(raw)
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise BadInput(f"{self.at(number)}: longer than {MAX_LINE_BYTES // 1024} KiB")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise BadInput(f"{self.at(number)}: not UTF-8 text") from None
                if number == 1:
                    text = text.removeprefix("\ufeff")
                if progress is not None and number % PROGRESS_LINES == 0:
                    progress(done + read, total)
                yield number, text.rstrip("\r\n")

    def blocks(
        self, progress: Progress | None, total: int, done: int = 0
    ) -> Iterator[tuple[int, str]]:
        """(number of its first line, text) of the file in blocks of whole
        lines, decoded, lines ended by "\\n": what `lines` reads, a megabyte at
        a time, with the same limits and the same errors."""
        with self.open() as stream:
            number = 1
            read = 0
            carry = b""
            while True:
                raw = stream.read(BLOCK_BYTES)
                read += len(raw)
                data = carry + raw
                if raw:
                    cut = data.rfind(b"\n") + 1
                    block, carry = data[:cut], data[cut:]
                    if len(carry) > MAX_LINE_BYTES:
                        at = number + block.count(b"\n")
                        raise BadInput(f"{self.at(at)}: longer than {MAX_LINE_BYTES // 1024} KiB")
                    if not block:
                        continue
                elif data:
                    block, carry = data + b"\n", b""
                else:
                    break
                if len(block) > MAX_LINE_BYTES and (
                    long := re.search(rb"[^\n]{%d}" % (MAX_LINE_BYTES + 1), block)
                ):
                    at = number + block.count(b"\n", 0, long.start())
                    raise BadInput(f"{self.at(at)}: longer than {MAX_LINE_BYTES // 1024} KiB")
                try:
                    text = block.decode("utf-8")
                except UnicodeDecodeError as exc:
                    at = number + block.count(b"\n", 0, exc.start)
                    raise BadInput(f"{self.at(at)}: not UTF-8 text") from None
                if number == 1:
                    text = text.removeprefix("\ufeff")
                if "\r" in text:
                    text = text.replace("\r\n", "\n")
                if progress is not None:
                    progress(done + read, total)
                yield number, text
                number += block.count(b"\n")


def _check_ratio(path: Path, info: zipfile.ZipInfo) -> None:
    """Refuse a chat that inflates more than `MAX_ZIP_RATIO` times its
    compressed size (beyond `ZIP_RATIO_FREE`): chat text compresses a few
    times, a bomb of blank lines thousands. Reading never yields more than
    the size declared, so the declared size is what is checked."""
    allowed = max(ZIP_RATIO_FREE, MAX_ZIP_RATIO * info.compress_size)
    if info.file_size > allowed:
        raise BadInput(
            f"{path.name}: {info.filename} inflates {info.file_size:,} bytes from"
            f" {info.compress_size:,} (more than {MAX_ZIP_RATIO} times): refused"
        )


def chat_member(names: list[str]) -> str | None:
    texts = [n for n in names if n.lower().endswith(".txt") and not n.endswith("/")]
    for name in texts:
        if name.rsplit("/", 1)[-1] == CHAT_MEMBER:
            return name
    for name in texts:
        if chat_name(name.rsplit("/", 1)[-1]) is not None:
            return name
    return None


__all__ = [
    "CHAT_MEMBER",
    "MAX_LINE_BYTES",
    "Source",
    "chat_member",
    "chat_name",
]
