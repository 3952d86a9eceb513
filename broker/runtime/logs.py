"""Logs: one JSON object per line (or one readable line on a terminal), carrying ids,
never answer texts.

Only the fields passed in ``extra=`` (ids, counts, codes) and the fixed message are
written. Call sites never pass answers, Other texts or clarification texts; the
integration tests grep the logs to keep it that way.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any, TextIO

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


# What a text line must not carry raw: C0 and C1 controls and DEL (a CR/LF would forge a
# line, an escape code recolour or hide one), the Unicode line and paragraph separators, and
# the bidi controls. (The JSON format escapes them itself.)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str) -> str:
    """``text`` with every such character written as an escape (``\\r``, ``\\x1b``, ``\\u202e``)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_"))
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname.lower():7} {record.name}: {record.getMessage()}"
        return escaped(f"{line} {extras}".rstrip())


class DropFrameTraces(logging.Filter):
    """The websockets library traces every frame's payload at debug level; payloads hold
    answers, so those records never get through, whatever the level.

    websockets logs them as ``logger.debug("< %s", frame)`` (and ``"> %s"``): the message is
    the format, the frame its argument (tests/unit/test_upstream_internals.py checks that on
    the websockets installed). A message already formatted is matched by its start."""

    _FORMATS = frozenset({"< %s", "> %s"})
    _PREFIXES = ("< TEXT", "> TEXT", "< BINARY", "> BINARY", "< CONT", "> CONT")

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        return not (isinstance(msg, str) and (msg in self._FORMATS or msg.startswith(self._PREFIXES)))


class QuietConnections(logging.Filter):
    """uvicorn (through websockets) logs every websocket's open and close at info: on a
    loaded broker nearly the whole log, and nothing an operator acts on (the
    ``qbroker_client_connections`` metric counts connections). Those two lines are debug
    here: shown as debug lines when the level is debug, dropped otherwise."""

    _LOGGER = "uvicorn.error"
    _MESSAGES = frozenset({"connection open", "connection closed"})

    def __init__(self, level: int) -> None:
        super().__init__()
        self.shown = level <= logging.DEBUG

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.INFO
            and record.name == self._LOGGER
            and isinstance(record.msg, str)
            and record.msg in self._MESSAGES
        ):
            if not self.shown:
                return False
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


def json_lines(log_format: str, stream: TextIO) -> bool:
    """Whether to write JSON lines: ``json`` and ``text`` say so; ``auto`` means readable
    text for a person at a terminal and JSON for anything else (a file, a pipe, a log
    collector)."""
    if log_format != "auto":
        return log_format == "json"
    try:
        return not stream.isatty()
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return True


def configure(level: str = "info", json_format: bool = True) -> None:
    root = logging.getLogger()
    root.setLevel(level.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_format else TextFormatter())
    handler.addFilter(DropFrameTraces())
    handler.addFilter(QuietConnections(root.level))
    root.handlers[:] = [handler]
    # uvicorn's own loggers go through the same handler; access logs stay off because
    # request lines add nothing the broker's own id-carrying lines do not say.
    # Third-party debug output (frame traces, protocol chatter) stays at info at most.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "websockets"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
        logger.setLevel(max(logging.INFO, root.level))
    # httpx (notifications' HTTP client) logs every request with its whole URL at info,
    # httpcore each step at debug: a Slack webhook's path and an ntfy topic are secrets
    # (broker/notify/ logs the target's scheme and host only, and its own outcome).
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # The MCP SDK and sse-starlette log every message they carry at debug (tool results with
    # the person's answers among them) and every stateless request at info: warnings only.
    for name in ("mcp", "sse_starlette"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
