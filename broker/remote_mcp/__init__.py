"""The broker's own MCP endpoint: the ``questionnaire`` tool over Streamable HTTP at ``/mcp``
(the session from the agent token) and ``/v1/sessions/{sid}/mcp`` (for tokens that cover
more than one session).

- ``gate``: what every request passes first (Origin, the agent token, the session, the
  body limit), refused as the agent API refuses;
- ``calls``: one tool call against the ``Broker``: waiting, progress, re-attaching retries;
- ``endpoint``: the MCP SDK's stateless Streamable HTTP transport and the low-level server.

The tool itself (name, description, schema, results, tool errors) is the core's
(``broker/core/tool.py``), the very one ``qbroker mcp`` serves over stdio.
"""

from broker.remote_mcp.endpoint import McpEndpoint

__all__ = ["McpEndpoint"]
