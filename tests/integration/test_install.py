"""A plain install gives a working ``pixie``: the wheel `pip install .` (and
so `pipx install .`) builds carries every module and every file the code
reads at run time, and the installed command runs every kind of command with
nothing from this source tree on its path."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FOLDERS = ("protocol", "device", "homebase", "relay", "sim", "entry")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("pixie_memory-*.whl")
    return built


def test_the_wheel_carries_every_module_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = set()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in (".py", ".html", ".css", ".js") or path.name == "py.typed":
                wanted.add(f"pixie/{folder}/{path.relative_to(ROOT / folder).as_posix()}")
    assert wanted - names == set()
    assert not any(n.startswith(("tests/", "scripts/")) for n in names)


def test_the_installed_command_runs_with_nothing_from_the_tree(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # -S: no site processing, so the development install's import hook is
    # off; the installed copy comes first, the dependencies after it.
    deps = sysconfig.get_paths()["purelib"]
    boot = (
        f"import sys; sys.path[:0] = [{str(target)!r}, {deps!r}]\n"
        "import pixie.device\n"
        f"assert pixie.device.__file__.startswith({str(target)!r}), pixie.device.__file__\n"
        "from pixie.entry.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {
        **os.environ,
        "PIXIE_KEYSTORE": "file",
        "PIXIE_KEYS": str(tmp_path / "keys"),
        "PYTHONPATH": "",
    }

    def pixie(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", "-c", boot, *argv],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    version = pixie("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "pixie 0.1.0"
    helped = pixie("--help")
    for command in ("init", "import", "notebook", "keys", "web", "mcp", "relay", "run"):
        assert f"    {command}" in helped.stdout, command
    data = tmp_path / "data"
    assert pixie("--data", str(data), "init").returncode == 0
    chat = ROOT / "tests" / "fixtures" / "ingest" / "whatsapp" / "WhatsApp Chat with Priya.txt"
    imported = pixie("--data", str(data), "import", str(chat), "--me", "Sam", "--tz", "UTC")
    assert imported.returncode == 0, imported.stderr
    assert "imported 7 messages" in imported.stdout
    found = pixie("--data", str(data), "grep", "usual place")
    assert found.returncode == 0 and "8pm at the usual place" in found.stdout
    config = pixie("--data", str(data), "mcp", "--print-config")
    assert config.returncode == 0 and '"mcp"' in config.stdout
