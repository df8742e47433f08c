"""MCP servers in the window: the panel (servers, their tools, switches), the question
asked before a server starts, and the card of a call."""
