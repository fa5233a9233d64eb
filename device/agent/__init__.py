"""What a model calls: check_notebook, grep_memory, the chat loop and the MCP server."""
