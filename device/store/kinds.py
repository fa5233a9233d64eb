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
    # A signed record of who joined or left the account (`protocol.membership`):
    # carried by the log to every sibling, never searched, shown or distilled.
    MEMBERSHIP = "membership"
    # A correction: the contact it names is the user (`store.identities`),
    # so that contact's events read as the user's own. Never searched,
    # shown or distilled itself. (New kinds go last: the text mirror's files
    # code a kind by its place here.)
    IDENTITY = "identity"


# The agent-chat transcript is never searchable: the user's own chat turns are
# questions, and returning one echoes the query back as if it were an answer;
# the agent's own replies are left out so a wrong answer cannot feed itself.
CHAT_KINDS = frozenset({EventKind.AGENT_CHAT_USER, EventKind.AGENT_CHAT_AGENT})
# The account's own records and corrections, not the user's life: neither
# searched nor imported.
ACCOUNT_KINDS = frozenset({EventKind.MEMBERSHIP, EventKind.IDENTITY})
SEARCHABLE_KINDS = frozenset(EventKind) - CHAT_KINDS - ACCOUNT_KINDS
