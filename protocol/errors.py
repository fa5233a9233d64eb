"""The exception family of the protocol package."""


class ProtocolError(Exception):
    """Raised for anything the protocol core cannot accept: a malformed id,
    frame or message. Never a half-built value."""
