"""What the user sees of the Notebook: listing, showing, searching, exporting.

Everything here is handed a `ClearNotebook` (the clear zone, holding no key)
and imports nothing that can open the sealed zone; an import contract checks
that. The sealed zone cannot leak through a screen that has no way to read it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pixie.device.agent.tools import CheckNotebookTool, label
from pixie.device.errors import BadInput, NotFound
from pixie.device.notebook.clearview import ClearNotebook
from pixie.device.store.notes import ClearNote, NoteKind, is_kept_up_identity, kept_up_title
from pixie.protocol.timestamps import format_date, format_time


def note_line(note: ClearNote, short_id: str | None = None, *, twin: bool = False) -> str:
    """One line of a list: the (short) id, the date, the label, tags and marks;
    a ``twin`` (another listed note has the same title) also names its source."""
    flags = []
    if note.user_edited:
        flags.append("edited")
    if note.body is None:
        flags.append("offloaded: opens from your Homebase")
    if twin:
        flags.append(f"from {note.source_ref}" if note.source_ref else "written by you")
    tags = f" [{', '.join(note.tags)}]" if note.tags else ""
    extra = f" ({'; '.join(flags)})" if flags else ""
    when = format_date(note.effective_date)
    return f"{short_id or note.id}  {when}  {label(note.kind, note.title)}{tags}{extra}"


def note_lines(notes: list[ClearNote], short: dict[str, str]) -> list[str]:
    """`note_line` of each note, with short ids, twins told apart by source."""
    titles = Counter((n.kind, n.title) for n in notes)
    return [note_line(n, short.get(n.id), twin=titles[(n.kind, n.title)] > 1) for n in notes]


def list_notes(view: ClearNotebook, kind: NoteKind | None) -> list[ClearNote]:
    return view.clear_notes(kind)


def show_note(view: ClearNotebook, note_id: str, contact_names: dict[str, str]) -> str:
    note = view.get_clear(note_id)
    if note is None:
        raise NotFound(f"no note with id {note_id}")
    lines = [
        label(note.kind, note.title),
        f"id: {note.id}",
        f"kind: {note.kind.value}",
    ]
    if note.contact_id:
        lines.append(f"person: {contact_names.get(note.contact_id, note.contact_id)}")
    if note.tags:
        lines.append(f"tags: {', '.join(note.tags)}")
    lines.append(f"about: {format_date(note.effective_date)}")
    lines.append(f"updated: {format_time(note.updated_at.wall_ms * 1000)}")
    if note.source_ref:
        lines.append(f"source: {note.source_ref}")
    if note.user_edited:
        lines.append("edited by you: distillation will not overwrite it")
        if note.kind is NoteKind.PERSON and not is_kept_up_identity(note.identity_key):
            lines.append(f"what Pixie learns later goes to: {kept_up_title(note.title)}")
    lines.append("")
    lines.append(note.body if note.body is not None else "Offloaded — opens from your Homebase.")
    return "\n".join(lines)


def note_json(note: ClearNote, contact_names: dict[str, str]) -> dict[str, Any]:
    out = note.as_json()
    out["person"] = contact_names.get(note.contact_id) if note.contact_id else None
    out["offloaded"] = note.body is None
    return out


def search_text(
    tool: CheckNotebookTool, query: str, person: str | None, topic: str | None, days: int | None
) -> str:
    """Exactly what check_notebook would hand the model."""
    args: dict[str, Any] = {"query": query}
    if person is not None:
        args["person"] = person
    if topic is not None:
        args["topic"] = topic
    if days is not None:
        args["days_back"] = days
    return tool.call(args)


_SLUG = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    return _SLUG.sub("-", text.casefold()).strip("-")[:50] or "note"


def export_markdown(view: ClearNotebook, target: Path, contact_names: dict[str, str]) -> int:
    """Write the clear zone as one Markdown file per note; all or nothing.

    The files go to a fresh staging directory beside ``target`` that is
    renamed into place only when every note is written. The staging directory
    gets a name no one else holds (a fixed ``DIR.partial`` could be someone's
    own directory, and clearing it out would delete their files), and a
    failure removes only what this export created.
    """
    notes = view.clear_notes()
    staging: Path | None = None
    created: list[Path] = []
    try:
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise BadInput(f"{target} exists and is not an empty directory")
        created = _missing_parents(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.partial-"))
        for note in notes:
            (staging / _export_name(note)).write_text(
                _export_text(note, contact_names), encoding="utf-8"
            )
        if target.exists():
            target.rmdir()
        staging.replace(target)
    except OSError as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for parent in created:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only if still empty: never anyone else's files
        raise BadInput(f"cannot export to {target}: {exc.strerror or exc}") from None
    return len(notes)


def _missing_parents(target: Path) -> list[Path]:
    """The directories above ``target`` that do not exist yet, deepest first."""
    missing = []
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def _export_name(note: ClearNote) -> str:
    return f"{note.kind.value}-{_slug(note.title)}-{note.id[:8]}.md"


def _export_text(note: ClearNote, contact_names: dict[str, str]) -> str:
    front = [
        "---",
        f"id: {note.id}",
        f"kind: {note.kind.value}",
        f"title: {note.title!r}",
        f"about: {format_date(note.effective_date)}",
        f"updated: {format_time(note.updated_at.wall_ms * 1000)}",
    ]
    if note.contact_id:
        front.append(f"person: {contact_names.get(note.contact_id, note.contact_id)!r}")
    if note.tags:
        front.append(f"tags: [{', '.join(note.tags)}]")
    if note.source_ref:
        front.append(f"source: {note.source_ref}")
    front.append(f"edited_by_you: {'true' if note.user_edited else 'false'}")
    front.append("---")
    body = note.body if note.body is not None else "_Offloaded: opens from your Homebase._"
    return "\n".join([*front, "", f"# {note.title}", "", body, ""])


PROGRESS_EVERY = 0.1  # seconds between two redraws of a progress line
_last_drawn: dict[str, float] = {}


def progress(done: int, total: int, what: str) -> None:
    """A one-line progress count on a terminal's stderr; nothing when piped.

    Redrawn at most every PROGRESS_EVERY seconds (a 100,000-event import calls
    this per thousand rows; the terminal need not see each), and always at the
    end, which also ends the line.
    """
    if total < 2 or not sys.stderr.isatty():
        return
    finished = done >= total
    now = time.monotonic()
    if not finished and now - _last_drawn.get(what, -PROGRESS_EVERY) < PROGRESS_EVERY:
        return
    _last_drawn[what] = now
    percent = 100 * min(done, total) // total
    end = "\n" if finished else ""
    sys.stderr.write(f"\r{what} {min(done, total):,} of {total:,} ({percent}%){end}")
    sys.stderr.flush()
    if finished:
        _last_drawn.pop(what, None)


def end_progress() -> None:
    """End a progress line left short of its total (an estimate that was
    too high, or work that failed), so what follows starts on a line of its own."""
    if _last_drawn and sys.stderr.isatty():
        sys.stderr.write("\n")
        sys.stderr.flush()
    _last_drawn.clear()
