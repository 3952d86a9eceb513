"""``qbroker tui``: answer a session's questionnaires in the terminal, or (``--inbox``) every
questionnaire waiting in the sessions the token covers.

A full-screen prompt_toolkit application over websockets to the broker. All state, key
handling and drawing live in ``clients.tui.model`` and, for the inbox,
``clients.tui.inbox_model`` (pure, unit-tested), the websocket in ``clients.tui.connection``;
this module is the command line, and wires them to a terminal:

* ``run`` checks the flags, then runs the screen and the connection side by side; the
  connection gives up (exit status 1) on close codes 4400/4401/4403, which a retry cannot
  fix. With ``--inbox`` that is the inbox's socket; the socket of the session being
  answered is opened and closed as the model asks (``session_wanted``).
* The application draws ``model.render(columns, rows)`` into one window and turns key
  presses into ``model.key(...)``, sending whatever frames that returns.

Ctrl+C (or SIGINT) quits with status 0 and the terminal restored.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clients.cli_args import add_url_and_session
from clients.tui.connection import Connection, inbox_websocket_url, validate_session, websocket_url
from clients.tui.inbox_model import InboxModel, InboxSocket, SessionSocket
from clients.tui.model import TuiModel
from clients.tui.sign_in import SignedIn, SignInError, kept_path, sign_in, sign_in_settings, sign_out

if TYPE_CHECKING:
    from prompt_toolkit.application import Application

AGES_REFRESH = 30.0  # seconds between redraws of the inbox's ages when nothing else happens

STYLE: dict[str, str] = {
    "header": "bg:#303446 #c6d0f5",
    "header.brand": "bg:#8caaee #232634 bold",
    "header.ok": "bg:#303446 #a6d189 bold",
    "header.wait": "bg:#303446 #e5c890 bold",
    "header.bad": "bg:#303446 #e78284 bold",
    "progress.head": "#c6d0f5 bold",
    "progress.answered": "#a6d189",
    "progress.current": "#8caaee bold underline",
    "progress.pending": "#737994",
    "progress.sep": "#51576d",
    "title": "#ffffff bold",
    "hint": "#838ba7 italic",
    "prompt": "#c6d0f5",
    "clar.label": "#ca9ee6 bold",
    "clar.request": "#a5adce italic",
    "clar.response": "#ef9f76",
    "separator": "#51576d",
    "row": "",
    "row.hl": "bg:#414559 bold",
    "marker": "#8caaee bold",
    "check.on": "#a6d189 bold",
    "check.off": "#737994",
    "option.label": "#ffffff",
    "option.desc": "#949cbb",
    "action": "#99d1db",
    "action.cancel": "#e78284",
    "scroll": "#737994 italic",
    "input.frame": "#8caaee",
    "input.title": "#8caaee bold",
    "input.count": "#838ba7",
    "input.text": "#ffffff",
    "input.cursor": "reverse",
    "wait": "#e5c890 bold",
    "idle.title": "#c6d0f5 bold",
    "idle.text": "#838ba7",
    "status.info": "#99d1db",
    "status.ok": "#a6d189 bold",
    "status.warn": "#e5c890 bold",
    "status.error": "#e78284 bold",
    "status.confirm": "bg:#e5c890 #232634 bold",
    "help": "#737994",
    "help.key": "#c6d0f5 bold",
}


def configure(parser: argparse.ArgumentParser) -> None:
    add_url_and_session(parser, "the session id to answer for (not with --inbox)", session_required=False)
    parser.add_argument(
        "--inbox",
        action="store_true",
        help="list every questionnaire waiting in the sessions the token covers (a pattern such as"
        " 'alice:*'), and answer them one after another",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="a client token for the session, or for a pattern of sessions with --inbox (default: $QBROKER_TOKEN;"
        " a token on the command line is visible to other users in the process list: prefer the variable or"
        " --token-file)",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        help="read the token from this file (default: $QBROKER_TOKEN_FILE; - reads standard input)",
    )
    parser.add_argument("--name", default=None, help="how this client is named to the broker (default: tui@HOST)")
    parser.add_argument(
        "--sign-out",
        action="store_true",
        help="where the broker signs people in: forget the sign-in this user keeps (see docs/tui.md), and exit",
    )


def given_token(flag: str | None, file: str | None) -> str:
    """The token: ``--token``, else the file (``--token-file``, else $QBROKER_TOKEN_FILE; "-":
    standard input), else $QBROKER_TOKEN; "" when none. A file's token is its first line."""
    if flag:
        return flag
    path = file or os.environ.get("QBROKER_TOKEN_FILE")
    if path:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        return (text.strip().splitlines() or [""])[0].strip()
    return os.environ.get("QBROKER_TOKEN", "").strip()


def run(args: argparse.Namespace) -> int:
    if args.sign_out:
        return _sign_out(args.url)
    try:
        token = given_token(args.token, args.token_file)
    except OSError as exc:
        print(f"qbroker tui: cannot read the token file: {exc}", file=sys.stderr)
        return 2
    credentials: SignedIn | None = None
    if not token:
        # Where the broker signs people in, the person signs in instead of pasting a token.
        try:
            credentials = _signed_in(args.url)
        except _Unasked as exc:
            print(f"qbroker tui: no token: set QBROKER_TOKEN or pass --token-file ({exc})", file=sys.stderr)
            return 2
        except SignInError as exc:
            print(f"qbroker tui: {exc}", file=sys.stderr)
            return 1
        if credentials is None:
            print("qbroker tui: no token: set QBROKER_TOKEN or pass --token-file", file=sys.stderr)
            return 2
        token = credentials.token
        args.inbox = args.inbox or not args.session  # a person's sign-in covers their sessions
    if not args.inbox and not args.session:
        print("qbroker tui: no session: pass --session (or set QBROKER_SESSION), or --inbox", file=sys.stderr)
        return 2
    if not args.inbox:
        problem = validate_session(args.session)
        if problem:
            print(f"qbroker tui: invalid --session: {problem}", file=sys.stderr)
            return 2
    try:
        ws_url = inbox_websocket_url(args.url) if args.inbox else websocket_url(args.url, args.session)
    except ValueError as exc:
        print(f"qbroker tui: invalid --url: {exc}", file=sys.stderr)
        return 2
    name = args.name or f"tui@{socket.gethostname()}"
    model: TuiModel | InboxModel
    if args.inbox:
        model = InboxModel(ws_url, lambda sid: websocket_url(args.url, sid), time.time)
        main = _main_inbox(model, args.url, ws_url, token, name, credentials)
    else:
        model = TuiModel(args.session, ws_url)
        main = _main(model, ws_url, token, name, credentials)
    try:
        code = asyncio.run(main)
    except KeyboardInterrupt:
        code = 0
    if model.fatal_message:
        print(f"qbroker tui: {model.fatal_message}", file=sys.stderr)
    return code


class _Unasked(SignInError):
    """The broker could not be asked whether people sign in there."""


def _signed_in(url: str) -> SignedIn | None:
    """The person signed in (the device flow, or the sign-in kept from last time), or None
    where the broker does not sign people in."""
    import httpx

    http = httpx.Client()
    try:
        settings = sign_in_settings(url, http)
    except SignInError as exc:
        http.close()
        raise _Unasked(f"{exc}, to ask whether people sign in there") from None
    if settings is None:
        http.close()
        return None
    return sign_in(settings, http, sys.stdout)


def _sign_out(url: str) -> int:
    import httpx

    with httpx.Client() as http:
        try:
            settings = sign_in_settings(url, http)
        except SignInError as exc:
            print(f"qbroker tui: {exc}", file=sys.stderr)
            return 1
        if settings is None:
            print("qbroker tui: nobody signs in on this broker: there is no sign-in to forget", file=sys.stderr)
            return 2
        had = sign_out(settings, http)
    print(f"Signed out: {kept_path()} is gone." if had else "You were not signed in.")
    return 0


class Screen(Protocol):
    """What the application draws and hands the keys to: a ``TuiModel`` or an ``InboxModel``."""

    def key(self, name: str, data: str = "") -> list[dict[str, Any]]: ...

    def render(self, width: int, height: int, now: float = 0.0) -> list[Any]: ...


class Sender(Protocol):
    def send(self, frames: list[dict[str, Any]]) -> None: ...


def _build_app(model: Screen, conn: Sender, refresh_interval: float | None = None) -> Application[int]:
    """The full-screen application; ``refresh_interval``: redraw that often even when nothing
    happens (the inbox's "3 min ago")."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.application.current import get_app
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.keys import Keys
    from prompt_toolkit.layout import Layout, Window
    from prompt_toolkit.layout.controls import FormattedTextControl
    from prompt_toolkit.output import ColorDepth
    from prompt_toolkit.styles import Style

    def fragments() -> StyleAndTextTuples:
        size = get_app().output.get_size()
        out: StyleAndTextTuples = []
        try:
            lines = model.render(size.columns, size.rows, time.monotonic())
        except Exception as exc:  # a drawing bug must not end the session
            lines = [[("class:status.error", f" could not draw the screen: {exc!r}"[: size.columns])]]
        for i, line in enumerate(lines):
            if i:
                out.append(("", "\n"))
            out.extend(line)
        return out

    bindings = KeyBindings()

    def bind(key: str | Keys, name: str) -> None:
        @bindings.add(key, eager=True)
        def _(event: KeyPressEvent) -> None:
            conn.send(model.key(name))

    for key, name in [
        ("up", "up"),
        ("down", "down"),
        ("pageup", "pageup"),
        ("pagedown", "pagedown"),
        ("home", "home"),
        ("end", "end"),
        ("enter", "enter"),
        ("space", "space"),
        ("escape", "escape"),
        ("backspace", "backspace"),
        ("delete", "delete"),
        ("left", "left"),
        ("right", "right"),
        ("tab", "tab"),
        ("c-u", "clear_line"),
        ("c-p", "up"),
        ("c-n", "down"),
    ]:
        bind(key, name)

    @bindings.add("c-c", eager=True)
    def _quit(event: KeyPressEvent) -> None:
        event.app.exit(result=0)

    @bindings.add(Keys.Any)
    def _char(event: KeyPressEvent) -> None:
        data = event.data
        if data and data.isprintable():
            conn.send(model.key("char", data))

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        conn.send(model.key("paste", event.data))

    # prompt_toolkit assumes 256 colours unless told; most terminals that say so do 24-bit.
    depth = ColorDepth.from_env()
    if depth is None and os.environ.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        depth = ColorDepth.DEPTH_24_BIT
    app: Application[int] = Application(
        layout=Layout(
            Window(
                FormattedTextControl(fragments, focusable=True, show_cursor=False),
                wrap_lines=False,
                always_hide_cursor=True,
            )
        ),
        key_bindings=bindings,
        style=Style.from_dict(STYLE),
        full_screen=True,
        refresh_interval=refresh_interval,
        mouse_support=False,
        color_depth=depth,
    )
    app.ttimeoutlen = 0.05  # a lone Escape is a key, not the start of a sequence, after 50 ms
    app.timeoutlen = 0.05
    return app


async def _main(model: TuiModel, ws_url: str, token: str, name: str, credentials: SignedIn | None) -> int:
    app_ref: list[Application[int]] = []

    def redraw() -> None:
        if app_ref:
            app_ref[0].invalidate()

    conn = Connection(model, ws_url, token, name, redraw, credentials=credentials)
    app = _build_app(model, conn)
    app_ref.append(app)
    return await _run(app, conn)


async def _main_inbox(
    model: InboxModel, base_url: str, ws_url: str, token: str, name: str, credentials: SignedIn | None
) -> int:
    app_ref: list[Application[int]] = []

    def redraw() -> None:
        if app_ref:
            app_ref[0].invalidate()

    sessions = _SessionSockets(model, base_url, token, name, redraw, credentials)
    inbox = Connection(
        InboxSocket(model),
        ws_url,
        token,
        name,
        sessions.changed,
        ready=("welcome", "inbox"),
        credentials=credentials,
    )
    app = _build_app(model, sessions, refresh_interval=AGES_REFRESH)
    app_ref.append(app)
    try:
        return await _run(app, inbox)
    finally:
        await sessions.close()


class _SessionSockets:
    """The socket of the session being answered from the inbox, opened and closed as the
    model's ``session_wanted`` says, after every frame and every key."""

    def __init__(
        self, model: InboxModel, base_url: str, token: str, name: str, redraw: Any, credentials: SignedIn | None
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.token = token
        self.credentials = credentials
        self.name = name
        self.redraw = redraw
        self.current: tuple[str, Connection, asyncio.Task[None]] | None = None

    def sync(self) -> None:
        wanted = self.model.session_wanted
        if self.current is not None and self.current[0] != wanted:
            self.current[2].cancel()  # leaving the session closes its socket
            self.current = None
        if wanted is not None and self.current is None:
            url = websocket_url(self.base_url, wanted)
            conn = Connection(
                SessionSocket(self.model, wanted),
                url,
                self.token,
                self.name,
                self.changed,
                credentials=self.credentials,
            )
            self.current = (wanted, conn, asyncio.create_task(conn.run()))

    def changed(self) -> None:
        self.sync()
        self.redraw()

    def send(self, frames: list[dict[str, Any]]) -> None:
        if self.current is not None:
            self.current[1].send(frames)
        self.changed()  # the key may have opened a session, or left one

    async def close(self) -> None:
        if self.current is not None:
            task = self.current[2]
            self.current = None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down anyway
                await task


async def _run(app: Application[int], conn: Connection) -> int:
    """The application and the connection side by side, until Ctrl+C, SIGTERM or a close
    that a retry cannot fix (status 1)."""
    loop = asyncio.get_running_loop()

    async def connection() -> None:
        await conn.run()
        # A fatal error can come before the application runs: wait (bounded) until it does.
        for _ in range(500):
            if app.is_running:
                break
            await asyncio.sleep(0.01)
        if app.is_running and not app.is_done:
            app.exit(result=1)

    def on_sigterm() -> None:
        if app.is_running:
            app.exit(result=128 + signal.SIGTERM)

    with contextlib.suppress(NotImplementedError, RuntimeError):  # non-Unix loops
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)

    task = asyncio.create_task(connection())
    try:
        result = await app.run_async()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down anyway
            await task
    if conn.fatal.is_set():
        return 1
    return int(result or 0)
