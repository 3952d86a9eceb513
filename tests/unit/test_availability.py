"""When nobody is there to answer: the pure deadline rules (time is passed in, never read)."""

from __future__ import annotations

import msgspec
import pytest

from broker.core.availability import Deadline, deadline, expired
from broker.core.machine import Questionnaire
from tests.helpers.machine import T0, answer, cancel, clarify, new_questionnaire, resume

WAIT = 5.0
GRACE = 30.0


def due(state: Questionnaire, clients: int, last_seen: float | None) -> Deadline | None:
    return deadline(state, clients, last_seen, client_wait=WAIT, reconnect_grace=GRACE)


def reason_at(state: Questionnaire, clients: int, last_seen: float | None, now: float) -> str | None:
    return expired(state, clients, last_seen, now, client_wait=WAIT, reconnect_grace=GRACE)


def test_a_connected_client_means_no_deadline() -> None:
    state = new_questionnaire()
    assert due(state, 1, None) is None
    assert due(state, 3, T0 - 100) is None
    assert reason_at(state, 1, None, T0 + 10_000) is None


def test_a_questionnaire_nobody_ever_saw_is_unavailable_after_the_client_wait() -> None:
    state = new_questionnaire()
    assert due(state, 0, None) == Deadline(T0 + WAIT, "ui_unavailable")
    assert reason_at(state, 0, None, T0) is None
    assert reason_at(state, 0, None, T0 + WAIT - 0.001) is None
    assert reason_at(state, 0, None, T0 + WAIT) == "ui_unavailable"  # the deadline itself counts
    assert reason_at(state, 0, None, T0 + WAIT + 100) == "ui_unavailable"


def test_a_questionnaire_with_its_own_client_wait_waits_that_long_for_a_first_client() -> None:
    state = msgspec.structs.replace(new_questionnaire(), client_wait=600.0)
    assert due(state, 0, None) == Deadline(T0 + 600.0, "ui_unavailable")
    assert reason_at(state, 0, None, T0 + WAIT + 1) is None
    assert reason_at(state, 0, None, T0 + 600.0) == "ui_unavailable"


def test_its_own_client_wait_may_be_shorter_than_the_broker_s() -> None:
    state = msgspec.structs.replace(new_questionnaire(), client_wait=0.0)
    assert due(state, 0, None) == Deadline(T0, "ui_unavailable")


def test_its_own_client_wait_leaves_the_reconnect_grace_as_it_is() -> None:
    state = msgspec.structs.replace(new_questionnaire(), client_wait=600.0)
    assert due(state, 0, T0 + 1) == Deadline(T0 + 1 + GRACE, "ui_error")


def test_a_client_that_left_before_the_start_counts_as_nobody() -> None:
    state = new_questionnaire()
    assert due(state, 0, T0 - 1) == Deadline(T0 + WAIT, "ui_unavailable")


def test_a_client_seen_at_the_start_then_gone_gets_the_reconnect_grace() -> None:
    state = new_questionnaire()
    assert due(state, 0, T0) == Deadline(T0 + GRACE, "ui_error")


def test_every_client_gone_mid_questionnaire_waits_the_reconnect_grace() -> None:
    state = answer(new_questionnaire(), "a", now=T0 + 2)
    gone_at = T0 + 50
    assert due(state, 0, gone_at) == Deadline(gone_at + GRACE, "ui_error")
    assert reason_at(state, 0, gone_at, gone_at + GRACE - 0.001) is None
    assert reason_at(state, 0, gone_at, gone_at + GRACE) == "ui_error"


def test_the_grace_counts_from_the_last_change_when_it_is_later_than_the_last_client() -> None:
    # The person left while the agent was thinking; the agent resumed much later.
    state = clarify(new_questionnaire(), now=T0 + 1)
    state = resume(state, now=T0 + 500)
    assert due(state, 0, T0 + 10) == Deadline(T0 + 500 + GRACE, "ui_error")
    assert reason_at(state, 0, T0 + 10, T0 + 500 + GRACE - 1) is None


def test_a_resume_nobody_saw_waits_the_questionnaire_s_own_wait_when_it_is_longer_than_the_grace() -> None:
    # A notification route covers the session: the resume's notification must have the same
    # time to bring the person back as the start's had.
    state = msgspec.structs.replace(new_questionnaire(), client_wait=900.0)
    state = resume(clarify(state, now=T0 + 1), now=T0 + 500)
    assert due(state, 0, T0 + 10) == Deadline(T0 + 500 + 900.0, "ui_error")
    assert reason_at(state, 0, T0 + 10, T0 + 500 + 899) is None
    assert reason_at(state, 0, T0 + 10, T0 + 500 + 900) == "ui_error"


def test_a_resume_nobody_saw_keeps_the_grace_when_its_own_wait_is_shorter() -> None:
    state = msgspec.structs.replace(new_questionnaire(), client_wait=2.0)
    state = resume(clarify(state, now=T0 + 1), now=T0 + 500)
    assert due(state, 0, T0 + 10) == Deadline(T0 + 500 + GRACE, "ui_error")


def test_a_client_that_left_after_the_last_change_gets_the_grace_whatever_its_own_wait() -> None:
    state = msgspec.structs.replace(new_questionnaire(), client_wait=900.0)
    state = answer(state, "a", now=T0 + 2)
    assert due(state, 0, T0 + 50) == Deadline(T0 + 50 + GRACE, "ui_error")


def test_an_inbox_covering_the_session_holds_a_questionnaire_nobody_opened() -> None:
    state = new_questionnaire()
    inbox_until = T0 + 600  # an inbox socket's heartbeats reach this far
    held = deadline(state, 0, None, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=inbox_until)
    assert held == Deadline(inbox_until + GRACE, "ui_unavailable")
    at = T0 + 600 + GRACE
    assert expired(state, 0, None, at - 0.001, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=inbox_until) is None
    assert expired(state, 0, None, at, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=inbox_until) == (
        "ui_unavailable"
    )


def test_an_inbox_that_left_long_ago_changes_nothing() -> None:
    state = new_questionnaire()
    assert deadline(state, 0, None, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=T0 - 1000) == due(
        state, 0, None
    )


def test_an_inbox_holds_a_questionnaire_whose_clients_left_for_the_grace_after_it_goes() -> None:
    state = answer(new_questionnaire(), "a", now=T0 + 2)
    held = deadline(state, 0, T0 + 10, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=T0 + 300)
    assert held == Deadline(T0 + 300 + GRACE, "ui_error")


def test_an_inbox_holds_nothing_that_has_no_deadline() -> None:
    assert deadline(new_questionnaire(), 1, None, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=T0) is None
    assert (
        deadline(clarify(new_questionnaire()), 0, None, client_wait=WAIT, reconnect_grace=GRACE, inbox_until=T0) is None
    )


@pytest.mark.parametrize("clients", [0, 1])
def test_a_questionnaire_waiting_for_the_agent_never_expires(clients: int) -> None:
    state = clarify(new_questionnaire())
    assert due(state, clients, None) is None
    assert reason_at(state, clients, T0, T0 + 10**6) is None


def test_a_terminal_questionnaire_has_no_deadline() -> None:
    state = cancel(new_questionnaire())
    assert due(state, 0, None) is None
    assert reason_at(state, 0, None, T0 + 10**6) is None


def test_a_deadline_is_a_frozen_value() -> None:
    value = Deadline(1.0, "ui_error")
    with pytest.raises(AttributeError):
        value.at = 2.0  # type: ignore[misc]
