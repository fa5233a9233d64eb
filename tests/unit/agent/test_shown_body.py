"""What of a long note the model is shown: its opening, and the lines past
the cut that hold the query's words."""

from __future__ import annotations

from pixie.device.agent.tools import BODY_CHARS_SHOWN, shown_body


def test_a_short_body_is_shown_whole() -> None:
    assert shown_body("One line.\nTwo  lines.", "anything") == "One line. Two lines."


def test_a_long_body_shows_the_lines_that_hold_the_query() -> None:
    lines = [f"- Line {i} about the weather and nothing much at all today." for i in range(30)]
    lines[25] = "- Wifi's live: network VM4471029, password PlumOtter42."
    body = "Chat with Callum.\n" + "\n".join(lines)
    shown = shown_body(body, "wifi password")
    assert len(shown) <= BODY_CHARS_SHOWN
    assert shown.startswith("Chat with Callum. - Line 0")
    assert "… - Wifi's live: network VM4471029, password PlumOtter42. …" in shown
    # Without query words past the cut, the opening as before.
    plain = shown_body(body, "callum")
    assert plain == " ".join(body.split())[: BODY_CHARS_SHOWN - 1] + "…"
    assert shown_body(body) == plain


def test_a_line_with_the_query_inside_the_opening_is_not_pushed_out_by_a_later_one() -> None:
    head = [f"- Fact {i}: something long enough to fill the opening of the page." for i in range(7)]
    wish = "- Gift idea: would love to learn the wheel at Clayworks Studio; as of 8 Nov 2026"
    tail = [f"- Also: a later line {i} of little interest at all, padding." for i in range(8)]
    tail[5] = "- Also: Christmas Eve in Kingston before we fly; as of 25 Nov 2026"
    body = "\n".join(["Who they are", *head, wish, *tail])
    assert " ".join(body.split()).index("Gift idea") < BODY_CHARS_SHOWN  # in the opening
    shown = shown_body(body, "gift ideas for Christmas")
    assert len(shown) <= BODY_CHARS_SHOWN
    assert wish[2:] in shown  # the line with the most query words stays
    assert "Christmas Eve in Kingston" in shown
    assert shown.startswith("Who they are - Fact 0")
    assert shown.endswith("…")


def test_a_line_the_opening_shows_anyway_leaves_room_for_a_later_one() -> None:
    lines = [f"- Line {i} about the weather and nothing much at all today." for i in range(30)]
    lines[3] = "- Callum brought the big umbrella round again on Thursday."
    lines[20] = "- Callum's new number is 07700 900318, the old one is gone."
    body = "Chat with Ada.\n" + "\n".join(lines)
    shown = shown_body(body, "callum")
    assert len(shown) <= BODY_CHARS_SHOWN
    assert "Callum brought the big umbrella" in shown  # in the opening
    assert "Callum's new number is 07700 900318" in shown  # and the later one too
