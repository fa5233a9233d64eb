"""The mbox importer: threads, people, bodies, charsets, odd messages, stable
ids, sniffing, bad files and bounded memory."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
import tracemalloc
import zoneinfo
from pathlib import Path

import pytest

from pixie.device.errors import BadInput
from pixie.device.ingest import load as loading
from pixie.device.ingest import mbox
from pixie.device.ingest.base import ContactCard, ImportOptions, Item, Skipped, to_us
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import MAX_REF_CHARS, MAX_TEXT_CHARS, EventKind, NewEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "mbox"
ME = ImportOptions(me=("sam@example.org",))
LISBON = zoneinfo.ZoneInfo("Europe/Lisbon")


def at(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> int:
    return to_us(dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC), dt.UTC)


def read(path: Path | str, opts: ImportOptions = ME) -> list[Item]:
    full = path if isinstance(path, Path) else FIXTURES / path
    return list(mbox.IMPORTER.read(full, opts, None))


def events(items: list[Item]) -> list[NewEvent]:
    return [i for i in items if isinstance(i, NewEvent)]


def cards(items: list[Item]) -> list[ContactCard]:
    return [i for i in items if isinstance(i, ContactCard)]


def skips(items: list[Item]) -> list[str]:
    return [i.reason for i in items if isinstance(i, Skipped)]


def body(event: NewEvent) -> str:
    """The text after the subject line."""
    return event.text.split("\n\n", 1)[1] if "\n\n" in event.text else ""


def message(number: int, body_text: str = "Hello.", message_id: str | None = None) -> str:
    ident = f"Message-ID: <{message_id}>\n" if message_id else ""
    return (
        f"From sender@example.com Mon Mar  2 10:{number % 60:02d}:00 2026\n"
        f"{ident}Date: Mon, 2 Mar 2026 10:{number % 60:02d}:00 +0000\n"
        "From: Sender <sender@example.com>\n"
        "To: sam@example.org\n"
        f"Subject: Message {number}\n"
        "\n"
        f"{body_text}\n"
        "\n"
    )


# --- what each fixture yields ------------------------------------------------------------


def test_thunderbird_thread_shares_one_thread_and_knows_who_wrote() -> None:
    items = read("thunderbird-thread.mbox")
    found = events(items)
    assert [e.kind for e in found] == [EventKind.EMAIL] * 3
    root = "email:3f1c2a90-7b1e-4c55-9d0a-1a2b3c4d5e6f@example.com"
    assert [e.thread for e in found] == [root] * 3
    assert [e.from_me for e in found] == [False, True, False]
    # From Alice: Alice; from the user: the first To recipient, Alice again.
    assert [e.contact for e in found] == ["alice@example.com"] * 3
    assert [e.at for e in found] == [
        at(2026, 3, 3, 9, 15),
        at(2026, 3, 3, 11, 2, 5),
        at(2026, 3, 4, 8, 30),
    ]
    assert [e.source for e in found] == [
        "mbox:3f1c2a90-7b1e-4c55-9d0a-1a2b3c4d5e6f@example.com",
        "mbox:9a8b7c6d-0000-4e1f-8a2b-3c4d5e6f7a8b@example.org",
        "mbox:c0ffee00-1111-4222-8333-944455556666@example.com",
    ]
    assert [e.text.split("\n")[0] for e in found] == [
        "Subject: Offsite planning for April",
        "Subject: Re: Offsite planning for April",
        "Subject: Re: Re: Offsite planning for April",
    ]


def test_thunderbird_thread_trims_quotes_attributions_and_signatures() -> None:
    first, reply, answer = events(read("thunderbird-thread.mbox"))
    assert body(first).endswith("Cheers,\nAlice")
    assert "Head of Operations" not in first.text
    assert body(reply) == "The 23rd works for me, the 16th clashes with the board meeting."
    # The German attribution on top and the quotes around the answer are gone,
    # what Alice wrote between them stays.
    assert body(answer) == "Great, the 23rd it is. I will send the invitations today.\n\nAlice"


def test_thunderbird_thread_cards_leave_out_the_user_and_come_first() -> None:
    items = read("thunderbird-thread.mbox")
    assert cards(items) == [
        ContactCard(name="Alice Example", aliases=("alice@example.com",)),
        ContactCard(name="Bob Builder", aliases=("bob.builder@example.net",)),
    ]
    assert isinstance(items[0], ContactCard) and isinstance(items[1], ContactCard)


def test_without_me_nothing_is_from_me_and_the_user_gets_a_card() -> None:
    items = read("thunderbird-thread.mbox", ImportOptions())
    assert [e.from_me for e in events(items)] == [False, False, False]
    assert [e.contact for e in events(items)] == [
        "alice@example.com",
        "sam@example.org",
        "alice@example.com",
    ]
    assert ContactCard(name="Sam Sample", aliases=("sam@example.org",)) in cards(items)


def test_me_by_display_name_marks_the_sent_email() -> None:
    found = events(read("thunderbird-thread.mbox", ImportOptions(me=("sam  sample",))))
    assert [e.from_me for e in found] == [False, True, False]


def test_every_event_follows_the_card_of_its_contact() -> None:
    for name in sorted(p.name for p in FIXTURES.glob("*.mbox")):
        seen: set[str] = set()
        for item in read(name, ImportOptions()):
            if isinstance(item, ContactCard):
                seen.update(item.aliases)
            elif isinstance(item, NewEvent) and item.contact is not None:
                assert item.contact in seen, (name, item.contact)


def test_gmail_takeout_prefers_the_plain_part() -> None:
    items = read("gmail-takeout.mbox")
    (event,) = events(items)
    assert event.text == (
        "Subject: Dinner on Friday?\n\nHey Sam,\n\nare you free for dinner on Friday?"
        " There is a new Lebanese place near the station, I can book a table for 8 pm."
        "\n\nCarol"
    )
    assert event.thread == "email:caf+abc123xyz=def456@mail.gmail.com"
    assert event.at == at(2026, 3, 10, 8, 0, 5)
    assert event.contact == "carol.danvers@gmail.com"
    assert cards(items) == [ContactCard(name="Carol Danvers", aliases=("carol.danvers@gmail.com",))]


def test_html_only_newsletter_is_reduced_to_text() -> None:
    (event,) = events(read("newsletter.mbox"))
    assert body(event) == (
        "This week's picks\n\nHello Sam & friends,\n\nGardening in small spaces\n\n"
        "Café culture in Lisbon – a guide\n\nRead more\n\non our site\n\n"
        "See you next week!\nThe Digest team"
    )
    assert "trackOpen" not in event.text and "font-family" not in event.text


def test_attachments_are_named_not_included() -> None:
    items = read("attachment.mbox")
    (event,) = events(items)
    assert event.text.split("\n")[-1] == "[attachments: Q1 report.pdf, team-day.jpg]"
    assert "JVBERi0" not in event.text and "%PDF" not in event.text
    assert "attached is the Q1 report" in event.text
    assert [c.name for c in cards(items)] == ["Dave Jones", "Erin Stone"]


def test_encoded_headers_are_decoded() -> None:
    items = read("encoded-headers.mbox")
    assert cards(items) == [
        ContactCard(name="Éloïse Dupont", aliases=("eloise@example.fr",)),
        ContactCard(name="Jörg Müller", aliases=("joerg@example.de",)),
    ]
    first, reply = events(items)
    assert first.text.startswith("Subject: Réunion à Paris – ordre du jour\n\nBonjour à tous,")
    assert first.text.endswith("\nÉloïse")
    assert reply.text == (
        "Subject: AW: Réunion à Paris\n\nDanke, ich bin dabei. Grüße aus München!\n\nJörg"
    )
    assert first.thread == reply.thread == "email:a1b2c3@mail.example.fr"
    assert [first.contact, reply.contact] == ["eloise@example.fr", "joerg@example.de"]


def test_charsets_latin1_windows1252_and_unknown() -> None:
    latin, windows, unknown = events(read("charsets.mbox"))
    assert latin.text == (
        "Subject: Straßenfest\n\nDas Straßenfest ist am Samstag. Bring bitte Käse und Brötchen mit."
    )
    # The Outlook "Original Message" block is trimmed.
    assert windows.text == "Subject: RE: Budget\n\nThe “final” numbers are in – €20k for Q2."
    assert unknown.text.startswith("Subject: Odd charset\n\nnaïve text in an unknown charset")


def test_odd_messages() -> None:
    items = read("odd.mbox")
    found = events(items)
    assert skips(items) == ["email without a date", "empty email", "email without a body"]
    no_id, broken_date, escaped, subject_only = found
    # No Message-ID: an id all the same, the subject as the thread.
    assert no_id.id is not None
    assert no_id.thread == "email:subject:note without a message-id"
    assert no_id.source is not None and no_id.source.startswith("mbox:")
    assert no_id.from_me is True and no_id.contact == "alice@example.com"
    # An unreadable Date: the postmark's time.
    assert broken_date.at == at(2026, 3, 18, 14, 45, 30)
    # ">From " was unescaped and did not start a message.
    assert "\n\nFrom the archives: the first bug was a moth.\n\n" in escaped.text
    # Reply and forward prefixes, in several languages, do not split a thread.
    assert subject_only.thread == "email:subject:plans"
    assert subject_only.contact == "judy@example.com"
    assert ContactCard(name="judy", aliases=("judy@example.com",)) in cards(items)


def test_postmark_without_an_offset_is_read_in_the_import_zone() -> None:
    items = read("odd.mbox", ImportOptions(me=("sam@example.org",), tz=LISBON))
    broken_date = events(items)[1]
    # 18 March: Lisbon is on UTC+0 until the end of March.
    assert broken_date.at == to_us(dt.datetime(2026, 3, 18, 14, 45, 30, tzinfo=LISBON), dt.UTC)


def test_gmail_postmark_offset_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "takeout.mbox"
    path.write_text(
        "From 1826@xxx Tue Mar 10 08:00:12 +0200 2026\nFrom: a@example.com\n"
        "Subject: s\nDate: garbage\n\nbody\n"
    )
    (event,) = events(read(path))
    assert event.at == at(2026, 3, 10, 6, 0, 12)


def test_forwarded_email_and_odd_header_charsets(tmp_path: Path) -> None:
    path = tmp_path / "forward.mbox"
    path.write_bytes(
        b"From a@example.com Mon Mar  2 10:00:00 2026\n"
        b"Message-ID: <fwd-1@example.com>\n"
        b"Date: Mon, 2 Mar 2026 10:00:00 +0000\n"
        b"From: =?x-unknown?Q?Zo=C3=A9?= <zoe@example.com>\n"
        b"To: Kl\xc3\xa4re <klaere@example.com>\n"
        b"Subject: Fwd: =?utf-8?q?Caf=C3=A9?= news\n"
        b"Content-Type: multipart/mixed; boundary=b1\n"
        b"\n"
        b"--b1\n"
        b"Content-Type: text/plain; charset=utf-8\n"
        b"\n"
        b"See the email below.\n"
        b"--b1\n"
        b"Content-Type: message/rfc822\n"
        b"Content-Disposition: attachment\n"
        b"\n"
        b"From: someone@example.com\n"
        b"Subject: inner\n"
        b"\n"
        b"Inner text that is not the body.\n"
        b"--b1--\n"
    )
    items = read(path, ImportOptions())
    (event,) = events(items)
    assert event.text == (
        "Subject: Fwd: Café news\n\nSee the email below.\n\n[attachments: forwarded email]"
    )
    # An unknown charset in an encoded word reads as UTF-8; raw UTF-8 as is.
    assert cards(items) == [
        ContactCard(name="Zoé", aliases=("zoe@example.com",)),
        ContactCard(name="Kläre", aliases=("klaere@example.com",)),
    ]


def test_dates_out_of_range_or_without_a_zone(tmp_path: Path) -> None:
    path = tmp_path / "dates.mbox"
    path.write_text(
        "From a@example.com Mon Mar  2 10:00:00 2026\nFrom: a@example.com\nSubject: far\n"
        "Date: Mon, 2 Mar 2250 10:00:00 +0000\n\nThe postmark wins.\n\n"
        "From a@example.com Mon Mar  2 11:00:00 2026\nFrom: a@example.com\nSubject: utc\n"
        "Date: Mon, 2 Mar 2026 12:00:00 -0000\n\nNo zone means UTC.\n\n"
        "From nobody\nFrom: a@example.com\nSubject: none\n"
        "Date: Mon, 2 Mar 1850 10:00:00 +0000\n\nNeither can be used.\n"
    )
    items = read(path, ImportOptions(tz=LISBON))
    assert [e.at for e in events(items)] == [at(2026, 3, 2, 10, 0), at(2026, 3, 2, 12, 0)]
    assert skips(items) == ["email without a date"]


# --- ids, threads and sources ------------------------------------------------------------


def test_reading_twice_gives_the_same_ids() -> None:
    for name in sorted(p.name for p in FIXTURES.glob("*.mbox")):
        first = [e.id for e in events(read(name))]
        assert first == [e.id for e in events(read(name))]
        assert None not in first and len(set(first)) == len(first)


def test_a_grown_mailbox_keeps_the_old_ids(tmp_path: Path) -> None:
    path = tmp_path / "inbox.mbox"
    shutil.copyfile(FIXTURES / "odd.mbox", path)
    old = [e.id for e in events(read(path))]
    with path.open("ab") as out:
        out.write((FIXTURES / "gmail-takeout.mbox").read_bytes())
    new = [e.id for e in events(read(path))]
    assert new[:-1] == old and len(new) == len(old) + 1 and new[-1] not in old


def test_the_same_message_id_gives_the_same_id_with_or_without_brackets_and_case(
    tmp_path: Path,
) -> None:
    one = tmp_path / "one.mbox"
    two = tmp_path / "two.mbox"
    one.write_text(message(1, message_id="Abc@Example.COM"))
    two.write_text(message(1, "Another body.", message_id="abc@example.com"))
    assert events(read(one))[0].id == events(read(two))[0].id


def test_long_message_ids_make_bounded_threads_and_sources(tmp_path: Path) -> None:
    long_id = "x" * 300 + "@example.com"
    path = tmp_path / "long.mbox"
    path.write_text(message(1, message_id=long_id))
    (event,) = events(read(path))
    assert event.thread is not None and event.source is not None
    for ref in (event.thread, event.source):
        assert len(ref) <= MAX_REF_CHARS and "\n" not in ref
    assert event.thread.startswith("email:") and event.source.startswith("mbox:")
    assert events(read(path))[0].id == event.id


def test_a_very_long_body_is_cut_to_one_event(tmp_path: Path) -> None:
    path = tmp_path / "long.mbox"
    path.write_text(message(1, "word " * 40_000))
    (event,) = events(read(path))
    assert len(event.text) <= MAX_TEXT_CHARS and event.text.endswith("[truncated]")


def test_a_giant_message_is_parsed_in_part_and_the_next_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mbox, "MAX_MESSAGE_BYTES", 4096)
    path = tmp_path / "giant.mbox"
    path.write_text(message(1, "start\n" + "filler line\n" * 5000 + "end") + message(2))
    first, second = events(read(path))
    assert "start" in first.text and "end" not in first.text
    assert second.text == "Subject: Message 2\n\nHello."


def test_crlf_line_ends_read_like_lf(tmp_path: Path) -> None:
    source = (FIXTURES / "thunderbird-thread.mbox").read_bytes()
    path = tmp_path / "crlf.mbox"
    path.write_bytes(source.replace(b"\n", b"\r\n"))
    assert events(read(path)) == events(read("thunderbird-thread.mbox"))


def test_progress_counts_bytes_up_to_the_size(tmp_path: Path) -> None:
    path = tmp_path / "many.mbox"
    path.write_text("".join(message(n) for n in range(600)))
    heard: list[tuple[int, int]] = []
    items = list(mbox.IMPORTER.read(path, ME, lambda done, total: heard.append((done, total))))
    assert len(events(items)) == 600
    size = path.stat().st_size
    assert len(heard) >= 3 and heard[-1] == (size, size)
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)


def test_bare_parse_counts_the_messages() -> None:
    # odd.mbox: seven messages, the empty one included.
    assert mbox.bare_parse(FIXTURES / "odd.mbox") == 7
    assert mbox.bare_parse(FIXTURES / "thunderbird-thread.mbox") == 3


def test_an_empty_file_is_an_empty_mailbox(tmp_path: Path) -> None:
    path = tmp_path / "empty.mbox"
    path.write_bytes(b"")
    assert read(path) == []


def test_names_and_units() -> None:
    assert mbox.IMPORTER.name == "mbox"
    assert mbox.IMPORTER.units == ("email", "emails")


def test_every_fixture_loads_and_a_second_import_adds_nothing(node: Node) -> None:
    for path in sorted(FIXTURES.glob("*.mbox")):
        first = loading.load(node.log, mbox.IMPORTER.read(path, ME, None))
        again = loading.load(node.log, mbox.IMPORTER.read(path, ME, None))
        assert first.imported > 0
        assert (again.imported, again.already_present) == (0, first.imported)
    # An email's address resolves to the card of its sender.
    alice = node.contacts.info(node.contacts.resolve("alice@example.com"))
    assert alice.name == "Alice Example"
    assert all(c.name != "Sam Sample" for c in node.contacts.all())


# --- body helpers ------------------------------------------------------------------------


def test_trim_reply_cases() -> None:
    wrapped = (
        "Sounds good.\n\nOn Tue, 3 Mar 2026 at 10:15, Alice Example <\n"
        "alice@example.com> wrote:\n> earlier\n> text"
    )
    assert mbox.trim_reply(wrapped) == "Sounds good."
    outlook = "Yes.\n\n________________________________\nFrom: Alice\nSent: Monday\n\nold"
    assert mbox.trim_reply(outlook) == "Yes."
    assert mbox.trim_reply("Thanks!\n--\nSam\nphone") == "Thanks!"
    french = "D'accord.\n\nLe 3 mars 2026 à 10:15, Alice a écrit :\n> Bonjour"
    assert mbox.trim_reply(french) == "D'accord."
    # A line that merely ends with a colon before a quote is kept.
    assert mbox.trim_reply("See below:\n> quoted\nMy answer") == "See below:\nMy answer"


def test_html_to_text_cases() -> None:
    html = (
        "<html><head><style>p{}</style></head><body><p>One&nbsp;&amp; two</p>"
        "<script>alert(1)</script><div>three<br/>four</div>  <span>five</span> six</body></html>"
    )
    # A no-break space is spacing like any other; inline elements join their line.
    assert mbox.html_to_text(html) == "One & two\n\nthree\nfour\nfive six"


# --- sniffing ----------------------------------------------------------------------------


def test_sniff_names_and_contents(tmp_path: Path) -> None:
    for fixture in FIXTURES.glob("*.mbox"):
        assert mbox.IMPORTER.sniff(fixture)
    mbx = tmp_path / "Inbox.mbx"
    mbx.write_text("anything")
    assert mbox.IMPORTER.sniff(mbx)
    plain = tmp_path / "Inbox"
    plain.write_bytes((FIXTURES / "gmail-takeout.mbox").read_bytes())
    assert mbox.IMPORTER.sniff(plain)
    other = tmp_path / "notes.txt"
    other.write_text("Dear diary,\nFrom now on I will write daily.\n")
    assert not mbox.IMPORTER.sniff(other)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert not mbox.IMPORTER.sniff(empty)
    assert not mbox.IMPORTER.sniff(tmp_path / "missing")
    folder = tmp_path / "Archive.mbox"  # Apple Mail exports a folder of this name
    folder.mkdir()
    assert not mbox.IMPORTER.sniff(folder)
    assert not mbox.IMPORTER.sniff(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_sniff_never_opens_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(mbox.IMPORTER.sniff(fifo)))
    worker.start()
    worker.join(timeout=5)
    if worker.is_alive():  # unblock the opener before failing
        with fifo.open("wb"):
            pass
        worker.join()
        pytest.fail("sniff blocked on a named pipe")
    assert answer == [False]


# --- bad input ---------------------------------------------------------------------------


def test_a_file_that_is_not_an_mbox_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "letter.mbox"
    path.write_text("Dear Sam,\n\nFrom Alice\n")
    with pytest.raises(BadInput, match=r"^letter\.mbox, line 1: not an mbox file"):
        read(path)
    path.write_text("\n\nDear Sam,\n")
    with pytest.raises(BadInput, match=r"^letter\.mbox, line 3: not an mbox file"):
        read(path)


def test_a_from_line_inside_a_paragraph_does_not_split_the_message(tmp_path: Path) -> None:
    path = tmp_path / "mboxo.mbox"
    path.write_text(
        message(1, "Our plan runs\nFrom 2019 to 2024 without a break.\nAnd then\nFrom here on")
        + message(2)
    )
    first, second = events(read(path))
    assert body(first).endswith("From 2019 to 2024 without a break.\nAnd then\nFrom here on")
    assert second.text == "Subject: Message 2\n\nHello."


def test_a_postmark_without_a_blank_line_before_it_still_starts_a_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tight.mbox"
    path.write_text(message(1)[:-1] + message(2))
    assert [e.text for e in events(read(path))] == [
        "Subject: Message 1\n\nHello.",
        "Subject: Message 2\n\nHello.",
    ]


def test_a_message_without_headers_names_the_file_and_message(tmp_path: Path) -> None:
    path = tmp_path / "broken.mbox"
    path.write_text(message(1) + "From x@example.com Mon Mar  2 10:00:00 2026\njust some words\n")
    with pytest.raises(BadInput, match=r"^broken\.mbox, message 2: "):
        read(path)


def test_an_unreadable_path_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"missing\.mbox"):
        read(tmp_path / "missing.mbox")
    with pytest.raises(BadInput, match="cannot read"):
        read(tmp_path)


# --- bounded memory ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_large_mailbox_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "large.mbox"
    paragraph = "The quick brown fox jumps over the lazy dog, again and again. " * 3 + "\n"
    text = paragraph * 150  # about 30 KB a message
    with path.open("w") as out:
        number = 0
        while out.tell() < 50 * 1024 * 1024:
            out.write(message(number, text, message_id=f"m{number}@example.com"))
            number += 1
    tracemalloc.start()
    try:
        count = 0
        for item in mbox.IMPORTER.read(path, ME, None):
            count += isinstance(item, NewEvent)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == number
    assert peak < 20 * 1024 * 1024
