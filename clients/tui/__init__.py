"""``qbroker tui``: answer questionnaires in the terminal.

- ``app``: the program (the command line and the prompt_toolkit application).
- ``connection``: the websocket to the broker, its backoff, and what its close codes mean.
- ``model``: ``TuiModel``, the client without a screen (tested alone); it coordinates
  ``state`` (what the person is doing), ``incoming`` (what the broker's frames do),
  ``keys`` (what each key does; ``secret_stop``: the stop before a pasted secret) and
  ``view``/``question_view`` (drawing), with ``scroll`` (windows over what does not fit),
  ``text_input`` (the text field), ``lines`` and ``text`` (measuring in terminal cells).
"""
