"""When is nobody there to answer? (pure: the caller passes ``now`` and the presence.)

Two rules from the protocol:

- No client connected when a questionnaire starts, and none within ``client_wait``:
  ``unavailable`` / ``ui_unavailable``. A questionnaire may carry its own wait
  (``Questionnaire.client_wait``: the agent asked for one, or a notification may bring the
  person); else the broker's ``client_wait`` holds.
- Every client gone mid-questionnaire: it waits ``reconnect_grace`` with answers and
  draft intact; after that, ``unavailable`` / ``ui_error``.

A questionnaire waiting for the agent's clarification is never expired: the person is
waiting on the agent, not the other way round. Nor is one an MCP host's own form is asking
(``in_host_since``): the person is there, in the host, and a host's form cannot be
withdrawn; once the host has replied (or declined), these rules hold again. The grace is counted from the later of
"last client seen" and "last change", so a resume after a long clarification gives the
person a fresh grace period to come back. A change nobody saw (the agent resumed while no
client was connected) must bring the person back as a start does, so it waits at least the
questionnaire's own first-client wait: a notification sent for the resume gives them the
same time to arrive as one sent for the start.

An inbox socket covering the session holds its questionnaires as a client would: while one
is connected, on any process, nothing becomes unavailable, and after the last one goes they
wait at least the reconnect grace more (a reload of the inbox page loses nothing); then the
rules above apply as if it had never been there. It does not count as a client of the
session (the inbox's ``clients`` and the notifications' "nobody is connected" are about
the session's own sockets).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from broker.core.machine import Questionnaire

Reason = Literal["ui_unavailable", "ui_error"]


class Deadline(msgspec.Struct, frozen=True):
    at: float
    reason: Reason


def first_client_wait(state: Questionnaire, client_wait: float) -> float:
    """How long ``state`` waits for a first client: its own wait, else the broker's."""
    return client_wait if state.client_wait is None else state.client_wait


def deadline(
    state: Questionnaire,
    clients: int,
    last_seen: float | None,
    *,
    client_wait: float,
    reconnect_grace: float,
    inbox_until: float | None = None,
) -> Deadline | None:
    """When ``state`` becomes unavailable if nobody connects, or None if it cannot.
    ``inbox_until``: until when an inbox socket covering the session is known connected
    (its last heartbeat's expiry, on any process; None: never)."""
    due = _deadline(state, clients, last_seen, client_wait, reconnect_grace)
    if due is None or inbox_until is None:
        return due
    return Deadline(max(due.at, inbox_until + reconnect_grace), due.reason)


def _deadline(
    state: Questionnaire, clients: int, last_seen: float | None, client_wait: float, reconnect_grace: float
) -> Deadline | None:
    if clients > 0 or state.status != "in_progress" or state.in_host_since is not None:
        return None  # (an MCP host's form asking it: the person is there, in the host)
    if last_seen is None or last_seen < state.created_at:
        return Deadline(state.created_at + first_client_wait(state, client_wait), "ui_unavailable")
    if state.updated_at > last_seen:  # changed while nobody was there: the person must come back
        return Deadline(state.updated_at + max(reconnect_grace, first_client_wait(state, client_wait)), "ui_error")
    return Deadline(last_seen + reconnect_grace, "ui_error")


def expired(
    state: Questionnaire,
    clients: int,
    last_seen: float | None,
    now: float,
    *,
    client_wait: float,
    reconnect_grace: float,
    inbox_until: float | None = None,
) -> Reason | None:
    """The reason ``state`` is unavailable at ``now``, or None while someone may still answer."""
    due = deadline(
        state, clients, last_seen, client_wait=client_wait, reconnect_grace=reconnect_grace, inbox_until=inbox_until
    )
    return due.reason if due is not None and now >= due.at else None
