"""The HTTP edges: each module turns one area's requests into calls on the service.

    agent_api.py  the agent API: start/resume, re-attach, abort (the hot HTTP path)
    record.py     the record of a session: a questionnaire's events, the session's history
    inbox.py      GET /v1/inbox: the open questionnaires a client token covers
    push.py       browser push: the VAPID key, a device's subscription
    operator.py   the operator's POST /v1/revocations (admin tokens)
    openapi.py    the agent API as an OpenAPI 3.1 document
    kit.py        what every edge here shares: body, query, bearer token, JSON and error replies

The MCP endpoint is an HTTP edge too, big enough for its own package: ``broker/remote_mcp/``.
"""
