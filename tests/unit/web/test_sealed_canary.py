"""The sealed zone never reaches the page.

Sealed notes carrying a canary string are planted through the huddle path
(prep, takeaways, and material from other agents), then every page the site
links to, every search and log query that could match, and every write route
aimed at a sealed id is requested: no response may hold the canary, sealed
ids answer exactly as unknown ids do, and every page but the sync status
(which shows the state digest) is byte for byte what it was before the
sealed notes existed.
"""

from __future__ import annotations

import html as htmllib
import re
import sqlite3
from pathlib import Path

import httpx

from pixie.device.node.clear import ClearNode
from pixie.device.node.keyed import Node
from pixie.device.notebook.huddle import HuddleRecord, record_huddle
from pixie.device.notebook.store import Distilled
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind, Zone
from pixie.device.web.app import WebConfig, create_app
from pixie.device.web.security import Secrets
from pixie.protocol.timestamps import parse_time

CANARY = "ZQXCANARY7731"
SECRETS = Secrets(access="a" * 20, csrf="c" * 20)
MAX_PAGES = 400


def clear_life(node: Node) -> None:
    at = parse_time("2026-10-01T09:00:00Z")
    node.log.append(
        [
            NewEvent(EventKind.MESSAGE, at, "Dinner with Jimmy on Friday?", "Jimmy Okafor"),
            NewEvent(EventKind.CALL, at + 5, "Call with Jimmy about his knee", "Jimmy Okafor"),
        ],
        now=at + 10,
    )
    jimmy = node.contacts.resolve("Jimmy Okafor")
    node.notebook.upsert_clear(
        Distilled(NoteKind.PERSON, jimmy, "Jimmy Okafor", "Runs marathons.", jimmy, ("running",))
    )
    node.notebook.add_user_note(NoteKind.GUIDANCE, "Never mention his knee", "Unless he does.")


def plant(node: Node) -> list[str]:
    record = HuddleRecord(
        "Jimmy Okafor",
        prep=(f"{CANARY} prep: ask about the knee",),
        takeaways=(f"{CANARY} takeaway: he is moving",),
        from_other_agents=(f"{CANARY} his agent says: divorce",),
    )
    return record_huddle(node.notebook, node.contacts, record, zone=Zone.SEALED)


async def crawl(client: httpx.AsyncClient, extra: list[str]) -> dict[str, str]:
    """Every page reachable from the Notebook page by links, plus ``extra``."""
    pages: dict[str, str] = {}
    queue = ["/", *extra]
    while queue and len(pages) < MAX_PAGES:
        path = queue.pop(0)
        if path in pages:
            continue
        response = await client.get(path)
        assert response.status_code == 200, path
        pages[path] = response.text
        for href in re.findall(r'(?:href|src)="(/[^"]*)"', response.text):
            target = htmllib.unescape(href)
            if target not in pages:
                queue.append(target)
    assert len(pages) < MAX_PAGES, "the crawl did not finish"
    return pages


def sealed_rows(path: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT id, updated_at, ciphertext, deleted FROM note WHERE zone = 'sealed' ORDER BY id"
        ).fetchall()
    finally:
        con.close()


async def test_no_route_serves_the_sealed_zone(data_dir: Path) -> None:
    queries = [
        # Parts of the canary, so that the page echoing the query back is no hit.
        "/search?q=ZQXCANARY",
        "/search?q=knee",
        "/search?q=divorce",
        "/search?q=prep+takeaway+huddle",
        "/search?person=Jimmy",
        "/search?topic=huddle",
        "/log?q=ZQXCANARY%5Cd%2B",
        "/log?q=divorce",
        "/log?q=.",
        "/log?person=Jimmy",
        "/people",
        "/status",
        "/add",
    ]
    with Node.open(data_dir) as keyed, ClearNode.open_clear(data_dir) as clear:
        clear_life(keyed)
        app = create_app(clear, WebConfig(SECRETS))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as c:
            c.cookies.set("pixie_web_8766", SECRETS.access)
            before = await crawl(c, queries)
            sealed_ids = plant(keyed)
            assert len(sealed_ids) == 3
            rows = sealed_rows(keyed.db.path)
            after = await crawl(c, queries)

            responses = list(after.values())
            unknown = "00000000-0000-7000-8000-000000000000"
            for sealed_id in sealed_ids:
                page = await c.get(f"/note/{sealed_id}")
                assert page.status_code == 404
                missing = await c.get(f"/note/{unknown}")
                assert page.text.replace(sealed_id, unknown) == missing.text
                responses.append(page.text)
                for action, form in [
                    ("edit", {"title": "Leak", "body": "leak", "tags": ""}),
                    ("delete", {}),
                    ("fetch", {}),
                    ("recall", {}),
                ]:
                    answer = await c.post(
                        f"/note/{sealed_id}/{action}", data={**form, "csrf": SECRETS.csrf}
                    )
                    assert answer.status_code == 404, action
                    responses.append(answer.text)
                as_json = await c.post(
                    f"/note/{sealed_id}/fetch",
                    data={"csrf": SECRETS.csrf},
                    headers={"accept": "application/json"},
                )
                responses.append(as_json.text)
                # A sealed note is no event either: nothing to pin or open.
                responses.append((await c.get(f"/event/{sealed_id}")).text)
                responses.append(
                    (await c.post("/pin", data={"event_id": sealed_id, "csrf": SECRETS.csrf})).text
                )
            assert sealed_rows(keyed.db.path) == rows  # nothing the page did touched them

    assert len(after) > 10
    for text in responses:
        assert CANARY not in text
        assert "his agent says" not in text and "takeaway: he is moving" not in text
    # The page cannot tell that sealed notes exist: only the digest on the
    # sync status changed.
    assert set(before) == set(after)
    changed = sorted(path for path in after if after[path] != before[path])
    assert changed == ["/status"]
