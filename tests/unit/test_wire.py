"""The session id, defined once in broker/core/wire.py and checked the same everywhere."""

from __future__ import annotations

import re

import pytest

from broker.core.wire import MAX_SESSION_ID, SESSION_ID_PATTERN, SESSION_ID_RULE, is_session_id
from broker.http.routes import openapi_document
from broker.tokens.claims import mint_token, valid_session_id

GOOD = ["demo", "a", "A-Z.a_z:0-9", "x" * MAX_SESSION_ID, "...", "user:42"]
BAD = ["", "x" * (MAX_SESSION_ID + 1), "a b", "a/b", "sid\n", "\nsid", "é", "a%2Fb", "{tag}"]


@pytest.mark.parametrize("sid", GOOD)
def test_a_session_id_of_the_alphabet_and_length_is_accepted(sid: str) -> None:
    assert is_session_id(sid) and valid_session_id(sid)


@pytest.mark.parametrize("sid", BAD)
def test_any_other_session_id_is_refused(sid: str) -> None:
    assert not is_session_id(sid) and not valid_session_id(sid)
    with pytest.raises(ValueError, match=re.escape(SESSION_ID_RULE)):
        mint_token("s" * 32, sid, "client")


def test_the_service_wide_token_sid_is_no_session_id() -> None:
    assert not is_session_id("*")  # "*" in a token means every session; no session is named "*"


def test_the_rule_in_messages_and_the_pattern_say_the_same() -> None:
    assert SESSION_ID_PATTERN == r"^[A-Za-z0-9._:-]{1,128}$"
    assert SESSION_ID_RULE == "1-128 characters of [A-Za-z0-9._:-]"


def test_the_openapi_document_publishes_the_same_pattern() -> None:
    sid = next(p for p in openapi_document()["paths"]["/v1/sessions/{sid}/questionnaire"]["post"]["parameters"])
    assert sid["name"] == "sid" and sid["schema"]["pattern"] == SESSION_ID_PATTERN
