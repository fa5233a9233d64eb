from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pixie.device.node.keyed import Node
from pixie.device.store.provision import create_data_dir
from pixie.entry.main import main

settings.register_profile(
    "pixie",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("pixie")


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def run_cli(*argv: str, stdin: bytes | None = None) -> CliResult:
    """Run ``pixie`` in-process (fast); the subprocess tests cover the real binary."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
    finally:
        sys.stdin = old_stdin
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    create_data_dir(path, name="test", role="device")
    return path


@pytest.fixture
def node(data_dir: Path) -> Iterator[Node]:
    with Node.open(data_dir) as n:
        yield n


@pytest.fixture(autouse=True)
def _file_keys(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys go to a private temp dir per test, never to the user's keychain."""
    monkeypatch.setenv("PIXIE_KEYSTORE", "file")
    monkeypatch.setenv("PIXIE_KEYS", str(tmp_path_factory.mktemp("keys")))
