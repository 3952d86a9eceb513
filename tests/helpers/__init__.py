"""What the tests share, in one place (docs/architecture.md, "tests/helpers").

- ``waiting``: ``wait_until`` / ``eventually``, waiting for a condition with a deadline.
- ``processes``: brokers and redis-server as real processes, their environment, free ports,
  test tokens, and ``need`` (skip when a program is missing; fail under QBROKER_REQUIRE_ALL=1).
- ``clients``: ``ScriptedClient``, a person on the websocket driven frame by frame, and the
  raw-socket helpers for handshake and close-code tests.
- ``protocol``: the docs/protocol.md suite's deployments, its ``Agent`` and the assertions
  on tool results, pending answers and errors.
- ``samples``: session ids, questions and tool inputs.
- ``machine``: questionnaires built and driven through the pure state machine, and its
  transition assertions (the core's unit tests).

Fixtures shared by every level are in ``tests/conftest.py``.
"""
