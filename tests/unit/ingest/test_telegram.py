"""The Telegram Desktop importer: single-chat and full exports, entity texts,
service and media messages, who is me, stable ids, sniffing, bad input."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest.base import ImportOptions, Item, Skipped, stable_id
from pixie.device.ingest.telegram import IMPORTER
from pixie.device.store.contacts import ContactCard
from pixie.device.store.memlog import EventKind, NewEvent
from tests.support.sniffing import sniff_without_blocking

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "telegram"
NEW_YORK = ZoneInfo("America/New_York")


def utc(*fields: int) -> int:
    return int(dt.datetime(*fields, tzinfo=dt.UTC).timestamp()) * 1_000_000


def read(path: Path, me: tuple[str, ...] = (), tz: dt.tzinfo = NEW_YORK) -> list[Item]:
    return list(IMPORTER.read(path, ImportOptions(me=me, tz=tz), None))


def events(items: list[Item]) -> list[NewEvent]:
    return [i for i in items if isinstance(i, NewEvent)]


def summary(items: list[Item]) -> list[tuple[int, str, str | None, bool | None]]:
    return [(e.at, e.text, e.contact, e.from_me) for e in events(items)]


def test_personal_chat_with_media_and_no_text() -> None:
    items = read(FIXTURES / "personal_chat.json")
    assert items[0] == ContactCard(name="Priya Nair")
    # Times come from date_unixtime, whatever the zone.
    assert summary(items) == [
        (utc(2025, 3, 14, 21, 5, 9), "are we still on for Saturday?", "Priya Nair", False),
        # Not sent by the chat's peer, so sent by the user.
        (utc(2025, 3, 14, 21, 6), "yes, 8pm", "Priya Nair", True),
        (utc(2025, 3, 14, 21, 7, 30), "[photo]", "Priya Nair", False),
        (utc(2025, 3, 14, 21, 8), "[sticker 😀]", "Priya Nair", False),
        (utc(2025, 3, 14, 21, 9), "[file: menu.pdf]", "Priya Nair", True),
    ]
    every = events(items)
    assert {e.thread for e in every} == {"telegram:4815162342"}
    assert {e.kind for e in every} == {EventKind.MESSAGE}
    assert {e.source for e in every} == {"telegram"}
    assert every[0].id == stable_id("telegram", 4815162342, 101, at_us=every[0].at)


def test_group_with_service_messages_and_entity_texts() -> None:
    items = read(FIXTURES / "group_chat.json", me=("Sam Okafor",))
    assert [i for i in items if isinstance(i, Skipped)] == [Skipped("service message")] * 3
    assert [i for i in items if isinstance(i, ContactCard)] == [
        ContactCard(name="Priya Nair"),
        ContactCard(name="Ana Costa"),
    ]
    assert summary(items) == [
        (
            utc(2025, 3, 1, 10, 2),
            "Flights: https://example.com/tap1234\nleaves 07:40 @ana_costa",
            "Priya Nair",
            False,
        ),
        (
            utc(2025, 3, 1, 10, 3),
            "the guidebook (https://example.com/guide) is mine",
            None,
            True,
        ),
        (utc(2025, 3, 1, 10, 4), "great, see you there", "Ana Costa", False),
    ]
    assert {e.thread for e in events(items)} == {"telegram:1987654321"}


def test_group_sender_named_by_id_is_me() -> None:
    items = read(FIXTURES / "group_chat.json", me=("user1001",))
    assert [e.from_me for e in events(items)] == [False, True, False]


def test_group_without_me_names_every_sender() -> None:
    items = read(FIXTURES / "group_chat.json")
    assert [e.contact for e in events(items)] == ["Priya Nair", "Sam Okafor", "Ana Costa"]
    assert not any(e.from_me for e in events(items))


def test_full_export_knows_me_from_personal_information() -> None:
    items = read(FIXTURES / "result.json")
    assert summary(items) == [
        (utc(2025, 3, 20, 8, 0), "morning!", "Priya Nair", False),
        (utc(2025, 3, 20, 8, 1), "morning :)", "Priya Nair", True),
        (utc(2025, 3, 21, 19, 30), "Next book: Piranesi", "Jonas Weber", False),
        (utc(2025, 3, 21, 19, 31), "already reading it", None, True),
    ]
    assert [e.thread for e in events(items)] == ["telegram:4815162342"] * 2 + ["telegram:555"] * 2
    assert items[-1] == Skipped("service message")


def test_ids_are_stable_and_distinct_per_chat() -> None:
    first = [e.id for e in events(read(FIXTURES / "result.json"))]
    assert first == [e.id for e in events(read(FIXTURES / "result.json"))]
    assert len(set(first)) == len(first)


def test_grown_export_keeps_the_old_ids(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "personal_chat.json").read_text())
    before = [e.id for e in events(read(FIXTURES / "personal_chat.json"))]
    data["messages"].append(
        {
            "id": 106,
            "type": "message",
            "date": "2025-03-15T09:00:00",
            "date_unixtime": "1742029200",
            "from": "Priya Nair",
            "from_id": "user4815162342",
            "text": "thanks!",
        }
    )
    grown = tmp_path / "result.json"
    grown.write_text(json.dumps(data))
    after = [e.id for e in events(read(grown))]
    assert after[: len(before)] == before and len(after) == len(before) + 1


def test_date_without_unixtime_is_read_in_the_zone(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    chat = {
        "name": "Priya Nair",
        "type": "personal_chat",
        "id": 42,
        "messages": [{"id": 1, "type": "message", "date": "2025-07-01T12:00:00", "text": "hi"}],
    }
    path.write_text(json.dumps(chat))
    # New York is UTC-4 in July.
    assert [e.at for e in events(read(path))] == [utc(2025, 7, 1, 16, 0)]


def test_progress_reaches_the_end() -> None:
    heard: list[tuple[int, int]] = []
    options = ImportOptions(tz=NEW_YORK)
    path = FIXTURES / "result.json"
    list(IMPORTER.read(path, options, lambda done, total: heard.append((done, total))))
    assert heard and heard[-1][0] == heard[-1][1] == path.stat().st_size


def test_sniff() -> None:
    for path in FIXTURES.iterdir():
        assert IMPORTER.sniff(path), path.name


def test_sniff_refuses_other_json(tmp_path: Path) -> None:
    other = tmp_path / "export.json"
    other.write_text(json.dumps({"messages": [{"id": 1, "text": "hi"}]}))
    assert not IMPORTER.sniff(other)
    text = tmp_path / "result.txt"
    text.write_text("{}")
    assert not IMPORTER.sniff(text)
    assert not IMPORTER.sniff(tmp_path / "missing.json")
    folder = tmp_path / "result.json"
    folder.mkdir()
    assert not IMPORTER.sniff(folder)


def test_sniff_does_not_open_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    # a sniff that opened it would block: asked with a deadline
    assert sniff_without_blocking(IMPORTER, fifo) is False


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{\n  "name": "Priya",\n  "messages": [\n    {"id": 1,,}\n  ]\n}\n')
    with pytest.raises(BadInput, match=r"result\.json, line 4, column 14: not valid JSON"):
        read(path)


def test_json_that_is_no_telegram_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    for data in ([1, 2], {"hello": "world"}, {"chats": {"list": "x"}}, {"messages": []}):
        path.write_text(json.dumps(data))
        with pytest.raises(BadInput, match=r"result\.json: not a Telegram export"):
            read(path)


def test_a_message_without_a_date_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    chat = {"name": "P", "type": "personal_chat", "id": 42, "messages": [{"id": 7, "text": "x"}]}
    path.write_text(json.dumps(chat))
    with pytest.raises(BadInput, match=r"result\.json, chat 42, message 7: no date"):
        read(path)


def test_non_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(b'{"name": "P",\n"messages": ["caf\xe9"]}')
    with pytest.raises(BadInput, match=r"result\.json, line 2: not UTF-8"):
        read(path)


def big_export(count: int) -> dict[str, object]:
    """A full export whose messages span many read chunks."""
    messages = [
        {
            "id": n,
            "type": "message",
            "date_unixtime": str(1740823200 + n),
            "from": "Ana Costa" if n % 2 else "Sam Okafor",
            "from_id": "user777" if n % 2 else "user1001",
            "text": [f"message {n} ", {"type": "bold", "text": "é" * (n % 50)}],
        }
        for n in range(1, count + 1)
    ]
    return {
        "personal_information": {"user_id": 1001, "first_name": "Sam", "last_name": "Okafor"},
        "contacts": {"list": [{"first_name": "x", "phone_number": "1" * 12}] * 500},
        "chats": {"about": "", "list": [{"name": "Big", "type": "private_group", "id": 9}]},
        "left_chats": {
            "about": "",
            "list": [
                {"name": "Big", "type": "private_group", "id": 10, "messages": messages},
                {"name": "Empty", "type": "private_group", "id": 11, "messages": []},
            ],
        },
        "other_data": {"nested": [[{"a": [1, 2.5e3, None, True]}]] * 100},
    }


def test_a_large_export_streams_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(big_export(30_000), ensure_ascii=False, indent=1))
    assert path.stat().st_size > 4 * 1024 * 1024
    items = read(path)
    got = events(items)
    assert [int(e.thread.removeprefix("telegram:")) for e in got[:1]] == [10]
    assert [e.text for e in got] == [
        f"message {n} {'é' * (n % 50)}".strip() for n in range(1, 30_001)
    ]
    assert [e.at for e in got] == [(1740823200 + n) * 1_000_000 for n in range(1, 30_001)]
    assert [e.from_me for e in got[:4]] == [False, True, False, True]


def test_errors_deep_in_a_large_export_name_the_right_place(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    text = json.dumps(big_export(20_000), indent=1)
    cut = text.index('"id": 19000,')
    broken = text[:cut] + '"id" 19000,' + text[cut + len('"id": 19000,') :]
    path.write_text(broken)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(broken)
    place = f"line {expected.value.lineno}, column {expected.value.colno}"
    with pytest.raises(BadInput, match=rf"result\.json, {place}: not valid JSON"):
        read(path)


def test_messages_before_the_chat_id_are_held_until_the_id(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    message = {"id": 1, "type": "message", "date_unixtime": "1740823200", "text": "hi"}
    path.write_text(
        json.dumps({"messages": [message], "name": "Ana", "type": "personal_chat", "id": 77})
    )
    assert summary(read(path)) == [(utc(2025, 3, 1, 10, 0), "hi", "Ana", False)]
    assert {e.thread for e in events(read(path))} == {"telegram:77"}


def test_truncated_or_trailing_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    whole = (FIXTURES / "personal_chat.json").read_text()
    path.write_text(whole[: len(whole) // 2])
    with pytest.raises(BadInput, match=r"result\.json, line \d+, column \d+: not valid JSON"):
        read(path)
    path.write_text(whole + "\n{}")
    with pytest.raises(BadInput, match=r"result\.json, line \d+, column 1: not valid JSON"):
        read(path)
    path.write_text("")
    with pytest.raises(BadInput, match=r"result\.json, line 1, column 1: not valid JSON"):
        read(path)


def test_personal_chat_peer_known_by_name_when_the_ids_differ(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    messages = [
        {"id": 1, "type": "message", "date_unixtime": "1740823200", "from": "Ana Costa",
         "from_id": "user5001", "text": "hi"},
        {"id": 2, "type": "message", "date_unixtime": "1740823260", "from": "Sam",
         "from_id": "user1001", "text": "hello"},
    ]  # fmt: skip
    chat = {"name": "Ana Costa", "type": "personal_chat", "id": 100, "messages": messages}
    path.write_text(json.dumps(chat))
    assert [(e.contact, e.from_me) for e in events(read(path))] == [
        ("Ana Costa", False),
        ("Ana Costa", True),
    ]
