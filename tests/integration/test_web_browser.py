"""The page in a real browser: `pixie web` as its own process on a paired
device (a relay and a Homebase running as processes too), driven by Debian's
Chromium through Playwright. It searches, edits, deletes, and opens an
offloaded note, first with no device daemon (the page says how to reach the
Homebase) and then through a running `pixie run`; it saves a screenshot of
each main view under the test's tmp_path.

Playwright's sync API runs in a worker thread, so it never shares a thread
with trio's event loop.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from pixie.device.app import control
from pixie.device.errors import BadInput
from pixie.device.web.offloaded import NO_DAEMON
from tests.support.browser import BROWSER_MARKS, CHROMIUM, plain_asyncio
from tests.support.daemons import BODY, Setup, stop
from tests.support.processes import PIXIE

pytestmark = BROWSER_MARKS
XSS_TITLE = "<img src=x onerror=alert(1)>"


@dataclass
class Browse:
    """What one browser session saw."""

    dialogs: list[tuple[str, str]] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)


def shoot(page: Any, shots: Path, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def submit(page: Any, selector: str) -> None:
    """Click a form's button and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(selector)


def without_daemon(url: str, shots: Path, ids: dict[str, str]) -> Browse:
    from playwright.sync_api import sync_playwright

    out = Browse()
    base = url.split("?", maxsplit=1)[0].rstrip("/")
    with plain_asyncio(), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("dialog", lambda d: (out.dialogs.append((d.type, d.message)), d.accept()))
            page.goto(url)
            out.seen["landed"] = page.url
            page.wait_for_selector("section#guidance")
            out.seen["sections"] = page.locator("section.group h2 a").all_inner_texts()
            out.seen["xss_title_text"] = page.locator(
                f'[data-note="{ids["xss"]}"] h3 a'
            ).inner_text()
            shoot(page, shots, "notebook")

            page.goto(f"{base}/search")
            page.fill("#q", "recital")
            submit(page, "#go")
            page.wait_for_selector("#headline")
            out.seen["headline"] = page.inner_text("#headline")
            out.seen["search_ids"] = [
                a.get_attribute("data-note") for a in page.locator("#results article.note").all()
            ]
            shoot(page, shots, "search")

            page.goto(f"{base}/note/{ids['edit']}")
            page.fill("#title", "Dinner with Priya, moved")
            page.fill("#tags", "food, friends")
            submit(page, "#save")
            page.wait_for_selector(".flash.ok")
            out.seen["edit_flash"] = page.inner_text(".flash.ok")
            out.seen["edit_marks"] = page.locator(".mark.edited").count()
            shoot(page, shots, "edited")
            submit(page, "#save")  # the same again: nothing to write
            page.wait_for_selector(".flash.ok")
            out.seen["noop_flash"] = page.inner_text(".flash.ok")

            page.goto(f"{base}/note/{ids['delete']}")
            submit(page, "#delete")
            page.wait_for_selector(".flash.ok")
            out.seen["delete_flash"] = page.inner_text(".flash.ok")
            out.seen["after_delete"] = page.url

            page.goto(f"{base}/note/{ids['parked']}")
            out.seen["badge"] = page.inner_text(".badge")
            out.seen["edit_form"] = page.locator("#edit-form").count()
            page.click("#fetch")
            page.wait_for_selector("#fetched:not([hidden])")
            # (a selector, not wait_for_function: the page's CSP forbids eval)
            page.wait_for_selector("#fetched-body:not(:empty)")
            out.seen["unreachable"] = page.inner_text("#fetched-body")
            shoot(page, shots, "offloaded-unreachable")

            page.goto(f"{base}/log?q=cello")
            out.seen["log_lines"] = page.locator("li.event").count()
            shoot(page, shots, "log")
            page.goto(f"{base}/status")
            out.seen["status"] = page.inner_text("table.siblings")
            shoot(page, shots, "status")
        finally:
            browser.close()
    return out


def with_daemon(url: str, shots: Path, parked: str) -> Browse:
    from playwright.sync_api import sync_playwright

    out = Browse()
    base = url.split("?", maxsplit=1)[0].rstrip("/")
    with plain_asyncio(), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("dialog", lambda d: (out.dialogs.append((d.type, d.message)), d.accept()))
            page.goto(url)
            page.goto(f"{base}/note/{parked}")
            page.click("#fetch")
            page.wait_for_selector("#fetched:not([hidden]):not(.failed)")
            out.seen["fetched"] = page.inner_text("#fetched-body")
            shoot(page, shots, "offloaded-fetched")
        finally:
            browser.close()
    return out


def cli_json(setup: Setup, *args: str) -> Any:
    result = setup.run(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


async def start_web(setup: Setup) -> tuple[trio.Process, str]:
    log = (setup.tmp / "web.log").open("ab")
    process = await trio.lowlevel.open_process(
        [*PIXIE, "--data", str(setup.phone), "web", "--listen", "127.0.0.1:0", "--timeout", "5"],
        stdout=subprocess.PIPE,
        stderr=log,
    )
    assert process.stdout is not None
    line = b""
    with trio.fail_after(60):
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, (setup.tmp / "web.log").read_text()
            line += chunk
    return process, line.decode().strip()


async def daemon_ready(phone: Path, note_id: str) -> str:
    """Wait until the device daemon answers a fetch over its control socket."""
    with trio.fail_after(60):
        while True:
            try:
                answer = await trio.to_thread.run_sync(
                    lambda: control.call(phone, "fetch", {"note_id": note_id, "timeout": 5}, 10)
                )
            except BadInput:  # up, but not connected to the relay yet
                answer = None
            if answer is not None:
                return str(answer)
            await trio.sleep(0.2)


async def test_the_page_in_a_real_browser(setup: Setup, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    ids = {
        "edit": setup.note("Dinner with Priya", "Friday at eight, the Lebanese place."),
        "delete": setup.note("Old plan", "Nothing worth keeping."),
        "parked": setup.note("Recital"),  # BODY: "Ada's cello recital is on the 14th ..."
        "xss": setup.note(XSS_TITLE, "A title that is markup."),
    }
    logged = setup.run(
        "log", "add", "--kind", "message", "--text", "cello practice", "--contact", "Ada"
    )
    assert logged.returncode == 0, logged.stderr
    homebase = await setup.homebase("--interval", "3600")
    device: trio.Process | None = None
    web: trio.Process | None = None
    try:
        code, report = setup.offload(ids["parked"], timeout=10)
        assert (code, report["cleared"]) == (0, True), report
        assert setup.run("sync").returncode == 0
        web, url = await start_web(setup)
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url

        first = await trio.to_thread.run_sync(without_daemon, url, shots, ids)
        seen = first.seen
        assert seen["landed"].endswith("/") and "token" not in seen["landed"]
        assert seen["sections"] == ["People", "About you", "Guidance", "Digests", "Pins"]
        assert seen["xss_title_text"] == XSS_TITLE  # shown as text, never run
        expected = cli_json(setup, "notebook", "search", "recital")
        assert seen["search_ids"] == [n["id"] for n in expected["notes"]]
        assert seen["headline"] == expected["message"]
        assert seen["edit_flash"].startswith("Saved.") and seen["edit_marks"] == 1
        assert seen["noop_flash"] == "Nothing changed, so nothing was written."
        edited = cli_json(setup, "notebook", "show", ids["edit"])
        assert (edited["title"], edited["tags"], edited["user_edited"]) == (
            "Dinner with Priya, moved",
            ["food", "friends"],
            True,
        )
        assert seen["delete_flash"] == "Deleted."
        assert setup.run("notebook", "show", ids["delete"]).returncode == 2
        assert seen["badge"] == "Offloaded — opens from your Homebase."
        assert seen["edit_form"] == 0  # recall first
        assert seen["unreachable"] == NO_DAEMON
        assert seen["log_lines"] == 1
        assert "mac" in seen["status"] and "equal after the last sync" in seen["status"]
        assert first.dialogs == [
            ("confirm", "Delete this note? Distillation will not bring it back.")
        ]

        device_log = (setup.tmp / "device.log").open("ab")
        device = await trio.lowlevel.open_process(
            [*PIXIE, "--data", str(setup.phone), "run", "--interval", "3600"], stderr=device_log
        )
        assert await daemon_ready(setup.phone, ids["parked"]) == BODY
        second = await trio.to_thread.run_sync(with_daemon, url, shots, ids["parked"])
        assert second.seen["fetched"] == BODY
        assert second.dialogs == []
        assert (
            cli_json(setup, "notebook", "show", ids["parked"])["body"] is None
        )  # not written back
    finally:
        for process in (web, device, homebase):
            if process is not None:
                assert await stop(process) == 0
    names = sorted(os.listdir(shots))
    assert names == [
        "edited.png",
        "log.png",
        "notebook.png",
        "offloaded-fetched.png",
        "offloaded-unreachable.png",
        "search.png",
        "status.png",
    ]
    assert all((shots / n).stat().st_size > 5_000 for n in names)
    web_log = (setup.tmp / "web.log").read_text()
    assert "stopped" in web_log and BODY not in web_log and "token=" not in web_log
