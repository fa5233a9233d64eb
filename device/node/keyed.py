"""Node: one peer's local state with its keys: the identity and the sealed zone.

Only what must hold keys opens one: sync, pairing, offload, the daemon, the
huddle and the commands that drive them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nacl.signing import SigningKey

from pixie.device.node.clear import ClearNode
from pixie.device.notebook.store import NotebookStore
from pixie.device.store.keystore import KeyStore, KeyStoreError, data_keys, open_key_store
from pixie.device.store.provision import identity_key_name
from pixie.protocol.clock import SYSTEM_CLOCK, SYSTEM_ENTROPY, Clock, Entropy
from pixie.protocol.identity import identity_from_seed


@dataclass
class Node(ClearNode):
    """A `ClearNode` whose Notebook opens the sealed zone and which knows its identity."""

    # None: PIXIE_KEYSTORE decides, on first use (a data dir with its own
    # keys has them here from the start).
    key_store: KeyStore | None = None
    notebook: NotebookStore = field(init=False)  # the full store, both zones

    def _notebook(self) -> NotebookStore:
        return NotebookStore(
            self.db,
            self.origin,
            self.log,
            key_store=self.key_store,
            clock=self.clock,
            entropy=self.entropy,
            ids=self.ids,
            settings=self.data.config_path,
        )

    def identity(self) -> SigningKey:
        """This peer's identity key, from the key store (never from the data dir)."""
        store = self.key_store or open_key_store(self.data.path)
        seed = store.get(identity_key_name(self.origin))
        if seed is None:
            raise KeyStoreError(
                "this peer's identity key is missing from the key store; "
                "restore it with `pixie keys import BACKUP`, "
                "or pair again from a fresh `pixie init`"
            )
        key = identity_from_seed(seed)
        if bytes(key.verify_key).hex() != self.db.meta().get("identity"):
            raise KeyStoreError("the key store holds a different identity than this data dir")
        return key

    @classmethod
    def open(
        cls,
        path: Path,
        key_store: KeyStore | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        entropy: Entropy = SYSTEM_ENTROPY,
    ) -> Node:
        data, db, meta = cls._open_parts(path)
        return cls(
            data,
            db,
            meta["origin"],
            meta["role"],
            meta.get("name", meta["role"]),
            key_store if key_store is not None else data_keys(path),
            clock=clock,
            entropy=entropy,
        )


__all__ = ["Node"]
