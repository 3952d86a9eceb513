"""The notification routes: ``QBROKER_NOTIFY_CONFIG``, a TOML file of ``[[route]]`` tables.

Each route says which sessions it covers (a session id, a prefix pattern ``team-a:*``, or
``*``), how to reach people (``kind`` and its target) and what a notice may say. The file is
read once, at start-up, with the standard library's ``tomllib``; anything it cannot use
(an unknown key or kind, a value of the wrong type or out of range) stops ``serve`` with
one line naming the file, the route (its position and sessions) and the key, before the
broker listens: a typo must not silently leave people unnotified.

The keys every route takes, and those of each kind, are the tables below; a kind's own
module (``webhook.py``, ``slack.py``, ...) reads its keys off ``Route.options``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from broker.core import scopes

KINDS: Final = ("webhook", "slack", "ntfy", "webpush", "email")
DEFAULT_AFTER: Final = 120.0
NTFY_PRIORITIES: Final = {"min": 1, "low": 2, "default": 3, "high": 4, "max": 5, "urgent": 5}

# Keys every route takes (``kind`` and ``sessions`` required).
_COMMON: Final = frozenset({"sessions", "kind", "after", "include_prompt", "link_token"})
# Each kind's own keys, and which of them it requires. (The webpush kind's module is
# helper-owned: the keys it needs go here.)
KIND_KEYS: Final[dict[str, frozenset[str]]] = {
    "webhook": frozenset({"url", "secret"}),
    "slack": frozenset({"url"}),
    "ntfy": frozenset({"url", "token", "priority", "tags"}),
    "webpush": frozenset(),
    "email": frozenset({"url", "to", "from", "subject_prefix"}),
}
_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "webhook": ("url", "secret"),
    "slack": ("url",),
    "ntfy": ("url",),
    "webpush": (),
    "email": ("url", "to", "from"),
}
_URL_SCHEMES: Final[dict[str, tuple[str, ...]]] = {
    "webhook": ("https", "http"),
    "slack": ("https", "http"),
    "ntfy": ("https", "http"),
    "email": ("smtp", "smtps"),
}


class RouteError(Exception):
    """What is wrong with one route (the loader adds the file and the route)."""


@dataclass(frozen=True)
class Route:
    """One ``[[route]]`` table, checked. ``index``: its position in the file, from 1."""

    index: int
    sessions: str
    kind: str
    after: float = DEFAULT_AFTER
    include_prompt: bool = True
    link_token: bool = False
    # The kind's own keys (url, secret, to, ...), as the file gives them, checked.
    options: Mapping[str, Any] = field(default_factory=dict)

    def covers(self, session_id: str) -> bool:
        return covers(self.sessions, session_id)

    @property
    def url(self) -> str:
        return str(self.options["url"])

    @property
    def name(self) -> str:
        """How logs and messages name it: its position and sessions, never its target."""
        return f'route {self.index} (sessions "{self.sessions}", {self.kind})'


def covers(pattern: str, session_id: str) -> bool:
    """Whether a route's ``sessions`` covers ``session_id``: as a token's scope would."""
    return scopes.covers(pattern, session_id)


def load_routes(path: Path) -> tuple[Route, ...]:
    """The routes of the file at ``path``; ``SystemExit`` with one line when it is unusable."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise SystemExit(f"qbroker: QBROKER_NOTIFY_CONFIG: cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SystemExit(f"qbroker: {path}: not valid TOML: {exc}") from None
    return parse_routes(document, str(path))


def parse_routes(document: Mapping[str, Any], where: str) -> tuple[Route, ...]:
    """The routes of a parsed TOML document; ``where`` names it in the one-line stop."""
    unknown = sorted(set(document) - {"route"})
    if unknown:
        raise SystemExit(f'qbroker: {where}: unknown key "{unknown[0]}"; the file holds [[route]] tables only')
    tables = document.get("route", [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise SystemExit(f"qbroker: {where}: route must be [[route]] tables")
    routes = []
    for index, table in enumerate(tables, start=1):
        try:
            routes.append(_route(index, table))
        except RouteError as exc:
            sessions = table.get("sessions")
            named = f' (sessions "{sessions}")' if isinstance(sessions, str) else ""
            raise SystemExit(f"qbroker: {where}: route {index}{named}: {exc}") from None
    return tuple(routes)


def _route(index: int, table: Mapping[str, Any]) -> Route:
    kind = table.get("kind")
    if kind is None:
        raise RouteError(f'key "kind" is missing; it is one of {", ".join(KINDS)}')
    if kind not in KINDS:
        raise RouteError(f'key "kind": unknown kind {kind!r}; it is one of {", ".join(KINDS)}')
    allowed = _COMMON | KIND_KEYS[kind]
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise RouteError(f'unknown key "{unknown[0]}"; a {kind} route takes {", ".join(sorted(allowed))}')
    for key in ("sessions", *_REQUIRED[kind]):
        if key not in table:
            raise RouteError(f'key "{key}" is missing; a {kind} route needs it')
    sessions = table["sessions"]
    if not isinstance(sessions, str) or not scopes.is_scope(sessions):
        raise RouteError(f'key "sessions" must be {scopes.SCOPE_RULE}, got {sessions!r}')
    after = table.get("after", DEFAULT_AFTER)
    if isinstance(after, bool) or not isinstance(after, int | float) or not 0 < after <= 7 * 24 * 3600:
        raise RouteError(f'key "after" must be a number of seconds above 0 (up to a week), got {after!r}')
    flags = {}
    for key, default in (("include_prompt", True), ("link_token", False)):
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise RouteError(f'key "{key}" must be true or false, got {value!r}')
        flags[key] = value
    options = {key: table[key] for key in KIND_KEYS[kind] if key in table}
    _check_options(kind, options)
    return Route(
        index,
        sessions,
        kind,
        float(after),
        flags["include_prompt"],
        flags["link_token"],
        options,
    )


def _check_options(kind: str, options: dict[str, Any]) -> None:
    if "url" in options:
        url = options["url"]
        schemes = _URL_SCHEMES[kind]
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in schemes or not parts.hostname:
            shown = url if not isinstance(url, str) else _without_secrets(url)
            raise RouteError(f'key "url" must be a {" or ".join(s + "://" for s in schemes)} URL, got {shown!r}')
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise RouteError(f'key "url" has a port that is not a number: {_without_secrets(url)!r}') from None
    for key in ("secret", "token", "from", "subject_prefix"):
        if key in options and (not isinstance(options[key], str) or not options[key].strip()):
            raise RouteError(f'key "{key}" must be a non-empty string')
    if "to" in options:
        to = options["to"]
        if isinstance(to, str):
            options["to"] = to = [to]
        if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
            raise RouteError('key "to" must be an e-mail address or a list of them')
    if "from" in options and "@" not in options["from"]:
        raise RouteError(f'key "from" must be an e-mail address, got {options["from"]!r}')
    if "priority" in options:
        priority = options["priority"]
        if isinstance(priority, str) and priority in NTFY_PRIORITIES:
            options["priority"] = NTFY_PRIORITIES[priority]
        elif isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 5:
            raise RouteError(f'key "priority" must be 1-5 or one of {", ".join(NTFY_PRIORITIES)}, got {priority!r}')
    if "tags" in options:
        tags = options["tags"]
        if not isinstance(tags, list) or not all(
            isinstance(t, str) and t.strip() and t.isascii() and "," not in t for t in tags
        ):
            raise RouteError('key "tags" must be a list of ASCII words without commas')


def _without_secrets(url: str) -> str:
    """A URL as a message may show it: scheme and host only (paths and passwords of
    webhook targets are often their secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}/..." if parts.scheme else "..."
