"""Puts the repository's root on ``sys.path``, so that a script run as
``python scripts/NAME.py`` can import `tests.testkit` (the sample life and the
benchmark questions, which are not installed with pixie)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
