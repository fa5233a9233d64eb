"""Note bodies as the page shows them: Markdown rendered safely, and plain
text for excerpts.

A note's body is text the agent or the user wrote, and may hold Markdown
(``# headings``, ``- lists``, ``**bold**``). It is rendered by markdown-it
with raw HTML off: ``<script>`` or ``<img onerror>`` in a note comes out as
text, never as markup. Links are markdown-it's own validated ones, so a
``javascript:``, ``vbscript:``, ``file:`` or ``data:`` link stays text.
Images are not rendered at all: the page's policy would refuse a remote one,
and fetching it would tell its host the note was opened. The renderer's
output is the only HTML the templates mark safe; everything else is
autoescaped.

Headings inside a body are shifted two levels down (``#`` becomes ``h3``),
below the page's own title and the note's. A distilled person page names its
sections on lines of their own ("Who they are", then a list); those lines are
shown as headings too.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from pixie.device.distill.pages import READ, THREADS, WHO

HEADING_SHIFT = 2
PERSON_SECTIONS = frozenset({WHO, READ, THREADS})

_MD = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
_MD.enable(["table", "strikethrough"])
_MD.disable(["image"])


def _shift(tokens: Sequence[Token]) -> None:
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            level = int(token.tag[1:]) + HEADING_SHIFT
            token.tag = f"h{min(level, 6)}"


def _person_sections(text: str) -> str:
    """A person page's section lines as Markdown headings."""
    lines = text.split("\n")
    return "\n".join(
        f"# {line.strip()}\n" if line.strip() in PERSON_SECTIONS else line for line in lines
    )


def markdown(text: str | None, *, person_page: bool = False) -> Markup:
    """A note's body as safe HTML (empty for an offloaded body)."""
    if not text:
        return Markup("")
    if person_page:
        text = _person_sections(text)
    env: dict[str, object] = {}
    tokens = _MD.parse(text, env)
    _shift(tokens)
    # The renderer escapes every text token and writes only its own tags.
    return Markup(_MD.renderer.render(tokens, _MD.options, env))  # noqa: S704


def plain(text: str | None, *, person_page: bool = False) -> str:
    """The words of a Markdown body without its marks, its blocks (a
    paragraph, a heading, a list item) joined by " · "."""
    if not text:
        return ""
    if person_page:
        text = _person_sections(text)
    out: list[str] = []
    for token in _MD.parse(text):
        if token.type == "inline":
            out.append(
                "".join(
                    " " if child.type in ("softbreak", "hardbreak") else child.content
                    for child in token.children or ()
                    if child.type in ("text", "code_inline", "softbreak", "hardbreak")
                )
            )
        elif token.type in ("code_block", "fence"):
            out.append(token.content)
    blocks = (" ".join(block.split()) for block in out)
    return " · ".join(block for block in blocks if block)


__all__ = ["HEADING_SHIFT", "PERSON_SECTIONS", "markdown", "plain"]
