"""One exception root: a wire code, a message, an HTTP status."""

from __future__ import annotations

import pytest

from broker.core.errors import HTTP_STATUS, BrokerError, invalid


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("invalid_arguments", 400),
        ("unauthorized", 401),
        ("forbidden", 403),
        ("unknown_questionnaire", 404),
        ("stale_revision", 409),
        ("not_awaiting_clarification", 409),
        ("store_unavailable", 503),
        ("shutting_down", 503),
    ],
)
def test_agent_api_codes_map_to_their_protocol_status(code: str, status: int) -> None:
    assert BrokerError(code, "m").http_status == status


@pytest.mark.parametrize(
    "code",
    [
        "bad_frame",
        "stale_step",
        "invalid_answer",
        "unknown_option",
        "other_not_allowed",
        "text_too_long",
        "looks_like_secret",
    ],
)
def test_websocket_only_codes_never_become_a_server_error(code: str) -> None:
    assert code not in HTTP_STATUS
    assert BrokerError(code, "m").http_status == 400


def test_an_error_carries_its_code_message_and_ref() -> None:
    error = BrokerError("stale_step", "old step", ref="r1")
    assert (error.code, error.message, error.ref, str(error)) == ("stale_step", "old step", "r1", "old step")
    assert BrokerError("bad_frame", "m").ref is None
    assert repr(error) == "BrokerError('stale_step', 'old step')"
    assert (error.frame, error.field) == (None, None)
    located = BrokerError("bad_frame", "hello 'token' must be a string", frame="hello", field="token")
    assert (located.frame, located.field) == ("hello", "token")


def test_invalid_builds_a_questionnaire_rejection() -> None:
    error = invalid('question "q": "id" must not be empty')
    assert error.code == "invalid_arguments"
    assert error.message == 'questionnaire: question "q": "id" must not be empty'
    assert error.http_status == 400
