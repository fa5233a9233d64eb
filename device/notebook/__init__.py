"""The Notebook: the clear zone, the sealed zone and its seal, huddle reasoning."""
