"""Bounded msgpack decoding, shared by every decoder in the protocol."""

from __future__ import annotations

from typing import Any

import msgpack

from .errors import ProtocolError


def unpack(
    data: bytes,
    what: str,
    *,
    max_bin: int,
    max_str: int,
    max_array: int,
    max_map: int = 0,
) -> Any:
    """Decode ``data`` refusing any string, binary, array or map over its bound
    (and any extension type); a `ProtocolError` names ``what`` failed."""
    try:
        return msgpack.unpackb(
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
