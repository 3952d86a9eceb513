"""``Pending``: a ``202``, the questionnaire still with the person.

A leaf of its own: the results return it and ``QBrokerTimeout`` carries it, and the errors
and the results import nothing of each other's to say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Pending:
    """A ``202``: the questionnaire is still with the person."""

    questionnaire_id: str
    revision: int
    step: int

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Pending:
        return cls(str(wire["questionnaireId"]), int(wire["revision"]), int(wire.get("step", 0)))
