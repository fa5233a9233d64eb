"""The Markdown and plain-text journal importer: a vault of daily notes, a
single journal with dated sections, dates from front matter, headings, file
names and folders, stable ids, sniffing, bad input."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest import load as loading
from pixie.device.ingest.base import ImportOptions, Item, Skipped, stable_id
from pixie.device.ingest.journal import IMPORTER, MAX_FILE_BYTES
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import MAX_REF_CHARS, EventKind, NewEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "journal"
VAULT = FIXTURES / "vault"
NEW_YORK = ZoneInfo("America/New_York")  # EST (UTC-5) until 9 March 2025, EDT (UTC-4) after
TOKYO = ZoneInfo("Asia/Tokyo")  # UTC+9, no summer time
T = TypeVar("T")

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")


def unblocked(call: Callable[[], T], *fifos: Path) -> T:
    """``call``'s result, failing (rather than hanging) if it blocks on one of
    ``fifos``: after five seconds a writer is opened on each to free it."""
    answer: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # handed to the test thread below
            failure.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=5)
    if worker.is_alive():
        for fifo in fifos:
            with suppress(OSError):  # ENXIO: nobody reads this one
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail("blocked on a named pipe")
    if failure:
        raise failure[0]
    return answer[0]


def utc(*fields: int) -> int:
    return int(dt.datetime(*fields, tzinfo=dt.UTC).timestamp()) * 1_000_000


def read(path: Path, tz: dt.tzinfo = NEW_YORK) -> list[Item]:
    return list(IMPORTER.read(path, ImportOptions(tz=tz), None))


def events(items: list[Item]) -> list[NewEvent]:
    return [i for i in items if isinstance(i, NewEvent)]


def ids(path: Path) -> set[str | None]:
    return {e.id for e in events(read(path))}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def only_event(path: Path, tz: dt.tzinfo = NEW_YORK) -> NewEvent:
    items = read(path, tz)
    assert len(items) == 1 and isinstance(items[0], NewEvent), items
    return items[0]


# --- the fixtures ---------------------------------------------------------------


NEW_YEAR = "New Year's Eve at Tom and Ana's. Fireworks from the roof at midnight; the"


def test_vault_yields_one_entry_a_note_in_sorted_order() -> None:
    items = read(VAULT)
    summary = [
        (i.at, i.source, i.text.split("\n")[0]) if isinstance(i, NewEvent) else i for i in items
    ]
    assert summary == [
        # 2024/12/31.md, dated by its folders: noon EST is 17:00 UTC.
        (utc(2024, 12, 31, 17), "journal:2024/12/31.md", NEW_YEAR),
        # created: 2025-03-12T21:05:00+01:00 carries its own offset.
        (utc(2025, 3, 12, 20, 5), "journal:2025-03-12 Wednesday.md", "# Late train"),
        # Named by its date: noon EDT is 16:00 UTC.
        (utc(2025, 3, 14, 16), "journal:2025-03-14.md", "# Friday"),
        Skipped("empty entry"),  # 2025-03-15.md
        Skipped("entry without a date"),  # Ideas.md
        # Front matter date: 2025-03-10, a day after the switch to EDT.
        (utc(2025, 3, 10, 16), "journal:Projects/Garden plan.md", "# Garden plan"),
    ]  # fmt: skip
    every = events(items)
    assert {e.kind for e in every} == {EventKind.JOURNAL}
    assert {e.from_me for e in every} == {True}
    assert {e.contact for e in every} == {None}
    assert {e.thread for e in every} == {None}
    # Nothing from .obsidian/, .trash/ or attachments/.
    assert not any("Obsidian" in e.text or "trash" in e.text for e in every)


def test_front_matter_is_removed_its_title_leads_and_its_tags_close() -> None:
    garden = next(e for e in events(read(VAULT)) if e.source == "journal:Projects/Garden plan.md")
    assert garden.text == (
        "# Garden plan\n\n"
        "Measured the back bed: 3.2 m by 1.1 m. Tomatoes along the fence, beans in the\n"
        "middle, and the herbs where the sun lasts longest.\n\n"
        "## To buy\n- compost (4 bags)\n- bean poles\n\n"
        "Tags: garden, spring"
    )


def test_byte_order_mark_and_crlf_line_ends() -> None:
    late = only_event(VAULT / "2025-03-12 Wednesday.md")
    assert late.text == (
        "# Late train\n\n"
        "The 20:40 was cancelled again, so I waited an hour in Utrecht.\n"
        "Wrote the conference abstract on my phone.\n\n"
        "Tags: commute, work"
    )
    assert late.at == utc(2025, 3, 12, 20, 5)
    # Read alone, a file is named by its own name.
    assert late.source == "journal:2025-03-12 Wednesday.md"


def test_dates_without_a_time_are_noon_in_the_import_zone() -> None:
    by_source = {e.source: e.at for e in events(read(VAULT, tz=TOKYO))}
    assert by_source == {
        "journal:2024/12/31.md": utc(2024, 12, 31, 3),  # noon in Tokyo is 03:00 UTC
        "journal:2025-03-12 Wednesday.md": utc(2025, 3, 12, 20, 5),  # its offset wins
        "journal:2025-03-14.md": utc(2025, 3, 14, 3),
        "journal:Projects/Garden plan.md": utc(2025, 3, 10, 3),
    }


def test_journal_with_dated_headings_in_several_styles() -> None:
    items = read(FIXTURES / "journal.md")
    assert [i if isinstance(i, Skipped) else (i.at, i.source) for i in items] == [
        # "# Journal" and its line come before any date, and the file has none.
        Skipped("undated text before the first dated heading"),
        (utc(2025, 3, 14, 16), "journal:journal.md#2025-03-14"),
        (utc(2025, 3, 15, 16), "journal:journal.md#2025-03-15"),
        # 9:30 pm EDT on the 16th is 01:30 UTC on the 17th.
        (utc(2025, 3, 17, 1, 30), "journal:journal.md#2025-03-16T21:30"),
        Skipped("empty entry"),  # "### 17.03.2025" with nothing under it
    ]
    first, second, third = events(items)
    # A heading inside fenced code and an undated subheading stay in the section.
    assert first.text == (
        "## 2025-03-14\n\nLong day. Finished the tax forms and posted them.\n\n"
        "```sh\n# 2025-01-01 is not a heading inside a code block\n"
        "tar czf taxes-2024.tgz taxes/\n```\n\n### Later\n\nCalled Mum; her knee is better."
    )
    assert second.text == (
        "# Saturday, 15 March 2025\n\nFarmers market with Sam. Bought far too many leeks."
    )
    assert third.text == "## March 16, 2025 9:30 pm\n\nQuiet Sunday. Finished the jigsaw."


def test_plain_text_entry_dated_by_its_name() -> None:
    entry = only_event(FIXTURES / "2025-01-02.txt")
    assert entry.at == utc(2025, 1, 2, 17)
    assert entry.source == "journal:2025-01-02.txt"
    assert entry.text == (
        "Back at work after the holidays. Inbox at 312 unread; answered the urgent\n"
        "ones and archived the rest."
    )


def test_progress_is_bytes_read_over_the_eligible_files() -> None:
    calls: list[tuple[int, int]] = []
    list(
        IMPORTER.read(
            VAULT, ImportOptions(tz=NEW_YORK), lambda done, total: calls.append((done, total))
        )
    )
    eligible = [
        "2024/12/31.md",
        "2025-03-12 Wednesday.md",
        "2025-03-14.md",
        "2025-03-15.md",
        "Ideas.md",
        "Projects/Garden plan.md",
    ]
    size = sum((VAULT / name).stat().st_size for name in eligible)
    assert calls[-1] == (size, size)


# --- stable ids -----------------------------------------------------------------


def test_ids_are_stable_and_derive_from_path_section_and_content() -> None:
    first, second = read(FIXTURES / "journal.md"), read(FIXTURES / "journal.md")
    assert [e.id for e in events(first)] == [e.id for e in events(second)]
    entry = events(first)[2]
    digest = hashlib.sha256(entry.text.encode()).hexdigest()
    assert entry.id == stable_id(
        "journal", "journal.md", "2025-03-16T21:30", digest, at_us=entry.at
    )
    vault = events(read(VAULT))
    assert len({e.id for e in vault}) == len(vault) == 4
    assert [e.id for e in vault] == [e.id for e in events(read(VAULT))]


def test_a_grown_folder_adds_only_its_new_files(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    before = ids(vault)
    write(vault / "Daily" / "2025-03-16.md", "Slept in. Pancakes.\n")
    after = ids(vault)
    assert before < after and len(after - before) == 1


def test_an_edited_entry_is_a_new_event(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    before = {e.source: e.id for e in events(read(vault))}
    note = vault / "2025-03-14.md"
    note.write_text(note.read_text() + "\nAdded later: the dentist moved to the 21st.\n")
    after = {e.source: e.id for e in events(read(vault))}
    changed = {source for source in before if before[source] != after[source]}
    assert changed == {"journal:2025-03-14.md"}


def test_line_ends_alone_do_not_change_an_id(tmp_path: Path) -> None:
    unix = write(tmp_path / "a" / "2025-03-14.md", "one\ntwo\n")
    windows = tmp_path / "b" / "2025-03-14.md"
    windows.parent.mkdir()
    windows.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    assert only_event(unix).id == only_event(windows).id


# --- where the date comes from --------------------------------------------------


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("date: 2025-03-14", utc(2025, 3, 14, 16)),
        ("date: '2025-03-14 21:05'", utc(2025, 3, 15, 1, 5)),
        ('date: "2025-03-14T21:05:00+01:00"', utc(2025, 3, 14, 20, 5)),
        ("date: 2025-03-14T21:05:00Z", utc(2025, 3, 14, 21, 5)),
        ("date: 2025-03-14 # the day I started", utc(2025, 3, 14, 16)),
        ("created: 2025-03-14 08:30", utc(2025, 3, 14, 12, 30)),
        ("created: 2025-01-01\ndate: 2025-03-14", utc(2025, 3, 14, 16)),
        # Not date-shaped (an unfilled template): the file name decides.
        ("date: '{{date}}'", utc(2025, 1, 2, 17)),
    ],
)
def test_front_matter_dates(tmp_path: Path, front: str, expected: int) -> None:
    note = write(tmp_path / "Journal 2025-01-02.md", f"---\n{front}\ntitle: Note\n---\nA line.\n")
    entry = only_event(note)
    assert entry.at == expected
    assert entry.text == "# Note\n\nA line."


def test_front_matter_beats_heading_and_heading_beats_name(tmp_path: Path) -> None:
    both = write(tmp_path / "2025-01-01.md", "---\ndate: 2025-02-02\n---\n# 2025-03-03\n\nText.\n")
    assert only_event(both).at == utc(2025, 2, 2, 17)
    heading = write(tmp_path / "2025-01-04.md", "# 2025-03-03\n\nText.\n")
    entry = only_event(heading)
    assert entry.at == utc(2025, 3, 3, 17)
    # One dated heading makes one entry of the whole file, heading kept.
    assert entry.source == "journal:2025-01-04.md"
    assert entry.text == "# 2025-03-03\n\nText."


@pytest.mark.parametrize(
    ("front", "body", "text"),
    [
        # The title is not repeated when the text already opens with it.
        ("title: Week 11", "# Week 11\n\nBusy.", "# Week 11\n\nBusy."),
        ("title: 'Week 11'", "Week 11\nBusy.", "Week 11\nBusy."),
        ("title: Week 11", "## Monday\nBusy.", "# Week 11\n\n## Monday\nBusy."),
        ("tags: journal, daily", "Busy.", "Busy.\n\nTags: journal, daily"),
        ("tags: [journal, 'daily']", "Busy.", "Busy.\n\nTags: journal, daily"),
        ("tags: '#journal #daily'", "Busy.", "Busy.\n\nTags: journal, daily"),
        ("tags:\n- journal\n- journal\nmood: fine", "Busy.", "Busy.\n\nTags: journal"),
        ("aliases: [x]\nnested:\n  title: not this one", "Busy.", "Busy."),
    ],
)
def test_front_matter_titles_and_tags(tmp_path: Path, front: str, body: str, text: str) -> None:
    note = write(tmp_path / "2025-03-14.md", f"---\n{front}\n---\n{body}\n")
    assert only_event(note).text == text


def test_a_leading_rule_is_not_front_matter(tmp_path: Path) -> None:
    note = write(tmp_path / "2025-03-14.md", "---\nA thought between rules.\n---\nMore.\n")
    assert only_event(note).text == "---\nA thought between rules.\n---\nMore."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("2025-03-14.md", utc(2025, 3, 14, 16)),
        ("2025-03-14 Friday.md", utc(2025, 3, 14, 16)),
        ("20250314.md", utc(2025, 3, 14, 16)),
        ("Journal 2025-03-14.txt", utc(2025, 3, 14, 16)),
        ("2025_03_14.markdown", utc(2025, 3, 14, 16)),
        ("14.03.2025.md", utc(2025, 3, 14, 16)),
        ("March 14, 2025.md", utc(2025, 3, 14, 16)),
        ("2025/03/14.md", utc(2025, 3, 14, 16)),
        ("2025/3/4 Tuesday.md", utc(2025, 3, 4, 17)),
        ("2025/2025-03-14.md", utc(2025, 3, 14, 16)),
    ],
)
def test_dates_from_file_names_and_folders(tmp_path: Path, name: str, expected: int) -> None:
    write(tmp_path / "notes" / name, "Something happened.\n")
    entry = only_event(tmp_path / "notes")
    assert entry.at == expected
    assert entry.source == f"journal:{name}"


@pytest.mark.parametrize(
    "name", ["Ideas.md", "12345678.md", "2025-13-45.md", "03/14.md", "v1.2.3.txt"]
)
def test_a_note_dated_nowhere_is_skipped_whatever_its_mtime(tmp_path: Path, name: str) -> None:
    note = write(tmp_path / "notes" / name, "Undated thoughts.\n")
    os.utime(note, (1_741_950_000, 1_741_950_000))
    assert read(tmp_path / "notes") == [Skipped("entry without a date")]


@pytest.mark.parametrize(
    ("heading", "expected", "key"),
    [
        ("## 2025-03-14", utc(2025, 3, 14, 16), "2025-03-14"),
        ("# Friday, 14 March 2025", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## March 14, 2025", utc(2025, 3, 14, 16), "2025-03-14"),
        ("### 14.03.2025", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## Fri 14th Mar 2025", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## 2025/03/14 21:05 - dinner at Ana's", utc(2025, 3, 15, 1, 5), "2025-03-14T21:05"),
        ("## 2025-03-14T07:15", utc(2025, 3, 14, 11, 15), "2025-03-14T07:15"),
        ("## Sept. 14, 2025, 9:05 am", utc(2025, 9, 14, 13, 5), "2025-09-14T09:05"),
        ("## Friday 2025-03-14", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## [[2025-03-14]]", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## __2025-03-14__ notes", utc(2025, 3, 14, 16), "2025-03-14"),
        ("## \U0001f4c5 **14 March 2025**", utc(2025, 3, 14, 16), "2025-03-14"),
        # No time, so the date alone: noon.
        ("## 2025-03-14 25:00 rehearsal", utc(2025, 3, 14, 16), "2025-03-14"),
    ],
)
def test_dated_heading_styles(tmp_path: Path, heading: str, expected: int, key: str) -> None:
    text = f"# 2025-01-01\n\nFirst.\n\n{heading}\n\nSecond.\n"
    items = read(write(tmp_path / "log.md", text))
    assert [(e.at, e.source) for e in events(items)] == [
        (utc(2025, 1, 1, 17), "journal:log.md#2025-01-01"),
        (expected, f"journal:log.md#{key}"),
    ]
    assert events(items)[1].text == f"{heading}\n\nSecond."


@pytest.mark.parametrize(
    "heading", ["## 2025-02-30", "## 1.15.2024 release", "## March 2025", "## 2025-03-14abc"]
)
def test_headings_that_are_not_dates_stay_in_their_section(tmp_path: Path, heading: str) -> None:
    text = f"# 2025-01-01\n\nFirst.\n\n{heading}\n\nStill the first.\n\n# 2025-01-02\n\nSecond.\n"
    first, second = events(read(write(tmp_path / "log.md", text)))
    assert first.text == f"# 2025-01-01\n\nFirst.\n\n{heading}\n\nStill the first."
    assert second.at == utc(2025, 1, 2, 17)


def test_text_before_the_first_dated_heading_takes_the_file_date(tmp_path: Path) -> None:
    text = (
        "---\ntitle: Week 11\ntags: [work]\n---\nA busy week.\n\n"
        "## 2025-03-14\n\nFriday.\n\n## 2025-03-15\nSaturday.\n"
    )
    items = read(write(tmp_path / "2025-03-10.md", text))
    assert [(e.at, e.source, e.text) for e in events(items)] == [
        (utc(2025, 3, 10, 16), "journal:2025-03-10.md", "# Week 11\n\nA busy week.\n\nTags: work"),
        (utc(2025, 3, 14, 16), "journal:2025-03-10.md#2025-03-14", FRIDAY),
        (utc(2025, 3, 15, 16), "journal:2025-03-10.md#2025-03-15", SATURDAY),
    ]


FRIDAY = "## 2025-03-14\n\nFriday.\n\nTags: work"
SATURDAY = "## 2025-03-15\nSaturday.\n\nTags: work"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n  \n\t\n",
        "\ufeff",
        "---\ntitle: Nothing yet\ndate: 2025-03-14\n---\n\n",
        "## 2025-03-14\n\n",
    ],
)
def test_empty_entries_are_skipped(tmp_path: Path, text: str) -> None:
    assert read(write(tmp_path / "2025-03-14.md", text)) == [Skipped("empty entry")]


def test_a_very_long_path_gives_a_bounded_source(tmp_path: Path) -> None:
    deep = tmp_path / "vault" / ("a" * 90) / ("b" * 90) / ("c" * 90)
    write(deep / "2025-03-14 the long way round.md", "Deep.\n")
    source = only_event(tmp_path / "vault").source
    assert source is not None and len(source) <= MAX_REF_CHARS
    assert source.startswith("journal:") and source.endswith("/2025-03-14 the long way round.md")


# --- what is read and what is not -----------------------------------------------


def test_symbolic_links_are_not_followed(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "2025-03-14.md", "Not in the vault.\n")
    vault = tmp_path / "vault"
    write(vault / "2025-03-15.md", "In the vault.\n")
    (vault / "linked.md").symlink_to(outside)
    (vault / "linked-folder").symlink_to(outside.parent, target_is_directory=True)
    (vault / "loop").symlink_to(vault, target_is_directory=True)
    assert [e.text for e in events(read(vault))] == ["In the vault."]


@needs_fifo
def test_a_pipe_in_the_folder_is_passed_over(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "2025-03-15.md", "In the vault.\n")
    pipe = vault / "2025-03-16.md"
    os.mkfifo(pipe)
    assert [e.text for e in events(unblocked(lambda: read(vault), pipe))] == ["In the vault."]
    assert unblocked(lambda: IMPORTER.sniff(vault), pipe)


def test_folders_deeper_than_the_interpreter_stack(tmp_path: Path) -> None:
    top = deep = tmp_path / "vault"
    top.mkdir()
    levels = sys.getrecursionlimit() + 100
    try:
        for _ in range(levels):  # one at a time: pathlib's own mkdir recurses
            deep = deep / "d"
            deep.mkdir()
        (deep / "2025-03-14.md").write_text("At the bottom.\n")
        entry = only_event(top)
        assert entry.text == "At the bottom."
        assert entry.source is not None and entry.source.endswith("d/d/2025-03-14.md")
    finally:
        # Emptied from the bottom up, since removing a tree this deep recurses too.
        (deep / "2025-03-14.md").unlink(missing_ok=True)
        while deep != tmp_path:
            with suppress(FileNotFoundError):
                deep.rmdir()
            deep = deep.parent


# --- sniffing -------------------------------------------------------------------


def test_sniff_claims_folders_of_notes_and_markdown_files(tmp_path: Path) -> None:
    assert IMPORTER.sniff(VAULT)
    assert IMPORTER.sniff(FIXTURES)
    assert IMPORTER.sniff(FIXTURES / "journal.md")
    assert IMPORTER.sniff(write(tmp_path / "plain.markdown", "no date at all\n"))
    assert IMPORTER.sniff(write(tmp_path / "deep" / "2025" / "03" / "14.md", "x\n").parents[2])
    assert IMPORTER.sniff(write(tmp_path / "texts" / "notes.txt", "x\n").parent)


def test_sniff_claims_text_files_only_with_front_matter_or_a_dated_heading(tmp_path: Path) -> None:
    assert not IMPORTER.sniff(FIXTURES / "2025-01-02.txt")
    assert IMPORTER.sniff(write(tmp_path / "a.txt", "---\ndate: 2025-03-14\n---\nText.\n"))
    assert IMPORTER.sniff(write(tmp_path / "b.txt", "\ufeff\n## March 14, 2025\nText.\n"))
    chat = "14/03/2025, 21:05 - Priya: are we still on for Saturday?\n"
    assert not IMPORTER.sniff(write(tmp_path / "chat.txt", chat))
    assert not IMPORTER.sniff(write(tmp_path / "c.txt", "---\nno keys here\n---\n"))
    assert not IMPORTER.sniff(write(tmp_path / "d.txt", "# Shopping\n- milk\n"))
    unclosed = "---\n" + "key: value\n" * 1000
    assert not IMPORTER.sniff(write(tmp_path / "e.txt", unclosed))


def test_sniff_declines_the_rest(tmp_path: Path) -> None:
    assert not IMPORTER.sniff(tmp_path / "missing")
    assert not IMPORTER.sniff(write(tmp_path / "result.json", "{}"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not IMPORTER.sniff(empty)
    hidden = tmp_path / "hidden"
    write(hidden / ".obsidian" / "workspace.md", "x\n")
    write(hidden / "attachments" / "photo.png", "x")
    assert not IMPORTER.sniff(hidden)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "note.md").symlink_to(FIXTURES / "journal.md")
    assert not IMPORTER.sniff(linked)
    too_deep = tmp_path / "too_deep"
    write(too_deep / "a" / "b" / "c" / "2025-03-14.md", "x\n")
    assert not IMPORTER.sniff(too_deep)


@needs_fifo
def test_sniff_never_opens_a_pipe(tmp_path: Path) -> None:
    pipe, text = tmp_path / "journal.md", tmp_path / "notes.txt"
    os.mkfifo(pipe)
    os.mkfifo(text)
    assert not unblocked(lambda: IMPORTER.sniff(pipe), pipe)
    assert not unblocked(lambda: IMPORTER.sniff(text), text)
    # A folder holding nothing but pipes named like notes.
    assert not unblocked(lambda: IMPORTER.sniff(tmp_path), pipe, text)


# --- bad input ------------------------------------------------------------------


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "2025-03-14.md", "Fine.\n")
    bad = vault / "Daily" / "2025-03-15.md"
    bad.parent.mkdir()
    bad.write_bytes("first\nsecond\ncaf\u00e9\n".encode("latin-1"))
    with pytest.raises(BadInput, match=r"^Daily/2025-03-15\.md, line 3: not UTF-8 text$"):
        read(vault)


def test_an_impossible_front_matter_date_is_named_with_its_line(tmp_path: Path) -> None:
    note = write(tmp_path / "note.md", "---\ntitle: x\ndate: 2025-02-30\n---\nText.\n")
    with pytest.raises(BadInput, match=r"^note\.md, line 3: date '2025-02-30' is not a date$"):
        read(note)


def test_a_file_over_the_limit_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "2025-03-14.md", "Fine.\n")
    huge = vault / "z" / "huge.md"
    huge.parent.mkdir()
    with huge.open("wb") as stream:
        stream.truncate(MAX_FILE_BYTES + 1)
    entries = IMPORTER.read(vault, ImportOptions(tz=NEW_YORK), None)
    with pytest.raises(BadInput, match=r"^z/huge\.md is larger than 16 MiB$"):
        next(entries)
    with pytest.raises(BadInput, match=r"^huge\.md is larger than 16 MiB$"):
        read(huge)


def test_a_folder_without_notes(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    write(folder / "cat.jpg", "x")
    write(folder / ".obsidian" / "2025-03-14.md", "x\n")
    with pytest.raises(BadInput, match=r"^no \.md or \.txt files in photos$"):
        read(folder)


def test_a_path_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"^cannot read missing: "):
        read(tmp_path / "missing")


@needs_fifo
def test_a_pipe_is_neither_folder_nor_file(tmp_path: Path) -> None:
    pipe = tmp_path / "journal.md"
    os.mkfifo(pipe)
    with pytest.raises(BadInput, match=r"^journal\.md is neither a folder nor a file$"):
        unblocked(lambda: read(pipe), pipe)


# --- into the log ---------------------------------------------------------------


def test_the_fixtures_load_and_a_second_import_adds_nothing(node: Node) -> None:
    options = ImportOptions(tz=NEW_YORK)
    for path in (VAULT, FIXTURES / "journal.md", FIXTURES / "2025-01-02.txt"):
        first = loading.load(node.log, IMPORTER.read(path, options, None))
        again = loading.load(node.log, IMPORTER.read(path, options, None))
        assert first.imported > 0
        assert (again.imported, again.already_present) == (0, first.imported)
        assert again.skipped == first.skipped
    assert node.log.count() == 4 + 3 + 1


def test_names_and_units() -> None:
    assert IMPORTER.name == "journal"
    assert IMPORTER.units == ("journal entry", "journal entries")
