"""Where a sentence ends, as every reader of the built-in distiller cuts them."""

from __future__ import annotations

import pytest

from pixie.device.distill.extract import quoted, sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "First day report: her teacher this year is Ms. Okafor. Lívia loves her",
            ["First day report: her teacher this year is Ms. Okafor.", "Lívia loves her"],
        ),
        ("Dr. Kwan at 3. L. Souza too.", ["Dr. Kwan at 3.", "L. Souza too."]),
        ("Yes. Ok. Hi. Done", ["Yes.", "Ok.", "Hi.", "Done"]),  # short words end sentences
        (
            'She watched. "I\'d love that one day." Third time.',
            ["She watched.", '"I\'d love that one day."', "Third time."],
        ),
        ("Really?! (Fine.) Next  line\nand more", ["Really?!", "(Fine.)", "Next line and more"]),
        ("", []),
        ("   ", []),
    ],
)
def test_sentences(text: str, expected: list[str]) -> None:
    assert list(sentences(text)) == expected


def test_a_quoted_sentence_is_someone_s_words() -> None:
    assert quoted("“I'd love to learn that one day.”")
    assert quoted('"Back by six," she said.')
    assert not quoted("I'd love to learn that one day.")
    assert not quoted("")
