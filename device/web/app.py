"""The page itself: You → Agent → Notebook, the memory log and sync status.

An ASGI app (Starlette) over one `ClearNode`, rendered on the server with
Jinja (autoescaped: a note titled ``<script>`` is shown as text) and a small
script that only enhances what works without it. It is built on the clear
side alone: the node it is given holds no key, the Notebook it reads is
`ClearNotebookStore`, and nothing here can import the sealed zone (an import
contract checks that), so no route, template or JSON answer can reach it.

Every read and write of the database runs on one worker thread at a time
(`trio.to_thread.run_sync` with a `CapacityLimiter(1)`): the store is
synchronous SQLAlchemy, and SQLite calls must not block the event loop.

The Notebook's behaviour is the CLI's: search is `search_clear` with the
person resolved the way check_notebook resolves it; edit, delete, add and pin
call the same store methods as ``pixie notebook edit/delete/add`` and
``pixie pin``, with the same guards (an offloaded note is recalled before it
is edited; an edit that changes nothing writes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import trio
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp

from pixie.device.agent.grep import MAX_QUERY_CHARS
from pixie.device.agent.limits import MAX_DAYS_BACK
from pixie.device.agent.tools import MAX_PERSON_CHARS, render_results
from pixie.device.errors import BadInput, DeviceError, NotFound
from pixie.device.node.clear import ClearNode
from pixie.device.notebook.clearview import ScoredNote
from pixie.device.store.contacts import (
    DETAIL_NAMES,
    ContactInfo,
    clean_name,
    name_key,
    phone_alias,
)
from pixie.device.store.memlog import EventRecord
from pixie.device.store.notes import MAX_TAG_CHARS, ClearNote, NoteKind
from pixie.device.web import humane, reads
from pixie.device.web.looks import environment
from pixie.device.web.offloaded import NO_DAEMON, HomebaseUnreachable, OffloadGateway
from pixie.device.web.security import CSRF_FIELD, Guard, Secrets, csrf_ok
from pixie.protocol.errors import ProtocolError
from pixie.protocol.ids import parse_id

HERE = Path(__file__).parent
FAVICON = HERE / "static" / "favicon.svg"
T = TypeVar("T")
DAY_US = humane.DAY_US

# What a redirect after a write says, by key: the address carries the key, never text.
DONE = {
    "edited": "Saved. The note is yours now: distillation will not overwrite it.",
    "unchanged": "Nothing changed, so nothing was written.",
    "deleted": "Deleted.",
    "added": "Added.",
    "pinned": "Pinned: a new note in Pins, and a spark in your log.",
    "recalled": "Recalled: the body is on this device again.",
    "recalled_pending": "Recalled: the body is here; the Homebase lets go of its copy later.",
}
ADDABLE = (NoteKind.GUIDANCE, NoteKind.ABOUT_YOU)


@dataclass(frozen=True, slots=True)
class WebConfig:
    """What the command hands the page besides the node.

    ``offload`` opens offloaded notes (None: nothing can, and the page says
    so); ``last_syncs`` reads the last sync report per sibling fingerprint.
    """

    secrets: Secrets
    offload: OffloadGateway | None = None
    last_syncs: Callable[[], dict[str, object]] | None = None
    loopback_only: bool = True


def _page(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= reads.MAX_PAGE:
        raise BadInput(f"page must be a whole number from 1 to {reads.MAX_PAGE}")
    return int(raw)


def _text_param(request: Request, name: str, limit: int) -> str | None:
    value = request.query_params.get(name)
    if value is None or not value.strip():
        return None
    if len(value) > limit:
        raise BadInput(f"{name} is longer than {limit} characters")
    return value.strip()


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInput(f"{name} must be text")
    return value


def split_tags(value: str | None) -> list[str] | None:
    """Comma-separated tags, as ``pixie notebook edit --tags`` reads them."""
    if value is None:
        return None
    return [t for t in (part.strip() for part in value.split(",")) if t]


def _note_id(value: str) -> str:
    try:
        return parse_id(value)
    except ProtocolError:
        # The store's own words for an id it does not hold.
        raise NotFound(f"no note with id {value[:40]}") from None


def _lf(text: str) -> str:
    # Browsers send a textarea's line breaks as CR LF whatever the text held.
    return text.replace("\r\n", "\n")


class NotebookPage:
    """The routes, over one node and one database lane."""

    def __init__(self, node: ClearNode, config: WebConfig) -> None:
        self.node = node
        self.config = config
        self.lane = trio.CapacityLimiter(1)
        self.templates = Jinja2Templates(env=environment(node.clock.now_us))

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the database lane, off the event loop."""
        return await trio.to_thread.run_sync(partial(fn, *args), limiter=self.lane)

    def render(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> Response:
        done = request.query_params.get("done")
        base = {
            "csrf": self.config.secrets.csrf,
            "csrf_field": CSRF_FIELD,
            "done": DONE.get(done or ""),
            "error": None,
            "nav": name.removesuffix(".html"),
        }
        return self.templates.TemplateResponse(
            request, name, {**base, **context}, status_code=status
        )

    async def csrf(self, request: Request) -> FormData:
        form = await request.form()
        if not csrf_ok(self.config.secrets, [_field(form, CSRF_FIELD)]):
            raise Forbidden("This form is out of date or did not come from this page: reload it.")
        return form

    # -- the Notebook --------------------------------------------------------------

    async def notebook(self, request: Request) -> Response:
        def load() -> tuple[dict[str, int], dict[str, list[ClearNote]], dict[str, str]]:
            counts = reads.group_counts(self.node.notebook.clear_view().counts())
            sections = {
                g.slug: reads.clear_page(self.node.db, g.kinds, limit=reads.SECTION_NOTES)[0]
                for g in reads.GROUPS
            }
            return counts, sections, self.node.contacts.names()

        counts, sections, names = await self.run(load)
        return self.render(
            request,
            "notebook.html",
            {"groups": reads.GROUPS, "counts": counts, "sections": sections, "names": names},
        )

    async def group(self, request: Request) -> Response:
        group = reads.GROUP_BY_SLUG.get(request.path_params["slug"])
        if group is None:
            raise NotFound("no such section of the Notebook")
        page = _page(request)

        def load() -> tuple[list[ClearNote], bool, dict[str, str]]:
            notes, more = reads.clear_page(
                self.node.db, group.kinds, offset=(page - 1) * reads.PAGE_NOTES
            )
            return notes, more, self.node.contacts.names()

        notes, more, names = await self.run(load)
        return self.render(
            request,
            "group.html",
            {"group": group, "notes": notes, "more": more, "page": page, "names": names},
        )

    async def people(self, request: Request) -> Response:
        def load() -> tuple[list[ContactInfo], set[str]]:
            return self.node.contacts.all(), reads.people_with_pages(self.node.db)

        contacts, with_page = await self.run(load)
        return self.render(request, "people.html", {"contacts": contacts, "with_page": with_page})

    async def person(self, request: Request) -> Response:
        contact_id = request.path_params["contact_id"]
        page = _page(request)

        def load() -> dict[str, Any]:
            info = self.node.contacts.info(contact_id)
            pages, _ = reads.clear_page(
                self.node.db, (NoteKind.PERSON,), contact_id=contact_id, limit=10
            )
            notes, more = reads.clear_page(
                self.node.db, None, contact_id=contact_id, offset=(page - 1) * reads.PAGE_NOTES
            )
            others = [a for a in info.aliases if name_key(a) != name_key(info.name)]
            return {
                "info": info,
                # Addresses and numbers are how to reach them; the rest are names.
                "emails": [a for a in others if "@" in a],
                "phones": [a for a in others if "@" not in a and phone_alias(a) == a],
                "aliases": [a for a in others if "@" not in a and phone_alias(a) != a],
                "details": [
                    (DETAIL_NAMES[k], humane.birthday(v) if k == "birthday" else v)
                    for k, v in info.details.as_dict().items()
                    if v is not None
                ],
                "pages": pages,
                "notes": [n for n in notes if n.kind is not NoteKind.PERSON],
                "more": more,
                "page": page,
                "names": self.node.contacts.names(),
            }

        return self.render(request, "person.html", await self.run(load))

    async def note(self, request: Request) -> Response:
        return await self._note_page(request, _note_id(request.path_params["note_id"]))

    async def _note_page(
        self,
        request: Request,
        note_id: str,
        *,
        error: str | None = None,
        fetched: str | None = None,
        form: dict[str, str] | None = None,
        status: int = 200,
    ) -> Response:
        def load() -> tuple[ClearNote, dict[str, str]]:
            note = self.node.notebook.get_clear(note_id)
            return note, self.node.contacts.names()

        note, names = await self.run(load)
        return self.render(
            request,
            "note.html",
            {
                "note": note,
                "names": names,
                "error": error,
                "fetched": fetched,
                "form": form,
                "can_fetch": self.config.offload is not None,
                "no_gateway": NO_DAEMON,
            },
            status,
        )

    async def edit(self, request: Request) -> Response:
        note_id = _note_id(request.path_params["note_id"])
        form = await self.csrf(request)
        title, body, tags = (_field(form, k) for k in ("title", "body", "tags"))
        if title is None and body is None and tags is None:
            raise BadInput("nothing to change: give a title, body or tags")

        def write() -> bool:
            current = self.node.notebook.get_clear(note_id)
            new_body = None if body is None else _lf(body)
            if new_body is not None and current.body is not None and _lf(current.body) == new_body:
                new_body = None  # the same text, only sent back with other line breaks
            return self.node.notebook.edit(
                note_id, title=title, body=new_body, tags=split_tags(tags)
            )

        try:
            changed = await self.run(write)
        except BadInput as exc:
            kept = {"title": title or "", "body": body or "", "tags": tags or ""}
            return await self._note_page(request, note_id, error=str(exc), form=kept, status=400)
        return _see(f"/note/{note_id}", done="edited" if changed else "unchanged")

    async def delete(self, request: Request) -> Response:
        note_id = _note_id(request.path_params["note_id"])
        await self.csrf(request)
        await self.run(self.node.notebook.delete, note_id)
        return _see("/", done="deleted")

    async def fetch(self, request: Request) -> Response:
        note_id = _note_id(request.path_params["note_id"])
        await self.csrf(request)
        wants_json = "application/json" in request.headers.get("accept", "")
        try:
            body = await self._fetch(note_id)
        except (HomebaseUnreachable, BadInput) as exc:
            if wants_json:
                return JSONResponse({"id": note_id, "error": str(exc)}, 502)
            return await self._note_page(request, note_id, error=str(exc), status=502)
        if wants_json:
            return JSONResponse({"id": note_id, "body": body, "verified": True})
        return await self._note_page(request, note_id, fetched=body)

    async def _fetch(self, note_id: str) -> str:
        note = await self.run(self.node.notebook.get_clear, note_id)
        if note.body is not None:
            raise BadInput("this note's body is on this device; there is nothing to fetch")
        gateway = self.config.offload
        if gateway is None:
            raise HomebaseUnreachable(NO_DAEMON)
        # Not on the database lane: the daemon does the work, this only waits.
        return await trio.to_thread.run_sync(gateway.fetch, note_id)

    async def recall(self, request: Request) -> Response:
        note_id = _note_id(request.path_params["note_id"])
        await self.csrf(request)
        note = await self.run(self.node.notebook.get_clear, note_id)
        if note.body is not None:
            return _see(f"/note/{note_id}", done="recalled")
        gateway = self.config.offload
        try:
            if gateway is None:
                raise HomebaseUnreachable(NO_DAEMON)
            released = await trio.to_thread.run_sync(gateway.recall, note_id)
        except (HomebaseUnreachable, BadInput) as exc:
            return await self._note_page(request, note_id, error=str(exc), status=502)
        return _see(f"/note/{note_id}", done="recalled" if released else "recalled_pending")

    async def add_form(self, request: Request) -> Response:
        kind = request.query_params.get("kind", NoteKind.GUIDANCE.value)
        form = {"kind": kind, "title": "", "body": "", "tags": ""}
        return self.render(request, "add.html", {"form": form, "kinds": ADDABLE})

    async def add(self, request: Request) -> Response:
        form = await self.csrf(request)
        values = {k: _field(form, k) or "" for k in ("kind", "title", "body", "tags")}
        try:
            kind = NoteKind(values["kind"])
            if kind not in ADDABLE:
                raise ValueError
        except ValueError:
            raise BadInput("kind must be guidance or about_you") from None
        tags = split_tags(values["tags"]) or []
        try:
            note_id = await self.run(
                self.node.notebook.add_user_note, kind, values["title"], _lf(values["body"]), tags
            )
        except BadInput as exc:
            return self.render(
                request,
                "add.html",
                {"form": values, "kinds": ADDABLE, "error": str(exc)},
                400,
            )
        return _see(f"/note/{note_id}", done="added")

    async def upcoming(self, request: Request) -> Response:
        page = _page(request)

        def load() -> dict[str, Any]:
            since = humane.today_start_us(self.node.clock.now_us())
            notes, more = reads.upcoming(self.node.db, since, offset=(page - 1) * reads.PAGE_NOTES)
            return {"notes": notes, "more": more, "page": page, "names": self.node.contacts.names()}

        return self.render(request, "upcoming.html", await self.run(load))

    async def favicon(self, request: Request) -> Response:
        return FileResponse(FAVICON, media_type="image/svg+xml")

    # -- search ----------------------------------------------------------------------

    async def search(self, request: Request) -> Response:
        query = _text_param(request, "q", MAX_QUERY_CHARS) or ""
        person = _text_param(request, "person", MAX_PERSON_CHARS)
        topic = _text_param(request, "topic", MAX_TAG_CHARS)
        days_raw = _text_param(request, "days", 12)
        days: int | None = None
        if days_raw is not None:
            if not days_raw.isdigit() or not 1 <= int(days_raw) <= MAX_DAYS_BACK:
                raise BadInput(f"days must be a whole number from 1 to {MAX_DAYS_BACK}")
            days = int(days_raw)

        asked = bool(query.strip()) or any(v is not None for v in (person, topic, days))

        def load() -> tuple[list[ScoredNote], str, dict[str, str], list[str]]:
            names = self.node.contacts.names()
            people = sorted(set(names.values()), key=str.casefold)
            if not asked:  # an empty form: nothing to rank, so nothing is listed
                return [], "", names, people
            contact_id = None
            if person is not None:
                try:
                    contact_id = self.node.contacts.resolve(clean_name(person, "person"))
                except NotFound:
                    # check_notebook's own answer for a name that resolves to no one
                    return [], f'No notes are filed under that person ("{person}").', names, people
            since = self.node.clock.now_us() - days * DAY_US if days else None
            found = self.node.notebook.clear_view().search_clear(query, contact_id, topic, since)
            headline = render_results(found, query, person, topic, days).splitlines()[0]
            return found, headline, names, people

        results, headline, names, people = await self.run(load)
        return self.render(
            request,
            "search.html",
            {
                "results": results,
                "headline": headline,
                "asked": asked,
                "scored": bool(query.strip()),
                "names": names,
                "people": people,
                "q": query,
                "person": person or "",
                "topic": topic or "",
                "days": days or "",
            },
        )

    # -- the memory log -----------------------------------------------------------------

    async def log(self, request: Request) -> Response:
        query = _text_param(request, "q", MAX_QUERY_CHARS)
        person = _text_param(request, "person", MAX_PERSON_CHARS)
        page = _page(request)

        def load() -> dict[str, Any]:
            names = self.node.contacts.names()
            people = sorted(set(names.values()), key=str.casefold)
            name = None
            if person is not None:
                try:
                    name = names.get(self.node.contacts.resolve(clean_name(person, "person")))
                except NotFound:
                    return {
                        "lines": [],
                        "more": False,
                        "literal": False,
                        "people": people,
                        "unknown": person,
                    }
            lines, more, literal = reads.timeline(
                self.node.mirror,
                query,
                name,
                offset=(page - 1) * reads.PAGE_EVENTS,
            )
            return {
                "lines": lines,
                "more": more,
                "literal": literal,
                "people": people,
                "unknown": None,
            }

        found = await self.run(load)
        return self.render(
            request,
            "log.html",
            {**found, "q": query or "", "person": person or "", "page": page},
        )

    async def event(self, request: Request) -> Response:
        event_id = _event_id(request.path_params["event_id"])

        def load() -> tuple[EventRecord, dict[str, str]]:
            record = reads.event(self.node.db, event_id)
            if record is None:
                raise NotFound(f"no event with id {event_id}")
            return record, self.node.contacts.names()

        record, names = await self.run(load)
        return self.render(request, "event.html", {"event": record, "names": names})

    async def source(self, request: Request) -> Response:
        ref = _text_param(request, "ref", 200)
        if ref is None:
            raise BadInput("which source? (ref is missing)")
        page = _page(request)
        view = await self.run(
            partial(reads.source_events, self.node.db, ref, offset=(page - 1) * reads.PAGE_EVENTS)
        )
        if view.person is not None:
            return _see(f"/person/{view.person}")
        names = await self.run(self.node.contacts.names)
        return self.render(
            request,
            "source.html",
            {"ref": ref, "events": view.events, "more": view.more, "page": page, "names": names},
        )

    async def pin(self, request: Request) -> Response:
        form = await self.csrf(request)
        event_id = _event_id(_field(form, "event_id") or "")
        tags = split_tags(_field(form, "tags")) or []
        note_id = await self.run(self.node.notebook.pin_spark, event_id, tags)
        return _see(f"/note/{note_id}", done="pinned")

    # -- sync status -------------------------------------------------------------------

    async def status(self, request: Request) -> Response:
        def load() -> dict[str, Any]:
            node = self.node
            counts = node.notebook.counts()
            last = self.config.last_syncs() if self.config.last_syncs is not None else None
            siblings = [
                {"info": s, "last": _last_sync(last, s.fingerprint)} for s in node.siblings.all()
            ]
            return {
                "role": node.role,
                "name": node.name,
                "origin": node.origin,
                "digest": node.digest().digest().hex(),
                "events": node.log.count(),
                "contacts": len(node.contacts.names()),
                "clear_notes": counts["clear"],
                "offloaded": counts["offloaded"],
                "siblings": siblings,
                "known": last is not None,
            }

        return self.render(request, "status.html", await self.run(load))


def _last_sync(last: dict[str, object] | None, fingerprint: str) -> dict[str, Any] | None:
    """A sibling's last sync report, and whether the two digests were equal after it."""
    if last is None:
        return None
    report = last.get(fingerprint)
    if not isinstance(report, dict):
        return None
    outcome = str(report.get("outcome", ""))
    at = report.get("at")
    return {
        "outcome": outcome,
        "at": int(float(at) * 1_000_000) if isinstance(at, int | float) else None,
        "applied": report.get("applied"),
        "error": report.get("error"),
        # A session ends in_sync when the Hellos' digests matched, and synced or
        # superseded when its closing Check found them equal.
        "equal": outcome in ("in_sync", "synced", "superseded"),
    }


def _event_id(value: str) -> str:
    try:
        return parse_id(value)
    except ProtocolError as exc:
        raise BadInput(str(exc)) from None


def _see(path: str, **query: str) -> RedirectResponse:
    target = path + (f"?{urlencode(query)}" if query else "")
    return RedirectResponse(target, 303)


class Forbidden(DeviceError):
    """A write without this run's CSRF token."""


def create_app(node: ClearNode, config: WebConfig) -> ASGIApp:
    """The whole page for ``node``: routes behind the `Guard`."""
    page = NotebookPage(node, config)

    async def failed(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, NotFound) else 403 if isinstance(exc, Forbidden) else 400
        return page.render(request, "error.html", {"error": str(exc)}, status)

    routes = [
        Route("/", page.notebook, name="notebook"),
        Route("/group/{slug}", page.group),
        Route("/people", page.people),
        Route("/person/{contact_id}", page.person),
        Route("/note/{note_id}", page.note),
        Route("/note/{note_id}/edit", page.edit, methods=["POST"]),
        Route("/note/{note_id}/delete", page.delete, methods=["POST"]),
        Route("/note/{note_id}/fetch", page.fetch, methods=["POST"]),
        Route("/note/{note_id}/recall", page.recall, methods=["POST"]),
        Route("/add", page.add_form, methods=["GET"]),
        Route("/add", page.add, methods=["POST"]),
        Route("/upcoming", page.upcoming),
        Route("/favicon.ico", page.favicon),
        Route("/search", page.search),
        Route("/log", page.log),
        Route("/event/{event_id}", page.event),
        Route("/source", page.source),
        Route("/pin", page.pin, methods=["POST"]),
        Route("/status", page.status),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={DeviceError: failed})
    return Guard(app, config.secrets, loopback_only=config.loopback_only)


__all__ = ["NotebookPage", "WebConfig", "create_app", "split_tags"]
