"""A `pixie` command loads what it uses: the web page's server and the calendar
parser are imported by `pixie web` and by a calendar import, not by every
command as it starts (together they were about a fifth of a command's start)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "hypercorn",
    "jinja2",
    "icalendar",
    "recurring_ical_events",
    "pixie.device.web.app",
    "pixie.device.web.security",
)

PROBE = """
import json, sys
from pixie.entry.main import build_parser
build_parser().parse_args(sys.argv[1:])
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def loaded_by(*argv: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_building_the_command_line_loads_no_web_server_and_no_calendar_parser() -> None:
    assert loaded_by("grep", "hello") == []
    assert loaded_by("web", "--listen", "127.0.0.1:0") == []  # parsed, not yet run
