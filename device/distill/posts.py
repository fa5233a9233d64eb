"""Near-identical posts: the same words posted again and again become one
note that counts them, instead of one note per post."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pixie.device.distill.pages import (
    day_of,
    parse_day,
    short_day,
)
from pixie.device.notebook.clear import (
    Distilled,
)
from pixie.device.store.notes import (
    NoteKind,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.sources import Row
from pixie.device.distill.stored import StoredNote, stored_note

# -- near-identical posts -----------------------------------------------------------
#
# The same post made again with another number or hashtag ("Porto rain, day 3",
# "Porto rain, day 5 #porto") is one note, not one per post: a digest per copy
# would fill a search's eight places with one thing said eight times. A post's
# digest is therefore filed under its gist (its author and its words, numbers
# and hashtags aside), and the note keeps the days it was posted; its title,
# text and source reference are the newest copy's. Merging happens here, on
# the write path, where the stored note can be read under the write lock; a
# re-run that adds a day already listed writes nothing, and a note the user
# edited is left as they made it.

_GIST_DROP = re.compile(r"#[^\W_][\w-]*|https?://\S+")
_GIST_WORD = re.compile(r"[^\W\d_]+")
_POSTED = re.compile(r"^Posted (\d+) times: (.+)\.$")
_TITLE_DAY = re.compile(r", (\d{1,2} [A-Z][a-z]{2} \d{4}): ")


def post_gist(text: str) -> str:
    """A post's words without its numbers, hashtags and links, folded."""
    return " ".join(_GIST_WORD.findall(_GIST_DROP.sub(" ", text).casefold()))


def post_identity(root: Row) -> str:
    """The identity of a post's digest: its author and its gist."""
    _, _, _, cid, me, text = root
    author = "me" if me else cid or "someone"
    digest = hashlib.sha256(f"{author}\x00{post_gist(text)}".encode()).hexdigest()[:32]
    return f"post-gist:{digest}"


def merge_post(session: Session, item: Distilled, posted: int) -> Distilled:
    """``item`` (one post's digest, posted at ``posted``) merged with the note
    already filed under the same gist, if there is one."""
    row = stored_note(session, NoteKind.POST_DIGEST, item.identity_key)
    if row is None or row.user_edited or row.body is None:
        return item  # new, the user's (the upsert keeps it), or parked on the Homebase
    stored_days, stored_text = _posted_days(row.body)
    if not stored_days:  # one post so far: its day is in its title
        match = _TITLE_DAY.search(row.title or "")
        day = parse_day(match.group(1)) if match else None
        stored_days = {day} if day is not None else set()
    day = day_of(posted)
    days = stored_days | {day}
    newer = (day, item.source_ref or "") >= (max(stored_days, default=0), row.source_ref or "")
    base = item if newer else _as_distilled(row, item)
    text = item.body if newer else stored_text
    if len(days) > 1:
        listed = [short_day(d) for d in sorted(days)]
        shown = ", ".join(listed[:-1]) + " and " + listed[-1]
        text = f"{text}\nPosted {len(days)} times: {shown}."
    return Distilled(
        base.kind,
        base.identity_key,
        base.title,
        text,
        base.contact_id,
        base.tags,
        base.source_ref,
        base.about_date,
    )


def _posted_days(body: str) -> tuple[set[int], str]:
    lines = body.splitlines()
    match = _POSTED.match(lines[-1]) if lines else None
    if match is None:
        return set(), body
    days = set()
    for label in re.split(r", | and ", match.group(2)):
        at = parse_day(label)
        if at is not None:
            days.add(at)
    return days, "\n".join(lines[:-1])


def _as_distilled(row: StoredNote, item: Distilled) -> Distilled:
    tags = tuple(json.loads(row.tags)) if row.tags else ()
    return Distilled(
        item.kind,
        item.identity_key,
        row.title or item.title,
        row.body or item.body,
        row.contact_id,
        tags,
        row.source_ref,
        row.about_date,
    )
