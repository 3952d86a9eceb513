"""The plumbing every part of the broker runs on.

config.py       the ``QBROKER_*`` settings, overridable by flags
metrics.py      Prometheus metrics (codes and statuses, never ids or texts)
logs.py         one JSON object per line, never answer texts
rate_limits.py  token buckets: per connection, and per key for HTTP requests
"""
