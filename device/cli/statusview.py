"""``pixie status``: what a peer holds, read with the driver alone.

Status is what a person runs to see that things are well, so it should
answer at once. Everything it shows is a handful of counts and meta rows, so
it reads them on a plain read-only SQLite connection, without the ORM, the
sync stack or any crypto (a test holds what it imports). The full command
(`datadir.cmd_status`) opens the node first, which migrates an older schema
and says what is wrong with a damaged data dir; the quick one (`quick`)
answers only for a database of the current schema whose identity rows are
whole, and otherwise leaves the command to it. Both print through `show`.

The statements name the tables and columns the ORM models declare;
`tests/integration/test_startup.py` holds the two paths' output equal.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from pixie.device.cli.early import split_data
from pixie.device.errors import DeviceError
from pixie.device.store import quickread
from pixie.device.store.datadir import resolve_data_dir
from pixie.device.store.keystore import describe_key_store, open_key_store
from pixie.device.store.quickread import reading
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.store.version import DIGEST_KEY
from pixie.device.sync.lastsync import last_syncs_in
from pixie.protocol.digest import Fingerprint
from pixie.protocol.keyprint import fingerprint
from pixie.protocol.timestamps import format_time


@dataclass(frozen=True)
class Status:
    info: dict[str, object]
    siblings: list[SiblingInfo]
    last: dict[str, object]


class _Meta:
    def __init__(self, rows: dict[str, str]) -> None:
        self.rows = rows

    def meta(self) -> dict[str, str]:
        return self.rows


def status_of(
    path: Path,
    meta: dict[str, str],
    digest: str,
    events: int,
    contacts: int,
    notes: dict[str, int],
    siblings: list[SiblingInfo],
) -> Status:
    """The figures `show` prints, in its order (both paths build them here)."""
    info: dict[str, object] = {
        "data": str(path),
        "role": meta["role"],
        "name": meta.get("name", meta["role"]),
        "fingerprint": fingerprint(bytes.fromhex(meta["identity"])),
        "origin": meta["origin"],
        "digest": digest,
        "events": events,
        "contacts": contacts,
        **{f"{zone}_notes": count for zone, count in notes.items()},
        "keys": describe_key_store(open_key_store(path)),
    }
    return Status(info, siblings, last_syncs_in(_Meta(meta)))


def show(status: Status, as_json: bool) -> None:
    """Print a status as `pixie status` prints it."""
    last = status.last
    if as_json:
        siblings = [{**s.as_json(), "last_sync": last.get(s.fingerprint)} for s in status.siblings]
        out = {**status.info, "siblings": siblings}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    for key, value in status.info.items():
        print(f"{key}: {value}")
    for s in status.siblings:
        print(f"sibling: {s.name} ({s.role}) {s.fingerprint} via {s.relay}")
        print(f"  last sync: {last_sync_line(last.get(s.fingerprint))}")


def last_sync_line(report: object) -> str:
    """One line for a sibling's last sync report (as `record_last_sync` keeps it)."""
    if not isinstance(report, dict):
        return "never"
    at = report.get("at")
    when = format_time(int(at * 1_000_000)) if isinstance(at, int | float) else "at an unknown time"
    parts = [f"{when}, {report.get('outcome', 'unknown')}"]
    trips = report.get("round_trips")
    if isinstance(trips, int):
        parts.append(f"{trips} round trip{'' if trips == 1 else 's'}")
    applied = report.get("applied")
    if isinstance(applied, int):
        parts.append(f"{applied} item{'' if applied == 1 else 's'} taken in")
    return ", ".join(parts)


def _plain(arguments: list[str]) -> tuple[str | None, bool] | None:
    """(--data, --json) of a plain status command line, else None."""
    data, rest = split_data(arguments)
    if not rest or rest[0] != "status" or not set(rest[1:]) <= {"--json"}:
        return None
    return data, "--json" in rest[1:]


def _read(path: Path) -> Status | None:
    """The status of the data dir at ``path`` from one read-only transaction,
    or None when it is not one the quick path answers for (`quickread`)."""
    with reading(path) as found:
        if found is None:
            return None
        con, meta = found
        counted = quickread.counts(con)
    found_notes, offloaded = counted.notes, counted.offloaded
    siblings = [
        SiblingInfo(bytes.fromhex(key), name, role, relay, paired_at)
        for key, name, role, relay, paired_at in counted.siblings
    ]
    notes = {
        "clear": found_notes.get("clear", 0),
        "sealed": found_notes.get("sealed", 0),
        "offloaded": offloaded,
    }
    value = meta.get(DIGEST_KEY)
    digest = (Fingerprint.decode(value) if value else Fingerprint()).digest().hex()
    return status_of(path, meta, digest, counted.events, counted.contacts, notes, siblings)


def quick(arguments: list[str]) -> int | None:
    """Answer a plain ``pixie status`` (exit status 0), or None to leave it
    to the full command."""
    plain = _plain(arguments)
    if plain is None:
        return None
    data, as_json = plain
    try:
        status = _read(resolve_data_dir(data))
    except (DeviceError, OSError, sqlite3.Error, ValueError, TypeError):
        return None  # the full command says what is wrong
    if status is None:
        return None
    show(status, as_json)
    return 0


__all__ = ["Status", "last_sync_line", "quick", "show", "status_of"]
