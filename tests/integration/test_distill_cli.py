"""`pixie distill`, the opportunistic pass of `pixie run` on a device, and a
pass killed with SIGKILL between two sources, then run again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import trio

from pixie.device.app.daemon import run_peer
from pixie.device.distill.service import NotetakingService
from pixie.device.node.keyed import Node
from pixie.device.store.notes import NoteKind
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.relayclient import RelayAddress
from tests.support.cli import run_cli
from tests.support.llmserver import Reply, ScriptedLLMServer, refused_url
from tests.support.processes import PIXIE

LLM_VARS = ("PIXIE_LLM_URL", "PIXIE_LLM_MODEL", "PIXIE_LLM_TIMEOUT", "PIXIE_LLM_API_KEY")


@pytest.fixture(autouse=True)
def _no_llm_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in LLM_VARS:
        monkeypatch.delenv(var, raising=False)


def cli(data: Path, *argv: str):  # type: ignore[no-untyped-def]
    return run_cli("--data", str(data), *argv)


def seed(data: Path) -> None:
    said = [
        ("Ada", False, "the Lyon marathon is in May"),
        ("Ada", True, "I live in Porto now, come visit"),
        ("Ada", False, "new running shoes!"),
        ("Sam", False, "the boiler is fixed"),
        ("Sam", True, "thanks! I work at Northwind Labs until six"),
    ]
    lines: list[dict[str, object]] = [
        {
            "kind": "message",
            "at": f"2026-03-01T10:{i:02d}:00Z",
            "text": text,
            "contact": who,
            "thread": f"t-{who.lower()}",
            "from_me": me,
        }
        for i, (who, me, text) in enumerate(said)
    ]
    lines.append({"kind": "post", "at": "2026-03-02T09:00:00Z", "text": "Sunset", "source": "p:1"})
    payload = "\n".join(json.dumps(line) for line in lines).encode()
    assert run_cli("--data", str(data), "log", "import", "-", stdin=payload).code == 0


def state(data: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(data / "pixie.db")
    try:
        rows = con.execute("SELECT * FROM note ORDER BY n").fetchall()
        rows += con.execute("SELECT * FROM distill_mark ORDER BY source").fetchall()
    finally:
        con.close()
    return rows


def test_distill_reports_what_it_did(data_dir: Path) -> None:
    seed(data_dir)
    out = cli(data_dir, "distill")
    assert out.code == 0, out.err
    assert out.out == (
        "distilled 2 threads, 1 post, 0 calls, 0 journal entries, 0 calendar entries and "
        "0 mail threads with 3 model calls (3 offline); notes: 7 written (6 new, 1 updated), "
        "0 unchanged, 0 kept as you edited them\n"
    )
    again = cli(data_dir, "distill", "--json")
    report = again.json()
    assert report["model_calls"] == 0 and report["notes_written"] == 0  # type: ignore[index]
    assert report["distilled"] == 0  # type: ignore[index]
    redo = cli(data_dir, "distill", "--all", "--json").json()
    assert redo["model_calls"] == 3 and redo["notes_written"] == 0  # type: ignore[index]
    assert redo["notes"]["unchanged"] == 7  # type: ignore[index]
    listed = cli(data_dir, "notebook", "list").out
    assert "Person · Ada" in listed and "Conversation · Sam" in listed and "About you" in listed
    assert "Post · You, 2 Mar 2026: Sunset" not in listed  # not from_me: nobody's name to show
    assert "Post · Someone, 2 Mar 2026: Sunset" in listed


def test_distill_uses_the_configured_model_and_falls_back(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(data_dir)
    (data_dir / "config.toml").write_text(f'[llm]\nurl = "{refused_url()}"\nmodel = "file"\n')
    with ScriptedLLMServer() as server:
        server.then(Reply.text("{ not json"))
        monkeypatch.setenv("PIXIE_LLM_URL", server.url)  # the environment beats the file
        monkeypatch.setenv("PIXIE_LLM_API_KEY", "sk-SECRETCANARY")
        report = cli(data_dir, "distill", "--json", "--timeout", "10").json()
        assert report["calls_by_backend"] == {"http": 3, "offline": 1}  # type: ignore[index]
        assert report["fallbacks"] == 1 and report["failed"] == 0  # type: ignore[index]
        assert [r.body["model"] for r in server.requests] == ["file"] * 3
        assert server.requests[0].headers["authorization"] == "Bearer sk-SECRETCANARY"
        # Flags beat the environment.
        out = cli(data_dir, "distill", "--all", "--json", "--model", "flag").json()
        assert out["calls_by_backend"] == {"http": 3}  # type: ignore[index]
        assert server.requests[-1].body["model"] == "flag"
        offline = cli(data_dir, "distill", "--all", "--offline", "--json").json()
        assert offline["calls_by_backend"] == {"offline": 3}  # type: ignore[index]
    for path in data_dir.rglob("*"):  # the key is never written to the data dir
        if path.is_file():
            assert b"SECRETCANARY" not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("argv", "config", "error"),
    [
        (["--url", "ftp://example.test/v1", "--model", "m"], None, "not an http:// or https://"),
        (["--url", "http://me:pw@example.test/v1", "--model", "m"], None, "must not carry"),
        (["--url", "http://127.0.0.1:9/v1"], None, "no model"),
        (["--timeout", "-1"], None, "above 0"),
        (["--timeout", "soon"], None, "invalid float value"),
        (["--offline", "--url", "http://127.0.0.1:9/v1"], None, "contradict"),
        ([], '[llm]\napi_key = "sk-SECRET"\n', "secrets never go in the config file"),
        ([], '[llm]\nurll = "x"\n', "unknown setting [llm] urll"),
        ([], "[llm\n", "is not valid TOML"),
        ([], '[llm]\ntimeout = "never"\n', "number of seconds"),
    ],
)
def test_bad_input_gives_one_line_and_changes_nothing(
    data_dir: Path, argv: list[str], config: str | None, error: str
) -> None:
    seed(data_dir)
    if config is not None:
        (data_dir / "config.toml").write_text(config)
    before = state(data_dir)
    out = cli(data_dir, "distill", *argv)
    assert out.code == 2 and out.out == ""
    assert out.err.startswith("pixie: error: ") and out.err.count("\n") == 1, out.err
    assert error in out.err
    assert "pw" not in out.err and "SECRET" not in out.err
    assert state(data_dir) == before


def test_distill_outside_a_data_dir_is_one_line(tmp_path: Path) -> None:
    out = cli(tmp_path / "nowhere", "distill")
    assert out.code == 2 and out.err.startswith("pixie: error: no Pixie data dir")


def test_run_refuses_bad_llm_settings_at_start(data_dir: Path) -> None:
    with Node.open(data_dir) as node:
        node.siblings.add(SiblingInfo(b"\x01" * 32, "mac", "homebase", "127.0.0.1:9", 0))
    (data_dir / "config.toml").write_text('[llm]\nurl = "http://127.0.0.1:9/v1"\n')
    out = cli(data_dir, "run", "--relay", "127.0.0.1:9")
    assert out.code == 2
    assert out.err.splitlines()[-1].startswith("pixie: error: a model URL is set but no model")


async def test_run_on_a_device_distils_new_material(
    node: Node, nursery: trio.Nursery, tmp_path: Path
) -> None:
    seed(node.data.path)
    relay = RelayAddress.parse(refused_url().split("//")[1].split("/")[0])  # relay down
    service = NotetakingService.for_node(node)
    nursery.start_soon(partial(run_peer, node, relay, distill=service, distill_every=0.05))
    with trio.fail_after(30):  # a deadline on an observable condition
        while len(node.notebook.clear_notes(NoteKind.PERSON)) < 2:
            await trio.sleep(0.05)
    cli(node.data.path, "log", "add", "--kind", "message", "--text", "I finished in 3:58!",
        "--contact", "Ada", "--thread", "t-ada")  # fmt: skip
    with trio.fail_after(30):
        while "3:58" not in str(
            [n.body for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)]
        ):
            await trio.sleep(0.05)


# -- a pass killed by SIGKILL between two sources --------------------------------------

KILLER = """
import os, signal, sys
from pixie.device.distill.service import NotetakingService
from pixie.entry.main import main

original = NotetakingService.commit
done = 0

def commit(self, *args):
    global done
    if done == int(sys.argv[2]) and sys.argv[3] == "mid":
        os.kill(os.getpid(), signal.SIGKILL)  # its answer in hand, nothing committed
    out = original(self, *args)
    done += 1
    if done == int(sys.argv[2]) and sys.argv[3] == "between":
        os.kill(os.getpid(), signal.SIGKILL)  # committed, the next one not begun
    return out

NotetakingService.commit = commit
sys.exit(main(["--data", sys.argv[1], "distill"]))
"""


@pytest.mark.parametrize("when", ["between", "mid"])
def test_a_pass_killed_between_sources_resumes_to_the_same_notebook(
    data_dir: Path, tmp_path: Path, when: str
) -> None:
    seed(data_dir)
    for i in range(6):
        cli(data_dir, "log", "add", "--kind", "call", "--text", f"Me: hi\nBo: call {i} about Lyon",
            "--contact", "Bo", "--source", f"call:{i}")  # fmt: skip
    calm = tmp_path / "calm"
    shutil.copytree(data_dir, calm)
    whole = cli(calm, "distill", "--json").json()
    assert whole["distilled"] == 9  # type: ignore[index]

    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(data_dir), "4", when],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=os.environ.copy(),
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with sqlite3.connect(data_dir / "pixie.db") as con:
        marks = con.execute("SELECT count(*) FROM distill_mark").fetchone()[0]
    assert marks == 4  # exactly the sources committed before the kill

    resumed = subprocess.run(
        [*PIXIE, "--data", str(data_dir), "distill", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["distilled"] == 9 - 4  # nothing skipped, and only one source redone
    assert report["failed"] == 0

    def notes(data: Path) -> list[tuple[object, ...]]:
        with sqlite3.connect(data / "pixie.db") as con:
            return con.execute(
                "SELECT id, kind, identity_key, title, body, tags, contact_id, source_ref, "
                "about_date FROM note ORDER BY id"
            ).fetchall()

    assert notes(data_dir) == notes(calm)
    with sqlite3.connect(data_dir / "pixie.db") as a, sqlite3.connect(calm / "pixie.db") as b:
        query = "SELECT * FROM distill_mark WHERE source != '*scan' ORDER BY source"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()


# -- journals and calendars, imported and distilled ----------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "distill"


def test_journals_and_calendars_become_about_you_facts_and_appointments(data_dir: Path) -> None:
    ics = cli(
        data_dir,
        "import",
        "--tz",
        "UTC",
        "--me",
        "me@example.test",
        str(FIXTURES / "appointments.ics"),
    )
    assert ics.code == 0, ics.err
    journal = cli(data_dir, "import", "--tz", "UTC", str(FIXTURES / "journal"))
    assert journal.code == 0, journal.err
    out = cli(data_dir, "distill", "--json")
    assert out.code == 0, out.err
    report = out.json()
    assert (report["journals"], report["calendar"]) == (2, 2)  # type: ignore[index]

    found = cli(data_dir, "notebook", "search", "when is my dentist appointment").out
    first = found.splitlines()[1]
    assert first.startswith("1. Conversation · Dentist check-up — Saturday 14 March 2026, 10:00")
    assert "saturday, march" in first
    assert "Where: Rua das Flores 12, Porto. With Tomasz Nowak." in found

    about = json.loads(cli(data_dir, "notebook", "list", "--kind", "about_you", "--json").out)
    shown = cli(data_dir, "notebook", "show", about[0]["id"]).out
    for line in (
        "- Work: works at Northwind Labs; as of 2 Mar 2026",
        "- Home: lives in Porto (moved); as of 9 Mar 2026",
        "- Family: sister Zoë; as of 2 Mar 2026",
        "- Allergy: allergic to peanuts; as of 2 Mar 2026",
        "- Diet: vegetarian; as of 9 Mar 2026",
        "- Likes: loves long walks; as of 9 Mar 2026",
    ):
        assert line in shown, shown
    before = state(data_dir)
    again = cli(data_dir, "distill", "--all", "--json").json()
    assert again["notes_written"] == 0  # type: ignore[index]
    assert state(data_dir) == before
