"""broker/runtime/logs.py: what the log shows at each level, and in which format.

Per-connection lines (uvicorn's "connection open" / "connection closed", the broker's
"client joined" / "client left") are debug: at info, a loaded broker's log would be
nothing else. ``auto`` writes readable text to a terminal and JSON lines anywhere else.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import Iterator

import pytest

from broker.core import frames
from broker.core.actors import Actor, ClientInfo
from broker.runtime import logs
from broker.runtime.config import Config
from broker.service import Broker, Encoded
from broker.store.memory import MemoryStore

UVICORN = "uvicorn.error"


def record(name: str, msg: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.makeLogRecord({"name": name, "msg": msg, "levelno": level, "levelname": logging.getLevelName(level)})


# --- the connection lines ---------------------------------------------------------------
@pytest.mark.parametrize("msg", ["connection open", "connection closed"])
def test_uvicorns_connection_lines_are_dropped_at_info(msg: str) -> None:
    assert logs.QuietConnections(logging.INFO).filter(record(UVICORN, msg)) is False


@pytest.mark.parametrize("msg", ["connection open", "connection closed"])
def test_uvicorns_connection_lines_are_shown_as_debug_at_debug(msg: str) -> None:
    line = record(UVICORN, msg)
    assert logs.QuietConnections(logging.DEBUG).filter(line) is True
    assert (line.levelno, line.levelname) == (logging.DEBUG, "DEBUG")


@pytest.mark.parametrize(
    "line",
    [
        record(UVICORN, "Application startup complete."),
        record(UVICORN, "connection rejected (%d %s)"),
        record(UVICORN, "connection open", logging.WARNING),  # not the line uvicorn writes
        record("qbroker.ws", "connection open"),  # another logger's line of the same words
        record("qbroker.service", "questionnaire outcome"),
        logging.makeLogRecord({"name": UVICORN, "msg": {"not": "a string"}, "levelno": logging.INFO}),
    ],
    ids=["startup", "rejected", "a-warning", "other-logger", "outcome", "not-a-string"],
)
def test_every_other_line_goes_through_unchanged(line: logging.LogRecord) -> None:
    level = line.levelno
    assert logs.QuietConnections(logging.INFO).filter(line) is True
    assert line.levelno == level


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """configure() replaces the root handler and sets levels: put them back afterwards."""
    names = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "websockets")
    saved = {name: (logging.getLogger(name).level, logging.getLogger(name).handlers[:]) for name in names}
    propagate = {name: logging.getLogger(name).propagate for name in names}
    try:
        yield
    finally:
        for name, (level, handlers) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate[name]


def _lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


@pytest.mark.usefixtures("restored_logging")
def test_at_info_the_configured_log_has_no_connection_lines_and_keeps_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("info", json_format=True)
    uvicorn = logging.getLogger(UVICORN)
    uvicorn.info("connection open")
    uvicorn.info("connection closed")
    uvicorn.info("Application startup complete.")
    logging.getLogger("qbroker.ws").warning("websocket handshake refused", extra={"session": "s"})
    logging.getLogger("qbroker.service").info("questionnaire outcome", extra={"questionnaire": "q"})

    lines = _lines(capsys.readouterr().err)

    assert [(line["level"], line["msg"]) for line in lines] == [
        ("info", "Application startup complete."),
        ("warning", "websocket handshake refused"),
        ("info", "questionnaire outcome"),
    ]


@pytest.mark.usefixtures("restored_logging")
def test_at_debug_the_connection_lines_are_debug_lines(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("debug", json_format=True)
    logging.getLogger(UVICORN).info("connection open")
    logging.getLogger(UVICORN).info("connection closed")

    lines = _lines(capsys.readouterr().err)

    assert [(line["level"], line["logger"], line["msg"]) for line in lines] == [
        ("debug", UVICORN, "connection open"),
        ("debug", UVICORN, "connection closed"),
    ]


class _Client:
    """A connected client as the service sees it."""

    def __init__(self, session_id: str) -> None:
        self.client_id = f"c-{uuid.uuid4().hex[:8]}"
        self.session_id = session_id
        self.codec: frames.Codec = "json"
        self.actor = Actor("tester", "client", ClientInfo("bot", "a test"))
        self.frames: list[Encoded] = []

    def deliver(self, *frames: Encoded) -> None:
        self.frames.extend(frames)

    def close(self, code: int, reason: str = "") -> None:
        raise AssertionError("not closed here")


async def test_a_client_joining_and_leaving_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    broker = Broker(Config(client_wait=60.0), MemoryStore())
    await broker.start()
    try:
        client = _Client(f"s-{uuid.uuid4().hex[:8]}")
        with caplog.at_level(logging.DEBUG, logger="qbroker.service"):
            await broker.join(client)
            open_then = broker.metrics.connections.value  # what counts connections instead
            await broker.leave(client)
            await asyncio.sleep(0)
    finally:
        await broker.stop()

    said = {r.getMessage(): r.levelno for r in caplog.records if r.name == "qbroker.service"}
    assert said.get("client joined") == logging.DEBUG
    assert said.get("client left") == logging.DEBUG
    assert (open_then, broker.metrics.connections.value) == (1, 0)


# --- the format ---------------------------------------------------------------------------
class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_auto_is_text_on_a_terminal_and_json_anywhere_else() -> None:
    assert logs.json_lines("auto", _Stream(tty=True)) is False
    assert logs.json_lines("auto", _Stream(tty=False)) is True


@pytest.mark.parametrize("tty", [True, False])
def test_json_and_text_are_taken_as_said_whatever_the_stream(tty: bool) -> None:
    assert logs.json_lines("json", _Stream(tty)) is True
    assert logs.json_lines("text", _Stream(tty)) is False


def test_auto_on_a_stream_that_cannot_tell_is_json() -> None:
    closed = io.StringIO()
    closed.close()  # its isatty() raises ValueError
    assert logs.json_lines("auto", closed) is True


def test_auto_is_the_default() -> None:
    assert Config.from_env({}).log_format == "auto"


def test_the_text_format_escapes_control_and_bidi_characters() -> None:
    """A refused handshake logs the path's session id, which the sender chose (percent-decoded):
    in the text format no CR/LF may forge a line, no escape code recolour one."""
    record = logging.makeLogRecord(
        {
            "name": "qbroker.ws",
            "levelname": "WARNING",
            "msg": "websocket handshake refused",
            "session": "x\r\n12:00:00 info    qbroker.ws: forged\x1b[2K\u202e",
        }
    )
    line = logs.TextFormatter().format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u202e" not in line
    assert "session=x\\r\\n12:00:00 info    qbroker.ws: forged\\x1b[2K\\u202e" in line
    assert logs.escaped("Zoë 李 \\ plain") == "Zoë 李 \\ plain"  # text of any script stays
