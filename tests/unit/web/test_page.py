"""The web page in process: its locks (token, host, CSRF, headers), escaping,
and that what it shows and writes is exactly what the CLI and the agent's
tools show and write."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from pixie.device.errors import BadInput
from pixie.device.node.clear import ClearNode
from pixie.device.node.keyed import Node
from pixie.device.notebook.store import Distilled
from pixie.device.store.contactbook import ContactBook
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind
from pixie.device.store.siblinginfo import SiblingInfo
from pixie.device.sync.offload import OffloadLedger
from pixie.device.web import humane
from pixie.device.web.app import WebConfig, create_app
from pixie.device.web.offloaded import NO_DAEMON, HomebaseUnreachable
from pixie.device.web.security import CONTENT_SECURITY_POLICY, MAX_FORM_BYTES, Secrets
from pixie.protocol.timestamps import format_time, parse_time

BASE = "http://127.0.0.1:8765"
SECRETS = Secrets(access="access-token-for-tests", csrf="csrf-token-for-tests")
HOLDER = b"\x02" * 32
PARKED = "Ada's recital is on the 14th; she wants honest notes afterwards."


@dataclass
class FakeHomebase:
    """An offload gateway that answers from a dict, or refuses like a dead daemon."""

    bodies: dict[str, str] = field(default_factory=dict)
    running: bool = True
    calls: list[tuple[str, str]] = field(default_factory=list)

    def fetch(self, note_id: str) -> str:
        self.calls.append(("fetch", note_id))
        if not self.running:
            raise HomebaseUnreachable(NO_DAEMON)
        if note_id not in self.bodies:
            raise BadInput("corrupt: the Homebase's bytes do not match the stamped hash")
        return self.bodies[note_id]

    def recall(self, note_id: str) -> bool:
        self.calls.append(("recall", note_id))
        if not self.running:
            raise HomebaseUnreachable(NO_DAEMON)
        return True


@dataclass
class Site:
    client: httpx.AsyncClient
    keyed: Node
    clear: ClearNode
    homebase: FakeHomebase
    ids: dict[str, str]

    async def get(self, path: str, **params: str) -> httpx.Response:
        return await self.client.get(path, params=params or None)

    async def post(
        self, path: str, data: dict[str, str], *, csrf: str | None = SECRETS.csrf
    ) -> httpx.Response:
        form = dict(data)
        if csrf is not None:
            form["csrf"] = csrf
        return await self.client.post(path, data=form)

    def row(self, note_id: str) -> tuple[object, ...]:
        con = sqlite3.connect(self.keyed.db.path)
        try:
            found = con.execute(
                "SELECT title, body, tags, updated_at, user_edited, deleted, holder "
                "FROM note WHERE id = ?",
                (note_id,),
            ).fetchone()
        finally:
            con.close()
        assert found is not None
        return tuple(found)


def seed(node: Node) -> dict[str, str]:
    """A small life: two people, their pages, a digest, guidance, a pin, an
    offloaded note and a note titled like a script."""
    at = parse_time("2026-11-01T10:00:00Z")
    log = node.log.append(
        [
            NewEvent(
                EventKind.MESSAGE, at, "Ada: the cello recital is on the 14th", "Ada Lovelace"
            ),
            NewEvent(EventKind.MESSAGE, at + 1, "Priya got the job in Lyon", "Priya Raman"),
            NewEvent(EventKind.MESSAGE, at + 2, "see you (tonight", "Ada Lovelace", from_me=True),
            NewEvent(EventKind.AGENT_CHAT_USER, at + 3, "what did Ada say?"),
        ],
        now=at + 10,
    )
    ada = node.contacts.resolve("Ada Lovelace")
    card = ContactCard(
        "Ada Lovelace", ("ada@example.org",), org="Royal Society", birthday="--12-10"
    )
    with node.db.writing() as session:
        ContactBook.merge_card_in(session, card, at)
    priya = node.contacts.resolve("Priya Raman")
    nb = node.notebook
    ids = {
        "ada_page": nb.upsert_clear(
            Distilled(NoteKind.PERSON, ada, "Ada Lovelace", "Plays the cello.", ada, ("music",))
        ).note_id,
        "priya_page": nb.upsert_clear(
            Distilled(NoteKind.PERSON, priya, "Priya Raman", "New job in Lyon.", priya, ("work",))
        ).note_id,
        "digest": nb.upsert_clear(
            Distilled(
                NoteKind.CONVERSATION_DIGEST,
                f"contact:{ada}",
                "Ada, recital",
                "Recital on the 14th.\nShe wants honest notes.",
                ada,
                ("music",),
                f"contact:{ada}",
                at,
            )
        ).note_id,
        "guidance": nb.add_user_note(NoteKind.GUIDANCE, "Keep it short", "Two lines at most."),
        "script": nb.add_user_note(NoteKind.GUIDANCE, "<script>alert(1)</script>", "<b>hi</b>"),
        "pin": nb.pin_spark(log.ids[1], ["work"]),
        "parked": nb.upsert_clear(
            Distilled(NoteKind.CALL_DIGEST, "call:1", "Call with Ada", PARKED, ada, ("music",))
        ).note_id,
        "event": log.ids[0],
        "chat_event": log.ids[3],
        "ada": ada,
    }
    ledger = OffloadLedger(node, HOLDER)
    candidate = ledger.candidate(ids["parked"])
    assert ledger.compare_and_clear(ids["parked"], candidate.content_hash)
    return ids


@pytest.fixture
def nodes(data_dir: Path) -> Iterator[tuple[Node, ClearNode]]:
    with Node.open(data_dir) as keyed, ClearNode.open_clear(data_dir) as clear:
        yield keyed, clear


@pytest.fixture
async def site(nodes: tuple[Node, ClearNode]) -> AsyncIterator[Site]:
    keyed, clear = nodes
    ids = seed(keyed)
    homebase = FakeHomebase({ids["parked"]: PARKED})
    app = create_app(
        clear, WebConfig(SECRETS, offload=homebase, last_syncs=lambda: {}, loopback_only=True)
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        client.cookies.set("pixie_web_8765", SECRETS.access)
        yield Site(client, keyed, clear, homebase, ids)


# -- the locks ---------------------------------------------------------------------------


async def test_every_request_needs_the_token(site: Site) -> None:
    site.client.cookies.clear()
    for path in ["/", "/search?q=cello", "/log", "/status", "/static/style.css"]:
        response = await site.client.get(path)
        assert response.status_code == 403, path
        assert "Ada" not in response.text and "cello" not in response.text
    wrong = await site.client.get("/", params={"token": "guess"})
    assert wrong.status_code == 403
    assert "set-cookie" not in wrong.headers
    site.client.cookies.set("pixie_web_8765", "guess")
    assert (await site.client.get("/")).status_code == 403


async def test_the_token_in_the_address_becomes_a_strict_cookie(site: Site) -> None:
    site.client.cookies.clear()
    response = await site.client.get("/search", params={"q": "cello", "token": SECRETS.access})
    assert response.status_code == 303
    assert response.headers["location"] == "/search?q=cello"  # the token leaves the address
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"pixie_web_8765={SECRETS.access};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    followed = await site.client.get(response.headers["location"])
    assert followed.status_code == 200 and "Plays the cello" in followed.text


async def test_a_foreign_host_name_is_refused(site: Site) -> None:
    # A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding).
    for host in ["evil.example:8765", "127.0.0.1:9999", "127.0.0.1.evil.example:8765", ""]:
        response = await site.client.get("/", headers={"host": host})
        assert response.status_code == 400, host
    for host in ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"]:
        assert (await site.client.get("/", headers={"host": host})).status_code == 200, host


async def test_every_response_carries_the_security_headers(site: Site) -> None:
    site.client.cookies.clear()
    refused = await site.client.get("/")
    site.client.cookies.set("pixie_web_8765", SECRETS.access)
    responses = [
        refused,
        await site.get("/"),
        await site.get("/static/app.js"),
        await site.get("/note/00000000-0000-7000-8000-000000000000"),
        await site.get("/nowhere"),
        await site.post(f"/note/{site.ids['guidance']}/edit", {"title": "x"}, csrf=None),
    ]
    for response in responses:
        headers = response.headers
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "default-src 'self'" in CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
        assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["x-frame-options"] == "DENY"


async def test_pages_hold_no_inline_script(site: Site) -> None:
    for path in ["/", f"/note/{site.ids['guidance']}", "/search?q=cello", "/log", "/status"]:
        html = (await site.get(path)).text
        scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.S)
        assert scripts == [""], path  # only the external /static/app.js
        assert not re.search(r"\son[a-z]+=", html), path  # no inline handlers either


async def test_writes_need_this_runs_csrf_token(site: Site) -> None:
    note_id = site.ids["guidance"]
    before = site.row(note_id)
    for csrf in [None, "", "csrf-token-from-elsewhere"]:
        response = await site.post(f"/note/{note_id}/edit", {"title": "Hijacked"}, csrf=csrf)
        assert response.status_code == 403
        response = await site.post(f"/note/{note_id}/delete", {}, csrf=csrf)
        assert response.status_code == 403
        response = await site.post("/pin", {"event_id": site.ids["event"]}, csrf=csrf)
        assert response.status_code == 403
    assert site.row(note_id) == before
    # GET never writes: the write routes answer POST only.
    assert (await site.get(f"/note/{note_id}/delete")).status_code == 405
    # A browser that says the request is cross-site is refused even with the token.
    response = await site.client.post(
        f"/note/{note_id}/delete",
        data={"csrf": SECRETS.csrf},
        headers={"sec-fetch-site": "cross-site"},
    )
    assert response.status_code == 403
    assert site.row(note_id) == before


async def test_a_form_is_bounded_before_it_is_read(site: Site) -> None:
    note_id = site.ids["guidance"]
    before = site.row(note_id)
    huge = {"csrf": SECRETS.csrf, "body": "x" * (MAX_FORM_BYTES + 1)}
    response = await site.client.post(f"/note/{note_id}/edit", data=huge)
    assert response.status_code == 413
    assert site.row(note_id) == before


# -- what it shows --------------------------------------------------------------------------


async def test_user_text_is_escaped_everywhere(site: Site) -> None:
    note_id = site.ids["script"]
    for path in ["/", "/group/guidance", f"/note/{note_id}", "/search?q=script&topic="]:
        html = (await site.get(path)).text
        assert "<script>alert(1)</script>" not in html, path
        assert "<b>hi</b>" not in html, path
    html = (await site.get(f"/note/{note_id}")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    # Query text echoed back is escaped too.
    html = (await site.get("/search", q='"><script>x</script>')).text
    assert "<script>x</script>" not in html


async def test_the_notebook_is_grouped_as_the_specification_groups_it(site: Site) -> None:
    html = (await site.get("/")).text
    sections = re.findall(r'<section class="group" id="(\w+)">', html)
    assert sections == ["people", "about", "guidance", "digests", "pins"]
    assert "edited by you" in html
    assert "Offloaded — opens from your Homebase" in html
    people = (await site.get("/group/people")).text
    assert "Ada Lovelace" in people and "Keep it short" not in people
    digests = (await site.get("/group/digests")).text
    assert "Ada, recital" in digests and "Call with Ada" in digests


async def test_a_person_page_shows_the_contact_book_and_their_notes(site: Site) -> None:
    html = (await site.get(f"/person/{site.ids['ada']}")).text
    assert "<h1>Ada Lovelace</h1>" in html
    assert "Royal Society" in html and "10 Dec" in html and "ada@example.org" in html
    assert "Plays the cello." in html  # the person page
    assert "Ada, recital" in html and "Call with Ada" in html  # notes filed under her
    assert (await site.get("/person/ffffffffffffffffffffffffffffffff")).status_code == 404


async def test_a_note_shows_kind_tags_date_source_and_edited_mark(site: Site) -> None:
    html = (await site.get(f"/note/{site.ids['digest']}")).text
    assert ">Conversation<" in html and ">music<" in html and "2026-11-01" in html
    source = re.search(r'href="(/source\?ref=[^"]+)"', html)
    assert source is not None
    events = (await site.get(source.group(1).replace("&amp;", "&"))).text
    assert "the cello recital is on the 14th" in events  # back to the log event
    pin = (await site.get(f"/note/{site.ids['pin']}")).text
    assert "edited by you" in pin and "Sparked by the user" in pin


async def test_search_is_check_notebooks_ranking(site: Site) -> None:
    view = site.clear.notebook.clear_view()
    cases = [
        ({"q": "cello"}, ("cello", None, None)),
        ({"q": "recital honest"}, ("recital honest", None, None)),
        ({"q": "", "topic": "music"}, ("", None, "music")),
        ({"q": "ada", "person": "Ada"}, ("ada", site.ids["ada"], None)),
    ]
    for params, (query, contact_id, topic) in cases:
        html = (await site.get("/search", **params)).text
        shown = re.findall(r'<article class="note" data-note="([^"]+)"', html)
        expected = [s.note.id for s in view.search_clear(query, contact_id, topic)]
        assert shown == expected, params
        assert "score 0" not in html, params  # a filter alone ranks nothing
    # An empty form asks nothing, so nothing is listed (and nothing is scored).
    for params in ({}, {"q": "  "}):
        html = (await site.get("/search", **params)).text
        assert re.findall(r'<article class="note"', html) == [], params
        assert "score" not in html.split("<main>")[1], params
    ranked = (await site.get("/search", q="cello")).text
    assert re.search(r'class="score"[^>]*>score [1-9]', ranked)
    html = (await site.get("/search", q="cello", person="Nobody Known")).text
    assert "No notes are filed under that person (&#34;Nobody Known&#34;)." in html
    bad = await site.get("/search", q="x", days="0")
    assert bad.status_code == 400 and "days must be a whole number" in bad.text


# -- what it writes ---------------------------------------------------------------------------


async def test_edit_marks_the_note_yours_and_a_no_op_writes_nothing(site: Site) -> None:
    note_id = site.ids["digest"]
    digest = site.keyed.digest()
    note = site.clear.notebook.get_clear(note_id)
    # The same text, sent back as a browser sends a textarea (CR LF line breaks).
    same = {
        "title": note.title,
        "body": (note.body or "").replace("\n", "\r\n"),
        "tags": ", ".join(note.tags),
    }
    before = site.row(note_id)
    response = await site.post(f"/note/{note_id}/edit", same)
    assert response.status_code == 303
    assert response.headers["location"] == f"/note/{note_id}?done=unchanged"
    assert site.row(note_id) == before and site.keyed.digest() == digest

    changed = {**same, "title": "Ada's recital", "tags": "music, family"}
    response = await site.post(f"/note/{note_id}/edit", changed)
    assert response.headers["location"] == f"/note/{note_id}?done=edited"
    title, body, tags, stamp, user_edited, _, _ = site.row(note_id)
    assert (title, body, tags, user_edited) == (
        "Ada's recital",
        note.body,
        '["music", "family"]',
        1,
    )
    assert stamp != before[3] and site.keyed.digest() != digest
    page = (await site.client.get(response.headers["location"])).text
    assert "Saved." in page and "edited by you" in page


async def test_edit_refuses_what_the_cli_refuses(site: Site) -> None:
    note_id = site.ids["guidance"]
    before = site.row(note_id)
    for form, words in [
        ({"title": "", "body": "x", "tags": ""}, "title is empty"),
        ({"title": "a\nb", "body": "x"}, "title must be one line"),
        ({"title": "ok", "body": "x", "tags": "bad/tag"}, "bad tag"),
        ({}, "nothing to change"),
    ]:
        response = await site.post(f"/note/{note_id}/edit", form)
        assert response.status_code == 400, form
        assert words in response.text
    assert site.row(note_id) == before
    # An offloaded body is not here to edit: recall it first, as the CLI says.
    parked = site.ids["parked"]
    parked_before = site.row(parked)
    response = await site.post(f"/note/{parked}/edit", {"title": "New", "body": "New"})
    assert response.status_code == 400 and "is offloaded to your Homebase" in response.text
    assert site.row(parked) == parked_before


async def test_delete_and_what_cannot_be_deleted(site: Site) -> None:
    note_id = site.ids["guidance"]
    response = await site.post(f"/note/{note_id}/delete", {})
    assert (response.status_code, response.headers["location"]) == (303, "/?done=deleted")
    _, _, _, _, _, deleted, _ = site.row(note_id)
    assert deleted == 1
    assert site.clear.notebook.clear_view().get_clear(note_id) is None
    again = await site.post(f"/note/{note_id}/delete", {})
    assert again.status_code == 404 and f"no note with id {note_id}" in again.text
    assert (await site.get(f"/note/{note_id}")).status_code == 404
    assert (await site.get("/note/not-an-id")).status_code == 404


async def test_add_guidance_and_about_you(site: Site) -> None:
    response = await site.post(
        "/add", {"kind": "about_you", "title": "About me", "body": "I live in Porto.", "tags": ""}
    )
    assert response.status_code == 303
    note_id = response.headers["location"].split("/")[2].split("?")[0]
    note = site.clear.notebook.get_clear(note_id)
    assert (note.kind, note.body, note.user_edited) == (
        NoteKind.ABOUT_YOU,
        "I live in Porto.",
        True,
    )
    again = await site.post(
        "/add", {"kind": "guidance", "title": "keep it SHORT", "body": "dup", "tags": ""}
    )
    assert again.status_code == 400 and "there is already a guidance note" in again.text
    assert 'value="keep it SHORT"' in again.text  # what was typed is kept
    wrong = await site.post("/add", {"kind": "person", "title": "x", "body": "y"})
    assert wrong.status_code == 400 and "guidance or about_you" in wrong.text


async def test_pin_an_event_from_the_log(site: Site) -> None:
    log = (await site.get("/log")).text
    assert f'value="{site.ids["event"]}"' in log
    response = await site.post("/pin", {"event_id": site.ids["event"], "tags": "music"})
    assert response.status_code == 303
    note_id = response.headers["location"].split("/")[2].split("?")[0]
    note = site.clear.notebook.get_clear(note_id)
    assert note.kind is NoteKind.SPARKED and note.source_ref == f"event:{site.ids['event']}"
    assert note.tags == ("music",)
    chat = await site.post("/pin", {"event_id": site.ids["chat_event"]})
    assert chat.status_code == 400 and "cannot be pinned" in chat.text
    bad = await site.post("/pin", {"event_id": "nope"})
    assert bad.status_code == 400


# -- the log --------------------------------------------------------------------------------


async def test_the_log_is_grep_memorys_matching(site: Site) -> None:
    html = (await site.get("/log")).text
    shown = re.findall(r'<li class="event" id="e-([^"]+)"', html)
    assert len(shown) == 4  # three messages and the spark; the chat turn is not memory
    assert site.ids["chat_event"] not in html
    regex = (await site.get("/log", q="rec[a-z]+al")).text
    assert "the cello recital" in regex and "Lyon" not in regex
    literal = (await site.get("/log", q="(tonight")).text
    assert "Not a valid pattern" in literal and "see you (tonight" in literal
    ada = (await site.get("/log", person="Ada")).text
    assert "cello recital" in ada and "see you (tonight" in ada and "Lyon" not in ada
    assert "Lyon" in (await site.get("/log", person="Priya Raman", q="job")).text
    unknown = (await site.get("/log", person="Nobody")).text
    assert "No contact named" in unknown


async def test_the_log_pages(site: Site) -> None:
    at = parse_time("2026-11-02T10:00:00Z")
    site.keyed.log.append(
        [NewEvent(EventKind.JOURNAL, at + i, f"entry number {i}") for i in range(120)],
        now=at + 500,
    )
    seen: list[str] = []
    for page in ("1", "2", "3"):
        html = (await site.get("/log", q="entry number", page=page)).text
        seen += re.findall(r"entry number (\d+)", html)
    assert seen == [str(i) for i in range(119, -1, -1)]
    assert (await site.get("/log", page="0")).status_code == 400


# -- offloaded notes ----------------------------------------------------------------------------


async def test_an_offloaded_note_opens_from_the_homebase_and_stays_there(site: Site) -> None:
    parked = site.ids["parked"]
    html = (await site.get(f"/note/{parked}")).text
    assert "Offloaded — opens from your Homebase." in html and PARKED not in html
    response = await site.client.post(
        f"/note/{parked}/fetch",
        data={"csrf": SECRETS.csrf},
        headers={"accept": "application/json"},
    )
    assert response.json() == {"id": parked, "body": PARKED, "verified": True}
    page = await site.post(f"/note/{parked}/fetch", {})  # without the script
    assert page.status_code == 200 and "Ada&#39;s recital is on the 14th" in page.text
    _, body, _, _, _, _, holder = site.row(parked)
    assert (body, holder) == (None, HOLDER.hex())  # shown, never written back
    resident = await site.post(f"/note/{site.ids['digest']}/fetch", {})
    assert resident.status_code == 502 and "nothing to fetch" in resident.text
    assert site.homebase.calls == [("fetch", parked), ("fetch", parked)]


async def test_without_a_daemon_the_page_says_how_to_reach_the_homebase(site: Site) -> None:
    site.homebase.running = False
    parked = site.ids["parked"]
    response = await site.client.post(
        f"/note/{parked}/fetch",
        data={"csrf": SECRETS.csrf},
        headers={"accept": "application/json"},
    )
    assert response.status_code == 502
    assert response.json() == {"id": parked, "error": NO_DAEMON}
    page = await site.post(f"/note/{parked}/fetch", {})
    assert page.status_code == 502 and "start `pixie run` for this data dir" in page.text
    recall = await site.post(f"/note/{parked}/recall", {})
    assert recall.status_code == 502 and "The device daemon is not running" in recall.text
    _, body, _, _, _, _, holder = site.row(parked)
    assert (body, holder) == (None, HOLDER.hex())


async def test_recall_goes_through_the_gateway(site: Site) -> None:
    parked = site.ids["parked"]
    response = await site.post(f"/note/{parked}/recall", {})
    assert response.headers["location"] == f"/note/{parked}?done=recalled"
    assert site.homebase.calls == [("recall", parked)]


async def test_status_shows_the_digest_and_siblings(site: Site) -> None:
    html = (await site.get("/status")).text
    assert site.keyed.digest().digest().hex() in html
    assert "Not paired with anyone yet" in html
    assert "sealed" not in html.split("<main>")[1].split("</main>")[0]


async def test_allowed_beyond_loopback_the_token_still_guards(
    nodes: tuple[Node, ClearNode],
) -> None:
    _, clear = nodes
    app = create_app(clear, WebConfig(SECRETS, loopback_only=False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://192.0.2.7:8765") as c:
        assert (await c.get("/")).status_code == 403
        c.cookies.set("pixie_web_8765", SECRETS.access)
        assert (await c.get("/")).status_code == 200


async def test_an_edited_person_page_names_the_page_beside_it(site: Site) -> None:
    page = site.ids["priya_page"]
    assert "kept up to date by Pixie" not in (await site.get(f"/note/{page}")).text
    site.keyed.notebook.edit(page, body="My own notes on Priya.")
    html = (await site.get(f"/note/{page}")).text
    assert "edited by you" in html
    assert "later news goes to “Priya Raman · kept up to date by Pixie”" in html
    # An edited note of another kind says only that it is the user's.
    guidance = (await site.get(f"/note/{site.ids['guidance']}")).text
    assert "edited by you" in guidance and "later news" not in guidance


# -- reading: Markdown, person cards, times, upcoming, the icon --------------------------------

HOSTILE = (
    "# Plan\n\n"
    "<script>alert('body')</script>\n\n"
    '<img src=x onerror="alert(2)">\n\n'
    "[x](javascript:alert(1)) and [y](JAVASCRIPT:alert(3)) and ![i](https://tracker.example/p.png)\n\n"
    "- **bold** item\n- second item"
)


class Tags(HTMLParser):
    """Every element a page's markup opens, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))


async def test_markdown_is_rendered_and_no_markup_from_a_note_reaches_the_page(site: Site) -> None:
    note_id = site.keyed.notebook.add_user_note(NoteKind.GUIDANCE, "Hostile", HOSTILE)
    for path in [f"/note/{note_id}", "/", "/group/guidance", "/search?q=plan"]:
        html = (await site.get(path)).text
        tags = Tags()
        tags.feed(html.split("<main>")[1].split("</main>")[0])
        names = {tag for tag, _ in tags.seen}
        assert not names & {"script", "img", "iframe", "object", "style"}, path
        for tag, attrs in tags.seen:
            assert not [k for k, _ in attrs if k.startswith("on")], (path, tag)
            href = dict(attrs).get("href") or ""
            assert not href.lower().startswith(("javascript:", "data:", "vbscript:")), path
    page = (await site.get(f"/note/{note_id}")).text
    body = page.split('id="note-body">')[1].split("</div>")[0]
    assert "<h3>Plan</h3>" in body  # a heading, two levels below the note's title
    assert "<li><strong>bold</strong> item</li>" in body
    assert "&lt;script&gt;alert('body')&lt;/script&gt;" in body  # shown as text
    assert "&lt;img src=x onerror=" in body
    assert "[x](javascript:alert(1))" in body  # the link stays text
    assert "[y](JAVASCRIPT:alert(3))" in body
    # An image is not loaded from anywhere: it is shown as a plain link.
    assert '!<a href="https://tracker.example/p.png">i</a>' in body
    # A card's excerpt is the words without the marks.
    card = (await site.get("/group/guidance")).text.split(f'data-note="{note_id}"')[1]
    excerpt = card.split('class="excerpt">')[1].split("</p>")[0]
    assert (
        excerpt.startswith("Plan · &lt;script&gt;") and "**" not in excerpt and "- " not in excerpt
    )


async def test_a_person_page_is_a_card_contact_details_first_then_sections(site: Site) -> None:
    ada = site.ids["ada"]
    site.keyed.notebook.edit(
        site.ids["ada_page"],
        body="Who they are\n- Plays the **cello**\nOpen threads\n- The recital on the 14th",
    )
    html = (await site.get(f"/person/{ada}")).text
    card = html.split('<article class="person-card">')[1].split("</article>")[0]
    assert card.index("Royal Society") < card.index("<h3>Who they are</h3>")
    assert '<a href="mailto:ada@example.org">ada@example.org</a>' in card
    assert "<li>Plays the <strong>cello</strong></li>" in card
    assert card.index("<h3>Who they are</h3>") < card.index("<h3>Open threads</h3>")


async def test_upcoming_lists_dated_notes_from_today_soonest_first(site: Site) -> None:
    today = humane.today_start_us(site.clear.clock.now_us())
    day = humane.DAY_US
    nb = site.keyed.notebook
    ids = {}
    for name, offset in [("past", -2), ("in ten", 10), ("today", 0), ("in three", 3)]:
        item = Distilled(NoteKind.CONVERSATION_DIGEST, f"d:{name}", f"Plan {name}", "x")
        ids[name] = nb.upsert_clear(replace(item, about_date=today + offset * day)).note_id
    html = (await site.get("/upcoming")).text
    shown = re.findall(r'<article class="note" data-note="([^"]+)"', html)
    mine = [i for i in shown if i in ids.values()]  # (the seed's pin is about today too)
    assert mine == [ids["today"], ids["in three"], ids["in ten"]]
    assert ">today<" in html and ">in 3 days<" in html and ">in 10 days<" in html
    assert '<a href="/upcoming" class="here" aria-current="page">Upcoming</a>' in html
    assert '<a href="/upcoming"' in (await site.get("/")).text  # linked from the nav


async def test_times_are_words_with_the_exact_time_beside_them(
    nodes: tuple[Node, ClearNode],
) -> None:
    keyed, clear = nodes
    key = b"\x07" * 32
    keyed.siblings.add(SiblingInfo(key, "mac", "homebase", "relay.example:443", 1))
    fingerprint = SiblingInfo(key, "mac", "homebase", "", 1).fingerprint
    at = clear.clock.now_us() // 1_000_000 - 200
    reports = {fingerprint: {"outcome": "no_answer", "at": at, "applied": 0}}
    app = create_app(clear, WebConfig(SECRETS, last_syncs=lambda: reports))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        c.cookies.set("pixie_web_8765", SECRETS.access)
        html = (await c.get("/status")).text
    exact = format_time(at * 1_000_000)
    found = re.search(rf'<time datetime="{exact}" title="{exact}">(\d+) minutes ago</time>', html)
    assert found is not None and int(found.group(1)) >= 3
    assert "no answer" in html and "no_answer" not in html
    assert re.search(r"\d{4}-\d\d-\d\dT", html.split("<main>")[1].replace(exact, "")) is None


def test_human_times() -> None:
    now = parse_time("2026-12-07T16:00:00Z")
    minute, day = 60_000_000, humane.DAY_US
    assert humane.ago(now - 10_000_000, now) == "just now"
    assert humane.ago(now - 3 * minute, now) == "3 minutes ago"
    assert humane.ago(now - minute, now) == "1 minute ago"
    assert humane.ago(now - day, now).startswith("yesterday, ")
    assert humane.ago(now - 30 * day, now) == humane.local_time(now - 30 * day)
    assert humane.day(parse_time("2026-11-01T00:00:00Z")) == "Sun 1 Nov 2026"
    assert humane.birthday("--12-10") == "10 Dec"
    assert humane.birthday("1815-12-10") == "10 Dec 1815"
    assert humane.birthday("sometime") == "sometime"
    assert humane.outcome("no_answer") == "no answer"
    assert humane.outcome("in_sync") == "already in sync"
    start = humane.today_start_us(now)
    assert humane.ahead(start, now) == "today"
    assert humane.ahead(start + day, now) == "tomorrow"
    assert humane.ahead(start + 5 * day, now) == "in 5 days"


async def test_the_icon_is_served_so_no_page_load_fails(site: Site) -> None:
    for path in ["/favicon.ico", "/static/favicon.svg"]:
        response = await site.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("image/svg+xml"), path
        assert response.text.startswith("<svg")
    html = (await site.get("/")).text
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
