"""The page on a phone and on a desktop: every main view in Debian's
Chromium at 390x844 and at 1280x800 (and at 360x740, the narrowest it is
made for), served by one `pixie web` process for the module over a data dir
with Markdown notes, a person with a full contact card, dated notes ahead, a
memory log and two siblings with their last syncs.

Each view must fit its width (no sideways scroll), keep the nav on one line
with every link in sight, give the search words box room (200 px or more),
log no console error and fail no request, and link an icon that is served.
A screenshot of every view at both sizes is kept under ``$PIXIE_ARTIFACTS``
(``artifacts/screens/`` in the repository when unset), one folder per size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.db import put_meta
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from pixie.device.store.provision import create_data_dir
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.lastsync import LAST_SYNC_KEY
from pixie.device.web import humane
from tests.support.browser import BROWSER_MARKS, CHROMIUM, plain_asyncio
from tests.support.processes import PIXIE

pytestmark = BROWSER_MARKS

ROOT = Path(__file__).resolve().parents[2]
# A phone, a desktop, and the narrowest phone the page is made for.
VIEWPORTS = [(390, 844), (1280, 800), (360, 740)]
MIN_WORDS_BOX = 200
PERSON_PAGE = (
    "Who they are\n"
    "- Plays the **cello** in the Camden Youth Orchestra\n"
    "- Birthday 10 Dec (from your contacts)\n"
    "Your read on the relationship\n"
    "- Close friend since school; wants honest opinions, not compliments\n"
    "Open threads\n"
    "- The recital on the 14th: she asked you to come"
)
GUIDANCE = (
    "# How to answer\n\n"
    "Keep replies **short**: two lines at most.\n\n"
    "- Say when something is a guess\n"
    "- Use 24-hour times\n\n"
    "See https://example.org/a-very-long-address-that-has-no-spaces-in-it-at-all-anywhere"
)


def artifacts() -> Path:
    return Path(os.environ.get("PIXIE_ARTIFACTS") or ROOT / "artifacts" / "screens")


@dataclass(frozen=True)
class Served:
    base: str
    token: str
    ids: dict[str, str]


def seed(data: Path) -> dict[str, str]:
    """The life the views show, written before the page starts."""
    with Node.open(data) as node:
        now = node.clock.now_us()
        minute = 60_000_000
        logged = node.log.append(
            [
                NewEvent(
                    EventKind.MESSAGE,
                    now - 50 * minute,
                    "Ada: the cello recital is on the 14th, seven o'clock, St Cecilia's hall; "
                    "bring Priya if she is back from Lyon by then",
                    "Ada Lovelace",
                ),
                NewEvent(
                    EventKind.MESSAGE, now - 30 * minute, "Priya got the job in Lyon", "Priya"
                ),
                NewEvent(
                    EventKind.MESSAGE,
                    now - 3 * minute,
                    "see you there",
                    "Ada Lovelace",
                    from_me=True,
                ),
            ],
            now=now,
        )
        card = ContactCard(
            "Ada Lovelace",
            ("ada@example.org", "+447700900123", "Ada L."),
            org="Royal Society",
            title="Analyst",
            birthday="--12-10",
            address="12 St James's Square, London SW1Y 4JH",
        )
        with node.db.writing() as session:
            ContactBook.merge_card_in(session, card, now)
        ada = node.contacts.resolve("Ada Lovelace")
        nb = node.notebook
        today = humane.today_start_us(now)
        day = humane.DAY_US

        def digest(key: str, title: str, body: str, days: int) -> str:
            item = Distilled(
                NoteKind.CONVERSATION_DIGEST,
                f"contact:{key}",
                title,
                body,
                ada,
                ("music",),
                f"contact:{ada}",
                today + days * day,
            )
            return nb.upsert_clear(item).note_id

        ids = {
            "ada": ada,
            "event": logged.ids[0],
            "person": nb.upsert_clear(
                Distilled(NoteKind.PERSON, ada, "Ada Lovelace", PERSON_PAGE, ada, ("music",))
            ).note_id,
            "guidance": nb.add_user_note(NoteKind.GUIDANCE, "Answer style", GUIDANCE),
            "soon": digest("recital", "Ada's recital", "- Sat 19:00\n- St Cecilia's hall", 2),
            "later": digest("dinner", "Dinner with Ada and Priya", "Booked for **four**.", 9),
            "today": digest("call", "Call Ada back", "About the programme.", 0),
        }
        nb.add_user_note(NoteKind.ABOUT_YOU, "About me", "I live in Porto.\n\n- Cellist too")
        for key, name, outcome, ago in [
            (b"\x07" * 32, "mac", "synced", 3),
            (b"\x08" * 32, "laptop", "no_answer", 90),
        ]:
            sibling = SiblingInfo(key, name, "homebase", "relay.pixie.example.net:443", now)
            node.siblings.add(sibling)
            report = {"outcome": outcome, "at": (now - ago * minute) / 1e6, "applied": 2}
            put_meta(node.db, f"{LAST_SYNC_KEY}:{sibling.fingerprint}", json.dumps(report))
    return ids


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `pixie web` for the whole module, over a freshly seeded data dir."""
    tmp = tmp_path_factory.mktemp("layout")
    data = tmp / "phone"
    env = {
        **os.environ,
        "PIXIE_KEYSTORE": "file",
        "PIXIE_KEYS": str(tmp / "keys"),
        "PIXIE_EMBEDDINGS": "0",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name in ("PIXIE_KEYSTORE", "PIXIE_KEYS", "PIXIE_EMBEDDINGS"):
            mp.setenv(name, env[name])
        create_data_dir(data, name="phone", role="device")
        ids = seed(data)
    log = (tmp / "web.log").open("ab")
    process = subprocess.Popen(
        [*PIXIE, "--data", str(data), "web", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=log,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()  # printed once the socket listens
        assert url.startswith("http://127.0.0.1:"), (tmp / "web.log").read_text()
        base, _, token = url.partition("/?token=")
        yield Served(base, token, ids)
    finally:
        process.terminate()
        assert process.wait(timeout=20) == 0
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with plain_asyncio(), sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


# name -> (address, a selector the view must show)
VIEWS: dict[str, tuple[str, str]] = {
    "notebook": ("/", "section#guidance article.note"),
    "search": ("/search", "#search-form"),
    "search-words": ("/search?q=ada", "#results article.note"),
    "person": ("/person/{ada}", ".person-card .md h3"),
    "note": ("/note/{guidance}", "#note-body h3"),
    "log": ("/log", "li.event time[datetime]"),
    "status": ("/status", "table.siblings time[datetime]"),
    "add": ("/add", "#add-form"),
    "upcoming": ("/upcoming", "ol.upcoming article.note"),
    # and the rest, which the main views link to
    "people": ("/people", "ul.people a"),
    "digests": ("/group/digests", "article.note"),
    "event": ("/event/{event}", "form.pin-full"),
    "source": ("/source?ref=contact%3A{ada}", "li.event"),
}

MEASURE = """() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, left: r.left,
    right: r.right, width: r.width, height: r.height}; };
  // The lines a link's words take: one per distinct top among their boxes.
  const lines = (e) => { const range = document.createRange(); range.selectNodeContents(e);
    return new Set([...range.getClientRects()].filter((r) => r.width > 0)
      .map((r) => Math.round(r.top))).size; };
  const nav = document.querySelector("header nav");
  const words = document.querySelector("#q");
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    nav: nav ? box(nav) : null,
    links: [...document.querySelectorAll("header nav a")]
      .map((a) => ({...box(a), lines: lines(a)})),
    words: words ? box(words) : null,
    main: box(document.querySelector("main")),
    logText: [...document.querySelectorAll("li.event .what")].map(box),
    icon: (document.querySelector('link[rel~="icon"]') || {}).href || null,
  };
}"""


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("size", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_the_view_fits_the_screen(
    served: Served, browser: Any, size: tuple[int, int], view: str
) -> None:
    width, height = size
    path, shows = VIEWS[view]
    path = path.format(**served.ids)
    context = browser.new_context(viewport={"width": width, "height": height})
    problems: list[str] = []
    try:
        page = context.new_page()
        page.on(
            "console",
            lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))
        page.on(
            "response",
            lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None,
        )
        joiner = "&" if "?" in path else "?"
        page.goto(f"{served.base}{path}{joiner}token={served.token}")
        assert page.url == f"{served.base}{path}"  # the token traded for the cookie
        m = page.evaluate(MEASURE)
        shots = artifacts() / f"{width}x{height}"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{view}.png"), full_page=True)

        if m["scrollWidth"] > m["innerWidth"]:
            problems.append(f"scrolls sideways: {m['scrollWidth']} px in {m['innerWidth']}")
        tops = {round(link["top"]) for link in m["links"]}
        wrapped = [i for i, link in enumerate(m["links"]) if link["lines"] != 1]
        tallest = max(link["height"] for link in m["links"])
        if len(tops) != 1 or wrapped or m["nav"]["height"] > 1.5 * tallest:
            problems.append(f"the nav takes more than one line: tops {sorted(tops)}, {wrapped=}")
        hidden = [i for i, link in enumerate(m["links"]) if link["right"] > m["innerWidth"]]
        if hidden:
            problems.append(f"nav links {hidden} are past the right edge")
        if m["words"] is not None and m["words"]["width"] < MIN_WORDS_BOX:
            problems.append(f"the words box is {m['words']['width']:.0f} px wide")
        if view == "log":
            narrow = [b["width"] for b in m["logText"] if b["width"] < 0.6 * m["main"]["width"]]
            if narrow:
                problems.append(f"the log's text gets {narrow[0]:.0f} px of {m['main']['width']}")
        icon = context.request.get(m["icon"] or f"{served.base}/favicon.ico")
        if icon.status != 200 or not icon.headers["content-type"].startswith("image/"):
            problems.append(f"the icon answers {icon.status} {icon.headers.get('content-type')}")
        if page.locator(shows).count() == 0:
            problems.append(f"nothing matches {shows}")
    finally:
        context.close()
    assert not problems, f"{view} at {width}x{height}: " + "; ".join(problems)


def test_the_views_read_as_words(served: Served, browser: Any) -> None:
    """What the phone shows: Markdown rendered, the person's card in order,
    sync times and outcomes in words, upcoming soonest first, no scores for
    an empty search."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto(f"{served.base}/status?token={served.token}")
        last = page.locator("td.last").all_inner_texts()
        synced = re.match(r"(\d+) minutes ago · synced · 2 changes applied$", last[0])
        assert synced is not None and int(synced.group(1)) >= 3, last  # seeded 3 minutes back
        assert "no answer" in last[1] and "no_answer" not in page.content()
        exact = page.locator("td.last time").first.get_attribute("datetime")
        assert exact is not None and exact.endswith("Z") and "T" in exact
        assert page.locator("td.last time").first.get_attribute("title") == exact

        page.goto(f"{served.base}/person/{served.ids['ada']}")
        card = page.locator(".person-card")
        assert card.locator("dl a[href^='mailto:']").inner_text() == "ada@example.org"
        headings = card.locator(".md h3").all_text_contents()
        assert headings == ["Who they are", "Your read on the relationship", "Open threads"]
        assert card.locator(".md strong").first.inner_text() == "cello"
        contact_y = card.locator(".contact").bounding_box()["y"]
        assert contact_y < card.locator(".md").bounding_box()["y"]

        page.goto(f"{served.base}/note/{served.ids['guidance']}")
        body = page.locator("#note-body")
        assert body.locator("h3").inner_text() == "How to answer"
        assert body.locator("li").all_inner_texts() == [
            "Say when something is a guess",
            "Use 24-hour times",
        ]
        assert "**" not in body.inner_text() and "# " not in body.inner_text()

        page.goto(f"{served.base}/upcoming")
        shown = [a.get_attribute("data-note") for a in page.locator("ol.upcoming article").all()]
        assert shown == [served.ids["today"], served.ids["soon"], served.ids["later"]]
        assert page.locator("ol.upcoming .day strong").all_inner_texts() == [
            "today",
            "in 2 days",
            "in 9 days",
        ]

        page.goto(f"{served.base}/search")
        assert page.locator("#results article").count() == 0
        assert page.locator(".score").count() == 0
        page.goto(f"{served.base}/search?topic=music")
        assert page.locator("#results article").count() > 0
        assert page.locator(".score").count() == 0  # a filter alone scores nothing
    finally:
        context.close()
