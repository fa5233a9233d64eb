"""The schema version of a data dir's database and the meta rows a reader
without the database layer needs, in a module of its own: the quick readers
(`pixie grep`, `pixie status`) tell from these a database they may read as
it is from one to leave to the full command, which migrates it."""

SCHEMA_VERSION = 10
DIGEST_KEY = "state_fingerprint"  # the meta row holding the state digest

__all__ = ["DIGEST_KEY", "SCHEMA_VERSION"]
