"""What the tests share, in one place (docs/architecture.md, "tests/helpers").

- ``waiting``: ``wait_until`` / ``eventually``, waiting for a condition with a deadline, and
  ``scaled``, the one factor every deadline in the tests goes through.
- ``workers``: which pytest-xdist worker this process is (its ports are its own).
- ``processes``: brokers and redis-server as real processes, their environment, free ports,
  test tokens, and ``need`` (skip when a program is missing; fail under QBROKER_REQUIRE_ALL=1).
- ``clients``: ``ScriptedClient``, a person on the websocket driven frame by frame, and the
  raw-socket helpers for handshake and close-code tests.
- ``protocol``: the docs/protocol.md suite's deployments, its ``Agent`` and the assertions
  on tool results, pending answers and errors.
- ``samples``: session ids, questions and tool inputs.
- ``agent_http``: the agent's calls (ask, outcome, resume...) for the synchronous e2e tests.
- ``browser``: Chromium's path and flags, contexts with the suite's deadlines, screenshots
  (the ``chromium``, ``context`` and ``page`` fixtures are tests/e2e/conftest.py's).
- ``terminal``: a tmux pane a test drives.
- ``secret_texts``: the secrets guard's table of texts and the rule each must match, shared
  with the page's Node tests (``secret_texts.json``).
- ``machine``: questionnaires built and driven through the pure state machine, and its
  transition assertions (the core's unit tests).
- ``npm``: Node programs from a lockfile in the repository (``npm ci``, cached outside the tree).
- ``fake_model``: scripted models, servers whose turns a test scripts, keeping every request
  (what an agent program sent its model): ``ScriptedModel`` (OpenAI-compatible chat
  completions, Pi), ``ScriptedAnthropic`` (Claude Code), ``ScriptedResponses`` (OpenAI's
  Responses API, Codex).
- ``pi``: the real Pi coding agent, isolated (``HOME``, ``PI_CODING_AGENT_DIR``, ``TMPDIR``)
  and offline, run in JSON/RPC mode with its event stream collected.
- ``codex``: the real Codex CLI, isolated (``CODEX_HOME``, ``HOME``, ``TMPDIR``) and offline:
  ``codex exec`` to its end, and ``codex app-server`` under a JSON-RPC driver.

Fixtures shared by every level are in ``tests/conftest.py``.
"""
