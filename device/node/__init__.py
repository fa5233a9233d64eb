"""A peer's state opened from its data dir, in two strengths.

`clear.ClearNode` wires the log, mirror, contacts, siblings and the clear
Notebook, and can reach no key: chat, MCP, distillation and pages open this
one. `keyed.Node` adds the identity key and the sealed zone, for the commands
and daemons that sync, pair and run the huddle. This file imports neither, so
importing the clear one never pulls in the key store.
"""
