"""The device-side commands of ``pixie``, one module per noun.

Each module (``datadir``, ``contacts``, ``log``, ``grep``, ``notebook``,
``keys``, ``pairing``, ``sync``, ``run``, ``distill``, ``offload``, ``nudges``, ``web``)
defines its handlers and an ``add_commands`` that registers them; `add_commands` here
calls each in the order ``pixie --help`` lists them. Handlers print exactly
what a user (or, for grep, the model) should see and raise a `DeviceError`
for anything refused; the entry point turns that into one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pixie.device.cli import (
    contacts,
    datadir,
    distill,
    grep,
    ingest,
    keys,
    log,
    notebook,
    nudges,
    offload,
    pairing,
    run,
    sync,
    web,
)
from pixie.device.cli.common import emit_json
from pixie.device.cli.nodes import open_node
from pixie.device.node.keyed import Node
from pixie.device.sync.driver import PeerService

__all__ = ["add_commands", "emit_json", "open_node"]


def add_commands(
    sub: Any,
    common: argparse.ArgumentParser,
    services: Callable[[Node, argparse.Namespace], list[PeerService]] | None = None,
) -> None:
    """Register the device commands on the top-level subparsers. ``services``
    gives `pixie run` what else a peer of its role answers (the holder, on a
    Homebase), built from the node and the command line."""
    datadir.add_commands(sub, common)
    keys.add_commands(sub, common)
    contacts.add_commands(sub, common)
    ingest.add_commands(sub, common)
    log.add_commands(sub, common)
    grep.add_commands(sub, common)
    notebook.add_commands(sub, common)
    pairing.add_commands(sub, common)
    sync.add_commands(sub, common)
    run.add_commands(sub, common, services=services)
    distill.add_commands(sub, common)
    offload.add_commands(sub, common)
    nudges.add_commands(sub, common)
    web.add_commands(sub, common)
