"""The app: a node run as a long-lived process. `daemon` holds the relay
connection, answers siblings' syncs, serves offload and runs the distillation
loop; `control` is its local socket, through which the command line asks a
running daemon to sync, offload, pair or report. Above `sync` and `distill`,
which it drives, and below `cli` and `web`."""
