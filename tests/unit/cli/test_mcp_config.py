"""``pixie mcp --print-config``: the JSON an MCP host needs, whose command,
started as a host would start it, is a working MCP server on this data dir."""

from __future__ import annotations

import os
from pathlib import Path

from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pixie.device.agent.mcpserver import SERVER_NAME
from tests.support.cli import run_cli

CALL_TIMEOUT = 30.0  # seconds; a server that never answers fails the test


async def test_the_printed_entry_starts_a_server_on_this_data_dir(
    data_dir: Path, tmp_path: Path
) -> None:
    out = run_cli("--data", str(data_dir), "mcp", "--print-config")
    assert out.code == 0, out.err
    config = out.json()
    assert isinstance(config, dict)
    entry = config["mcpServers"]["pixie-memory"]
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-3:] == ["--data", str(data_dir.absolute()), "mcp"]

    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={k: os.environ[k] for k in ("PIXIE_KEYSTORE", "PIXIE_KEYS")},
    )
    with (tmp_path / "mcp.err").open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, CALL_TIMEOUT) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == SERVER_NAME
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"check_notebook", "grep_memory"}


def test_the_vscode_form_and_a_missing_data_dir(data_dir: Path, tmp_path: Path) -> None:
    out = run_cli("--data", str(data_dir), "mcp", "--print-config", "vscode")
    assert out.code == 0, out.err
    config = out.json()
    assert isinstance(config, dict)
    assert config["servers"]["pixie-memory"]["type"] == "stdio"
    missing = run_cli("--data", str(tmp_path / "nowhere"), "mcp", "--print-config")
    assert missing.code == 2 and missing.out == ""
    assert len(missing.err.strip().splitlines()) == 1
    bad = run_cli("--data", str(data_dir), "mcp", "--print-config", "emacs")
    assert bad.code == 2 and "invalid choice" in bad.err
