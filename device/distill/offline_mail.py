"""The built-in distiller on mail: automated mail told apart, a thread's
subject and what it settles, numbers and dates quoted as written."""

from __future__ import annotations

import re
from typing import cast

from pixie.device.distill.contract import (
    DistillRequest,
)
from pixie.device.distill.extract import sentences
from pixie.device.distill.offline_others import _answer, others_in
from pixie.device.distill.offline_talk import _numbers_in, _page_facts, _their_facts
from pixie.device.distill.offline_words import (
    _CODE,
    _MONEY,
    _PHONE_NUMBER,
    MAX_TAGS,
    _distinct,
    _is_small_talk,
    _names,
    _quote,
    _Said,
    _score,
    _span,
    _unique,
    _who,
)
from pixie.device.store.memlog import MAIL_AUTOMATED_MARK

# -- mail ---------------------------------------------------------------------------
#
# A mail thread's digest says who wrote, about what (the subject), and the
# sentences that carry what was agreed and the numbers a person later looks
# for: booking references, amounts, dates and times. The importer has already
# cut quoted replies and signatures, so nothing is distilled twice; it marks
# mail that no person wrote (a mailing list, bulk mail, a no-reply sender) on
# the line after the subject, and such mail gets a digest but never adds to
# anyone's person page.

MAIL_KEY_LINES = 4
_SUBJECT = re.compile(r"^Subject: (.*)$", re.MULTILINE)
_ATTACHED = re.compile(r"^\[attachments?: .*\]$", re.MULTILINE)
_AGREED = re.compile(
    r"\b(confirm\w*|agreed?|booked|booking|reservation|reference|scheduled|deadline|due|"
    r"refund\w*|deposit|invoice|receipt|order\w*|delivery|deliver\w*|appointment|"
    r"move[- ]out|move[- ]in|start date|starts?|quote|total)\b",
    re.IGNORECASE,
)


def mail_subject(text: str) -> str:
    """The subject line the importer wrote first, or ""."""
    found = _SUBJECT.match(text)
    return found.group(1).strip() if found else ""


def is_automated(text: str) -> bool:
    """Whether the importer marked this mail as sent by no person."""
    return automated_reason(text) is not None


def _mail_body(text: str) -> str:
    """The mail's own words: no subject, marker or attachment lines, and no
    greeting or sign-off line ("Hi Hannah,", "Best wishes,")."""
    lines = text.split("\n")
    start = 2 if is_automated(text) else 1
    kept = [
        line
        for line in lines[start:]
        if not _ATTACHED.match(line) and not _SALUTATION.match(line.strip())
    ]
    return "\n".join(kept).strip()


def automated_reason(text: str) -> str | None:
    """What the importer's marker says ("mailing list"), or None."""
    lines = text.split("\n", 2)
    if len(lines) < 2 or not lines[1].startswith(MAIL_AUTOMATED_MARK):
        return None
    return lines[1][len(MAIL_AUTOMATED_MARK) :].strip(" ()") or "automated"


_SALUTATION = re.compile(
    r"^(?:(?:hi|hello|hey|dear|hiya|morning|good (?:morning|afternoon|evening)|ol[áa]|oi|"
    r"querid[oa]|prezad[oa])\b[^.!?\n]{0,40}|(?:best|best wishes|kind regards|regards|"
    r"many thanks|thanks|thank you|cheers|all the best|love|warmly|sincerely|yours|"
    r"abra[çc]os?|beijos?|atenciosamente)[ ,!.]*(?:\w+[ ,!.]*){0,2})[,!.]?$",
    re.IGNORECASE,
)


def _mail(request: DistillRequest) -> dict[str, object]:
    """A digest of a mail thread: who, about what, what was agreed, numbers."""
    first = request.lines[0]
    subject = mail_subject(first.text) or "(no subject)"
    automated = all(is_automated(line.text) for line in request.lines)
    said: list[_Said] = []
    for line in request.lines:
        body = " ".join(_mail_body(line.text).split())
        for i, piece in enumerate(sentences(body)):
            part = piece.strip()
            if not part or _is_small_talk(part):
                continue
            bonus = 3.0 * bool(_CODE.search(part) or _MONEY.search(part))
            bonus += 2.0 * bool(_AGREED.search(part))
            said.append(_Said(line.at, line.speaker, line.from_me, part, _score(part) + bonus, i))
    who = _names(request.participants)
    count = len(request.lines)
    span = _span(first.at, request.lines[-1].at)
    if automated:
        parts = [f"Automated email from {who or 'a sender'} {span}: “{_quote(subject, 200)}”."]
    else:
        noun = "email" if count == 1 else "emails"
        mine = sum(line.from_me for line in request.lines)
        by = f", {mine} of them yours" if mine and mine < count else ""
        by = ", sent by you" if mine == count else by
        parts = [
            f"Email thread “{_quote(subject, 200)}” with {who or 'nobody else'}: "
            f"{count} {noun}{by}, {span}."
        ]
    key = _distinct((s for s in sorted(said, key=lambda s: -s.score) if s.score > 0), 99)
    key = key[:MAIL_KEY_LINES]
    key.sort(key=lambda s: (s.at, s.n))
    parts.extend(f"- {_who(s)}: “{_quote(s.text, 240)}”" for s in key)
    numbers = _unique(
        number
        for line in request.lines
        for number in _numbers_in(_mail_body(line.text), (_CODE, _MONEY, _PHONE_NUMBER))
    )
    if numbers:
        parts.append("Numbers: " + ", ".join(numbers[:8]) + ".")
    answer = _answer("\n".join(parts), said, request, min_hits=1)
    reasons = {automated_reason(line.text) for line in request.lines}
    kind = "newsletter" if "mailing list" in reasons else "automated" if automated else ""
    topical = cast(list[str], answer["tags"])
    answer["tags"] = _unique(t for t in ("email", kind, *topical) if t)[: MAX_TAGS + 1]
    if not automated and len(request.participants) == 1:
        name = request.participants[0]
        # Facts by the patterns only: a mail's sentences are the digest's.
        answer["person_facts"] = _page_facts(_their_facts(request, name), [])
    if not automated:
        answer["others"] = others_in(request)
    return answer
