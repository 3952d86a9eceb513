"""What a route is: a path template, the endpoint that serves it, and one line about it.

The table itself is ``broker/http/routes.py``; the app dispatches by it, the 404 lists it
and the OpenAPI document's paths are built from it, so the three cannot drift.

A template is a path with ``{name}`` segments, each matching one non-empty segment, as
Starlette's ``{name}`` does (``tests/unit/test_http.py`` checks the two agree). Matching
compares the request path's segments, split once per request, with the template's: no
regular expression on the hot path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from starlette.types import Scope, Send

from broker.http.kit import error_body, respond
from broker.service import Broker

PathItem = dict[str, Any]  # an OpenAPI path item: its operations by method
Schema = dict[str, Any]


# A plain-ASGI endpoint: called with (scope, receive, send, *the template's {name} segments).
Endpoint = Callable[..., Awaitable[None]]


class Documented(Protocol):
    """An area's part of the OpenAPI document (a module of ``broker/http/openapi/``)."""

    def operations(self) -> dict[str, PathItem]:
        """The path items of the area's templates, by template."""
        ...

    def schemas(self) -> dict[str, Schema]:
        """The components the operations refer to (``#/components/schemas/...``)."""
        ...


@dataclass(frozen=True)
class Route:
    """``path``: the template; ``methods``: as the 404 lists them; ``endpoint``: what serves
    it, made once per app from the broker (None: a websocket path, served by the websocket
    transport before the app sees it); ``doc``: its OpenAPI operations (None: not in the
    document, as websockets are not); ``slash``: a trailing ``/`` is the same path."""

    path: str
    methods: str
    about: str
    endpoint: Callable[[Broker], Endpoint] | None
    doc: Documented | None
    slash: bool = False
    _length: int = field(init=False, repr=False)
    _literals_at: Callable[[list[str]], tuple[str, ...]] = field(init=False, repr=False)
    _literals: tuple[str, ...] = field(init=False, repr=False)
    _segments_at: Callable[[list[str]], tuple[str, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # itemgetters: a path's segments compared and picked in C (the agent API's hot path).
        parts = self.path.split("/")
        names = [i for i, part in enumerate(parts) if part.startswith("{") and part.endswith("}")]
        literals = [i for i in range(len(parts)) if i not in names]
        object.__setattr__(self, "_length", len(parts))
        object.__setattr__(self, "_literals_at", _picker(literals))
        object.__setattr__(self, "_literals", tuple(parts[i] for i in literals))
        object.__setattr__(self, "_segments_at", _picker(names))

    def match(self, parts: list[str]) -> tuple[str, ...] | None:
        """The ``{name}`` segments of a path split at ``/`` (None: not this route)."""
        if len(parts) != self._length and not (self.slash and len(parts) == self._length + 1 and parts[-1] == ""):
            return None
        if self._literals_at(parts) != self._literals:
            return None
        segments = self._segments_at(parts)
        return segments if all(segments) else None


def _picker(indices: list[int]) -> Callable[[list[str]], tuple[str, ...]]:
    """A function picking ``indices`` of a list, always as a tuple."""
    if not indices:
        return lambda parts: ()
    if len(indices) == 1:
        index = indices[0]
        return lambda parts: (parts[index],)
    picked: Callable[[list[str]], tuple[str, ...]] = itemgetter(*indices)
    return picked


def not_found_message(routes: tuple[Route, ...], method: str, path: str) -> str:
    """The 404's message: the path asked for, and every endpoint of the table. It starts
    ``questionnaire:``, as the agent API's messages do, when the path was meant for it."""
    prefix = "questionnaire: " if "/questionnaire" in path else ""
    listed = "; ".join(f"{route.methods} {route.path} ({route.about})" for route in routes)
    return (
        f"{prefix}no such endpoint: {method} {path}; the broker's endpoints are {listed}"
        " (is the broker URL its base, with no path?)"
    )


async def unknown_endpoint(routes: tuple[Route, ...], scope: Scope, send: Send) -> None:
    """A JSON 404 for any other path under /v1/: a wrong base URL (``--url .../v1``) or a
    typo is told what the paths are, in the API's own error shape."""
    message = not_found_message(routes, scope["method"], scope["path"])
    await respond(send, 404, error_body("not_found", message), [])
