"""The pure core: what a questionnaire is and how it may change, with no I/O.

Every transport (the HTTP agent API, the client websocket, the stores, a test) drives the
same code here. Nothing in this package awaits, reads a clock (``now`` is passed in),
touches a socket or imports the service around it; ``tests/unit/test_core_is_pure.py``
keeps it so.

- ``errors``: the one exception root, with the wire's error codes.
- ``model``: the tool input, validated and normalized into frozen values.
- ``schema``: the tool input's one JSON Schema, built from the model's limits and rules.
- ``machine``: the questionnaire's states and transitions.
- ``actors``: who acts on a questionnaire (a token's holder and role, a client's program).
- ``events``: the record of who changed a questionnaire and how, told from its states.
- ``history``: a questionnaire's summary for the session's history, told from its events.
- ``results``: the tool results an agent reads (text and details).
- ``tool``: the tool as MCP servers publish it (name, description, schema), its results
  and tool errors, shared by ``qbroker mcp`` and the broker's own MCP endpoint.
- ``frames``: the websocket frames, parsed and built, and their codecs.
- ``availability``: when a questionnaire nobody attends becomes unavailable.
- ``status``: the websocket close codes and reasons.
- ``wire``: the session id's alphabet and length (pattern, check, the rule for messages).
- ``secret_shapes``: what a pasted credential looks like (the secrets guard's one list).
- ``inbox``: what the inbox shows of an open questionnaire, in which order, a page at a time.
"""
