"""The importers `pixie log import` can read with, in one registry.

An importer turns one file format into the `NewEvent`s the memory log
appends. It has a ``name`` (what a user or a caller asks for it by), a
``sniff(path)`` that says, without raising and without consuming anything,
whether a file looks like its format, and ``read_events(stream, progress)``,
which reads a whole binary stream and returns every event, all or nothing: a
bad record raises `BadInput` naming where it is, before anything is written.
``progress``, when given, hears the number of bytes read so far, now and then
and once at the end.

`detect` asks the importers in the order they were registered and returns the
first whose ``sniff`` says yes; `pixie log import` falls back to `DEFAULT`
(JSON Lines, the format it has always read) when none does, and reads stdin
with `DEFAULT` too.

Adding a format (mbox, iCalendar, vCard, a WhatsApp or Telegram export,
Markdown notes) is one module in this package:

1. write ``pixie/device/ingest/<format>.py`` with a class that has ``name``,
   ``sniff`` and ``read_events`` as `Importer` describes, and a module-level
   ``IMPORTER`` instance of it (see `jsonl` for the pattern). Keep ``sniff``
   cheap and specific: a file suffix, or the first bytes of a regular file,
   never a read from a pipe or a device;
2. add the module to `_BUILT_IN` below, before any importer whose ``sniff``
   would also claim its files (order decides between two that both say yes);
3. add its cases to tests/unit/ingest/test_ingest_registry.py: that it is registered,
   what it sniffs and what it refuses, and the events a small sample yields.

An importer reads only the stream it is given and builds events from it; it
writes nothing and reaches no other part of the data dir.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from pixie.device.errors import BadInput
from pixie.device.ingest import jsonl
from pixie.device.store.memlog import NewEvent


class Importer(Protocol):
    """One file format the memory log can be filled from."""

    @property
    def name(self) -> str: ...

    def sniff(self, path: Path) -> bool: ...

    def read_events(
        self, stream: IO[bytes], progress: Callable[[int], None] | None = None
    ) -> list[NewEvent]: ...


class Registry:
    """Importers by name, asked in the order they were registered."""

    def __init__(self) -> None:
        self._importers: dict[str, Importer] = {}

    def register(self, importer: Importer) -> Importer:
        """Add ``importer``; a second one of the same name is refused."""
        if importer.name in self._importers:
            raise ValueError(f"an importer named {importer.name!r} is already registered")
        self._importers[importer.name] = importer
        return importer

    def get(self, name: str) -> Importer:
        """The importer called ``name``; `BadInput` listing the known ones if none is."""
        try:
            return self._importers[name]
        except KeyError:
            known = ", ".join(self._importers)
            raise BadInput(f"no importer named {name!r:.40} (one of: {known})") from None

    def detect(self, path: Path) -> Importer | None:
        """The first importer whose ``sniff`` claims ``path``, or None."""
        for importer in self._importers.values():
            if importer.sniff(path):
                return importer
        return None

    def names(self) -> tuple[str, ...]:
        return tuple(self._importers)


# What `pixie log import` reads when no importer recognises the input.
DEFAULT = jsonl.IMPORTER.name

# The built-in importers, in the order `detect` asks them.
_BUILT_IN: tuple[Importer, ...] = (jsonl.IMPORTER,)

REGISTRY = Registry()
for _importer in _BUILT_IN:
    REGISTRY.register(_importer)


def register(importer: Importer) -> Importer:
    """Add ``importer`` to the registry `pixie log import` uses."""
    return REGISTRY.register(importer)


def get(name: str) -> Importer:
    """The registered importer called ``name``."""
    return REGISTRY.get(name)


def detect(path: Path) -> Importer | None:
    """The first registered importer whose ``sniff`` claims ``path``, or None."""
    return REGISTRY.detect(path)


def for_path(path: Path) -> Importer:
    """The importer to read ``path`` with: the one `detect` finds, else `DEFAULT`."""
    return detect(path) or get(DEFAULT)


__all__ = [
    "DEFAULT",
    "REGISTRY",
    "Importer",
    "Registry",
    "detect",
    "for_path",
    "get",
    "register",
]
