"""The ``pixie`` command: one entry point for every role.

It lives at the top of the import graph (the Homebase builds on the device, so
this is the one place that may see every package) and only assembles the
subcommands each package defines.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sqlite3
import sys
import traceback
from typing import TYPE_CHECKING, NoReturn

from pixie.device.cli.early import package_version, split_data
from pixie.device.errors import BadInput, DeviceError
from pixie.entry.allocator import keep_freed_memory
from pixie.protocol.errors import ProtocolError
from pixie.relay.errors import RelayError

if TYPE_CHECKING:
    from pixie.device.node.keyed import Node
    from pixie.device.sync.driver import PeerService

# The subcommands (and so the database, the network and the crypto libraries)
# are imported when the parser is built, not when this module is: `pixie
# --version` answers before any of them (tests/integration/test_startup.py).


class UsageError(Exception):
    """A command line argparse refused."""


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus a message and exits; we want one clear line.
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def holder_services(node: Node, args: argparse.Namespace) -> list[PeerService]:
    """What `pixie run` on a Homebase answers besides sync: the holder, with
    the faults ``--faults`` asks for (refused at start if malformed)."""
    from pixie.homebase.holder import Holder
    from pixie.protocol.faults import HOLDER_FAULTS, FaultSpecError, parse_faults

    if node.role != "homebase":
        return []
    try:
        plan = parse_faults(args.faults or "", HOLDER_FAULTS, seed=args.fault_seed)
    except FaultSpecError as exc:
        raise BadInput(f"--faults: {exc}") from None
    if plan:
        print(f"pixie run: injecting holder faults {plan.describe()}", file=sys.stderr, flush=True)
    return [Holder(node, plan)]


# Which module registers each command: a command line that names one builds a
# parser with that module alone, so a command imports what it runs and not
# every other command's libraries (a test holds this table to the full
# parser's commands and each command's help to the full parser's).
COMMAND_MODULES = {
    "init": "pixie.device.cli.datadir",
    "status": "pixie.device.cli.datadir",
    "config": "pixie.device.cli.datadir",
    "keys": "pixie.device.cli.keys",
    "contacts": "pixie.device.cli.contacts",
    "import": "pixie.device.cli.ingest",
    "log": "pixie.device.cli.log",
    "grep": "pixie.device.cli.grep",
    "notebook": "pixie.device.cli.notebook",
    "pin": "pixie.device.cli.notebook",
    "huddle": "pixie.device.cli.notebook",
    "invite": "pixie.device.cli.pairing",
    "pair": "pixie.device.cli.pairing",
    "devices": "pixie.device.cli.pairing",
    "sync": "pixie.device.cli.sync",
    "run": "pixie.device.cli.run",
    "distill": "pixie.device.cli.distill",
    "offload": "pixie.device.cli.offload",
    "fetch": "pixie.device.cli.offload",
    "recall": "pixie.device.cli.offload",
    "nudges": "pixie.device.cli.nudges",
    "web": "pixie.device.cli.web",
    "chat": "pixie.device.cli.agent",
    "mcp": "pixie.device.cli.agent",
    "relay": "pixie.relay.cli",
}


def command_of(arguments: list[str]) -> str | None:
    """The command a command line names, if it names one before any other
    option than ``--data`` (``--help`` and the like need the full parser)."""
    _, rest = split_data(arguments)
    return rest[0] if rest and rest[0] in COMMAND_MODULES else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with ``command``, only the commands of the
    module that registers it; else every command."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--data",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="data directory (default: $PIXIE_DATA or the per-user data dir)",
    )
    parser = _Parser(
        prog="pixie",
        description="Pixie Memory: local-first memory for a personal agent.",
        epilog="Refused input is one line on stderr and exit status 2. "
        "PIXIE_DEBUG=1 adds the traceback to an unexpected error.",
        parents=[common],
    )
    parser.add_argument(
        "--version", action="version", version=f"pixie {package_version() or '(not installed)'}"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    if command is not None:
        module = importlib.import_module(COMMAND_MODULES[command])
        if command == "run":
            module.add_commands(sub, common, services=holder_services)
        else:
            module.add_commands(sub, common)
        return parser
    from pixie.device.cli import agent as agentcli
    from pixie.device.cli import main as device_cli
    from pixie.relay import cli as relay_cli

    device_cli.add_commands(sub, common, services=holder_services)
    agentcli.add_commands(sub, common)
    relay_cli.add_commands(sub, common)
    return parser


DEBUG_ENV = "PIXIE_DEBUG"


def _quick(arguments: list[str]) -> int | None:
    """The exit status of a command answered without the full parser and
    the database layer (a plain grep on a current text mirror, a plain
    status, a notebook search), or None to run it in full. Each answers
    only what it can answer as the full command would, errors included."""
    if any(_SURROGATE.search(a) for a in arguments):
        return None
    if "grep" in arguments:
        from pixie.device.cli import quickgrep

        return quickgrep.run(arguments)
    if "status" in arguments:
        from pixie.device.cli import statusview

        return statusview.quick(arguments)
    if "search" in arguments:
        from pixie.device.cli import notebooksearch

        return notebooksearch.quick(arguments)
    return None


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments == ["--version"]:  # what argparse would print, without the subcommands
        print(f"pixie {package_version() or '(not installed)'}")
        return 0
    try:
        quick = _quick(arguments)
        if quick is None:
            keep_freed_memory()
            parser = build_parser(command_of(arguments))
            _check_arguments(arguments)
            args = parser.parse_args(arguments)
            code: int = args.func(args)
        else:
            code = quick
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("pixie: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        known = _known(exc)
        if known is not None:
            print(f"pixie: error: {' '.join(str(known).splitlines())}", file=sys.stderr)
            return 2
        # The last line of defence: input, a file or the database reached a
        # path no check foresaw. The user still gets one line and status 2,
        # and the line names the exception, so a bug is reported, not hidden;
        # PIXIE_DEBUG=1 adds the traceback.
        if os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
        print(f"pixie: error: {_unexpected(exc)}", file=sys.stderr)
        return 2
    return code


def _reader_gone() -> int:
    """The reader went away (``pixie grep x | head``); that is not an error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _check_arguments(arguments: list[str]) -> None:
    """Refuse an argument that is not UTF-8 (Python hands it over with lone
    surrogates standing for the bad bytes, which nothing can store or print)."""
    for number, value in enumerate(arguments, 1):
        if _SURROGATE.search(value):
            raise UsageError(f"argument {number} ({value!r:.60}) is not valid UTF-8")


_SURROGATE = re.compile("[\ud800-\udfff]")
_KNOWN = (UsageError, DeviceError, ProtocolError, RelayError)


def _known(exc: BaseException) -> BaseException | None:
    """``exc``, or the one error a task group wrapped it in, if it is one of
    the errors the packages raise on purpose."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, _KNOWN) else None


def _unexpected(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps the driver's error
    inner = orig if isinstance(orig, Exception) else exc
    lines = str(inner).strip().splitlines()
    detail = f"{type(inner).__name__}: {lines[0][:200]}" if lines else type(inner).__name__
    if isinstance(inner, sqlite3.DatabaseError):
        message = str(inner)
        if type(inner) is sqlite3.DatabaseError or any(w in message for w in _DAMAGE_WORDS):
            return f"the database is damaged or not a Pixie database ({detail})"
        return f"database error ({detail})"
    return f"unexpected {detail} (set {DEBUG_ENV}=1 to see where)"


# What SQLite says of a file it cannot read as a database.
_DAMAGE_WORDS = ("malformed", "not a database", "corrupt")


if __name__ == "__main__":
    sys.exit(main())
