"""Opening offloaded notes from the page, through whoever holds the identity.

Fetching a body from the Homebase needs this peer's identity key, and the web
package may not reach the key store (an import contract forbids it). So the
page is handed an `OffloadGateway` by the command that starts it; the one
`pixie web` uses asks the running `pixie run` daemon over its control socket,
exactly as `pixie fetch` and `pixie recall` do when a daemon serves the data
dir. A fetched body is shown and never written back; a recall is the store's
own restore, done by the daemon.
"""

from __future__ import annotations

from typing import Protocol

from pixie.device.errors import DeviceError

NO_DAEMON = (
    "The device daemon is not running, so the Homebase cannot be reached from here: "
    "start `pixie run` for this data dir and try again."
)


class HomebaseUnreachable(DeviceError):
    """No running daemon (or no Homebase) to open an offloaded note through."""


class OffloadGateway(Protocol):
    """Fetch and recall, by note id. Both block (call them off the event loop)
    and raise a `DeviceError` with one line for the user when they fail."""

    def fetch(self, note_id: str) -> str:
        """The note's body, verified against the hash stamped at offload."""
        ...

    def recall(self, note_id: str) -> bool:
        """Bring the body home; whether the Homebase released its copy yet."""
        ...


__all__ = ["NO_DAEMON", "HomebaseUnreachable", "OffloadGateway"]
