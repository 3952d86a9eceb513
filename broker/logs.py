"""Structured logs: one JSON object per line, carrying ids, never answer texts.

Only the fields passed in ``extra=`` (ids, counts, codes) and the fixed message are
written. Call sites never pass answers, Other texts or clarification texts; the
integration tests grep the logs to keep it that way.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

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


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_"))
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname.lower():7} {record.name}: {record.getMessage()}"
        return f"{line} {extras}".rstrip()


class DropFrameTraces(logging.Filter):
    """The websockets library traces every frame's payload at debug level; payloads hold
    answers, so those records never get through, whatever the level."""

    _PREFIXES = ("< TEXT", "> TEXT", "< BINARY", "> BINARY", "< CONT", "> CONT")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(self._PREFIXES))


def configure(level: str = "info", json_format: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_format else TextFormatter())
    handler.addFilter(DropFrameTraces())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's own loggers go through the same handler; access logs stay off because
    # request lines add nothing the broker's own id-carrying lines do not say.
    # Third-party debug output (frame traces, protocol chatter) stays at info at most.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "websockets"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
        logger.setLevel(max(logging.INFO, root.level))
