"""Bounded msgpack decoding, shared by every decoder in the protocol."""

from __future__ import annotations

from itertools import compress, repeat
from typing import Any

import msgpack

from .errors import ProtocolError

# How deep arrays and maps may nest (a bare scalar is depth 0, ``[1]`` depth 1).
# The deepest message we send is a sync batch carrying a clear note's tags:
# message > records > notes > note > clear fields > tags, 6 levels. Nothing
# that decodes a value of ours recurses past this, and neither does a repr or
# a comparison of it.
MAX_DEPTH = 8
_CONTAINERS = (list, dict)
_CONTAINER_TYPES = frozenset(_CONTAINERS)  # msgpack makes no subclasses


def unpack(
    data: bytes,
    what: str,
    *,
    max_bin: int,
    max_str: int,
    max_array: int,
    max_map: int = 0,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Decode ``data`` refusing any string, binary, array or map over its bound
    (and any extension type) and any nesting deeper than ``max_depth``; a
    `ProtocolError` names ``what`` failed."""
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_bin_len=max_bin,
            max_str_len=max_str,
            max_array_len=max_array,
            max_map_len=max_map,
            max_ext_len=0,
        )
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ProtocolError(f"malformed {what} ({type(exc).__name__})") from None
    if isinstance(value, _CONTAINERS) and not _within(value, max_depth):
        raise ProtocolError(f"malformed {what} (nested over {max_depth} levels)")
    return value


def _within(value: list[Any] | dict[Any, Any], limit: int) -> bool:
    """Is ``value`` nested at most ``limit`` levels deep? Level by level, never
    recursing (msgpack's own decoder is no Python recursion: it stops near 1024
    levels, far past what Python code can repr or compare). Each level is
    looked at in C: the types of a container's items first (most are flat
    columns of scalars, passed at that cost alone), the containers among them
    only where there are some. Map keys are strings or bytes
    (``strict_map_key``), never containers."""
    level: list[Any] = [value]
    for _ in range(limit):
        deeper: list[Any] = []
        for container in level:
            items = container.values() if type(container) is dict else container
            if not _CONTAINER_TYPES.isdisjoint({*map(type, items)}):
                deeper.extend(compress(items, map(isinstance, items, repeat(_CONTAINERS))))
        if not deeper:
            return True
        level = deeper
    return False
