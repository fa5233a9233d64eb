"""Mail reaches the Notebook (one digest per thread, with what was agreed and
the numbers; mail no person wrote kept off person pages), and a repeating
calendar entry is one note (how often, since when, until when, which weeks
were skipped), read in the calendar's own zone."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

from pixie.device.agent.tools import CheckNotebookTool
from pixie.device.distill.contract import Line, SourceKind, make_request
from pixie.device.distill.offline import OfflineDistiller, distill
from pixie.device.distill.plans import appointment_in
from pixie.device.distill.prompt import render_prompt
from pixie.device.distill.router import LLMRouter
from pixie.device.distill.series import series_of
from pixie.device.distill.service import NotetakingService, PassReport
from pixie.device.ingest.base import ImportOptions
from pixie.device.ingest.ics import IMPORTER as ICS
from pixie.device.ingest.load import load as load_items
from pixie.device.ingest.mbox import IMPORTER as MBOX
from pixie.device.node.keyed import Node
from pixie.device.store.memlog import EventKind, NewEvent
from pixie.device.store.notes import NoteKind

MAILBOX = """\
From dave@lettings.example Mon Oct 05 10:00:00 2026
From: Dave Brook <dave@lettings.example>
To: Hannah Okafor <hannah@example.org>
Subject: Move-out date
Date: Mon, 05 Oct 2026 10:00:00 +0100
Message-ID: <a1@lettings.example>

Hi Hannah,

Thanks for letting me know. I agree to the move-out date of 30 November.
I will return the deposit of £850 within 10 days of the inspection.
Call me on 0113 496 0123 if anything comes up.

Best,
Dave

From hannah@example.org Mon Oct 05 12:00:00 2026
From: Hannah Okafor <hannah@example.org>
To: Dave Brook <dave@lettings.example>
Subject: Re: Move-out date
Date: Mon, 05 Oct 2026 12:00:00 +0100
Message-ID: <a2@example.org>
In-Reply-To: <a1@lettings.example>
References: <a1@lettings.example>

Great. The inspection can be on 28 November at 10am.

On Mon, 5 Oct 2026 Dave wrote:
> I agree to the move-out date of 30 November.

From noreply@trains.example Tue Oct 06 09:00:00 2026
From: Rail Tickets <noreply@trains.example>
To: hannah@example.org
Subject: Your booking confirmation
Date: Tue, 06 Oct 2026 09:00:00 +0100
Message-ID: <b1@trains.example>

Your booking reference is TX7Q9KD. Leeds to London, 12 December 2026.
Total paid: £84.20.

From news@weekly.example Wed Oct 07 08:00:00 2026
From: Dave Brook <news@weekly.example>
To: hannah@example.org
Subject: This week in lettings
List-Id: <lettings.weekly.example>
Date: Wed, 07 Oct 2026 08:00:00 +0100
Message-ID: <c1@weekly.example>

I work at Brook Lettings and I live in Harrogate. Rents are up again.
"""

SERIES = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Test//EN
X-WR-TIMEZONE:{zone}
BEGIN:VEVENT
DTSTART;TZID={zone}:20260108T190000
DTEND;TZID={zone}:20260108T210000
RRULE:FREQ=WEEKLY;BYDAY=TH;UNTIL=20260403T000000Z
EXDATE;TZID={zone}:20260205T190000
EXDATE;TZID={zone}:20260305T190000
UID:climb-1@test
SUMMARY:Climbing with Priya
LOCATION:The Depot
DESCRIPTION:Bring chalk.
END:VEVENT
BEGIN:VEVENT
DTSTART;TZID={zone}:20261214T093000
DTEND;TZID={zone}:20261214T100000
UID:dentist-1@test
SUMMARY:Dentist check-up
DESCRIPTION:Confirmation number 55821. Referred by Dr Shah.
END:VEVENT
END:VCALENDAR
"""

WEEK = 7 * 86_400_000_000
NOW = int(dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000


async def distil(node: Node) -> PassReport:
    return await NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),))
    ).run_pass()


def load(node: Node, path: Path, zone: str = "Europe/London") -> None:
    options = ImportOptions(
        me=("hannah@example.org", "Hannah Okafor"), tz=zoneinfo.ZoneInfo(zone), now_us=NOW
    )
    importer = ICS if path.suffix == ".ics" else MBOX
    load_items(node.log, importer.read(path, options, None), now=NOW)


def digests(node: Node) -> dict[str, str]:
    return {n.title: n.body or "" for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)}


async def test_a_mail_thread_is_one_digest_with_what_was_agreed(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "inbox.mbox"
    path.write_text(MAILBOX)
    load(node, path)
    report = await distil(node)
    assert report.as_json()["mail"] == 3  # two messages of one thread are one source
    notes = digests(node)
    thread = notes["Email: Move-out date — Dave Brook"]
    assert "2 emails, 1 of them yours" in thread
    assert "move-out date of 30 November" in thread and "£850" in thread
    assert "28 November at 10am" in thread
    assert "Numbers: £850, 0113 496 0123." in thread  # amounts and phone numbers
    assert "Hi Hannah" not in thread and "Best," not in thread  # greeting and sign-off
    assert thread.count("I agree to the move-out date") == 1  # the quote is not read again
    booking = notes["Email: Your booking confirmation — Rail Tickets"]
    assert booking.startswith("Automated email from Rail Tickets")
    assert "TX7Q9KD" in booking and "£84.20" in booking
    found = node.notebook.clear_view().search_clear("booking reference")
    assert found[0].note.title == "Email: Your booking confirmation — Rail Tickets"
    assert {"email", "automated"} <= set(found[0].note.tags)
    assert (await distil(node)).written == 0  # idempotent


async def test_mail_no_person_wrote_never_reaches_a_person_page(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "inbox.mbox"
    path.write_text(MAILBOX)
    load(node, path)
    await distil(node)
    pages = node.notebook.clear_notes(NoteKind.PERSON)
    assert all("Harrogate" not in (p.body or "") for p in pages)
    newsletter = digests(node)["Email: This week in lettings — Dave Brook"]
    assert newsletter.startswith("Automated email")
    (note,) = [
        n for n in node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST) if "lettings" in n.title
    ]
    assert "newsletter" in note.tags


def test_the_importer_marks_automated_mail(tmp_path: Path) -> None:
    path = tmp_path / "inbox.mbox"
    path.write_text(MAILBOX)
    options = ImportOptions(me=("hannah@example.org",), tz=zoneinfo.ZoneInfo("UTC"), now_us=NOW)
    texts = [item.text for item in MBOX.read(path, options, None) if isinstance(item, NewEvent)]
    marks = [t.split("\n")[1] if "\n" in t else "" for t in texts]
    assert marks == [
        "",
        "",
        "Automated mail (no-reply sender)",
        "Automated mail (mailing list)",
    ]


async def test_a_weekly_series_is_one_note(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "calendar.ics"
    path.write_text(SERIES.format(zone="Europe/London"))
    load(node, path)
    await distil(node)
    notes = digests(node)
    assert len(notes) == 2  # the series and the dentist, not twelve notes
    series = notes["Climbing with Priya — weekly on Thursdays at 19:00"]
    assert series.startswith(
        "Repeating: Climbing with Priya, weekly on Thursdays at 19:00, "
        "from Thursday 8 January 2026 to Thursday 2 April 2026 "
        "(11 times, 2 skipped (5 Feb 2026, 5 Mar 2026))."
    )
    assert "Where: The Depot." in series and "Notes: Bring chalk." in series
    assert "Mar 2026: 12, 19, 26; Apr 2026: 2." in series
    dentist = notes["Dentist check-up — Monday 14 December 2026, 09:30"]
    assert "Notes: Confirmation number 55821. Referred by Dr Shah." in dentist
    assert "since" not in dentist
    assert (await distil(node)).written == 0


async def test_a_series_reads_its_days_in_its_own_zone(node: Node, tmp_path: Path) -> None:
    # 19:00 in Toronto is midnight in UTC: the day must stay Thursday.
    path = tmp_path / "calendar.ics"
    path.write_text(SERIES.format(zone="America/Toronto"))
    load(node, path, "America/Toronto")
    await distil(node)
    assert "Climbing with Priya — weekly on Thursdays at 19:00" in digests(node)


def test_series_cadence_and_skips() -> None:
    day = 86_400_000_000
    start = int(dt.datetime(2026, 1, 6, 18, tzinfo=dt.UTC).timestamp()) * 1_000_000
    text = "Yoga\n2026-01-06 18:00–19:00"
    fortnightly = [start + i * 14 * day for i in range(6) if i != 3]
    series = series_of(text, start, fortnightly)
    assert series is not None and series.cadence == "every two weeks"
    assert [d.isoformat() for d in series.skipped] == ["2026-02-17"]
    assert series_of(text, start, [start]) is None  # one occurrence is no series
    monthly = [start + i * 30 * day for i in range(4)]
    found = series_of(text, start, monthly)
    assert found is not None and found.cadence == "monthly" and found.skipped == ()


def test_a_model_is_shown_the_occurrences() -> None:
    line = Line(NOW, "Me", True, "Yoga\n2026-11-01 00:00–01:00", "calendar")
    request = make_request(
        SourceKind.CALENDAR,
        "a repeating calendar entry",
        None,
        (),
        [line],
        occurrences=[NOW + WEEK, NOW],
    )
    assert request.occurrences == (NOW, NOW + WEEK)
    answer = distill(request)
    assert isinstance(answer["summary"], str) and answer["summary"].startswith("Repeating: Yoga")
    _, prompt = render_prompt(request)
    assert "It repeats: 2 occurrences, starting (UTC) 2026-11-01 00:00, 2026-11-08 00:00" in prompt


GROUP_CALL = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Test//EN
BEGIN:VEVENT
DTSTART:20261206T180000Z
DTEND:20261206T190000Z
RRULE:FREQ=MONTHLY;BYDAY=1SU;COUNT=6
UID:family-call@test
SUMMARY:Video call – Mum & Chioma
ORGANIZER;CN=Hannah Okafor:mailto:hannah@example.org
ATTENDEE;CN=Ngozi Okafor:mailto:ngozi@example.org
ATTENDEE;CN=Chioma Okafor:mailto:chioma@example.org
END:VEVENT
END:VCALENDAR
"""


async def test_a_note_of_several_people_is_found_under_each(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "calendar.ics"
    path.write_text(GROUP_CALL)
    load(node, path)
    await distil(node)
    (note,) = node.notebook.clear_notes(NoteKind.CONVERSATION_DIGEST)
    # Its contact is the first attendee; the other is tagged by name.
    assert "chioma okafor" in note.tags
    view = node.notebook.clear_view()
    for name in ("Ngozi Okafor", "Chioma Okafor"):
        found = view.search_clear("video call", node.contacts.resolve(name))
        assert [s.note.id for s in found] == [note.id]
        assert [s.note.id for s in view.search_clear("", node.contacts.resolve(name))] == [note.id]


async def test_a_series_says_which_occurrence_is_next_and_moves_on(
    node: Node, tmp_path: Path
) -> None:
    path = tmp_path / "calendar.ics"
    path.write_text(SERIES.format(zone="Europe/London"))
    load(node, path)
    clock = [int(dt.datetime(2026, 2, 1, 12, tzinfo=dt.UTC).timestamp()) * 1_000_000]
    service = NotetakingService(
        node.db, node.notebook, LLMRouter((OfflineDistiller(),)), now=lambda: clock[0]
    )
    await service.run_pass()
    series = digests(node)["Climbing with Priya — weekly on Thursdays at 19:00"]
    # 5 February was skipped: the next is the 12th.
    assert "Next: Thursday 12 February 2026 (2026-02-12)." in series
    assert "Last: Thursday 29 January 2026 (2026-01-29)." in series
    (note,) = [n for n in node.notebook.clear_notes() if "series" in n.tags]
    ahead = CheckNotebookTool(node.notebook.clear_view(), node.contacts, now=lambda: clock[0])
    assert [s.note.id for s in ahead.lookup({"days_ahead": 14}).notes] == [note.id]
    # Nothing new and nothing passed: nothing to do.
    assert not service.has_new_material()
    assert (await service.run_pass()).written == 0
    # Once the 12th has passed, the note moves on by itself.
    clock[0] = int(dt.datetime(2026, 2, 14, 12, tzinfo=dt.UTC).timestamp()) * 1_000_000
    assert service.has_new_material()
    assert (await service.run_pass()).written == 1
    series = digests(node)["Climbing with Priya — weekly on Thursdays at 19:00"]
    assert "Next: Thursday 19 February 2026 (2026-02-19)." in series
    assert "Last: Thursday 12 February 2026 (2026-02-12)." in series
    # After the last occurrence there is no next, and no more passes for it.
    clock[0] = int(dt.datetime(2026, 6, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000
    await service.run_pass()
    assert "Next:" not in digests(node)["Climbing with Priya — weekly on Thursdays at 19:00"]
    assert not service.has_new_material()


async def test_a_long_thread_gets_a_digest_per_month(node: Node) -> None:
    start = int(dt.datetime(2026, 5, 1, 9, tzinfo=dt.UTC).timestamp()) * 1_000_000
    day = 86_400_000_000
    events = [
        NewEvent(
            EventKind.MESSAGE,
            start + i * day,
            f"Day {i}: the boiler is still making that noise, engineer booked"
            if i != 3
            else "Wifi's live! Network VM4471029, password PlumOtter42",
            contact="Callum Reid",
            thread="t-c",
        )
        for i in range(70)
    ]
    node.log.append(events, now=0)
    await distil(node)
    titles = sorted(digests(node))
    assert titles == [
        "Callum Reid",
        "Callum Reid — July 2026",
        "Callum Reid — June 2026",
        "Callum Reid — May 2026",
    ]
    (may,) = [n for n in node.notebook.clear_notes() if n.title == "Callum Reid — May 2026"]
    assert "may" in may.tags and may.contact_id is not None
    # The thread digest holds the newest forty; May's words are in May's.
    found = node.notebook.clear_view().search_clear("wifi password")
    assert found[0].note.title == "Callum Reid — May 2026"
    assert "PlumOtter42" in (found[0].note.body or "")
    assert (await distil(node)).written == 0  # idempotent
    # A short thread gets none.
    node.log.append(
        [NewEvent(EventKind.MESSAGE, start, "hi there, long time", contact="Ada", thread="t-a")],
        now=0,
    )
    await distil(node)
    assert not any(t.startswith("Ada —") for t in digests(node))


def test_odd_series_are_read_or_left_alone() -> None:
    day = 86_400_000_000
    start = int(dt.datetime(2026, 1, 6, 18, tzinfo=dt.UTC).timestamp()) * 1_000_000
    # No day in the text, two starts on one day, starts out of order.
    assert series_of("Yoga", start, [start, start + day]) is None
    assert series_of("Yoga\n2026-01-06 18:00–19:00", start, [start, start + 60]) is None
    found = series_of("Yoga\n2026-01-06 18:00–19:00", start, [start + 7 * day, start])
    assert found is not None and found.cadence == "weekly" and len(found.days) == 2
    # Irregular gaps: a series all the same, with no skips claimed.
    odd = series_of(
        "Yoga\n2026-01-06 18:00–19:00", start, [start, start + 2 * day, start + 40 * day]
    )
    assert odd is not None and odd.skipped == ()


def test_mail_headers_of_every_sort_are_read_without_a_traceback(tmp_path: Path) -> None:
    odd = (
        "From x Mon Oct 05 10:00:00 2026\nFrom: =?utf-8?q?broken\nTo:\nSubject:\n"
        "Precedence: \nAuto-Submitted: no\nList-Id:\nDate: Mon, 05 Oct 2026 10:00:00 +0100\n\n"
        "Body with no sender worth the name.\n"
    )
    path = tmp_path / "odd.mbox"
    path.write_text(odd)
    options = ImportOptions(me=(), tz=zoneinfo.ZoneInfo("UTC"), now_us=NOW)
    (event,) = [item for item in MBOX.read(path, options, None) if isinstance(item, NewEvent)]
    assert event.text.split("\n")[0] == "Subject: (no subject)"
    line = Line(event.at, "someone", False, event.text, "email")
    request = make_request(SourceKind.MAIL, "an email thread", None, (), [line])
    assert str(distill(request)["summary"]).startswith("Email thread “(no subject)”")


class _Eager:
    """A model that files facts about everyone it can."""

    name = "eager"

    async def answer(self, request: object) -> object:
        lines = getattr(request, "lines", ())
        if not any("This week in lettings" in line.text for line in lines):
            return await OfflineDistiller().answer(request)  # type: ignore[arg-type]
        return {
            "summary": "News.",
            "person": None,
            "facts": [],
            "tags": [],
            "person_facts": [{"kind": "home", "text": "lives in Harrogate", "date": None}],
            "open_threads": [],
            "appointments": [],
            "others": [{"name": "Dave", "kind": "other", "text": "is leaving", "date": None}],
        }

    async def aclose(self) -> None:
        return None


async def test_mail_no_person_wrote_never_reaches_a_page_whatever_the_model(
    node: Node, tmp_path: Path
) -> None:
    path = tmp_path / "inbox.mbox"
    path.write_text(MAILBOX)
    load(node, path)
    # Dave has a page (a chat with him), and the newsletter is "from" him.
    chat = [
        NewEvent(EventKind.MESSAGE, NOW - 60_000_000 * i, text, contact="Dave Brook", thread="t-d")
        for i, text in enumerate(["Keys are under the mat", "Thanks Dave, got them"])
    ]
    node.log.append(chat, now=0)
    router = LLMRouter((_Eager(), OfflineDistiller()))  # type: ignore[arg-type]
    await NotetakingService(node.db, node.notebook, router).run_pass()
    pages = {p.title: p.body or "" for p in node.notebook.clear_notes(NoteKind.PERSON)}
    assert "Dave Brook" in pages
    assert all("Harrogate" not in body and "is leaving" not in body for body in pages.values())


def test_a_day_no_calendar_has_names_no_appointment() -> None:
    for text in ("Dentist\n2026-02-30 10:00–11:00", "Dentist\n2026-03-01 24:00"):
        assert appointment_in(text, NOW) is None
        line = Line(NOW, "Me", True, text, "calendar")
        request = make_request(SourceKind.CALENDAR, "a calendar entry", None, (), [line])
        assert str(distill(request)["summary"]).startswith("Calendar entry: Dentist")
        series = make_request(
            SourceKind.CALENDAR,
            "a repeating calendar entry",
            None,
            (),
            [line],
            occurrences=[NOW, NOW + WEEK],
        )
        distill(series)  # read as an entry, not a series: no ValueError
