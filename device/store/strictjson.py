"""Decoding one JSON document strictly, for input from outside: an import
file's line, a huddle record. Python's own decoder lets NaN and Infinity
through and fails on some input in ways of its own; this one refuses all of
it with a `BadInput` that names what was wrong, never the content.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pixie.device.errors import BadInput


def _no_constant(name: str) -> Any:
    raise BadInput(f"not valid JSON ({name} is not a JSON value)")


# One decoder for every call: `json.loads` with a keyword builds a new decoder
# (and its scanner) each time, which costs more than decoding a short line.
# Sharing one is what `json.loads` itself does for its default decoder.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)

# The decoder's own step, for a reader that checks for itself what follows a
# value (a JSON Lines line's newline): ``scan_once(text, index)`` is the JSON
# value starting exactly at ``index`` and the index just past it, decoded as
# `loads_strict` decodes it. It raises StopIteration where no value can start, `BadInput` for NaN or
# Infinity, and whatever else `loads_strict` turns into a BadInput; a caller
# that takes its result must still check what follows the value (and passes
# anything it cannot take to `loads_strict`, which says what is wrong).
scan_once: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def loads_strict(text: str) -> Any:
    """Decode one JSON document, refusing what Python's decoder lets through
    or fails on in its own ways: NaN and Infinity, a number too long to
    convert (a ValueError), nesting deep enough to exhaust the stack."""
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            # What json.loads does for such a string, without a new decoder.
            return _DECODER.decode(text)
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadInput("JSON nested too deeply") from None
    except ValueError:
        raise BadInput("not valid JSON (a number too long to read)") from None
