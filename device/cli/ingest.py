"""``pixie import``: bring a life in from the files people have.

``pixie import PATH`` detects the format (or takes ``--format``), streams the
file through its importer into the memory log in one durable transaction,
and prints one summary line. ``pixie log import`` is the same command under
its older name.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import signal
import sys
import threading
import zoneinfo
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pixie.device.cli import display
from pixie.device.cli.common import emit_json, file_arg, plural, seconds_flag
from pixie.device.cli.nodes import open_node
from pixie.device.errors import BadInput
from pixie.device.ingest import registry as importers
from pixie.device.ingest.base import DATE_ORDERS, Importer, ImportOptions, Item
from pixie.device.ingest.jsonl import IMPORTER as JSONL
from pixie.device.ingest.load import ImportReport, load
from pixie.device.store import config, identities
from pixie.protocol.timestamps import now_us

if TYPE_CHECKING:
    from pixie.device.node.keyed import Node

# An import's default CPU budget (see `_budget_for`): importers run at well
# under 2 s a MiB on every shape the tests throw at them, so this only stops
# an input built to cost minutes.
CPU_BASE_SECONDS = 30
CPU_SECONDS_PER_MIB = 4
CPU_STDIN_SECONDS = 600
MAX_ZONE_CHARS = 100  # the longest IANA name is about 30 characters

MAX_ME = 64  # --me flags at most


def local_zone() -> dt.tzinfo:
    """The machine's time zone with its rules (summer time included): $TZ or
    /etc/localtime's zone name if it names one, else the current fixed offset."""
    names = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = Path("/etc/localtime").resolve()
        names.append("/".join(target.parts[target.parts.index("zoneinfo") + 1 :]))
    except (OSError, ValueError):
        pass
    for name in names:
        if name:
            try:
                return zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
                continue
    return dt.datetime.now().astimezone().tzinfo or dt.UTC


def zone_flag(text: str) -> dt.tzinfo:
    """``--tz``: an IANA zone name ("Europe/Lisbon") or UTC."""
    if text.upper() in {"UTC", "Z"}:
        return dt.UTC
    try:
        if len(text) > MAX_ZONE_CHARS:
            raise ValueError  # no zone is named so; the file system would refuse the name
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise BadInput(
            f"--tz: unknown time zone {text!r:.60} (an IANA name such as Europe/Lisbon)"
        ) from None


def _options(args: argparse.Namespace) -> ImportOptions:
    me = tuple(args.me or ())
    if len(me) > MAX_ME:
        raise BadInput(f"--me: at most {MAX_ME} of them")
    for value in me:
        if not value.strip() or len(value) > 320 or "\x00" in value:
            raise BadInput(f"--me: {value!r:.40} is not an address, number or name")
    tz = zone_flag(args.tz) if args.tz is not None else local_zone()
    return ImportOptions(me=me, tz=tz, now_us=now_us(), date_order=args.date_order, notice=_notice)


def _notice(line: str) -> None:
    display.end_progress()
    print(f"pixie: notice: {line}", file=sys.stderr)


# The formats whose events have senders, of whom the user may be one.
SENDER_FORMATS = frozenset({"whatsapp", "telegram", "mbox"})
ME_PROMPT = (
    "Who are you in these messages? Your names, addresses and numbers, "
    "comma-separated (empty to skip): "
)
ME_NOTICE = (
    "no identity of yours is known, so your own messages cannot be told apart from"
    " others' (imported as another person's); run `pixie config set me NAME,ADDRESS,NUMBER`"
    " for later imports and `pixie contacts me NAME` to re-mark these as yours"
)


def _with_identities(
    node: Node, options: ImportOptions, importer: Importer, notices: list[str]
) -> tuple[ImportOptions, list[str] | None]:
    """``options`` with the user's stored identities added: the data dir's
    ``me`` setting and those the log knows (`pixie contacts me`), and
    ``notices`` to hear what the importer decided on its own. With no
    identity at all, for a format with senders: asked once on a terminal
    (the answer, to keep once the import is done, comes back beside the
    options), else a notice."""
    stored = config.load_me(node.data.path)
    with node.db.reading(plain=True) as conn:
        logged = identities.known(conn)
    me = tuple(dict.fromkeys([*options.me, *(stored or ()), *logged]))
    answer: list[str] | None = None
    if not me and importer.name in SENDER_FORMATS:
        if stored is None and sys.stdin.isatty():
            print(ME_PROMPT, end="", file=sys.stderr, flush=True)
            # Kept once the import is done: asked once, even if skipped.
            answer = config.check_me([sys.stdin.readline().strip()], "who you are")
            me = tuple(answer)
        if not me:
            notices.append(ME_NOTICE)
    return dataclasses.replace(options, me=me, notice=notices.append), answer


def run_import(args: argparse.Namespace, *, fallback: Importer | None = None) -> int:
    options = _options(args)
    notices: list[str] = []  # told once the import is done (an error is one line alone)
    answer: list[str] | None = None  # who the user said they are, when asked
    chosen = importers.get(args.format) if args.format else None
    # Open (and so validate) the data dir before reading a possibly long file.
    with open_node(args) as node:
        importer: Importer
        items: Iterator[Item]
        if args.path == "-":
            if chosen is not None and chosen is not JSONL:
                raise BadInput("standard input can only be read as JSON Lines (--format jsonl)")
            importer = JSONL
            items = JSONL.read_stream(sys.stdin.buffer)
        else:
            path = file_arg(args.path, "PATH")
            if not path.exists():
                raise BadInput(f"cannot read {args.path}: no such file or folder")
            if chosen is not None:
                importer = chosen
            elif fallback is not None:
                importer = importers.detect(path) or fallback
            else:
                importer = importers.for_path(path)
            label = f"{importer.name}: bytes read:"
            options, answer = _with_identities(node, options, importer, notices)
            items = importer.read(
                path, options, lambda done, total: display.progress(done, total, label)
            )
        budget = args.cpu_budget if args.cpu_budget is not None else _budget_for(args.path)
        budgeted = _within(_checked(items), budget)
        try:
            report = load(node.log, budgeted)
        except _OverBudget:
            raise BadInput(
                f"{args.path}: stopped after {budget:g} s of CPU time, nothing imported"
                " (an input shaped to cost minutes, or a very large one: --cpu-budget"
                " SECONDS allows more)"
            ) from None
        finally:
            budgeted.close()  # its timer stops here whatever ended the import
            display.end_progress()
    if args.json:
        emit_json(summary(report, importer))
    else:
        print(summary_line(report, importer))
    if answer is not None:
        config.save_me(node.data.path, answer)
    for line in notices:
        print(f"pixie: notice: {line}", file=sys.stderr)
    return 0


class _OverBudget(Exception):
    """The import's CPU budget ran out (raised by the SIGPROF timer)."""


def _budget_for(path: str) -> float:
    """The CPU seconds a file's import may take by default: `CPU_BASE_SECONDS`
    and `CPU_SECONDS_PER_MIB` for each MiB of it (a folder: of its files);
    standard input, whose size is unknown, `CPU_STDIN_SECONDS`."""
    if path == "-":
        return CPU_STDIN_SECONDS
    target = Path(path)
    try:
        if target.is_dir():
            size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
        else:
            size = target.stat().st_size
    except OSError:
        size = 0
    return CPU_BASE_SECONDS + CPU_SECONDS_PER_MIB * size / (1024 * 1024)


def _within(items: Iterator[Item], seconds: float) -> Generator[Item, None, None]:
    """``items``, read while the process has CPU time left of ``seconds``
    (counted from the first item; `_OverBudget` where it runs out, even
    inside one item's work). The timer stops when the items do, so the
    commit that follows is never interrupted: the import is then whole."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield from items
        return

    def expire(_signum: int, _frame: object) -> None:
        raise _OverBudget

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield from items
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _checked(items: Iterable[Item]) -> Iterator[Item]:
    # A file that vanishes or cannot be read mid-way is bad input, not a crash.
    try:
        yield from items
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}") from None


def summary(report: ImportReport, importer: Importer) -> dict[str, Any]:
    """The ``--json`` form of what an import did."""
    return {
        "format": importer.name,
        "imported": report.imported,
        "already_present": report.already_present,
        "new_contacts": report.new_contacts,
        "contact_cards": report.cards,
        "skipped": report.skipped_total,
        "skipped_reasons": dict(report.skipped.most_common()),
        "kinds": dict(report.kinds.most_common()),
    }


def summary_line(report: ImportReport, importer: Importer) -> str:
    """``imported 1,204 emails (37 already present), 12 new contacts, 3 skipped: why``."""
    one, many = importer.units
    if report.imported or report.already_present or not report.cards:
        head = f"imported {plural(report.imported, one, many)}"
        head += f" ({report.already_present:,} already present)"
        parts = [head, plural(report.new_contacts, "new contact")]
    else:
        # An address book: what it brought is contacts, not events.
        merged = report.cards - report.new_contacts
        parts = [f"read {plural(report.cards, one, many)}: {report.new_contacts:,} new"]
        if merged:
            parts[0] += f", {merged:,} merged into existing contacts"
    if report.skipped:
        why = ", ".join(f"{n:,} {reason}" for reason, n in report.skipped.most_common())
        parts.append(f"{report.skipped_total:,} skipped: {why}")
    return ", ".join(parts)


def cmd_import(args: argparse.Namespace) -> int:
    return run_import(args)


def add_import_flags(p: argparse.ArgumentParser) -> None:
    """The flags ``pixie import`` and ``pixie log import`` share."""
    p.add_argument(
        "--format",
        metavar="F",
        help="the format (default: detected): " + ", ".join(importers.REGISTRY.names()),
    )
    p.add_argument(
        "--me",
        action="append",
        metavar="ADDRESS|NAME",
        help="an address, phone number or name that is you (repeatable); decides from_me",
    )
    p.add_argument(
        "--tz",
        metavar="ZONE",
        help="time zone for times written without one (default: this machine's)",
    )
    p.add_argument(
        "--date-order",
        choices=DATE_ORDERS,
        help="how dates that do not say are read (default: decided from the file; "
        "day-first, with a notice, when no date in it tells)",
    )
    p.add_argument(
        "--cpu-budget",
        type=seconds_flag,
        metavar="SECONDS",
        help="CPU time the import may take before it stops, importing nothing "
        f"(default: {CPU_BASE_SECONDS} s and {CPU_SECONDS_PER_MIB} s a MiB of input)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pixie import``."""
    formats = ", ".join(importers.REGISTRY.names())
    p = sub.add_parser(
        "import",
        parents=[common],
        help="import mail, calendars, contacts, chats and journals",
        description=f"Import a file or folder into the memory log. Formats: {formats}. "
        "Importing the same export again adds only what is new.",
    )
    p.add_argument("path", metavar="PATH", help="a file or folder, or - for JSON Lines on stdin")
    add_import_flags(p)
    p.set_defaults(func=cmd_import)


__all__ = ["add_commands", "add_import_flags", "local_zone", "run_import", "summary_line"]
