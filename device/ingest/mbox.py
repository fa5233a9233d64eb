"""Reading emails from mbox files (Thunderbird, Gmail Takeout, Apple Mail,
mutt): one email event per message.

The file is split into messages while it is read, a line at a time: a message
starts at a "From " line at the start of the file, after a blank line, or
shaped like a postmark ("From sender ... 2024"). Only one message is held at
a time, and of a message at most `MAX_MESSAGE_BYTES` (the rest of a giant one,
an attachment in practice, is passed over), so memory stays bounded whatever
the size of the mailbox. ">From " lines are unescaped (mboxrd).

Each message is parsed by the standard library's ``email`` package
(``policy.default``); the fields the event needs are then read from the raw
headers (parsed header objects are rebuilt on every access and would cost
more than the parse): RFC 2047 words, raw 8-bit bytes and the body's charset
and transfer encoding decoded, an unknown charset read as UTF-8 with
replacement. `bare_parse` does the splitting and parsing alone. The
event's text is the subject line and the body: text/plain preferred, else the
HTML reduced to text; quoted replies, their "On ... wrote:" attribution,
Outlook's "Original Message" blocks and the signature trimmed; attachments
named on a last line. Mail no person wrote (List-Id or List-Unsubscribe,
Precedence: bulk, Auto-Submitted, a no-reply sender) says so on the line
after the subject (`automated_by`).

The thread is the root of References, else In-Reply-To, else the message's own
Message-ID (else its subject without "Re:"/"Fwd:"), so a conversation shares
one. The people of From, To and Cc become contact cards, yielded before the
event; the event's contact is the sender, or for an email the user sent, its
first recipient.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from pathlib import Path
from typing import IO

from pixie.device.errors import BadInput
from pixie.device.ingest.base import (
    ContactCard,
    ImportOptions,
    Item,
    Progress,
    Skipped,
    fit_text,
    ref,
    stable_id,
    where,
)
from pixie.device.ingest.mailparts import (
    _body,
    _date,
    _header,
    _ids,
    _people,
    _raw_header,
    _thread_subject,
    html_to_text,
    trim_reply,
)
from pixie.device.store.memlog import MAIL_AUTOMATED_MARK, EventKind, NewEvent

SUFFIXES = (".mbox", ".mbx")
SNIFF_BYTES = 4096
MAGIC = b"From "
# Bytes read at most per call: a longer line (base64 without breaks) comes in pieces.
CHUNK_BYTES = 64 * 1024
# Of one message, at most this much is parsed; the rest is passed over.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
PROGRESS_MESSAGES = 256  # messages between two calls of the progress hook
# Cards already yielded are remembered up to this many, then forgotten (a
# repeated card is harmless, an unbounded set is not).
MAX_REMEMBERED_CARDS = 10_000

# A postmark: "From sender Sat Jan  3 01:05:34 1996", a time of day then a year.
_POSTMARK = re.compile(rb"From \S+ .*\d{1,2}:\d{2}(?::\d{2})?\b.*\d{4}\s*$")
_ESCAPED_FROM = re.compile(rb">+From ")
_PARSER = BytesParser(policy=policy.default)


class _Raw:
    """One message as the splitter found it: its number (from 1), its
    postmark line and its bytes (without the postmark)."""

    __slots__ = ("data", "number", "postmark")

    def __init__(self, number: int, postmark: bytes, data: bytes) -> None:
        self.number = number
        self.postmark = postmark
        self.data = data


def _messages(stream: IO[bytes], path: Path, counter: list[int]) -> Iterator[_Raw]:
    """The messages of ``stream``; ``counter[0]`` follows the bytes read.

    Raises `BadInput` if the first line that is not blank is not a "From "
    line. An empty file is an empty mailbox."""
    number = 0
    postmark: bytes | None = None
    parts: list[bytes] = []
    size = 0
    line_start = True  # the chunk about to be read starts a line
    previous_blank = True  # the line before it was blank (or there was none)
    leading = 0  # blank lines before the first postmark
    while True:
        chunk = stream.readline(CHUNK_BYTES)
        if not chunk:
            break
        counter[0] += len(chunk)
        starts = line_start
        line_start = chunk.endswith(b"\n")
        if starts and chunk.startswith(MAGIC) and (previous_blank or _POSTMARK.match(chunk)):
            if postmark is not None:
                yield _Raw(number, postmark, b"".join(parts))
            number += 1
            postmark = chunk.rstrip(b"\r\n")
            parts = []
            size = 0
            previous_blank = False
            continue
        blank = starts and line_start and not chunk.strip()
        if postmark is None:
            if blank:
                leading += 1
                continue
            raise BadInput(
                where(path, f'line {leading + 1}: not an mbox file (no "From " line starts it)')
            )
        if starts and chunk.startswith(b">") and _ESCAPED_FROM.match(chunk):
            chunk = chunk[1:]
        if size < MAX_MESSAGE_BYTES:
            parts.append(chunk)
            size += len(chunk)
        previous_blank = blank
    if postmark is not None:
        yield _Raw(number, postmark, b"".join(parts))


def _parse(raw: _Raw, path: Path) -> EmailMessage | None:
    """``raw`` as a message, or None for an empty one."""
    if not raw.data or raw.data.isspace():  # isspace, unlike strip, copies nothing
        return None
    try:
        message = _PARSER.parsebytes(raw.data)
    except Exception as exc:  # the parser is lenient; anything it raises is a broken message
        raise BadInput(where(path, f"message {raw.number}: cannot parse it: {exc}")) from None
    if not isinstance(message, EmailMessage) or not message.keys():
        raise BadInput(where(path, f"message {raw.number}: no header fields, not an email"))
    return message


def bare_parse(path: Path) -> int:
    """How many messages ``path`` holds, each split and parsed as `read` does
    and nothing more: the baseline an import's throughput is measured against."""
    count = 0
    with path.open("rb") as stream:
        for raw in _messages(stream, path, [0]):
            if raw.data and not raw.data.isspace():
                _PARSER.parsebytes(raw.data)
            count += 1
    return count


# --- the importer --------------------------------------------------------------------


class MboxImporter:
    """mbox files, one email event per message."""

    name = "mbox"
    units = ("email", "emails")

    def sniff(self, path: Path) -> bool:
        """A file named .mbox or .mbx, or a regular file that starts with
        "From ". A folder is not an mbox (Apple Mail's "Inbox.mbox" folder
        holds one), and a pipe or a device is never read."""
        try:
            mode = path.stat().st_mode
        except OSError:
            return path.suffix.lower() in SUFFIXES
        if stat.S_ISDIR(mode):
            return False
        if path.suffix.lower() in SUFFIXES:
            return True
        # Checked before opening: opening a named pipe would wait for a writer.
        if not stat.S_ISREG(mode):
            return False
        try:
            with path.open("rb") as stream:
                head = stream.read(SNIFF_BYTES)
        except OSError:
            return False
        return head.startswith(MAGIC)

    def read(self, path: Path, options: ImportOptions, progress: Progress | None) -> Iterator[Item]:
        """Every email of ``path``, each after the cards of its people."""
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
        with stream:
            try:
                total = os.fstat(stream.fileno()).st_size
            except OSError:
                total = 0
            counter = [0]
            carded: set[ContactCard] = set()
            try:
                for raw in _messages(stream, path, counter):
                    yield from self._message(path, raw, options, carded)
                    if progress is not None and raw.number % PROGRESS_MESSAGES == 0:
                        progress(counter[0], max(total, counter[0]))
            except OSError as exc:
                raise BadInput(f"cannot read {path.name}: {exc.strerror}") from None
            if progress is not None:
                progress(counter[0], max(total, counter[0]))

    def _message(
        self, path: Path, raw: _Raw, options: ImportOptions, carded: set[ContactCard]
    ) -> Iterator[Item]:
        message = _parse(raw, path)
        if message is None:
            yield Skipped("empty email")
            return
        at = _date(message, raw.postmark, options.tz)
        if at is None:
            yield Skipped("email without a date")
            return
        subject = _header(message, "subject")
        body, attachments = _body(message)
        if not body and not attachments:
            yield Skipped("email without a body")
            return

        senders = _people(message, "from")
        sender = senders[0] if senders else None
        if sender is None:
            sender_name = _header(message, "from")
            from_me = options.is_me(sender_name)
        else:
            from_me = options.is_me(sender.address, sender.name)
        recipients = _people(message, "to")
        copied = _people(message, "cc")
        contact: str | None = None
        if not from_me:
            contact = sender.address if sender is not None else None
        else:
            others = [p for p in recipients + copied if not options.is_me(p.address, p.name)]
            contact = others[0].address if others else None

        seen: set[str] = set()
        for person in senders + recipients + copied:
            if person.address in seen or options.is_me(person.address, person.name):
                continue
            seen.add(person.address)
            card = ContactCard(name=person.name, aliases=(person.address,))
            if card in carded:
                continue
            if len(carded) >= MAX_REMEMBERED_CARDS:
                carded.clear()
            carded.add(card)
            yield card

        ids = _ids(_raw_header(message, "message-id"))
        message_id = ids[0] if ids else None
        references = _ids(_raw_header(message, "references"))
        replied = _ids(_raw_header(message, "in-reply-to"))
        roots = references or replied or ids
        thread: str | None = None
        if roots:
            thread = ref("email:", roots[0])
        elif _thread_subject(subject):
            thread = ref("email:subject:", _thread_subject(subject))

        trimmed = trim_reply(body)
        lines = [f"Subject: {subject or '(no subject)'}"]
        automated = automated_by(message, sender.address if sender is not None else "")
        if automated:
            lines.append(f"{MAIL_AUTOMATED_MARK} ({automated})")
        if trimmed:
            lines += ["", trimmed]
        if attachments:
            lines += ["", f"[attachments: {', '.join(attachments)}]"]
        text = fit_text("\n".join(lines))

        if message_id is not None:
            event_id = stable_id("mbox", message_id, at_us=at)
            source = ref("mbox:", message_id)
        else:
            from_key = sender.address if sender is not None else _header(message, "from")
            key = hashlib.sha256(
                "\x1f".join((str(at), from_key, subject, body)).encode("utf-8", "surrogatepass")
            ).hexdigest()
            event_id = stable_id("mbox", None, key, at_us=at)
            source = ref("mbox:", f"no-id:{key[:32]}")
        yield NewEvent(
            kind=EventKind.EMAIL,
            at=at,
            text=text,
            contact=contact,
            thread=thread,
            source=source,
            from_me=from_me,
            id=event_id,
        )


# Mail no person wrote: a mailing list or newsletter, bulk mail, a robot's
# notice. It is marked on the line after the subject (`MAIL_AUTOMATED_MARK`),
# which distillation reads: such mail gets a digest of its own but never adds
# to anyone's person page.
_NO_REPLY = re.compile(
    r"^(?:no[-_.]?reply|do[-_.]?not[-_.]?reply|notifications?|mailer-daemon|bounces?|"
    r"newsletters?|alerts?|marketing)(?:[-_.+].*)?@",
    re.IGNORECASE,
)


def automated_by(message: Message, address: str) -> str:
    """Why ``message`` reads as sent by no person ("mailing list", "bulk
    mail", "automatic reply", "no-reply sender"), or "" when a person wrote it."""
    if _raw_header(message, "list-id") or _raw_header(message, "list-unsubscribe"):
        return "mailing list"
    precedence = _raw_header(message, "precedence").strip().casefold()
    if precedence in ("bulk", "list", "junk"):
        return "bulk mail"
    auto = _raw_header(message, "auto-submitted").strip().casefold()
    if auto and auto != "no":
        return "automatic reply" if auto.startswith("auto-replied") else "sent automatically"
    if _NO_REPLY.match(address):
        return "no-reply sender"
    return ""


IMPORTER = MboxImporter()

__all__ = [
    "IMPORTER",
    "MAX_MESSAGE_BYTES",
    "SNIFF_BYTES",
    "SUFFIXES",
    "MboxImporter",
    "bare_parse",
    "html_to_text",
    "trim_reply",
]
