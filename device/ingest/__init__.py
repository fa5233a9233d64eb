"""Bringing events in: importers behind one registry."""
