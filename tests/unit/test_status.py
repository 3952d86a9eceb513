"""The close codes and reasons, named once in broker/core/status.py, against the protocol's table."""

from __future__ import annotations

import re
from pathlib import Path

from broker.core.status import CloseCode, CloseReason

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_every_close_code_of_the_protocol_has_a_name() -> None:
    table = PROTOCOL.read_text(encoding="utf-8").split("### Close codes", 1)[1].split("\n\n", 2)[1]
    documented = {int(code) for code in re.findall(r"\b(\d{4})\b", table)}
    assert documented  # the table was found
    assert documented <= set(CloseCode)


def test_close_reasons_fit_in_a_close_frame() -> None:
    # A close frame's reason is at most 123 bytes of UTF-8 (RFC 6455, 5.5).
    for reason in CloseReason:
        assert 0 < len(reason.encode()) <= 123, reason
