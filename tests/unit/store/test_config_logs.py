"""`pixie config show` (the settings in force and their sources, no secrets)
and the daemon's log formats (`pixie run --json-logs`)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from pixie.device import logs
from tests.support.cli import run_cli


def test_config_show_says_where_each_setting_comes_from(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (data_dir / "config.toml").write_text(
        '[relay]\naddress = "relay.example:7700"\n[llm]\nmodel = "from-file"\n'
    )
    monkeypatch.setenv("PIXIE_LLM_MODEL", "from-env")
    monkeypatch.setenv("PIXIE_LLM_API_KEY", "sk-very-secret")
    res = run_cli("--data", str(data_dir), "config", "show", "--json")
    assert res.code == 0, res.err
    shown = json.loads(res.out)
    assert shown["relay"] == {
        "value": "relay.example:7700",
        "source": "config.toml [relay] address",
    }
    assert shown["llm_model"] == {"value": "from-env", "source": "PIXIE_LLM_MODEL"}
    assert shown["llm_api_key"] == {"value": "(set)", "source": "PIXIE_LLM_API_KEY"}
    text = run_cli("--data", str(data_dir), "config", "show")
    assert "sk-very-secret" not in res.out + text.out + text.err


def test_a_broken_config_file_is_one_error_line(data_dir: Path) -> None:
    (data_dir / "config.toml").write_text("[relay\n")
    res = run_cli("--data", str(data_dir), "config", "show")
    assert res.code == 2 and res.err.count("\n") == 1 and "not valid TOML" in res.err


@pytest.mark.parametrize("json_lines", [True, False])
def test_daemon_logs_are_text_or_json_lines(
    json_lines: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(logs.sys, "stderr", stream)
    logs.configure_logging(json_lines=json_lines)
    try:
        logging.getLogger("pixie.sync").info("sync with %s: %s", "ab12", "synced")
    finally:
        root = logging.getLogger("pixie")
        for handler in list(root.handlers):
            root.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    if json_lines:
        record = json.loads(line)
        assert (record["level"], record["logger"]) == ("info", "pixie.sync")
        assert record["msg"] == "sync with ab12: synced" and record["ts"].endswith("Z")
    else:
        assert line.endswith("info pixie.sync: sync with ab12: synced")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[relay]\naddress = 1979-05-27T07:32:00Z\n", "[relay] address must be a string"),
        ("[relay]\naddress = 7700\n", "[relay] address must be a string"),
        ("[llm]\nmodel = [1, 2]\n", "[llm] model must be a string or a number"),
        ("[llm]\nurl = { a = 1 }\n", "[llm] url must be a string or a number"),
        ("relay = 3\n", "[relay] must be a table"),
        ("x = 1" + "1" * 5000 + "\n", "a number too long"),
        ("x = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ],
)
@pytest.mark.parametrize("command", [["config", "show"], ["config", "show", "--json"]])
def test_a_config_setting_of_a_shape_no_one_could_mean_is_one_error_line(
    data_dir: Path, text: str, needle: str, command: list[str]
) -> None:
    (data_dir / "config.toml").write_text(text)
    res = run_cli("--data", str(data_dir), *command)
    assert res.code == 2, res.out
    assert res.err.startswith("pixie: error: ") and res.err.count("\n") == 1, res.err
    assert needle in res.err
