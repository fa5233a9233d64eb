"""The import contracts in pyproject.toml catch what they claim to.

`./scripts/test` runs lint-imports over the real tree, which shows the
contracts hold. This test shows that each would fail if broken: it copies the
packages into a scratch tree, plants one forbidden import per contract, and
checks that lint-imports names every planted violation and exits nonzero.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGES = ("protocol", "device", "homebase", "relay", "sim", "entry")

# (folder/file planted, its one import, the contract name that must break)
PLANTS = [
    ("device/agent/leak.py", "import pixie.device.notebook.sealed", "sealed zone"),
    ("device/distill/leak.py", "import pixie.device.store.keystore", "sealed zone"),
    ("device/web/leak.py", "import pixie.device.notebook.seal", "sealed zone"),
    ("device/web/upward.py", "import pixie.device.cli.notebook", "device rooms"),
    ("device/store/upward.py", "import pixie.device.sync.driver", "device rooms"),
    ("relay/peek.py", "import pixie.device.store.db", "layers: entry above sim"),
    ("relay/crypto.py", "import nacl.signing", "relay's own code imports no crypto"),
    ("relay/opener.py", "import pixie.protocol.envelope", "holds no key"),
    ("protocol/blocking.py", "import trio", "sans-IO"),
    ("homebase/tool.py", "import pixie.sim.world", "layers: entry above sim"),
    # An existing module gets the import added (and loses it afterwards).
    ("homebase/holding.py", "import trio", "sans-IO cores"),
    ("homebase/holdsteps.py", "import sqlite3", "peer engine's steps"),
    ("device/sync/syncsteps.py", "import pixie.device.store.db", "peer engine's steps"),
    ("device/sync/admitsteps.py", "import trio", "peer engine's steps"),
    ("device/sync/offloadsteps.py", "import pixie.device.sync.offload", "peer engine's steps"),
]


def contract_names() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [c["name"] for c in config["tool"]["importlinter"]["contracts"]]


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).parent / "lint-imports"
    if not tool.exists():
        pytest.skip("lint-imports is not installed in this environment")
    return subprocess.run(
        [str(tool), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        check=False,
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("contracts")
    for name in PACKAGES:
        shutil.copytree(
            ROOT / name,
            tree / "pixie" / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return tree


def test_every_plant_names_a_contract() -> None:
    names = contract_names()
    for _, _, wanted in PLANTS:
        assert any(wanted in name for name in names), wanted


def test_the_real_tree_keeps_every_contract(scratch: Path) -> None:
    result = lint_imports(scratch)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contract_names())} kept, 0 broken." in result.stdout


def test_each_planted_import_breaks_its_contract(scratch: Path) -> None:
    planted: list[tuple[Path, str | None]] = []
    for where, line, _ in PLANTS:
        path = scratch / "pixie" / where
        before = path.read_text() if path.exists() else None
        header = '"""A forbidden import, planted on purpose."""\n'
        path.write_text(f"{before or header}\n{line}  # planted on purpose\n")
        planted.append((path, before))
    try:
        result = lint_imports(scratch)
    finally:
        for path, before in planted:
            if before is None:
                path.unlink()
            else:
                path.write_text(before)
    out = " ".join(result.stdout.split())  # lint-imports wraps long lines
    assert result.returncode != 0
    for where, line, wanted in PLANTS:
        module = "pixie." + where.removesuffix(".py").replace("/", ".")
        target = line.split()[1]
        broken = [n for n in contract_names() if wanted in n]
        assert any(f"{' '.join(n.split())} BROKEN" in out for n in broken), (wanted, out)
        assert f"{module} -> {target}" in out or module in out, (module, out)
