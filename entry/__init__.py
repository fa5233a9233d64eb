"""The `pixie` command: assembles every package's subcommands."""
