"""The exception family of the relay package.

The ``pixie`` entry point turns a `RelayError` into one line on stderr and exit
status 2. Nothing a client sends raises one: per-connection trouble ends that
connection and is counted, never raised.
"""


class RelayError(Exception):
    """The relay cannot start as asked: a bad setting, an unusable TLS key pair,
    an address it cannot listen on."""
