"""The composition root: the ``qbroker`` command puts the broker and its clients together.

``broker/`` never imports ``clients/``; this package is the one place that knows both (the
subcommand table in ``qbroker.cli``, and where the browser page lives for ``serve``).
"""
