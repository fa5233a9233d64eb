"""Opening the data dir a command names, with its keys.

The agent commands open theirs with `ClearNode.open_clear` instead.
"""

from __future__ import annotations

import argparse

from pixie.device.cli.common import data_path
from pixie.device.node.keyed import Node


def open_node(args: argparse.Namespace) -> Node:
    """The data dir with its identity and both Notebook zones."""
    return Node.open(data_path(args))
