"""Settings: the data dir's config.toml, then PIXIE_* variables, then flags.

Later sources win. Secrets never live here: an API key comes only from the
environment, and `show` masks anything that looks like one.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pixie.device.errors import BadInput

# setting -> (TOML table, key, environment variable)
SETTINGS: dict[str, tuple[str, str, str]] = {
    "relay": ("relay", "address", "PIXIE_RELAY"),
    "llm_url": ("llm", "url", "PIXIE_LLM_URL"),
    "llm_model": ("llm", "model", "PIXIE_LLM_MODEL"),
    "llm_timeout": ("llm", "timeout", "PIXIE_LLM_TIMEOUT"),
    # Notebook search by meaning: "off" keeps the term ranking alone and
    # embeds nothing (see notebook/nearby.py).
    "meaning": ("search", "meaning", "PIXIE_EMBEDDINGS"),
}
_OFF = frozenset({"0", "off", "no", "false"})
_ON = frozenset({"1", "on", "yes", "true"})

# The model endpoint's API key is read from this variable and nowhere else: a
# data dir is synced, backed up and copied around, so a key written into its
# config file would travel with it.
LLM_API_KEY_ENV = "PIXIE_LLM_API_KEY"
LLM_KEYS = frozenset(key for table, key, _ in SETTINGS.values() if table == "llm")


def load(path: Path) -> dict[str, Any]:
    data = _read(path)
    _check_shapes(path, data)
    return data


def _read(path: Path) -> dict[str, Any]:
    """The file's TOML as read, checked for nothing but being TOML."""
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
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise BadInput(f"{path} is not valid TOML (nested too deeply)") from None
    except ValueError:
        # What int() refuses: a number of more than 4300 digits.
        raise BadInput(f"{path} is not valid TOML (a number too long to read)") from None
    return data


def _check_shapes(path: Path, data: dict[str, Any]) -> None:
    """Refuse a setting's table that is not a table, and a setting that is a
    date, a list or a table: none could be meant, and each would travel on to
    places that cannot handle it (``config show --json`` cannot encode a date).
    Whether a string or number is a good value is for its user to say."""
    for table, key, _ in SETTINGS.values():
        section = data.get(table)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise BadInput(f"{path}: [{table}] must be a table")
        value = section.get(key)
        if value is None:
            continue
        if table == "relay":
            # One relay, or several of one fleet: "A,B,C" or ["A", "B", "C"].
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                continue
            if not isinstance(value, str):
                raise BadInput(
                    f"{path}: [relay] {key} must be a string (HOST:PORT, or several "
                    "separated by commas) or a list of such strings"
                )
        if not isinstance(value, str | int | float):
            raise BadInput(f"{path}: [{table}] {key} must be a string or a number")


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


def llm(path: Path, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """The [llm] settings in force (``llm_url``, ``llm_model``, ``llm_timeout``),
    after refusing an [llm] table that could not be meant as written."""
    _check_llm_table(path, load(path))
    return {k: v for k, v in effective(path, flags).items() if k.startswith("llm_")}


def meaning_off(path: Path) -> bool:
    """Whether the settings in force turn search by meaning off ([search]
    meaning = "off" in the file, or PIXIE_EMBEDDINGS=0, which wins); refuses
    a value that is neither on nor off. Reads this one setting: a mistake in
    another table is for the commands that use it to report."""
    table, key, env = SETTINGS["meaning"]
    value: Any = os.environ.get(env) or None
    if value is None:
        section = _read(path).get(table)
        value = section.get(key) if isinstance(section, dict) else None
    if value is None:
        return False
    word = str(value).strip().casefold()
    if word in _OFF:
        return True
    if word in _ON:
        return False
    raise BadInput(f"search meaning must be on or off, not {str(value)[:40]!r}")


def llm_api_key() -> str | None:
    """The model endpoint's API key, from the environment only."""
    return os.environ.get(LLM_API_KEY_ENV) or None


def _check_llm_table(path: Path, data: dict[str, Any]) -> None:
    """Refuse an [llm] table that is not a table, names a key we do not know
    (a typo would otherwise be silently ignored), or holds a secret."""
    section = data.get("llm")
    if section is None:
        return
    if not isinstance(section, dict):
        raise BadInput(f"{path}: [llm] must be a table")
    for key in section:
        if any(word in key.casefold() for word in ("key", "token", "secret", "password")):
            raise BadInput(
                f"{path}: [llm] {key} looks like a secret; secrets never go in the config "
                f"file (set {LLM_API_KEY_ENV} in the environment instead)"
            )
        if key not in LLM_KEYS:
            known = ", ".join(sorted(LLM_KEYS))
            raise BadInput(f"{path}: unknown setting [llm] {key} (known: {known})")


def describe(path: Path, flags: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every setting in force and where it came from (flag, environment, file or
    unset), for `pixie config show`. The API key is reported as set or not,
    never shown."""
    data = load(path)
    out: list[dict[str, Any]] = []
    for name, (table, key, env) in SETTINGS.items():
        value: Any = None
        source = "unset"
        section = data.get(table, {})
        if isinstance(section, dict) and key in section:
            value, source = section[key], f"{path.name} [{table}] {key}"
        if os.environ.get(env):
            value, source = os.environ[env], env
        if flags and flags.get(name) is not None:
            value, source = flags[name], "flag"
        out.append({"name": name, "value": value, "source": source})
    out.append(
        {
            "name": "llm_api_key",
            "value": "(set)" if llm_api_key() else None,
            "source": LLM_API_KEY_ENV if llm_api_key() else "unset",
        }
    )
    return out


# Who the user is, for imports (`pixie init --me`, `pixie config set me`):
# a file of its own beside config.toml, written whole. It is this machine's
# setting; what `pixie contacts me` records goes in the log and syncs.
ME_FILE = "me.json"
MAX_ME = 64  # identities at most
MAX_ME_CHARS = 320


def check_me(values: list[str], what: str) -> list[str]:
    """The identities in ``values`` (each may hold several, comma-separated),
    trimmed, empty ones dropped, each checked; `BadInput` naming ``what``."""
    out: list[str] = []
    for value in values:
        if "\x00" in value:
            raise BadInput(f"{what}: {value!r:.40} is not an address, number or name")
        for piece in value.split(","):
            part = " ".join(piece.split())
            if not part:
                continue
            if len(part) > MAX_ME_CHARS or not part.isprintable():
                raise BadInput(f"{what}: {part!r:.40} is not an address, number or name")
            if part not in out:
                out.append(part)
    if len(out) > MAX_ME:
        raise BadInput(f"{what}: at most {MAX_ME} of them")
    return out


def load_me(folder: Path) -> list[str] | None:
    """The identities stored in the data dir ``folder``; None if none were
    ever stored (an empty list: the user chose to give none)."""
    path = folder / ME_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
        values = data["me"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise TypeError
        return check_me(values, str(path))
    except (UnicodeDecodeError, ValueError, TypeError, KeyError):
        raise BadInput(f"{path} is not a list of identities (pixie config set me ...)") from None


def save_me(folder: Path, values: list[str]) -> None:
    """Store ``values`` as the user's identities in the data dir ``folder``."""
    path = folder / ME_FILE
    aside = path.with_name(ME_FILE + ".new")
    try:
        aside.write_text(json.dumps({"me": values}, ensure_ascii=False, indent=1) + "\n")
        aside.replace(path)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None
