"""The peer's own code, phone or Homebase: the store, the Notebook's two
zones, the node that joins them, sync and offload, the agent's tools,
distillation, importers and the commands (see ARCHITECTURE.md)."""
