"""The kinds of event the memory log holds, and which of them grep searches."""

from __future__ import annotations

import enum


class EventKind(enum.StrEnum):
    JOURNAL = "journal"
    MESSAGE = "message"
    CALL = "call"
    VOICEMAIL = "voicemail"
    POST = "post"
    EMAIL = "email"
    CALENDAR = "calendar"
    SPARK = "spark"  # something the user chose to remember
    AGENT_CHAT_USER = "agent_chat_user"
    AGENT_CHAT_AGENT = "agent_chat_agent"


# The agent-chat transcript is never searchable: the user's own chat turns are
# questions, and returning one echoes the query back as if it were an answer;
# the agent's own replies are left out so a wrong answer cannot feed itself.
CHAT_KINDS = frozenset({EventKind.AGENT_CHAT_USER, EventKind.AGENT_CHAT_AGENT})
SEARCHABLE_KINDS = frozenset(EventKind) - CHAT_KINDS
