"""The device-side commands of ``pixie``: init, status, contacts, log, grep.

Handlers print exactly what a user (or, for grep, the model) should see and
raise a `DeviceError` for anything refused; the entry point turns that into
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from pixie.device.agent.grep import GrepMemoryTool
from pixie.device.agent.tools import MAX_DAYS_BACK, CheckNotebookTool
from pixie.device.cli import display
from pixie.device.distill.service import NotetakingService
from pixie.device.errors import BadInput, NotFound
from pixie.device.ingest.jsonl import read_events
from pixie.device.logs import configure_logging
from pixie.device.notebook.huddle import nudges, read_huddle_file, record_huddle
from pixie.device.store import config
from pixie.device.store.contacts import clean_name
from pixie.device.store.datadir import ROLES, DataDir, resolve_data_dir
from pixie.device.store.memlog import NewEvent, check_ref, check_text, parse_kind
from pixie.device.store.node import Node
from pixie.device.store.notes import NoteKind, Zone
from pixie.device.store.siblings import SiblingInfo
from pixie.device.sync import control, daemon, offload, pairing
from pixie.device.sync.driver import PeerService, SyncOutcome, SyncReport, last_syncs
from pixie.device.sync.relayclient import RelayAddress, RelayUnavailable
from pixie.protocol.errors import ProtocolError
from pixie.protocol.identity import fingerprint
from pixie.protocol.ids import parse_id
from pixie.protocol.offload import Outcome
from pixie.protocol.sync import SyncStats
from pixie.protocol.timestamps import format_time, now_us, parse_time

# A sync draws a progress line only when the sibling holds this many more items
# than we do (an initial sync of a large log, not the usual handful).
SYNC_PROGRESS_FROM = 1000


# The most any timeout, interval or age flag may ask for. Beyond these a
# number is a typo (or `inf`), and some would overflow on the way to a
# deadline or a timestamp.
MAX_FLAG_SECONDS = 7 * 86_400.0
MAX_FLAG_DAYS = float(MAX_DAYS_BACK)


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        # argparse's own wording for a value that is no number at all
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r:.40}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{what} must be a finite number, not {text!r:.40}")
    return value


def seconds_flag(text: str) -> float:
    """An argparse type: a number of seconds above 0, at most a week."""
    value = _number(text, "seconds")
    if not 0 < value <= MAX_FLAG_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 and at most {MAX_FLAG_SECONDS:g}, not {text:.40}"
        )
    return value


def days_flag(text: str) -> float:
    """An argparse type: a number of days from 0 to a century."""
    value = _number(text, "days")
    if not 0 <= value <= MAX_FLAG_DAYS:
        raise argparse.ArgumentTypeError(
            f"must be a number of days from 0 to {MAX_FLAG_DAYS:g}, not {text:.40}"
        )
    return value


def days_back_flag(text: str) -> int:
    """An argparse type: a whole number of days from 1 to `MAX_DAYS_BACK`."""
    value = count_flag(text)
    if value > MAX_DAYS_BACK:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_DAYS_BACK}, not {value}")
    return value


def count_flag(text: str) -> int:
    """An argparse type: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r:.40}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def file_arg(value: str, what: str) -> Path:
    """A path named on the command line, refused if no file could have it
    (the operating system itself raises ValueError for a NUL)."""
    if "\x00" in value:
        raise BadInput(f"{what} contains a NUL character")
    return Path(value)


def emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def data_path(args: argparse.Namespace) -> Path:
    return resolve_data_dir(getattr(args, "data", None))


def open_node(args: argparse.Namespace) -> Node:
    return Node.open(data_path(args))


# -- init and status -------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    path = data_path(args)
    name = clean_name(args.name, "name") if args.name is not None else None
    DataDir.init(path, name=name, role=args.role)
    with Node.open(path) as node:
        if args.json:
            emit_json({"data": str(path), "role": node.role, "origin": node.origin})
        else:
            print(f"initialised a {node.role} data dir at {path}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        siblings = node.siblings.all()
        info = {
            "data": str(node.data.path),
            "role": node.role,
            "name": node.name,
            "fingerprint": fingerprint(node.public_key()),
            "origin": node.origin,
            "digest": node.digest().digest().hex(),
            "events": node.log.count(),
            "contacts": len(node.contacts.all()),
            **{f"{zone}_notes": count for zone, count in node.notebook.counts().items()},
        }
        last = last_syncs(node)
    if args.json:
        emit_json(
            {
                **info,
                "siblings": [
                    {**s.as_json(), "last_sync": last.get(s.fingerprint)} for s in siblings
                ],
            }
        )
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
        for s in siblings:
            print(f"sibling: {s.name} ({s.role}) {s.fingerprint} via {s.relay}")
    return 0


# -- pairing ------------------------------------------------------------------------


def _relay_address(
    args: argparse.Namespace, node: Node, fallback: str | None = None
) -> RelayAddress:
    """--relay, then PIXIE_RELAY, then the config file, then ``fallback``."""
    settings = config.effective(node.data.config_path, {"relay": args.relay})
    address = settings.get("relay") or fallback
    if not address:
        raise BadInput("no relay address: pass --relay HOST:PORT or set [relay] address")
    return RelayAddress.parse(str(address))


def _positive(value: float, what: str) -> float:
    if not value > 0:
        raise BadInput(f"{what} must be a positive number of seconds")
    return value


def cmd_invite(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    with open_node(args) as node:

        def show(code: str) -> None:
            print(code, flush=True)
            print(
                f"Waiting up to {timeout:g} s for `pixie pair CODE` on your other peer...",
                file=sys.stderr,
                flush=True,
            )

        # With `pixie run` serving this data dir, the invite goes over its
        # connection: one of our own would knock it off the relay (and it us).
        via = None
        if not args.relay:
            via = control.call(
                node.data.path,
                "invite",
                {"timeout": timeout},
                timeout + 15,
                on_note=lambda note: show(str(note.get("code"))),
            )
        if via is not None:
            sibling = SiblingInfo.from_json(via)
        else:
            relay = _relay_address(args, node)
            sibling = trio.run(lambda: pairing.invite(node, relay, timeout=timeout, show_code=show))
    _paired(args, sibling)
    return 0


def cmd_pair(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    pairing.InviteCode.parse(args.code)  # a bad code: one line, before anything else
    with open_node(args) as node:
        # As for invite: through a running daemon if it holds the code's relay.
        via = control.call(
            node.data.path, "pair", {"code": args.code, "timeout": timeout}, timeout + 15
        )
        if via is not None:
            sibling = SiblingInfo.from_json(via)
        else:
            sibling = trio.run(lambda: pairing.pair(node, args.code, timeout=timeout))
    _paired(args, sibling)
    return 0


# -- sync -----------------------------------------------------------------------------


def _siblings_and_relay(
    args: argparse.Namespace, node: Node
) -> tuple[list[SiblingInfo], RelayAddress]:
    """The siblings to sync with and the relay to reach them (by default, the
    one they were paired through)."""
    siblings = node.siblings.all()
    if not siblings:
        raise BadInput("no sibling to sync with: pair first (`pixie invite` / `pixie pair`)")
    return siblings, _relay_address(args, node, siblings[0].relay)


def cmd_sync(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    with open_node(args) as node:
        siblings, relay = _siblings_and_relay(args, node)
        via = _via_daemon(args, node, "sync", {}, timeout * 4)
        if via is not None:
            reports = [SyncReport.from_json(r) for r in via]
        else:

            def show(sibling: str, stats: SyncStats) -> None:
                if stats.expected >= SYNC_PROGRESS_FROM:
                    display.progress(stats.applied, stats.expected, f"{sibling}: records applied:")

            try:
                reports = trio.run(
                    lambda: daemon.sync_once(
                        node, relay, siblings, idle_timeout=timeout, progress=show
                    )
                )
            finally:
                display.end_progress()
        digest = node.digest().digest().hex()
    failed = [r for r in reports if r.outcome is SyncOutcome.FAILED]
    silent = [r for r in reports if r.outcome is SyncOutcome.NO_ANSWER]
    if args.json:
        emit_json({"digest": digest, "sessions": [r.as_json() for r in reports]})
    else:
        for r in reports:
            if r.outcome is not SyncOutcome.NO_ANSWER:  # said once, below
                print(r.describe(timeout))
    if failed:
        print(f"pixie: error: sync failed: {failed[0].error}", file=sys.stderr)
        return 1
    if silent:
        # Nothing was tried and nothing changed: the sibling is just not there.
        print(f"pixie: error: {silent[0].describe(timeout)}", file=sys.stderr)
        return 2
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    interval = _positive(args.interval, "--interval")
    with open_node(args) as node:
        services = args.services(node, args) if args.services is not None else []
        if args.faults and not services:
            raise BadInput("--faults applies to a Homebase's `pixie run`; this peer is a device")
        _, relay = _siblings_and_relay(args, node)
        configure_logging(json_lines=args.json_logs)
        logging.getLogger("pixie.run").info(
            "pixie run: %s %s via %s", node.role, fingerprint(node.public_key()), relay
        )
        trio.run(lambda: daemon.run_until_signal(node, relay, interval=interval, services=services))
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        settings = config.describe(node.data.config_path)
        siblings = node.siblings.all()
    relay = settings[0]
    if relay["value"] is None and siblings:
        relay["value"], relay["source"] = siblings[0].relay, "pairing"
    if args.json:
        emit_json({s["name"]: {"value": s["value"], "source": s["source"]} for s in settings})
    else:
        for s in settings:
            value = "-" if s["value"] is None else s["value"]
            print(f"{s['name']} = {value}  ({s['source']})")
    return 0


# -- distillation ---------------------------------------------------------------------


def cmd_distill(args: argparse.Namespace) -> int:
    if args.offline and args.url is not None:
        raise BadInput("--offline and --url contradict each other: give one of them")
    flags = {"llm_url": args.url, "llm_model": args.model, "llm_timeout": args.timeout}
    with open_node(args) as node:
        service = NotetakingService.for_node(node, flags, offline_only=args.offline)

        def show(done: int, total: int) -> None:
            display.progress(done, total, "sources looked at:")

        report = trio.run(lambda: service.run_pass(everything=args.all, progress=show))
    if args.json:
        emit_json(report.as_json())
    else:
        print(report.render())
    if report.failed:
        print(
            f"pixie: error: {report.failed} source{'s' if report.failed != 1 else ''} could not "
            "be distilled; the next pass tries again",
            file=sys.stderr,
        )
        return 1
    return 0


# -- offloading -----------------------------------------------------------------------


def _offload_relay(args: argparse.Namespace, node: Node) -> RelayAddress:
    _, relay = _siblings_and_relay(args, node)
    return relay


def _via_daemon(
    args: argparse.Namespace, node: Node, op: str, op_args: dict[str, Any], timeout: float
) -> Any | None:
    """The result of ``op`` run by the `pixie run` serving this data dir over its
    own relay connection, or None when no daemon runs here (or `--relay` asks
    for another relay than the daemon's)."""
    if getattr(args, "relay", None):
        return None
    return control.call(node.data.path, op, op_args, timeout + 5)


def _report_from(data: dict[str, Any]) -> offload.OffloadReport:
    return offload.OffloadReport(
        note_id=str(data["note_id"]),
        outcome=Outcome(data["outcome"]),
        detail=str(data["detail"]),
        cleared=bool(data["cleared"]),
        bytes=int(data["bytes"]),
        holder=data["holder"],
    )


def cmd_offload(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    if (args.note_id is None) == (args.older_than is None):
        raise BadInput("give a NOTE_ID or --older-than DAYS (one of the two)")
    with open_node(args) as node:
        relay = _offload_relay(args, node)
        if args.note_id is not None:
            ids = [parse_event_id(args.note_id)]
        else:
            ids = offload.candidates(node, args.older_than)

        async def run(service: offload.NoteOffloadService) -> list[offload.OffloadReport]:
            reports = []
            for i, note_id in enumerate(ids, 1):
                reports.append(await service.offload(note_id))
                display.progress(i, len(ids), "offloaded")
            # Holdings nothing here points at any more (after a recall, an edit
            # that raced an offload, a deletion) go now, while connected.
            await service.release_pending()
            return reports

        first = (
            _via_daemon(args, node, "offload", {"note_id": ids[0], "timeout": timeout}, timeout)
            if ids
            else None
        )
        if not ids:
            reports = []
        elif first is not None:
            reports = [_report_from(first)]
            for i, note_id in enumerate(ids[1:], 2):
                more = {"note_id": note_id, "timeout": timeout}
                got = _via_daemon(args, node, "offload", more, timeout)
                reports.append(
                    _report_from(got)
                    if got is not None
                    else offload.relay_down_report(note_id, "the running daemon went away")
                )
                display.progress(i, len(ids), "offloaded")
        else:
            try:
                reports = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
            except RelayUnavailable as exc:
                reports = [offload.relay_down_report(i, str(exc)) for i in ids]
    if args.json:
        emit_json(reports[0].as_json() if args.note_id else [r.as_json() for r in reports])
    else:
        for r in reports:
            if r.cleared:
                print(f"offloaded {r.note_id} ({r.bytes:,} B) to {r.holder}; its index stays here")
            else:
                print(f"kept {r.note_id} here ({r.outcome.value}): {r.detail}")
        if args.note_id is None:
            done = sum(r.cleared for r in reports)
            print(f"{done} of {len(reports)} notes offloaded", file=sys.stderr)
    failed = [r for r in reports if not r.cleared]
    return 1 if failed else 0


def cmd_fetch(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    note_id = parse_event_id(args.note_id)
    with open_node(args) as node:
        relay = _offload_relay(args, node)

        async def run(service: offload.NoteOffloadService) -> str:
            return await service.fetch(note_id)

        via = _via_daemon(args, node, "fetch", {"note_id": note_id, "timeout": timeout}, timeout)
        if via is not None:
            body = str(via)
        else:
            body = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
    if args.json:
        emit_json({"id": note_id, "body": body, "verified": True})
    else:
        print(body)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    timeout = _positive(args.timeout, "--timeout")
    note_id = parse_event_id(args.note_id)
    with open_node(args) as node:
        relay = _offload_relay(args, node)

        async def run(service: offload.NoteOffloadService) -> bool:
            return await service.recall(note_id)

        via = _via_daemon(args, node, "recall", {"note_id": note_id, "timeout": timeout}, timeout)
        if via is not None:
            released = bool(via)
        else:
            released = trio.run(lambda: offload.with_service(node, relay, run, timeout=timeout))
    if args.json:
        emit_json({"id": note_id, "recalled": True, "released": released})
    else:
        tail = (
            "the Homebase released its copy"
            if released
            else "the Homebase's copy will be released at the next chance"
        )
        print(f"recalled {note_id}: its body is here again; {tail}")
    return 0


def _paired(args: argparse.Namespace, sibling: SiblingInfo) -> None:
    if args.json:
        emit_json(sibling.as_json())
    else:
        print(f"paired with {sibling.name} ({sibling.role}), fingerprint {sibling.fingerprint}")


# -- contacts --------------------------------------------------------------


def cmd_contacts_add(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        cid, created = node.contacts.add(args.name, args.alias or [], now_us())
    if args.json:
        emit_json({"id": cid, "created": created})
    else:
        print(cid)
    return 0


def cmd_contacts_list(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        contacts = node.contacts.all()
    if args.json:
        emit_json([{"id": c.id, "name": c.name, "aliases": list(c.aliases)} for c in contacts])
        return 0
    for c in contacts:
        aka = f" (also: {', '.join(c.aliases)})" if c.aliases else ""
        print(f"{c.id}  {c.name}{aka}")
    return 0


# -- the memory log --------------------------------------------------------


def cmd_log_add(args: argparse.Namespace) -> int:
    try:
        at = parse_time(args.at) if args.at is not None else now_us()
    except ProtocolError as exc:
        raise BadInput(f"--at: {exc}") from None
    event = NewEvent(
        kind=parse_kind(args.kind),
        at=at,
        text=check_text(args.text),
        contact=clean_name(args.contact) if args.contact is not None else None,
        thread=check_ref(args.thread, "--thread"),
        source=check_ref(args.source, "--source"),
        from_me=True if args.from_me else None,
    )
    with open_node(args) as node:
        result = node.log.append([event], now=now_us())
    if args.json:
        emit_json({"id": result.ids[0]})
    else:
        print(result.ids[0])
    return 0


def cmd_log_import(args: argparse.Namespace) -> int:
    # Open (and so validate) the data dir before reading a possibly long file.
    with open_node(args) as node:
        if args.file == "-":
            events = read_events(sys.stdin.buffer)
        else:
            try:
                with file_arg(args.file, "FILE").open("rb") as stream:
                    size = os.fstat(stream.fileno()).st_size
                    events = read_events(
                        stream, lambda read: display.progress(read, size, "bytes read:")
                    )
            except OSError as exc:
                raise BadInput(f"cannot read {args.file}: {exc.strerror}") from None
        result = node.log.append(
            events,
            now=now_us(),
            progress=lambda done, total: display.progress(done, total, "events written:"),
        )
    summary = {
        "imported": len(result.ids),
        "already_present": result.skipped,
        "new_contacts": result.new_contacts,
    }
    if args.json:
        emit_json(summary)
    else:
        print(
            f"imported {summary['imported']} events ({summary['already_present']} already "
            f"present), {summary['new_contacts']} new contacts"
        )
    return 0


def cmd_grep(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        result = GrepMemoryTool(node.mirror).run(args.pattern)
    if args.json:
        emit_json(result.as_json())
    else:
        print(result.render())
    return 0


def cmd_log_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        records = node.log.all_records()
        names = node.contacts.names()
    for r in records[-args.last :] if args.last else records:
        item = {
            "id": r.id,
            "kind": r.kind.value,
            "at": format_time(r.at),
            "contact": names.get(r.contact_id) if r.contact_id else None,
            "thread": r.thread,
            "source": r.source,
            "text": r.text,
        }
        emit_json({k: v for k, v in item.items() if v is not None})
    return 0


# -- the Notebook ----------------------------------------------------------


def _kind(value: str | None) -> NoteKind | None:
    if value is None:
        return None
    try:
        return NoteKind(value)
    except ValueError:
        names = ", ".join(k.value for k in NoteKind)
        raise BadInput(f"unknown note kind {value!r:.40} (one of: {names})") from None


def _check_tool(node: Node) -> CheckNotebookTool:
    return CheckNotebookTool(node.notebook.clear_view(), node.contacts)


def cmd_notebook_list(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    with open_node(args) as node:
        notes = display.list_notes(node.notebook.clear_view(), kind)
        names = node.contacts.names()
    if args.json:
        emit_json([display.note_json(n, names) for n in notes])
    else:
        for note in notes:
            print(display.note_line(note))
    return 0


def cmd_notebook_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        view = node.notebook.clear_view()
        names = node.contacts.names()
        if args.json:
            note = view.get_clear(args.id)
            if note is None:
                raise NotFound(f"no note with id {args.id}")
            emit_json(display.note_json(note, names))
        else:
            print(display.show_note(view, args.id, names))
    return 0


def cmd_notebook_add(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    if kind not in (NoteKind.GUIDANCE, NoteKind.ABOUT_YOU):
        raise BadInput("--kind must be guidance or about_you")
    with open_node(args) as node:
        note_id = node.notebook.add_user_note(kind, args.title, args.body, args.tag or [])
    emit_id(args, note_id)
    return 0


def _split_tags(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [t for t in (part.strip() for part in value.split(",")) if t]


def cmd_notebook_edit(args: argparse.Namespace) -> int:
    if args.title is None and args.body is None and args.tags is None:
        raise BadInput("nothing to change: give --title, --body or --tags")
    with open_node(args) as node:
        changed = node.notebook.edit(
            args.id, title=args.title, body=args.body, tags=_split_tags(args.tags)
        )
    if args.json:
        emit_json({"id": args.id, "changed": changed})
    else:
        print(f"{args.id} {'edited' if changed else 'unchanged'}")
    return 0


def cmd_notebook_delete(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        node.notebook.delete(args.id)
    if args.json:
        emit_json({"id": args.id, "deleted": True})
    else:
        print(f"{args.id} deleted")
    return 0


def cmd_notebook_search(args: argparse.Namespace) -> int:
    if args.days is not None and not 1 <= args.days <= MAX_DAYS_BACK:
        raise BadInput(f"--days must be from 1 to {MAX_DAYS_BACK}")
    with open_node(args) as node:
        tool = _check_tool(node)
        if args.json:
            contact_id = None
            if args.person is not None:
                try:
                    contact_id = node.contacts.resolve(args.person)
                except NotFound:
                    emit_json({"notes": [], "message": "No notes are filed under that person."})
                    return 0
            since = now_us() - args.days * 86_400_000_000 if args.days else None
            found = node.notebook.clear_view().search_clear(
                args.query or "", contact_id, args.topic, since
            )
            names = node.contacts.names()
            emit_json(
                {
                    "notes": [
                        {**display.note_json(s.note, names), "score": s.score} for s in found
                    ],
                    "message": display.search_text(
                        tool, args.query or "", args.person, args.topic, args.days
                    ).splitlines()[0],
                }
            )
        else:
            print(display.search_text(tool, args.query or "", args.person, args.topic, args.days))
    return 0


def cmd_notebook_export(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        count = display.export_markdown(
            node.notebook.clear_view(), file_arg(args.dir, "DIR"), node.contacts.names()
        )
    if args.json:
        emit_json({"exported": count, "dir": args.dir})
    else:
        print(f"exported {count} notes to {args.dir}")
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        note_id = node.notebook.pin_spark(parse_event_id(args.event_id), args.tag or [])
    emit_id(args, note_id)
    return 0


def cmd_huddle_record(args: argparse.Namespace) -> int:
    record = read_huddle_file(file_arg(args.file, "FILE"))
    with open_node(args) as node:
        ids = record_huddle(node.notebook, node.contacts, record, zone=Zone(args.zone))
    if args.json:
        emit_json({"ids": ids})
    else:
        print("\n".join(ids))
    return 0


def cmd_nudges(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        found = nudges(node.notebook, now_us())
    if args.json:
        emit_json([n.as_json() for n in found])
    elif not found:
        print("No nudges right now.")
    else:
        for n in found:
            print(f"- {n.action}")
    return 0


def emit_id(args: argparse.Namespace, note_id: str) -> None:
    if args.json:
        emit_json({"id": note_id})
    else:
        print(note_id)


def parse_event_id(value: str) -> str:
    try:
        return parse_id(value)
    except ProtocolError as exc:
        raise BadInput(str(exc)) from None


# -- the parser ------------------------------------------------------------


def add_commands(
    sub: Any,
    common: argparse.ArgumentParser,
    services: Callable[[Node, argparse.Namespace], list[PeerService]] | None = None,
) -> None:
    """Register the device commands on the top-level subparsers. ``services``
    gives `pixie run` what else a peer of its role answers (the holder, on a
    Homebase), built from the node and the command line."""

    def json_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")

    cfg = sub.add_parser("config", parents=[common], help="the settings in force")
    cfgsub = cfg.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = cfgsub.add_parser(
        "show", parents=[common], help="each setting, its value and where it came from"
    )
    json_flag(p)
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser("init", parents=[common], help="create a data dir for this peer")
    p.add_argument("--name", help="a name for this peer (shown to its siblings)")
    p.add_argument("--role", choices=ROLES, default="device", help="device (default) or homebase")
    json_flag(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("status", parents=[common], help="what this peer holds")
    json_flag(p)
    p.set_defaults(func=cmd_status)

    contacts = sub.add_parser("contacts", parents=[common], help="people in your life")
    csub = contacts.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = csub.add_parser("add", parents=[common], help="add a contact (or aliases to one)")
    p.add_argument("name")
    p.add_argument("--alias", action="append", metavar="A", help="another name (repeatable)")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_add)
    p = csub.add_parser("list", parents=[common], help="list contacts")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_list)

    log = sub.add_parser("log", parents=[common], help="the append-only memory log")
    lsub = log.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = lsub.add_parser("add", parents=[common], help="append one event")
    p.add_argument("--kind", required=True, help="journal, message, call, voicemail, post, ...")
    p.add_argument("--text", required=True)
    p.add_argument("--contact", metavar="NAME")
    p.add_argument("--thread", metavar="ID")
    p.add_argument("--source", metavar="REF")
    p.add_argument("--at", metavar="ISO8601", help="when it happened (default: now)")
    p.add_argument("--from-me", action="store_true", help="the user wrote it")
    json_flag(p)
    p.set_defaults(func=cmd_log_add)
    p = lsub.add_parser("import", parents=[common], help="import events from JSON Lines")
    p.add_argument("file", metavar="FILE.jsonl", help="a JSON Lines file, or - for stdin")
    json_flag(p)
    p.set_defaults(func=cmd_log_import)
    p = lsub.add_parser("show", parents=[common], help="print events as JSON Lines")
    p.add_argument("--last", type=count_flag, metavar="N", help="only the N most recently written")
    p.set_defaults(func=cmd_log_show)

    p = sub.add_parser(
        "grep", parents=[common], help="search the memory log as the model's grep_memory does"
    )
    p.add_argument("pattern", help="keyword, name, phrase or RE2 pattern (case-insensitive)")
    json_flag(p)
    p.set_defaults(func=cmd_grep)

    nb = sub.add_parser("notebook", parents=[common], help="the distilled Notebook (clear zone)")
    nsub = nb.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = nsub.add_parser("list", parents=[common], help="list notes, newest first")
    p.add_argument("--kind", help="only notes of this kind")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_list)
    p = nsub.add_parser("show", parents=[common], help="show one note")
    p.add_argument("id")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_show)
    p = nsub.add_parser("add", parents=[common], help="write a guidance or about_you note")
    p.add_argument("--kind", required=True, help="guidance or about_you")
    p.add_argument("--title", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--tag", action="append", metavar="T", help="a topic tag (repeatable)")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_add)
    p = nsub.add_parser("edit", parents=[common], help="edit a note (it becomes yours)")
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--body")
    p.add_argument("--tags", help="comma-separated; replaces the note's tags")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_edit)
    p = nsub.add_parser("delete", parents=[common], help="delete a note")
    p.add_argument("id")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_delete)
    p = nsub.add_parser("search", parents=[common], help="what check_notebook returns")
    p.add_argument("query", nargs="?", default="")
    p.add_argument("--person", metavar="NAME")
    p.add_argument("--topic", metavar="T")
    p.add_argument(
        "--days", type=days_back_flag, metavar="N", help="only notes about the last N days"
    )
    json_flag(p)
    p.set_defaults(func=cmd_notebook_search)
    p = nsub.add_parser("export", parents=[common], help="the clear zone as Markdown files")
    p.add_argument("dir", metavar="DIR")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_export)

    p = sub.add_parser("pin", parents=[common], help="pin a moment into the Notebook (a spark)")
    p.add_argument("event_id", metavar="EVENT_ID")
    p.add_argument("--tag", action="append", metavar="T", help="a topic tag (repeatable)")
    json_flag(p)
    p.set_defaults(func=cmd_pin)

    hud = sub.add_parser("huddle", parents=[common], help="huddle material (sealed)")
    hsub = hud.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = hsub.add_parser("record", parents=[common], help="file a huddle record from JSON")
    p.add_argument("file", metavar="FILE.json")
    p.add_argument(
        "--zone",
        choices=[z.value for z in Zone],
        default=Zone.SEALED.value,
        help="zone for prep and takeaways (material from other agents is always sealed)",
    )
    json_flag(p)
    p.set_defaults(func=cmd_huddle_record)

    p = sub.add_parser("invite", parents=[common], help="print a one-time pairing code and wait")
    p.add_argument("--relay", metavar="HOST:PORT", help="relay address (tls://HOST:PORT for TLS)")
    p.add_argument(
        "--timeout", type=seconds_flag, default=pairing.DEFAULT_TIMEOUT, metavar="SECONDS"
    )
    json_flag(p)
    p.set_defaults(func=cmd_invite)
    p = sub.add_parser("pair", parents=[common], help="pair with the peer that printed CODE")
    p.add_argument("code", metavar="CODE")
    p.add_argument("--timeout", type=seconds_flag, default=60.0, metavar="SECONDS")
    json_flag(p)
    p.set_defaults(func=cmd_pair)

    p = sub.add_parser("sync", parents=[common], help="run one sync session with each sibling")
    p.add_argument("--relay", metavar="HOST:PORT", help="relay address (default: from pairing)")
    p.add_argument(
        "--timeout",
        type=seconds_flag,
        default=30.0,
        metavar="SECONDS",
        help="give up when the sibling is silent this long (default 30)",
    )
    json_flag(p)
    p.set_defaults(func=cmd_sync)
    p = sub.add_parser("run", parents=[common], help="stay connected and in sync (until Ctrl-C)")
    p.add_argument("--relay", metavar="HOST:PORT", help="relay address (default: from pairing)")
    p.add_argument(
        "--interval",
        type=seconds_flag,
        default=daemon.SYNC_INTERVAL,
        metavar="SECONDS",
        help="seconds between syncs when nothing changes",
    )
    p.add_argument(
        "--faults",
        metavar="SPEC",
        default="",
        help="Homebase only: inject holder faults, e.g. 'refuse=0.5,ack-delay=1@2' (see README)",
    )
    p.add_argument("--fault-seed", type=int, metavar="N", help="seed the fault dice")
    p.add_argument("--json-logs", action="store_true", help="log JSON Lines instead of text")
    p.set_defaults(func=cmd_run, services=services)

    p = sub.add_parser(
        "distill", parents=[common], help="distil new conversations, posts and calls into notes"
    )
    p.add_argument(
        "--url", metavar="URL", help="an OpenAI-compatible API base (overrides [llm] url)"
    )
    p.add_argument("--model", metavar="NAME", help="the model to ask (overrides [llm] model)")
    p.add_argument(
        "--timeout",
        type=float,  # the model client refuses a nonsense value (llm.check_timeout)
        metavar="SECONDS",
        help="deadline per model answer (default 60)",
    )
    p.add_argument(
        "--offline", action="store_true", help="use the built-in distiller only, whatever is set"
    )
    p.add_argument(
        "--all", action="store_true", help="redo every source, not only those with new material"
    )
    json_flag(p)
    p.set_defaults(func=cmd_distill)

    def offload_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--relay", metavar="HOST:PORT", help="relay address (default: from pairing)")
        p.add_argument(
            "--timeout",
            type=seconds_flag,
            default=offload.ACK_TIMEOUT,
            metavar="SECONDS",
            help=f"how long to wait for the Homebase (default {offload.ACK_TIMEOUT:g})",
        )
        json_flag(p)

    p = sub.add_parser(
        "offload", parents=[common], help="park a note's body on the Homebase (index stays)"
    )
    p.add_argument("note_id", nargs="?", metavar="NOTE_ID")
    p.add_argument(
        "--older-than", type=days_flag, metavar="DAYS", help="offload every note older than DAYS"
    )
    offload_flags(p)
    p.set_defaults(func=cmd_offload)
    p = sub.add_parser("fetch", parents=[common], help="show an offloaded note's verified body")
    p.add_argument("note_id", metavar="NOTE_ID")
    offload_flags(p)
    p.set_defaults(func=cmd_fetch)
    p = sub.add_parser("recall", parents=[common], help="bring an offloaded note's body home")
    p.add_argument("note_id", metavar="NOTE_ID")
    offload_flags(p)
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("nudges", parents=[common], help="finished nudges from both zones")
    json_flag(p)
    p.set_defaults(func=cmd_nudges)
