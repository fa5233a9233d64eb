"""The built-in distiller: the embedded default, and the last resort behind a model.

Deterministic, offline and dependency-free: the same request always gives the
same answer, on every machine, so a pass that re-derives a note re-derives it
word for word and the Notebook's no-op rule keeps it untouched. It answers in
the same JSON a model would and goes through the same validation.

It writes what the source means rather than copies of it:

* a conversation digest says who talked, when, about what, and what is still
  open or arranged, with the few lines that say most;
* the person of a one-to-one thread (or the one other person of a call, a
  post or a calendar entry) gets facts, each with the day it was said: work,
  home, family, birthday, pets, plans (`extract.FIRST_PERSON` on their own
  lines, `extract.SECOND_PERSON` on the user's lines to them), a read on the
  relationship (how often, who writes, what about, how recently), and open
  threads (unanswered questions, the latest plan);
* facts about the user come only from the user's own lines, by the same
  first-person patterns (where they live and work, allergies, diet, likes,
  people close to them, ...);
* a post digest describes the post (who, when, what about, replies) and never
  repeats the post, whose text is the note's title already;
* a journal entry gets a dated digest of what the day was about, and a
  calendar entry an appointment (what, which day, what time, where, with whom);
* tags come from a small topic lexicon, plus any hashtags the user wrote.
"""

from __future__ import annotations

from pixie.device.distill.contract import (
    BackendFailure,
    DistillRequest,
    Failure,
    SourceKind,
)
from pixie.device.distill.offline_journal import _calendar, _journal
from pixie.device.distill.offline_mail import _mail
from pixie.device.distill.offline_talk import _call, _conversation, _post, without_media


class OfflineDistiller:
    """The `Backend` that needs nothing: no network, no model, no randomness."""

    name = "offline"

    async def answer(self, request: DistillRequest) -> object:
        return self.answer_now(request)

    def answer_now(self, request: DistillRequest) -> object:
        """The same answer, without a checkpoint: it waits on nothing, so a
        pass may ask for it on the worker thread that reads and writes the
        source (`LLMRouter.distill_now`).

        It reads whatever people wrote; should a source it cannot read
        raise, that source fails (and is tried again next pass) and the pass
        goes on: one odd message must not stop every other source, or a
        daemon that restarts into the same source. Only the error's type is
        said, never the text that caused it."""
        try:
            return distill(request)
        except Exception as exc:  # any bug on any text: this source fails, not the pass
            raise BackendFailure(Failure.BROKEN, type(exc).__name__) from None

    async def aclose(self) -> None:
        return None


def distill(request: DistillRequest) -> dict[str, object]:
    """The answer a model would give, as a JSON-ready object."""
    request = without_media(request)
    if request.kind is SourceKind.CONVERSATION:
        return _conversation(request)
    if request.kind is SourceKind.POST:
        return _post(request)
    if request.kind is SourceKind.JOURNAL:
        return _journal(request)
    if request.kind is SourceKind.CALENDAR:
        return _calendar(request)
    if request.kind is SourceKind.MAIL:
        return _mail(request)
    return _call(request)
