"""Editing a note in the user's own editor (``$VISUAL``, else ``$EDITOR``).

The note goes out as one small Markdown file: a header with its title and
tags, a ``---`` line, then the body::

    # Save and close to apply; close without saving to change nothing.
    title: Priya Raman
    tags: work, family
    ---
    Lead data engineer at Helix Bio.

`edit_in_editor` writes that file (mode 0600, in a private temp directory),
runs the editor on it and reads it back. It returns None, and the caller
changes nothing, when the editor fails or the file comes back unchanged; a
file whose header cannot be read is one clear error naming the line, and
changes nothing either.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pixie.device.cli.common import read_small_text
from pixie.device.errors import BadInput

HEADER_NOTE = "# Save and close to apply; close without saving to change nothing."
SEPARATOR = "---"
MAX_FILE_BYTES = 256 * 1024


@dataclass(frozen=True)
class Edited:
    """What came back from the editor."""

    title: str
    tags: list[str]
    body: str


def render(title: str, tags: list[str], body: str) -> str:
    """The file the editor sees."""
    return f"{HEADER_NOTE}\ntitle: {title}\ntags: {', '.join(tags)}\n{SEPARATOR}\n{body}\n"


def parse(text: str, name: str = "the edited note") -> Edited:
    """The title, tags and body of a file as `render` lays it out."""
    lines = text.split("\n")
    title: str | None = None
    tags: list[str] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == SEPARATOR:
            body = "\n".join(lines[number:]).rstrip("\n")
            if title is None:
                raise BadInput(f"{name}: no 'title:' line above the '{SEPARATOR}' line")
            return Edited(title, tags, body)
        if not stripped or stripped.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        key = key.strip().lower()
        if not colon or key not in ("title", "tags"):
            raise BadInput(
                f"{name}, line {number}: expected 'title: ...', 'tags: ...' or '{SEPARATOR}'"
            )
        if key == "title":
            title = value.strip()
        else:
            tags = [t.strip() for t in value.split(",") if t.strip()]
    raise BadInput(f"{name}: the '{SEPARATOR}' line between the header and the body is missing")


def editor_command() -> list[str]:
    """``$VISUAL`` or ``$EDITOR``, split as a shell would split it."""
    for variable in ("VISUAL", "EDITOR"):
        value = os.environ.get(variable, "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError:
                raise BadInput(f"${variable} is not a command line: {value!r:.80}") from None
            if words:
                return words
    raise BadInput("set $VISUAL or $EDITOR to edit in an editor, or give --title, --body or --tags")


def edit_in_editor(title: str, tags: list[str], body: str) -> Edited | None:
    """Let the user edit the note; None if the editor failed or nothing changed."""
    command = editor_command()
    original = render(title, tags, body)
    with tempfile.TemporaryDirectory(prefix="pixie-edit-") as folder:
        path = Path(folder) / "note.md"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(original)
        try:
            done = subprocess.run([*command, str(path)], check=False)
        except OSError as exc:
            raise BadInput(
                f"cannot run the editor {command[0]!r}: {exc.strerror or exc}; nothing changed"
            ) from None
        if done.returncode != 0:
            raise BadInput(f"the editor exited with status {done.returncode}; nothing changed")
        text = read_small_text(path, MAX_FILE_BYTES, "the edited note")
    if text.replace("\r\n", "\n") == original:
        return None
    return parse(text.replace("\r\n", "\n"))


__all__ = ["Edited", "edit_in_editor", "editor_command", "parse", "render"]
