"""``pixie notebook``, ``pin`` and ``huddle``: the distilled Notebook, read and
written by hand.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pixie.device.cli import display, editor, notebooksearch
from pixie.device.cli.common import (
    emit_id,
    emit_json,
    file_arg,
    json_flag,
)
from pixie.device.cli.nodes import open_node
from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.huddle import read_huddle_file, record_huddle
from pixie.device.store.notes import NoteKind, Zone
from pixie.device.store.shortids import (
    note_ids,
    resolve_event_id,
    resolve_note_id,
    short_forms,
)

MAX_STDIN_BODY_BYTES = 1024 * 1024


def _kind(value: str | None) -> NoteKind | None:
    if value is None:
        return None
    try:
        return NoteKind(value)
    except ValueError:
        names = ", ".join(k.value for k in NoteKind)
        raise BadInput(f"unknown note kind {value!r:.40} (one of: {names})") from None


def cmd_notebook_list(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    with open_node(args) as node:
        notes = display.list_notes(node.notebook.clear_view(), kind)
        names = node.contacts.names()
        short = short_forms(note_ids(node.db)) if not args.json else {}
    if args.json:
        emit_json([display.note_json(n, names) for n in notes])
    else:
        for line in display.note_lines(notes, short):
            print(line)
    return 0


def cmd_notebook_show(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        args.id = resolve_note_id(node.db, args.id)
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
    body = _read_stdin_body() if args.body == "-" else args.body
    if args.title is None and body is None and args.tags is None:
        return _edit_in_editor(args)
    with open_node(args) as node:
        args.id = resolve_note_id(node.db, args.id)
        changed = node.notebook.edit(
            args.id, title=args.title, body=body, tags=_split_tags(args.tags)
        )
    _report_edit(args, changed)
    return 0


def _read_stdin_body() -> str:
    """``--body -``: the body from standard input, bounded."""
    data = sys.stdin.buffer.read(MAX_STDIN_BODY_BYTES + 1)
    if len(data) > MAX_STDIN_BODY_BYTES:
        raise BadInput(f"the body on stdin is larger than {MAX_STDIN_BODY_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("the body on stdin is not UTF-8 text") from None


def _edit_in_editor(args: argparse.Namespace) -> int:
    """No flags: the note in $VISUAL/$EDITOR, applied with the same guards."""
    with open_node(args) as node:
        args.id = resolve_note_id(node.db, args.id)
        note = node.notebook.clear_view().get_clear(args.id)
        if note is None:
            raise NotFound(f"no note with id {args.id}")
        if note.body is None:
            raise BadInput(
                f"note {args.id} is offloaded to your Homebase; "
                f"bring it back with `pixie recall {args.id}` before editing it"
            )
        title, tags, body = note.title, list(note.tags), note.body
    edited = editor.edit_in_editor(title, tags, body)
    changed = False
    if edited is not None:
        # The store's own guards and no-op rule, as for flags; the note may
        # have changed while the editor was open, so nothing is assumed.
        with open_node(args) as node:
            changed = node.notebook.edit(
                args.id, title=edited.title, body=edited.body, tags=edited.tags
            )
    _report_edit(args, changed)
    return 0


def _report_edit(args: argparse.Namespace, changed: bool) -> None:
    if args.json:
        emit_json({"id": args.id, "changed": changed})
    else:
        print(f"{args.id} {'edited' if changed else 'unchanged'}")


def cmd_notebook_delete(args: argparse.Namespace) -> int:
    with open_node(args) as node:
        args.id = resolve_note_id(node.db, args.id)
        node.notebook.delete(args.id)
    if args.json:
        emit_json({"id": args.id, "deleted": True})
    else:
        print(f"{args.id} deleted")
    return 0


def cmd_notebook_search(args: argparse.Namespace) -> int:
    # A plain command line is answered before this runs (`notebooksearch.quick`).
    with open_node(args) as node:
        return notebooksearch.search(args, node.notebook.clear_view(), node.contacts)


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
        note_id = node.notebook.pin_spark(resolve_event_id(node.db, args.event_id), args.tag or [])
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


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``notebook ...``, ``pin`` and ``huddle record``."""
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
    p = nsub.add_parser(
        "edit",
        parents=[common],
        help="edit a note (it becomes yours); with no flags, in $VISUAL or $EDITOR",
    )
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--body", help="the new body; - reads it from standard input")
    p.add_argument("--tags", help="comma-separated; replaces the note's tags")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_edit)
    p = nsub.add_parser("delete", parents=[common], help="delete a note")
    p.add_argument("id")
    json_flag(p)
    p.set_defaults(func=cmd_notebook_delete)
    p = nsub.add_parser("search", parents=[common], help="what check_notebook returns")
    notebooksearch.add_arguments(p)
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
