"""Settings: the data dir's config.toml, then PIXIE_* variables, then flags.

Later sources win. Secrets never live here: an API key comes only from the
environment, and `show` masks anything that looks like one.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from .errors import BadInput

# setting -> (TOML table, key, environment variable)
SETTINGS: dict[str, tuple[str, str, str]] = {
    "relay": ("relay", "address", "PIXIE_RELAY"),
}


def load(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path} is not valid TOML ({exc})") from None
    return data


def effective(path: Path, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    data = load(path)
    out: dict[str, Any] = {}
    for name, (table, key, env) in SETTINGS.items():
        section = data.get(table, {})
        if isinstance(section, dict) and key in section:
            out[name] = section[key]
        if os.environ.get(env):
            out[name] = os.environ[env]
        if flags and flags.get(name) is not None:
            out[name] = flags[name]
    return out
