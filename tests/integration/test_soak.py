"""A short kill -9 soak (the long one is `./scripts/soak --kills 200`): random
processes killed mid-work, and every acknowledged event, note and offloaded
body still there; digests equal after a final sync."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

SOAK = ROOT / "scripts" / "soak.py"


@pytest.mark.slow
def test_short_kill_soak(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SOAK), "--kills", "5", "--seed", "11", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "5 kills" in out.stdout and "digests equal" in out.stdout
