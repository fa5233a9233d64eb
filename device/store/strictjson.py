"""Decoding one JSON document strictly, for input from outside: an import
file's line, a huddle record. Python's own decoder lets NaN and Infinity
through and fails on some input in ways of its own; this one refuses all of
it with a `BadInput` that names what was wrong, never the content.
"""

from __future__ import annotations

import json
from typing import Any

from pixie.device.errors import BadInput


def _no_constant(name: str) -> Any:
    raise BadInput(f"not valid JSON ({name} is not a JSON value)")


# One decoder for every call: `json.loads` with a keyword builds a new decoder
# (and its scanner) each time, which costs more than decoding a short line.
# Sharing one is what `json.loads` itself does for its default decoder.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


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
