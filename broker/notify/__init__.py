"""Notifications: telling people that a questionnaire waits for them (docs/notifications.md).

- ``config``: the routes (``QBROKER_NOTIFY_CONFIG``, TOML ``[[route]]`` tables);
- ``notification``: the ``Notification`` value, what a route is told;
- ``channel``: the interface of a kind (``deliver``, ``check``) and how delivery fails;
- one module per kind: ``webhook``, ``slack``, ``ntfy``, ``email``, ``webpush``; ``channels``
  picks the one for a route; ``posting``: the HTTP kinds' POST;
- ``dispatch``: the bounded queue, retries with backoff and jitter, metrics;
- ``triggers``: ``Notifier``, fed by the service: when (started, resumed, idle), claimed
  once across brokers in the store.
"""
