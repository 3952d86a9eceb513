"""``qbroker mcp``: the questionnaire tool served to an MCP host over stdio (``server``)."""
