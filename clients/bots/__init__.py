"""``qbroker bots``: scripted websocket bots and agent loops that load-test a broker.

- ``cli``: the command (flags, pre-flight checks, the load processes, the report).
- ``plan``: what a questionnaire will ask and how the bots will answer, and the verifier.
- ``run``: the load run itself (sessions, bots, the agent loop).
- ``http``: a lean HTTP/1.1 client for the agent calls.
- ``stats``: counters, latency samples and the report.
"""
