"""Running ``pixie`` in-process, and showing a refused command changed nothing."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from pixie.entry.main import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def run_cli(*argv: str, stdin: bytes | None = None) -> CliResult:
    """Run ``pixie`` in-process (fast); the subprocess tests cover the real binary."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
    finally:
        sys.stdin = old_stdin
    return CliResult(code, out.getvalue(), err.getvalue())


def db_fingerprint(data: Path) -> str:
    """Event and contact rows, so a refused command can be shown to change nothing."""
    con = sqlite3.connect(data / "pixie.db")
    try:
        rows = con.execute("SELECT id, kind, at, text FROM memory_event ORDER BY n").fetchall()
        rows += con.execute("SELECT id, name FROM contact ORDER BY id").fetchall()
        rows += con.execute("SELECT alias_key FROM contact_alias ORDER BY 1").fetchall()
    finally:
        con.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()
