"""A round (one questionnaire in flight), what a bot may see of its session, and what a
session may see of its run: the leaf the run, the session, its bots and their checks
share, so that none of them imports another for its types; a bot reaches the run's
options only through its ``BotSettings``."""

from __future__ import annotations

import asyncio
import random
import ssl
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from clients.bots.options import Budget, Options
from clients.bots.plan import Expectation, Plan, Rates
from clients.bots.stats import Stats

# What a command may change in an ``Expectation``: answers, clarifications, draft, cancelled.
Saved = tuple[list[dict[str, Any]], list[dict[str, Any]], "dict[str, Any] | None", bool]


@dataclass
class Round:
    """One questionnaire in flight: the plan, what the bots did so far, timing."""

    plan: Plan
    expect: Expectation
    started: float
    questionnaire_id: str | None = None
    acted: set[int] = field(default_factory=set)  # steps some bot has acted on
    last_acted: int = -1
    clarified: Counter[int] = field(default_factory=Counter)  # question index -> clarifications sent

    def next_command(self, qid: str, step: int, index: int, rng: random.Random) -> dict[str, Any]:
        """The command for question ``index`` that the plan says (a clarification, the cancel
        or the answer), written into the expectation as sent; the caller adds its ``ref``."""
        plan, expect = self.plan, self.expect
        if self.clarified[index] < plan.clarify_at.count(index):
            self.clarified[index] += 1
            request = plan.request(len(expect.clarifications) + 1)
            pick = plan.drafts[index] if rng.random() < 0.5 else None
            expect.asked(index, request, pick.expected if pick is not None else None)
            frame: dict[str, Any] = {"type": "clarify", "questionnaireId": qid, "step": step, "request": request}
            if pick is not None:
                frame["draft"] = pick.selection()
            return frame
        if index == plan.cancel_at:
            expect.cancelled = True
            return {"type": "cancel", "questionnaireId": qid, "step": step}
        pick = plan.answers[index]
        expect.answered(index)
        return {
            "type": "answer",
            "questionnaireId": qid,
            "step": step,
            "questionId": plan.snapshot[index]["id"],
            **pick.selection(),
        }


@dataclass(frozen=True)
class BotSettings:
    """What of the run's options a bot acts by."""

    seed: int
    urls: list[str]
    deflate: bool
    think_ms: tuple[float, float]
    rates: Rates


class RunView(Protocol):
    """What a session may see of the load run it is part of."""

    opts: Options
    stats: Stats
    budget: Budget
    tls: ssl.SSLContext  # shared: building one per client is costly
    connect_slots: asyncio.Semaphore


class SessionView(Protocol):
    """What a bot (and its checks) may see and do of its session."""

    sid: str
    stats: Stats
    client_token: str
    settings: BotSettings
    connect_slots: asyncio.Semaphore  # the run's: how many bots may be connecting at once
    round: Round | None
    steps_seen: dict[str, int]  # questionnaire -> the highest step any bot of the session was shown

    @property
    def bots(self) -> Sequence[object]:
        """The session's bots, in turn: bot ``step % len(bots)`` acts on a step."""
        ...

    def bind(self, questionnaire_id: str, now: float, question: dict[str, Any] | None) -> Round | None: ...

    def mismatch(self, detail: str) -> None: ...
