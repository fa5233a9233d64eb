"""``pixie contacts``: the people in your life."""

from __future__ import annotations

import argparse
from typing import Any

from pixie.device.cli.common import emit_json, json_flag, plural
from pixie.device.cli.nodes import open_node
from pixie.device.errors import BadInput
from pixie.device.store import config, identities
from pixie.device.store.contacts import DETAIL_NAMES, ContactDetails, phone_alias, resolve_on
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.protocol.timestamps import now_us


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
        # Every detail field on every contact, null where nothing is known.
        emit_json(
            [
                {"id": c.id, "name": c.name, "aliases": list(c.aliases), **c.details.as_dict()}
                for c in contacts
            ]
        )
        return 0
    for c in contacts:
        aka = f" (also: {', '.join(c.aliases)})" if c.aliases else ""
        print(f"{c.id}  {c.name}{aka}")
        for line in detail_lines(c.details):
            print(f"    {line}")
    return 0


def cmd_contacts_me(args: argparse.Namespace) -> int:
    """Log that a contact is the user: their events read as the user's own."""
    identity = " ".join(args.identity.split())
    if not identity or len(identity) > config.MAX_ME_CHARS or not identity.isprintable():
        raise BadInput(f"{args.identity!r:.40} is not a contact's name, address or number")
    with open_node(args) as node:
        with node.db.reading(plain=True) as conn:
            cid = resolve_on(conn, identity)
            if cid is None and (number := phone_alias(identity)) is not None:
                cid = resolve_on(conn, number)
            if cid is None:
                cid = resolve_on(conn, identity, loose=True)
            if cid is None:
                raise BadInput(f"no contact named {identity!r:.60} (see pixie contacts list)")
            already = identities.is_me(conn, cid)
            count = 0 if already else identities.not_mine(conn, cid)
        name = node.contacts.info(cid).name
        if not already:
            event = NewEvent(
                kind=EventKind.IDENTITY,
                at=now_us(),
                text=identity,
                contact=name,
                source="contacts me",
                from_me=True,
            )
            node.log.append([event])
    if args.json:
        emit_json({"contact": cid, "name": name, "remarked": count, "already": already})
    elif already:
        print(f"{name} is already you; nothing to re-mark")
    else:
        print(f"{name} is you: {plural(count, 'message')} re-marked as yours")
    return 0


def detail_lines(details: ContactDetails) -> list[str]:
    """A contact's details as lines to show under it: one per detail, a
    note's own lines indented beneath its label."""
    out = []
    for field, value in details.as_dict().items():
        if value is None:
            continue
        label = DETAIL_NAMES[field]
        if field == "note":
            out.append(f"{label}:")
            out.extend(f"  {line}" for line in value.split("\n"))
        else:
            out.append(f"{label}: {value}")
    return out


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``contacts add``, ``contacts me`` and ``contacts list``."""
    contacts = sub.add_parser("contacts", parents=[common], help="people in your life")
    csub = contacts.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = csub.add_parser("add", parents=[common], help="add a contact (or aliases to one)")
    p.add_argument("name")
    p.add_argument("--alias", action="append", metavar="A", help="another name (repeatable)")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_add)
    p = csub.add_parser(
        "me",
        parents=[common],
        help="say a contact is you: their messages become yours",
        description="Say a contact (by name, address or number) is you. Their "
        "messages, imported before pixie knew who you are, read as yours from now on, "
        "here and on every synced device; later imports know the identity too.",
    )
    p.add_argument("identity", metavar="NAME", help="the contact's name, address or number")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_me)
    p = csub.add_parser("list", parents=[common], help="list contacts")
    json_flag(p)
    p.set_defaults(func=cmd_contacts_list)
