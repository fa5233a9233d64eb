from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, settings

from pixie.device.node.keyed import Node
from pixie.device.store.provision import create_data_dir
from pixie.device.sync.relayclient import RelayAddress
from tests.support.daemons import Setup, paired_processes
from tests.support.wire import Recorder, recorded_relay

settings.register_profile(
    "pixie",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("pixie")


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


@pytest.fixture(autouse=True)
def _term_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches rank by terms alone unless a test turns meaning on (the
    tests of `nearby` and of search with meaning do): the many tests that
    hold the spec's term ranking exactly then see that ranking, and no test
    pays for loading the embedding model it does not use."""
    monkeypatch.setenv("PIXIE_EMBEDDINGS", "0")


@pytest.fixture
async def wire(nursery: trio.Nursery) -> AsyncIterator[tuple[RelayAddress, Recorder]]:
    """A real relay on loopback behind a proxy that records every byte both ways."""
    yield await recorded_relay(nursery)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    """A device and a Homebase paired through a relay process (see support/daemons.py)."""
    async with paired_processes(tmp_path) as paired:
        yield paired
