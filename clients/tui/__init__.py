"""``qbroker tui``: answer questionnaires in the terminal.

- ``app``: the program (prompt_toolkit application, websocket connection, command).
- ``model``: what is shown and what keys do, without a screen (tested alone).
- ``text``: text layout helpers (wrapping, cutting, windows over long text).
"""
