"""Where the last sync with each sibling is recorded: a meta row per sibling,
written by `pixie run` and `pixie sync`, read by `pixie status` and the web
page. A module of its own so that its readers load none of sync's machinery."""

from __future__ import annotations

import json
from typing import Protocol

LAST_SYNC_KEY = "last_sync"


class _Meta(Protocol):
    def meta(self) -> dict[str, str]: ...


def last_syncs_in(db: _Meta) -> dict[str, object]:
    """The last sync report per sibling fingerprint (read from meta, which
    holds no key); a row that is not JSON is passed over."""
    out: dict[str, object] = {}
    prefix = LAST_SYNC_KEY + ":"
    for key, value in db.meta().items():
        if key.startswith(prefix):
            try:
                out[key[len(prefix) :]] = json.loads(value)
            except ValueError:
                continue
    return out
