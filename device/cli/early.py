"""What the `pixie` command reads of its command line before any subcommand
is imported: the installed version, and which arguments are ``--data`` (so
that `pixie --version` and a quick `pixie grep` load nothing else, and a
command line that names its command loads that command alone)."""

from __future__ import annotations


def package_version() -> str:
    """The installed version of Pixie Memory ("" when it runs from a tree
    that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pixie-memory")
    except PackageNotFoundError:
        return ""


def split_data(arguments: list[str]) -> tuple[str | None, list[str]]:
    """The value of ``--data DIR`` (or ``--data=DIR``; the last one given),
    and the other arguments in order. A ``--data`` with nothing after it is
    left among the others, for the parser to refuse."""
    data: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(arguments):
        arg = arguments[i]
        if arg == "--data" and i + 1 < len(arguments):
            data, i = arguments[i + 1], i + 2
            continue
        if arg.startswith("--data="):
            data = arg.partition("=")[2]
        else:
            rest.append(arg)
        i += 1
    return data, rest
