"""``qbroker bots``: scripted websocket bots and agent loops that load-test a broker.

- ``cli``: the command (flags, pre-flight checks, the load processes, the report).
- ``plan``: what a questionnaire will ask and how the bots will answer, and the verifier.
- ``run``: the load run (one process's sessions, the budget, ``run_load``).
- ``session``: a session: its round, its bots and the agent loop.
- ``bot``: one websocket bot: its connection, the frames it reads, how it plays the plan.
- ``checks``: what a bot checks in the frames it reads.
- ``http``: a lean HTTP/1.1 client for the agent calls.
- ``stats``: counters, latency samples and the report.
"""
