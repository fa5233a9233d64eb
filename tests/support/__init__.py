"""Helpers shared by several test modules (no tests here)."""

from pathlib import Path

# The repository's top folder (scripts/, the packages, pyproject.toml).
ROOT = Path(__file__).resolve().parents[2]
