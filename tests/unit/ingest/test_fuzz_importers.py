"""Every importer against hostile files of its own format.

Inputs are the real exports under ``tests/fixtures/ingest``, mutated: cut,
spliced with another file's bytes, bit-flipped, a line repeated thousands of
times, blank lines by the thousand, or a hostile snippet of the format spliced
in (a rule that fires every second, a 5,000-digit number, a line of a
megabyte, quoted-printable soft breaks, a zip that inflates). The contract:
an importer reads the file to its end, or raises `BadInput`; nothing else (a
KeyError, a RecursionError, an OverflowError) gets out. The suite runs a short
pass; ``./scripts/fuzz`` a long one.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pixie.device.errors import BadInput
from pixie.device.ingest import registry
from pixie.device.ingest.base import ImportOptions, to_us
from tests.support.fuzzing import fuzz_settings

pytestmark = pytest.mark.fuzz

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"
OPTIONS = ImportOptions(
    me=("me@example.com", "Sam"),
    tz=dt.UTC,
    now_us=to_us(dt.datetime(2026, 6, 1, tzinfo=dt.UTC), dt.UTC),
)

# (format, the suffix a file of it is named with, its fixture files)
FORMATS = {
    "ics": (".ics", sorted((FIXTURES / "ics").glob("*.ics"))),
    "mbox": (".mbox", sorted((FIXTURES / "mbox").glob("*.mbox"))),
    "telegram": (".json", sorted((FIXTURES / "telegram").glob("*.json"))),
    "vcf": (".vcf", sorted((FIXTURES / "vcf").glob("*.vcf"))),
    "whatsapp": (".txt", sorted((FIXTURES / "whatsapp").glob("*.txt"))),
}

# Snippets of each format an attacker would reach for.
HOSTILE: dict[str, list[bytes]] = {
    "ics": [
        b"BEGIN:VEVENT\r\nUID:x\r\nDTSTART:20260101T000000Z\r\n"
        b"RRULE:FREQ=HOURLY;BYMINUTE=" + b",".join(b"%d" % i for i in range(60)) + b"\r\n"
        b"SUMMARY:tick\r\nEND:VEVENT\r\n",
        b"BEGIN:VEVENT\r\nUID:y\r\nDTSTART:00010101T000000Z\r\nRRULE:FREQ=HOURLY\r\nEND:VEVENT\r\n",
        b"BEGIN:VEVENT\r\nUID:z\r\nDTSTART:99991231T000000Z\r\nRRULE:FREQ=YEARLY;COUNT=99999"
        b"\r\nEND:VEVENT\r\n",
        b"RRULE:FREQ=DAILY;INTERVAL=0\r\n",
        b"DTSTART;TZID=" + b"A" * 5000 + b":20260101T000000\r\n",
    ],
    "mbox": [
        b"From x@y Mon Jan  1 00:00:00 2024\nTo: "
        + b", ".join(b"p%d@x.org" % i for i in range(300))
        + b"\nSubject: =?utf-8?b?"
        + b"A" * 5000
        + b"?=\n\nbody\n",
        b"Content-Type: multipart/mixed; boundary=b\n\n" + b"--b\n" * 2000,
        b"Date: Mon, 1 Jan 99999999 00:00:00 +9999\n",
    ],
    "telegram": [
        b'{"id": ' + b"9" * 5000 + b"}",
        b"[" * 3000,
        b'"date_unixtime": "' + b"9" * 40 + b'"',
        b'{"text": [' + b'{"type": "link", "text": "x"},' * 500 + b'"y"]}',
    ],
    "vcf": [
        b"BEGIN:VCARD\r\nVERSION:2.1\r\nFN:Ann\r\nNOTE;ENCODING=QUOTED-PRINTABLE:"
        + b"=\r\n".join([b"ab"] * 5000)
        + b"\r\nEND:VCARD\r\n",
        b"BEGIN:VCARD\r\n" * 500,
        b"BDAY:99999-99-99\r\n",
        b"EMAIL:" + b"@" * 5000 + b"\r\n",
    ],
    "whatsapp": [
        b"\n" * 20_000,
        b"[99/99/9999, 99:99:99] Ann: x\n",
        b"[01/01/2024, 10:00:00] " + b"A" * 200 + b": x\n",
        b"x" * (1024 * 1024 + 1) + b"\n",
    ],
}


def _check(fmt: str, path: Path) -> None:
    """Read the whole file; only BadInput may stop it."""
    importer = registry.get(fmt)
    try:
        for _ in importer.read(path, OPTIONS, None):
            pass
    except BadInput:
        pass


@st.composite
def hostile_files(draw: st.DrawFn, fmt: str) -> bytes:
    _, files = FORMATS[fmt]
    raw = draw(st.sampled_from(files)).read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["cut", "splice", "flip", "repeat", "hostile", "other"]))
        at = draw(st.integers(0, len(raw)))
        if how == "cut":
            raw = raw[:at]
        elif how == "splice":
            end = draw(st.integers(at, len(raw)))
            raw = raw[:at] + raw[end:] + raw[at:end]
        elif how == "flip" and raw:
            i = min(at, len(raw) - 1)
            raw = raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1 :]
        elif how == "repeat":
            lines = raw.splitlines(keepends=True) or [b"\n"]
            line = lines[min(draw(st.integers(0, len(lines) - 1)), len(lines) - 1)]
            raw = raw[:at] + line * draw(st.integers(2, 3000)) + raw[at:]
        elif how == "hostile":
            raw = raw[:at] + draw(st.sampled_from(HOSTILE[fmt])) + raw[at:]
        else:  # another format's bytes where this one's were
            other = draw(st.sampled_from(sorted(FORMATS)))
            raw = raw[:at] + draw(st.sampled_from(FORMATS[other][1])).read_bytes()[:4096]
    return raw


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@fuzz_settings(short=40)
@given(data=st.data())
def test_an_importer_reads_a_hostile_file_or_refuses_it(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, data: st.DataObject
) -> None:
    raw = data.draw(hostile_files(fmt))
    suffix, _ = FORMATS[fmt]
    name = "WhatsApp Chat with Ann" if fmt == "whatsapp" else "export"
    path = tmp_path_factory.mktemp(fmt) / f"{name}{suffix}"
    path.write_bytes(raw)
    _check(fmt, path)


@fuzz_settings(short=20)
@given(data=st.data())
def test_a_whatsapp_zip_is_read_or_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """A chat in a zip: the zip itself mutated too (members renamed, cut)."""
    chat = data.draw(hostile_files("whatsapp"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(data.draw(st.sampled_from(["_chat.txt", "chat.txt", "a/b.txt"])), chat)
    raw = buffer.getvalue()
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(raw)))
        raw = raw[:at] + data.draw(st.binary(max_size=64)) + raw[at:]
    path = tmp_path_factory.mktemp("zip") / "WhatsApp Chat with Ann.zip"
    path.write_bytes(raw)
    _check("whatsapp", path)
