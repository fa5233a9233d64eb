"""``pixie grep`` without the database layer, when the text mirror is current.

A grep is what a person runs most and waits for most, and almost all of its
time used to go on importing what it never touches: the ORM, the sync and
crypto stacks, every other subcommand. When the command line is a plain
``pixie [--data DIR] grep [--json] PATTERN`` and the data dir's text mirror
is current (its head names the log's newest row, that row is the event it
recorded, and no contact its lines name has been renamed: the same checks
`MemoryTextMirror.ensure_current` makes), this answers from the mapped files
with the same tool and the same output as the full command. In every other
case (a mirror behind the log or damaged, a database it cannot open read-only,
anything unusual on the command line) it returns None before printing a
thing, and the full command runs, which brings the mirror up to date or says
what is wrong.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from pixie.device.agent.grep import GrepMemoryTool, GrepResult
from pixie.device.cli.early import split_data
from pixie.device.errors import DeviceError
from pixie.device.store.datadir import DB_NAME, resolve_data_dir
from pixie.device.store.mirrorfiles import (
    MIRROR_FOLDER,
    Damaged,
    Head,
    MappedMirror,
    Standing,
    open_segments,
    standing,
)
from pixie.device.store.quickread import read_only_transaction

_FLAGS = {"--json"}


def _plain(arguments: list[str]) -> tuple[str | None, str, bool] | None:
    """(--data, pattern, --json) of a plain grep command line, else None."""
    data, rest = split_data(arguments)
    if not rest or rest[0] != "grep":
        return None
    flags = [a for a in rest[1:] if a.startswith("-")]
    words = [a for a in rest[1:] if not a.startswith("-")]
    if len(words) != 1 or not set(flags) <= _FLAGS or any(not a for a in rest):
        return None  # help, a pattern that starts with "-", "--": the full parser's
    return data, words[0], bool(flags)


def _current(db_path: Path, head: Head) -> bool:
    """Whether the log stands where the head says (`standing`), read in one
    read-only transaction on the driver."""
    with read_only_transaction(db_path) as con:
        return standing(con, head) is Standing.CURRENT


def show(result: GrepResult, as_json: bool) -> None:
    """Print a grep's answer as `pixie grep` prints it (the full command too)."""
    if as_json:
        sys.stdout.write(json.dumps(result.as_json(), ensure_ascii=False) + "\n")
    else:
        print(result.render())


def run(arguments: list[str]) -> int | None:
    """Answer a plain grep from a current mirror (exit status 0), or None to
    leave the command to the full parser."""
    plain = _plain(arguments)
    if plain is None:
        return None
    data, pattern, as_json = plain
    try:
        path = resolve_data_dir(data)
        head, base, tail, _ = open_segments(path / MIRROR_FOLDER)
        if not _current(path / DB_NAME, head):
            return None
        result = GrepMemoryTool(MappedMirror(base, tail)).run(pattern)
    except (DeviceError, Damaged, OSError, sqlite3.Error):
        return None  # the full command says what is wrong, or repairs it
    show(result, as_json)
    return 0
