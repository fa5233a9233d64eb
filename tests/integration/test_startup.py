"""What a command imports before it answers: `pixie --version` needs none of
the subcommands, so none of the heavy libraries are loaded for it."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sqlalchemy", "trio", "nacl", "cryptography", "numpy", "httpx", "re2", "msgpack")

PROBE = """
import json, sys
from pixie.entry.main import main
code = main(["--version"])
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {heavy})]))
"""


def test_version_imports_no_subcommand_and_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=set(HEAVY))],
        capture_output=True,
        text=True,
        check=True,
    )
    version_line, loaded = done.stdout.splitlines()
    assert version_line.startswith("pixie ")
    code, heavy = json.loads(loaded)
    assert (code, heavy) == (0, [])


def test_version_is_what_the_full_parser_prints() -> None:
    full = subprocess.run(
        [sys.executable, "-m", "pixie.entry.main", "--version", "--data", "x"],
        capture_output=True,
        text=True,
        check=True,
    )
    quick = subprocess.run(
        [sys.executable, "-m", "pixie.entry.main", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert full.stdout == quick.stdout
