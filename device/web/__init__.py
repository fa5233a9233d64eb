"""`pixie web`: the Notebook, the log and sync status in a local browser page."""
