"""The importers `pixie import` reads with, in one registry.

An importer (`pixie.device.ingest.base.Importer`) turns one format into the
items an import writes: events, contact cards and skips. It has a ``name``
(what ``--format`` asks for), ``units`` (how the summary counts its events), a
``sniff(path)`` that says, without raising and without consuming anything,
whether a path looks like its format, and ``read(path, options, progress)``,
which streams the items of a path and raises `BadInput` naming the file and
the record for anything it cannot read. `pixie.device.ingest.load` writes the
items, all or nothing.

`detect` asks the importers in the order they are registered and returns the
first whose ``sniff`` says yes, so the order runs from the most specific
signature to the loosest: JSON Lines and Telegram's JSON (a first line or
key to recognise), mbox ("From " at the start), iCalendar and vCard (a BEGIN
line), a WhatsApp export (a timestamped first line), and last the journal,
which claims a folder of Markdown or text files.

Adding a format is one module in this package: a class with ``name``,
``units``, ``sniff`` and ``read`` and a module-level ``IMPORTER``; add it to
`_BUILT_IN` below, in its place in the order, and its cases to
tests/unit/ingest/. An importer reads only the path it is given and writes
nothing.
"""

from __future__ import annotations

from pathlib import Path

from pixie.device.errors import BadInput
from pixie.device.ingest import ics, journal, jsonl, mbox, telegram, vcard, whatsapp
from pixie.device.ingest.base import Importer


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


# What `pixie log import` reads when no importer recognises the input, and
# what standard input is read as.
DEFAULT = jsonl.IMPORTER.name

# The built-in importers, in the order `detect` asks them.
_BUILT_IN: tuple[Importer, ...] = (
    jsonl.IMPORTER,
    telegram.IMPORTER,
    mbox.IMPORTER,
    ics.IMPORTER,
    vcard.IMPORTER,
    whatsapp.IMPORTER,
    journal.IMPORTER,
)

REGISTRY = Registry()
for _importer in _BUILT_IN:
    REGISTRY.register(_importer)


def register(importer: Importer) -> Importer:
    """Add ``importer`` to the registry `pixie import` uses."""
    return REGISTRY.register(importer)


def get(name: str) -> Importer:
    """The registered importer called ``name``."""
    return REGISTRY.get(name)


def detect(path: Path) -> Importer | None:
    """The first registered importer whose ``sniff`` claims ``path``, or None."""
    return REGISTRY.detect(path)


def for_path(path: Path) -> Importer:
    """The importer `pixie import` reads ``path`` with: the one `detect`
    finds; `BadInput` naming the formats to choose from when none does."""
    found = detect(path)
    if found is None:
        known = ", ".join(REGISTRY.names())
        raise BadInput(
            f"cannot tell what format {path.name!r:.80} is in; name it with --format "
            f"(one of: {known})"
        )
    return found


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
