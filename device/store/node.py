"""Deprecated location of `Node`; see `pixie.device.node`."""

from pixie.device.node.keyed import Node

__all__ = ["Node"]
