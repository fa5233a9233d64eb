"""The vCard importer: cards from phone, Google, Outlook and vCard 4 exports,
names, aliases and details, skips, sniffing, bad files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pixie.device.errors import BadInput
from pixie.device.ingest import load as loading
from pixie.device.ingest import vcard
from pixie.device.ingest.base import ContactCard, ImportOptions, Item, Skipped
from pixie.device.node.keyed import Node
from tests.support.sniffing import sniff_without_blocking

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ingest" / "vcf"


def read_path(path: Path) -> list[Item]:
    return list(vcard.IMPORTER.read(path, ImportOptions(), None))


def read(name: str) -> list[Item]:
    return read_path(FIXTURES / name)


def write(tmp_path: Path, body: bytes | str, name: str = "x.vcf") -> Path:
    path = tmp_path / name
    path.write_bytes(body.encode("utf-8") if isinstance(body, str) else body)
    return path


def test_iphone_export() -> None:
    ada, charles, pizza = read("iphone.vcf")
    assert ada == ContactCard(
        name="Ada Lovelace",
        aliases=(
            "Ada",
            "ada@example.org",  # the grouped item1.EMAIL, lowercased
            "ada@engines.example",
            "+447700900123",
            "02079460018",
        ),
        org="Analytical Engines Ltd, Research",
        title="Mathematician",
        birthday="1815-12-10",
        note="Met at the Babbage salon.\nLikes poetry, and engines.",
        # Numbers as written, with their kinds; the first postal address.
        phone="mobile +44 7700 900123; home 020 7946 0018",
        address="12 St James's Square, London, SW1Y 4JH, United Kingdom",
    )
    # A TEL that is no number is left out; the card still counts.
    assert charles == ContactCard(
        "Charles Babbage", ("+442079460999",), phone="work +44 20 7946 0999"
    )
    # An empty FN and N: the organisation names the card.
    assert pizza == ContactCard(
        "Pixie Pizza", ("+351210000000",), org="Pixie Pizza", phone="work +351 21 000 0000"
    )


def test_google_export() -> None:
    grace, alan, someone = read("google.vcf")
    assert grace.name == "Grace Hopper"
    assert grace.aliases == (
        "Amazing Grace",
        "Grandma COBOL",  # every nickname of a comma-separated list
        "grace@navy.example",
        "ghopper@yale.example",
        "2025550147",
    )
    assert (grace.org, grace.title, grace.birthday) == ("US Navy", "Rear Admiral", "1906-12-09")
    assert grace.note == (
        "Found the moth in the Mark II. Call about the compiler book before the end of the month."
    )
    # No FN: the name is assembled from N (given, additional, family).
    assert alan == ContactCard(
        "Alan Mathison Turing", ("alan@bletchley.example",), birthday="--06-23"
    )
    # Nothing but an address: the address names the card.
    assert someone == ContactCard("someone@example.com", ("someone@example.com",))


def test_outlook_21_quoted_printable_latin1() -> None:
    (card,) = read("outlook21.vcf")
    assert card == ContactCard(
        name="Jürgen Müller",
        aliases=("juergen.mueller@grosshandel.example", "+49301234567", "01701234567"),
        org="Großhandel GmbH, Einkauf",
        title="Leiter Einkauf",
        birthday="1971-03-14",
        note="Erste Zeile\nZweite Zeile mit Umlaut ä und ein sehr langes Ende.",
        phone="work +49 30 1234567; mobile 0170 1234567",
    )


def test_vcard_4() -> None:
    (card,) = read("v4.vcf")
    assert card == ContactCard(
        name="Katherine Johnson",
        aliases=("Kathy", "KJ", "kj@nasa.example", "+17575550100"),
        org="NASA, Flight Research Division",
        title="Research mathematician",
        birthday="--08-26",
        phone="mobile +1-757-555-0100",
    )


def test_card_without_a_name_is_skipped() -> None:
    assert read("noname.vcf") == [
        Skipped("card without a name"),
        ContactCard("Ada Lovelace", birthday="--03-14"),
    ]


def test_two_reads_give_the_same_cards() -> None:
    for name in ("iphone.vcf", "google.vcf", "outlook21.vcf", "v4.vcf", "noname.vcf"):
        assert read(name) == read(name)


@pytest.mark.parametrize(
    ("bday", "expected"),
    [
        ("19900314", "1990-03-14"),
        ("1990-03-14", "1990-03-14"),
        ("--0314", "--03-14"),
        ("--03-14", "--03-14"),
        ("1990-03-14T00:00:00Z", "1990-03-14"),
        ("--0229", "--02-29"),
        ("19900230", None),  # no such day
        ("circa 1800", None),  # vCard 4 allows text
    ],
)
def test_birthday_forms(tmp_path: Path, bday: str, expected: str | None) -> None:
    path = write(tmp_path, f"BEGIN:VCARD\nVERSION:4.0\nFN:Ada\nBDAY:{bday}\nEND:VCARD\n")
    (card,) = read_path(path)
    assert isinstance(card, ContactCard)
    assert card.birthday == expected


def test_apple_omitted_year(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "BEGIN:VCARD\nVERSION:3.0\nFN:Ada\nBDAY;X-APPLE-OMIT-YEAR=1604:1604-03-14\nEND:VCARD\n",
    )
    (card,) = read_path(path)
    assert isinstance(card, ContactCard) and card.birthday == "--03-14"


def test_crlf_bom_folding_escapes_and_unescaped_commas(tmp_path: Path) -> None:
    body = (
        "\ufeffBEGIN:VCARD\r\nVERSION:3.0\r\nFN:Müller, Hans\r\nNOTE:one\\ntwo\\, th\r\n ree\\;"
        " four\\\\\r\nEMAIL:hans@firma.example\r\nEND:VCARD\r\n"
    )
    (card,) = read_path(write(tmp_path, body))
    assert card == ContactCard(
        "Müller, Hans", ("hans@firma.example",), note="one\ntwo, three; four\\"
    )


def test_raw_latin1_and_qp_without_charset(tmp_path: Path) -> None:
    body = (
        b"BEGIN:VCARD\r\nVERSION:2.1\r\nN:M\xfcller;J\xfcrgen\r\n"
        b"NOTE;ENCODING=QUOTED-PRINTABLE:Gr=FC=DFe\r\nEND:VCARD\r\n"
    )
    (card,) = read_path(write(tmp_path, body))
    assert card == ContactCard("Jürgen Müller", note="Grüße")


def test_photos_are_passed_over(tmp_path: Path) -> None:
    # vCard 2.1 style: base64 on lines of their own, ended by a blank line,
    # and an old exporter's unfolded base64 after it.
    body = (
        "BEGIN:VCARD\nVERSION:2.1\nFN:Ada\nPHOTO;JPEG;ENCODING=BASE64:\n"
        "    /9j/4AAQSkZJRgABAQAASABIAAD/4QBMRXhpZgAATU0AKgAAAAgAAYdpAAQAAAABAAAAGgAA\n"
        "    AAAAA6ABAAMAAAABAAEAAKACAAQAAAABAAAAAaADAAQAAAABAAAAAQAAAAD\n"
        "\n"
        "LOGO;ENCODING=BASE64;TYPE=PNG:iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ\n"
        "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\n"
        "TEL:+1 555 0100 123\nEND:VCARD\n"
    )
    (card,) = read_path(write(tmp_path, body))
    assert card == ContactCard("Ada", ("+15550100123",), phone="+1 555 0100 123")


def test_over_long_values_are_cut_to_what_a_contact_holds(tmp_path: Path) -> None:
    body = f"BEGIN:VCARD\nVERSION:3.0\nFN:{'A' * 300}\nNOTE:{'n' * 5000}\nEND:VCARD\n"
    (card,) = read_path(write(tmp_path, body))
    assert isinstance(card, ContactCard)
    assert len(card.name) == 200
    assert card.note is not None and len(card.note) == 2000


def test_progress_reports_the_bytes(tmp_path: Path) -> None:
    body = "".join(f"BEGIN:VCARD\nVERSION:3.0\nFN:Person {i}\nEND:VCARD\n" for i in range(600))
    path = write(tmp_path, body)
    heard: list[tuple[int, int]] = []
    items = list(vcard.IMPORTER.read(path, ImportOptions(), lambda a, b: heard.append((a, b))))
    assert len(items) == 600
    size = path.stat().st_size
    assert heard[-1] == (size, size)
    assert len(heard) == 600 // vcard.PROGRESS_CARDS + 1
    assert [a for a, _ in heard] == sorted(a for a, _ in heard)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("hello there\n", "line 1: not a vCard line"),
        ("", "no vCard in the file"),
        ("BEGIN:VCARD\nFN:Ada\nEND:VCARD\nBEGIN:VCARD\nFN:Bob\n", "card 2 (line 4) never ends"),
        ("BEGIN:VCARD\nFN:Ada\nEND:VCARD\nEND:VCARD\n", "line 4: END without BEGIN"),
        ("BEGIN:VCALENDAR\nEND:VCALENDAR\n", "line 1: not a vCard"),
        ("BEGIN:VCARD\nFN:Ada\nEND:VCARD\nFN:stray\n", "line 4: outside any card"),
        ("BEGIN:VCARD\nFN:Ada\nEND:VCARD\nBEGIN:VCARD\nno colon\nEND:VCARD\n", "card 2, line 5"),
    ],
)
def test_bad_files_name_the_file_and_card(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, body, "broken.vcf")
    with pytest.raises(BadInput) as caught:
        read_path(path)
    assert str(caught.value).startswith("broken.vcf, ")
    assert message in str(caught.value)


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"missing\.vcf"):
        read_path(tmp_path / "missing.vcf")


def test_file_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vcard, "MAX_FILE_BYTES", 100)
    path = write(tmp_path, "BEGIN:VCARD\nFN:" + "A" * 200 + "\nEND:VCARD\n", "big.vcf")
    with pytest.raises(BadInput, match=r"big\.vcf: larger than"):
        read_path(path)


def test_sniff_by_suffix_and_content(tmp_path: Path) -> None:
    assert vcard.IMPORTER.sniff(FIXTURES / "iphone.vcf")
    assert vcard.IMPORTER.sniff(tmp_path / "absent.VCARD")  # by name alone
    assert vcard.IMPORTER.sniff(write(tmp_path, "\ufeff \r\nBEGIN:VCARD\r\n", "contacts"))
    assert vcard.IMPORTER.sniff(write(tmp_path, "begin:vcard\n", "lower.txt"))
    assert not vcard.IMPORTER.sniff(write(tmp_path, "BEGIN:VCALENDAR\n", "cal.txt"))
    assert not vcard.IMPORTER.sniff(write(tmp_path, "", "empty"))
    assert not vcard.IMPORTER.sniff(tmp_path / "absent")
    assert not vcard.IMPORTER.sniff(tmp_path)  # a folder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_sniff_never_opens_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "contacts-pipe"
    os.mkfifo(fifo)
    assert sniff_without_blocking(vcard.IMPORTER, fifo) is False


def test_names_and_units() -> None:
    assert vcard.IMPORTER.name == "vcf"
    assert vcard.IMPORTER.units == ("contact", "contacts")


def test_every_fixture_merges_into_the_contact_book(node: Node) -> None:
    for path in sorted(FIXTURES.glob("*.vcf")):
        loading.load(node.log, vcard.IMPORTER.read(path, ImportOptions(), None))
    grace = node.contacts.info(node.contacts.resolve("ghopper@yale.example"))
    assert grace.name == "Grace Hopper"
    assert grace.details.birthday == "1906-12-09"
    juergen = node.contacts.info(node.contacts.resolve("+49301234567"))
    assert juergen.name == "Jürgen Müller"
    assert juergen.details.org == "Großhandel GmbH, Einkauf"
    # The second Ada card (noname.vcf) names her again: one contact.
    assert [c.name for c in node.contacts.all()].count("Ada Lovelace") == 1


def test_odd_addresses_and_numbers_are_kept_or_left_out_whole(tmp_path: Path) -> None:
    body = (
        "BEGIN:VCARD\nVERSION:3.0\nFN:Odd\nADR;TYPE=HOME:;;;;;;\n"
        "TEL;TYPE=CELL:not a number\nTEL:+44 (0)113 496 0000\nEND:VCARD\n"
        "BEGIN:VCARD\nVERSION:3.0\nFN:Long\n"
        + "".join(f"TEL;TYPE=WORK:+44 113 496 {i:04d}\n" for i in range(40))
        + "ADR:;;"
        + "x" * 500
        + ";Leeds;;;UK\nEND:VCARD\n"
    )
    odd, long = read_path(write(tmp_path, body))
    assert isinstance(odd, ContactCard) and isinstance(long, ContactCard)
    assert odd.address is None  # an address of empty parts is none
    assert odd.phone == "+44 (0)113 496 0000"  # what is no number is left out
    assert long.phone is not None and len(long.phone) <= 200
    assert long.phone.endswith("0") or long.phone[-1].isdigit()  # cut between numbers
    assert long.address is not None and len(long.address) <= 200


def test_a_number_kind_is_a_whole_type_word(tmp_path: Path) -> None:
    body = "BEGIN:VCARD\nVERSION:3.0\nFN:Net\nTEL;TYPE=X-NETWORK:+44 113 496 0000\nEND:VCARD\n"
    (card,) = read_path(write(tmp_path, body))
    assert isinstance(card, ContactCard) and card.phone == "+44 113 496 0000"  # not "work"


# -- logical lines, without vobject's look at the whole line per physical line -------


def _lines_of(text: str) -> vcard._Lines:
    import io

    return vcard._Lines(io.BytesIO(text.encode()))


_PIECES = [
    "BEGIN:VCARD",
    "VERSION:2.1",
    "NOTE;ENCODING=QUOTED-PRINTABLE:a=",
    "NOTE;quoted-printable:x=3D=",
    "NOTE;QUOTED-",
    " PRINTABLE:split=",
    "b=",
    "c",
    " folded",
    "\tfolded by a tab",
    "",
    "   ",
    "FN:Ann=",
    "END:VCARD",
    "=",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_logical_lines_are_vobjects(pieces: list[str], end: str) -> None:
    from vobject.base import getLogicalLines

    text = end.join(pieces) + (end if pieces else "")
    ours = list(vcard.logical_lines(_lines_of(text)))
    theirs = list(getLogicalLines(_lines_of(text), allowQP=True))
    assert ours == theirs


def test_a_card_of_many_soft_line_breaks_reads_in_one_pass(tmp_path: Path) -> None:
    """300 KB of quoted-printable soft line breaks took 30 s (each physical
    line made the reader look at the whole value again); 2 MB read here."""
    body = "=\r\n".join(["ab"] * 400_000)
    path = tmp_path / "qp.vcf"
    path.write_bytes(
        f"BEGIN:VCARD\r\nVERSION:2.1\r\nFN:Ann\r\nNOTE;ENCODING=QUOTED-PRINTABLE:{body}\r\n"
        "END:VCARD\r\n".encode()
    )
    lines = list(vcard.logical_lines(_lines_of(path.read_text())))
    assert len(lines) == 5 and lines[3][0].count("\n") == 399_999
