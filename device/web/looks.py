"""The templates' environment: Jinja with autoescape on, and the filters
that turn what the store holds into what a reader sees (times in words,
Markdown bodies rendered safely, plain excerpts, sync outcomes in words)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jinja2
from markupsafe import Markup

from pixie.device.agent.tools import label
from pixie.device.store.notes import LABELS, is_kept_up_identity, kept_up_title
from pixie.device.web import humane, render

TEMPLATES = Path(__file__).parent / "templates"
EXCERPT_CHARS = 280


def excerpt(text: str | None, person_page: bool = False) -> str:
    """A body's words without Markdown marks, clipped for a card."""
    flat = render.plain(text, person_page=person_page)
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def environment(now_us: Callable[[], int]) -> jinja2.Environment:
    """The page's templates; ``now_us`` is the clock "3 minutes ago" counts from."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["day"] = humane.day
    env.filters["local"] = humane.local_time
    env.filters["iso"] = humane.iso
    env.filters["ago"] = lambda us: humane.ago(us, now_us())
    env.filters["ahead"] = lambda us: humane.ahead(us, now_us())
    env.filters["outcome"] = humane.outcome
    env.filters["excerpt"] = excerpt
    env.filters["markdown"] = _markdown
    env.globals["LABELS"] = LABELS
    env.globals["label"] = label
    env.globals["is_kept_up_identity"] = is_kept_up_identity
    env.globals["kept_up_title"] = kept_up_title
    return env


def _markdown(text: str | None, person_page: bool = False) -> Markup:
    return render.markdown(text, person_page=person_page)


__all__ = ["EXCERPT_CHARS", "environment", "excerpt"]
