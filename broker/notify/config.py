"""The notification routes: ``QBROKER_NOTIFY_CONFIG``, a TOML file of ``[[route]]`` tables.

Each route says which sessions it covers (a session id, a prefix pattern ``team-a:*``, or
``*``), how to reach people (``kind`` and its target) and what a notice may say. The file is
read once, at start-up, with the standard library's ``tomllib``; anything it cannot use
(an unknown key or kind, a value of the wrong type or out of range) stops ``serve`` with
one line naming the file, the route (its position and sessions) and the key, before the
broker listens: a typo must not silently leave people unnotified.

The keys every route takes are ``_COMMON`` below, each kind's its row in ``kinds.py``, and
each key's check one function in ``_CHECKS``; a kind's own module (``webhook.py``,
``slack.py``, ...) reads its keys off ``Route.options``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from broker.core import scopes
from broker.notify.kinds import KINDS, Kind
from broker.tokens.claims import sub_problem

DEFAULT_AFTER: Final = 120.0
NTFY_PRIORITIES: Final = {"min": 1, "low": 2, "default": 3, "high": 4, "max": 5, "urgent": 5}

# Keys every route takes (``kind`` and ``sessions`` required); each kind's own are its row
# in broker/notify/kinds.py.
_COMMON: Final = frozenset({"sessions", "kind", "after", "include_prompt", "link_token", "link_sub"})


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
    # Who holds the link tokens (their ``sub``): the person the route reaches, else the route.
    link_sub: str | None = None
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
    name = table.get("kind")
    if name is None:
        raise RouteError(f'key "kind" is missing; it is one of {", ".join(KINDS)}')
    if name not in KINDS:
        raise RouteError(f'key "kind": unknown kind {name!r}; it is one of {", ".join(KINDS)}')
    kind = KINDS[name]
    allowed = _COMMON | kind.keys
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise RouteError(f'unknown key "{unknown[0]}"; a {name} route takes {", ".join(sorted(allowed))}')
    for key in ("sessions", *kind.required):
        if key not in table:
            raise RouteError(f'key "{key}" is missing; a {name} route needs it')
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
    link_sub = table.get("link_sub")
    if link_sub is not None and (problem := sub_problem(link_sub)) is not None:
        raise RouteError(f'key "link_sub" is not a token holder\'s name: {problem}')
    # Each key the route gives, checked (and normalized) by its check, in _CHECKS' order.
    options = {key: check(kind, table[key]) for key, check in _CHECKS.items() if key in kind.keys and key in table}
    return Route(
        index,
        sessions,
        name,
        float(after),
        flags["include_prompt"],
        flags["link_token"],
        link_sub,
        options,
    )


def _url(kind: Kind, url: Any) -> Any:
    schemes = kind.url_schemes
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in schemes or not parts.hostname:
        shown = url if not isinstance(url, str) else _without_secrets(url)
        raise RouteError(f'key "url" must be a {" or ".join(s + "://" for s in schemes)} URL, got {shown!r}')
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise RouteError(f'key "url" has a port that is not a number: {_without_secrets(url)!r}') from None
    return url


def _text(key: str) -> Callable[[Kind, Any], Any]:
    def check(kind: Kind, value: Any) -> Any:
        if not isinstance(value, str) or not value.strip():
            raise RouteError(f'key "{key}" must be a non-empty string')
        return value

    return check


def _sender(kind: Kind, value: Any) -> Any:
    _text("from")(kind, value)
    if "@" not in value:
        raise RouteError(f'key "from" must be an e-mail address, got {value!r}')
    return value


def _recipients(kind: Kind, to: Any) -> Any:
    if isinstance(to, str):
        to = [to]
    if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
        raise RouteError('key "to" must be an e-mail address or a list of them')
    return to


def _priority(kind: Kind, priority: Any) -> Any:
    if isinstance(priority, str) and priority in NTFY_PRIORITIES:
        return NTFY_PRIORITIES[priority]
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 5:
        raise RouteError(f'key "priority" must be 1-5 or one of {", ".join(NTFY_PRIORITIES)}, got {priority!r}')
    return priority


def _tags(kind: Kind, tags: Any) -> Any:
    if not isinstance(tags, list) or not all(
        isinstance(t, str) and t.strip() and t.isascii() and "," not in t for t in tags
    ):
        raise RouteError('key "tags" must be a list of ASCII words without commas')
    return tags


# Every kind's key, with its check: the value kept (normalized), or a RouteError.
_CHECKS: Final[dict[str, Callable[[Kind, Any], Any]]] = {
    "url": _url,
    "secret": _text("secret"),
    "token": _text("token"),
    "from": _sender,
    "subject_prefix": _text("subject_prefix"),
    "to": _recipients,
    "priority": _priority,
    "tags": _tags,
}


def _without_secrets(url: str) -> str:
    """A URL as a message may show it: scheme and host only (paths and passwords of
    webhook targets are often their secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}/..." if parts.scheme else "..."
