"""The phone peer: the memory log, the text mirror, grep, and (as the project
grows) the Notebook, distillation and the sync driver."""
