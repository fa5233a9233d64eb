"""The installed version, in a module of its own: `pixie --version` reads it
without importing any subcommand."""

from __future__ import annotations


def package_version() -> str:
    """The installed version of Pixie Memory ("" when it runs from a tree
    that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pixie-memory")
    except PackageNotFoundError:
        return ""
