"""The notification kinds a route may name, one row each: its own keys, the ones it
requires, and the URL schemes its ``url`` may use (broker/notify/config.py checks a route
against its kind's row; broker/notify/channels.py builds its channel).

A new kind is a row here, its keys' checks in config.py (a key already known needs none),
and its channel: a module of its own and a line in channels.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_HTTP: Final = ("https", "http")


@dataclass(frozen=True)
class Kind:
    name: str
    keys: frozenset[str]  # its own keys, beside those every route takes
    required: tuple[str, ...] = ()
    url_schemes: tuple[str, ...] = ()  # what its ``url`` may be (when it takes one)


KINDS: Final[dict[str, Kind]] = {
    kind.name: kind
    for kind in (
        Kind("webhook", frozenset({"url", "secret"}), ("url", "secret"), _HTTP),
        Kind("slack", frozenset({"url"}), ("url",), _HTTP),
        Kind("ntfy", frozenset({"url", "token", "priority", "tags"}), ("url",), _HTTP),
        Kind("webpush", frozenset()),  # (its keys are the broker's: QBROKER_VAPID_*)
        Kind("email", frozenset({"url", "to", "from", "subject_prefix"}), ("url", "to", "from"), ("smtp", "smtps")),
    )
}
