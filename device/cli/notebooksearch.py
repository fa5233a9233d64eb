"""``pixie notebook search``: what check_notebook answers, from the command line.

The search reads the clear zone and the contact book, both on the driver
(`ClearNotebook`, `ContactReader`), so it needs none of the ORM, the sync
stack or the crypto a node opens with. A plain ``pixie [--data DIR] notebook
search ...`` command line is answered here (`quick`) on a `PlainDatabase`,
when the data dir is one a quick command may read as it is (`store/quickread.py`);
in every other case, and for a command line this parser refuses, it is left
to the full command, which runs the same `search` on the opened node. A test
holds the two paths' output equal and what the quick one imports.
"""

from __future__ import annotations

import argparse
import sqlite3
from typing import Any, NoReturn

from pixie.device.agent.limits import MAX_DAYS_BACK
from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.cli import display
from pixie.device.cli.common import days_back_flag, emit_json, json_flag
from pixie.device.cli.early import split_data
from pixie.device.errors import BadInput, DeviceError
from pixie.device.notebook.clearview import ClearNotebook
from pixie.device.store.contacts import ContactReader
from pixie.device.store.datadir import CONFIG_NAME, DB_NAME, resolve_data_dir
from pixie.device.store.plaindb import PlainDatabase
from pixie.device.store.quickread import readable


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The search's arguments, for the full parser and the quick one alike."""
    p.add_argument("query", nargs="?", default="")
    p.add_argument("--person", metavar="NAME")
    p.add_argument("--topic", metavar="T")
    p.add_argument(
        "--days", type=days_back_flag, metavar="N", help="only notes about the last N days"
    )
    p.add_argument(
        "--ahead",
        type=days_back_flag,
        metavar="N",
        help="only notes about the next N days (appointments, plans)",
    )
    json_flag(p)


def search(args: argparse.Namespace, clear: ClearNotebook, contacts: ContactReader) -> int:
    """Run the search ``args`` asks for and print it."""
    for flag, value in (("--days", args.days), ("--ahead", args.ahead)):
        if value is not None and not 1 <= value <= MAX_DAYS_BACK:
            raise BadInput(f"{flag} must be from 1 to {MAX_DAYS_BACK}")
    wanted: dict[str, Any] = {"query": args.query or ""}
    for key, value in (
        ("person", args.person),
        ("topic", args.topic),
        ("days_back", args.days),
        ("days_ahead", args.ahead),
    ):
        if value is not None:
            wanted[key] = value
    answer = CheckNotebookTool(clear, contacts).lookup(wanted)
    if args.json:
        names = contacts.names()
        emit_json(
            {
                "notes": [
                    {**display.note_json(s.note, names), "score": s.score} for s in answer.notes
                ],
                "message": answer.text.splitlines()[0],
            }
        )
    else:
        # A miss is one line that says so; the person's contact card, which
        # the model gets after it, is no match and is not shown as one.
        print(answer.text if answer.notes else answer.text.splitlines()[0])
    return 0


class _Refused(Exception):
    """A command line the quick parser will not take: the full one says why."""


class _Quiet(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def _parse(rest: list[str]) -> argparse.Namespace | None:
    """The arguments of ``notebook search ...``, or None for anything else."""
    if rest[:2] != ["notebook", "search"]:
        return None
    words = rest[2:]
    if any(w in ("-h", "--help", "--data") or w.startswith("--data=") for w in words):
        return None
    parser = _Quiet(prog="pixie notebook search", add_help=False)
    add_arguments(parser)
    try:
        return parser.parse_args(words)
    except _Refused:
        return None


def quick(arguments: list[str]) -> int | None:
    """Answer a plain ``pixie notebook search`` (its exit status), or None to
    leave it to the full command."""
    data, rest = split_data(arguments)
    args = _parse(rest)
    if args is None:
        return None
    try:
        path = resolve_data_dir(data)
        if not readable(path):
            return None
        db = PlainDatabase(path / DB_NAME)
    except (DeviceError, OSError, sqlite3.Error):
        return None  # the full command says what is wrong
    try:
        clear = ClearNotebook(db, settings=path / CONFIG_NAME)
        return search(args, clear, ContactReader(db))
    finally:
        db.dispose()


__all__ = ["add_arguments", "quick", "search"]
