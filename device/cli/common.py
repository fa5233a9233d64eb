"""What several device commands share: the argparse types for numbers and
paths, where the data dir is, and printing JSON. Opening the keyed node is
in nodes.py and reaching a sibling in reach.py, so a command that needs
neither (chat, mcp) imports neither.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from pixie.device.agent.limits import MAX_DAYS_BACK
from pixie.device.errors import BadInput
from pixie.device.store.datadir import resolve_data_dir
from pixie.protocol.errors import ProtocolError
from pixie.protocol.ids import parse_id

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


def read_small_text(path: Path, limit: int, what: str) -> str:
    """The UTF-8 text of a file the user names, read at most ``limit`` bytes
    (the path may name a device or a pipe that never ends); one clear error
    naming ``what`` for a file that cannot be read, is larger, or is not text."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(limit + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise BadInput(f"{what} is larger than {limit // 1024} KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} is not UTF-8 text") from None


def emit_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def data_path(args: argparse.Namespace) -> Path:
    return resolve_data_dir(getattr(args, "data", None))


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


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def positive(value: float, what: str) -> float:
    if not value > 0:
        raise BadInput(f"{what} must be a positive number of seconds")
    return value


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """ "1 email", "1,204 emails"."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count:,} {word}"
