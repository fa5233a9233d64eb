"""The week of a journal: a week's entries gathered in one digest, each day a
line, fitted to the note's size."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pixie.device.distill.contract import (
    DistillResult,
)
from pixie.device.distill.plans import date_words, day_start_us
from pixie.device.notebook.clear import (
    Distilled,
)
from pixie.device.store.notes import (
    NoteKind,
)

if TYPE_CHECKING:
    pass
from pixie.device.distill.sources import Loaded
from pixie.device.distill.stored import MAX_PAGE_TAGS, fit_title, iso_day, stored_note

# -- the week of a journal -----------------------------------------------------------
#
# Besides its own dated digest, every journal entry adds a line to the note of
# its ISO week ("Journal, week of Monday 2 March 2026"): what each day of the
# week was about, in one place, for questions about a week or a weekend. A
# line is keyed by its day and a short reference to its entry, so an entry
# distilled again replaces its own line and two entries of one day keep one
# line each; lines are in date order, whatever order the entries came in.

MAX_WEEK_LINE = 240
MAX_WEEK_BODY = 16_000
"""Characters of a week note's body. It is an overview (each entry has a note
of its own); a week of a great many entries shortens every line alike, then
leaves out its earliest ones, counted, rather than outgrow what the Notebook
takes (which would refuse the entry's notes altogether)."""
MIN_WEEK_GIST = 40
_WEEK_LINE = re.compile(r"^- [A-Z][a-z]+ (\d{4}-\d{2}-\d{2}): .*\[([0-9a-f]{6})\]$")
_WEEK_LEFT_OUT = re.compile(r"^- (\d+) earlier entr(?:y|ies) not listed$")
_WEEK_GIST = re.compile(r"^(- [A-Z][a-z]+ \d{4}-\d{2}-\d{2}: )(.*)( \[[0-9a-f]{6}\])$")


def _fit_week(lines: list[str], left_out: int, room: int) -> tuple[list[str], int]:
    """The week's lines within ``room`` characters: each gist cut to an even
    share (at least `MIN_WEEK_GIST`), then the earliest lines left out and
    counted, if need be."""

    def size(kept: list[str]) -> int:
        return sum(len(line) + 1 for line in kept) + 40  # and the line that counts

    if size(lines) <= room:
        return lines, left_out
    share = max(MIN_WEEK_GIST, room // max(1, len(lines)) - 30)
    cut = []
    for line in lines:
        match = _WEEK_GIST.match(line)
        if match is not None and len(match.group(2)) > share:
            gist = match.group(2)[: share - 1].rstrip() + "…"
            cut.append(match.group(1) + gist + match.group(3))
        else:
            cut.append(line)
    while cut and size(cut) > room:
        cut.pop(0)
        left_out += 1
    return cut, left_out


def merge_week(session: Session, loaded: Loaded, result: DistillResult) -> Distilled:
    """The week note of a journal entry's week, with the entry's line in it."""
    newest = max(at for _, _, at, _, _, _ in loaded.rows)
    day = iso_day(newest)
    date = dt.date.fromisoformat(day)
    year, week, _ = date.isocalendar()
    monday = date - dt.timedelta(days=date.weekday())
    identity = f"journal-week:{year}-W{week:02d}"
    ref = hashlib.sha256(loaded.source.key.encode()).hexdigest()[:6]
    gist = result.summary.split(". ", 1)[1] if result.summary.startswith("Journal, ") else ""
    gist = " ".join((gist or result.summary).split())
    if len(gist) > MAX_WEEK_LINE:
        gist = gist[: MAX_WEEK_LINE - 1].rstrip() + "…"
    weekday = date_words(day)[0]
    lines = {(day, ref): f"- {weekday} {day}: {gist} [{ref}]"}
    left_out = 0  # earlier entries of the week its note no longer lists
    row = stored_note(session, NoteKind.CONVERSATION_DIGEST, identity)
    if row is not None and row.body is not None and not row.user_edited:
        for line in row.body.splitlines():
            match = _WEEK_LINE.match(line)
            if match is not None:
                lines.setdefault((match.group(1), match.group(2)), line)
            elif (more := _WEEK_LEFT_OUT.match(line)) is not None:
                left_out = int(more.group(1))
    days = sorted({d for d, _ in lines})
    named = [date_words(d) for d in days]
    tags = ["journal", "week", f"{year}-w{week:02d}"]
    tags += [weekday.casefold() for weekday, _, _ in named]
    tags += [month.casefold() for _, month, _ in named]
    if any(w in ("Saturday", "Sunday") for w, _, _ in named):
        tags.append("weekend")
    entries = len(lines) + left_out
    head = f"Journal, week of {date_words(monday.isoformat())[2]}: {entries} " + (
        "entry." if entries == 1 else "entries."
    )
    room = MAX_WEEK_BODY - len(head) - 1
    listed, left_out = _fit_week([lines[k] for k in sorted(lines)], left_out, room)
    if left_out:
        noun = "entry" if left_out == 1 else "entries"
        listed = [f"- {left_out} earlier {noun} not listed", *listed]
    body = "\n".join([head, *listed])
    return Distilled(
        kind=NoteKind.CONVERSATION_DIGEST,
        identity_key=identity,
        title=fit_title(f"Journal, week of {date_words(monday.isoformat())[2]}"),
        body=body,
        tags=tuple(dict.fromkeys(tags))[:MAX_PAGE_TAGS],
        source_ref=identity,
        about_date=day_start_us(days[-1]),
    )
