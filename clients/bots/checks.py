"""What a bot checks in the frames it reads: each against the session's ``Round`` (what the
plan asked and what the bots of the session sent so far).

A mixin of ``Bot`` (bot.py): the checks read and keep a little of the bot's state (the
highest step it was shown, the answer whose latency is running), so they live beside it,
but apart from the connection and the playing of the plan. A problem is reported as a
``verify_mismatch`` through ``Session.mismatch``.
"""

from __future__ import annotations

from typing import Any

from clients.bots.round import Round, SessionView
from clients.bots.stats import Stats

BOT_NAME = "qbroker-bots"  # how a bot names itself in its hello ("qbroker-bots 3")


class FrameChecks:
    """The frame checks of one bot (mixed into ``Bot``, which sets these attributes)."""

    session: SessionView
    stats: Stats
    seen: tuple[str, int] | None  # the questionnaire and highest step this bot was shown
    pending_answer: tuple[str, int, float] | None  # (questionnaire, step, sent at)

    def on_suspended(self, frame: dict[str, Any]) -> None:
        rnd = self.session.round
        qid = frame.get("questionnaireId")
        if rnd is None or qid != rnd.questionnaire_id:
            return
        # The frame may be late: this bot's broker (or this bot) can lag behind the one whose
        # bot already acted on the next question, even clarified again. So it must be exactly
        # the clarification its revision names, not the latest one sent; ``_check_order``
        # catches a suspension shown again after something newer.
        clar = rnd.expect.clarifications
        revision = frame.get("revision")
        sent = clar[revision - 1] if isinstance(revision, int) and 0 < revision <= len(clar) else None
        if sent is None or (frame.get("request"), frame.get("questionId")) != (sent["request"], sent["questionId"]):
            self.session.mismatch(f"suspended frame {frame!r} does not match the clarification sent")

    def _check_order(self, frame: dict[str, Any]) -> None:
        """A bot's views of a questionnaire never go back a step: each is the state as of a
        write, and a connection (or a new one) never shows an older write than it showed."""
        qid, step = frame.get("questionnaireId"), frame.get("step")
        if not isinstance(qid, str) or not isinstance(step, int):
            return
        seen = self.seen
        if seen is not None and seen[0] == qid:
            if step < seen[1]:
                self.session.mismatch(f"{frame.get('type')} frame of {qid} at step {step} after step {seen[1]}")
                return
            step = max(step, seen[1])
        self.seen = (qid, step)
        steps = self.session.steps_seen
        steps[qid] = max(step, steps.get(qid, step))

    def on_closed(self, frame: dict[str, Any], now: float) -> None:
        qid = frame.get("questionnaireId")
        if not isinstance(qid, str):
            self.session.mismatch(f"closed frame without a questionnaire id: {frame!r}")
            return
        pending = self.pending_answer
        if pending is not None and pending[0] == qid:
            self.stats.observe("answer_to_next_question", now - pending[2])
            self.pending_answer = None
        rnd = self.session.round
        if rnd is None or rnd.questionnaire_id != qid:
            return
        want = rnd.plan.expected_status
        if frame.get("status") != want or (want == "cancelled" and frame.get("reason") != "user_cancelled"):
            self.session.mismatch(f"closed frame {frame!r}, expected {want}")
        if want == "completed":
            self._check_answered_by(frame)
        elif "answeredBy" in frame:
            self.session.mismatch(f"closed frame {frame!r} says who answered, but it did not complete")

    def _check_question(self, rnd: Round, frame: dict[str, Any]) -> None:
        expect, plan = rnd.expect, rnd.plan
        index = frame["index"]
        problems = []
        if index != len(expect.answers):
            problems.append(f"index {index}, but {len(expect.answers)} question(s) were answered")
        if frame.get("total") != plan.total:
            problems.append(f"total {frame.get('total')!r} != {plan.total}")
        if 0 <= index < plan.total and frame.get("question") != plan.snapshot[index]:
            problems.append(f"question {frame.get('question')!r} != {plan.snapshot[index]!r}")
        if frame.get("clarifications") != expect.clarifications:
            problems.append(f"clarifications {frame.get('clarifications')!r} != {expect.clarifications!r}")
        if frame.get("draft") != expect.draft:
            problems.append(f"draft {frame.get('draft')!r} != {expect.draft!r}")
        progress = frame.get("progress")
        states = [p.get("state") for p in progress] if isinstance(progress, list) else None
        want = ["answered"] * index + ["current"] + ["pending"] * (plan.total - index - 1)
        if states != want:
            problems.append(f"progress states {states!r} != {want!r}")
        if index == 0 and "answeredBy" in frame:
            problems.append(f"answeredBy {frame['answeredBy']!r} before any answer")
        if index > 0:
            self._check_answered_by(frame)
        for problem in problems:
            self.session.mismatch(f"question frame of {frame.get('questionnaireId')}: {problem}")

    def _check_answered_by(self, frame: dict[str, Any]) -> None:
        """Who answered, when the frame says (a broker before ``answeredBy`` does not): in a
        bots' session, always a bot (a client of kind ``bot``, named as the bots name
        themselves)."""
        if "answeredBy" not in frame:
            return
        by = frame["answeredBy"]
        client = by.get("client") if isinstance(by, dict) else None
        if (
            not isinstance(by, dict)
            or set(by) != {"sub", "role", "client"}
            or by["role"] != "client"
            or not isinstance(client, dict)
            or client.get("kind") != "bot"
            or not str(client.get("name")).startswith(BOT_NAME)
        ):
            self.session.mismatch(f"{frame.get('type')} frame of {frame.get('questionnaireId')}: answeredBy {by!r}")

    def _check_view_after_reconnect(self, expect: tuple[str, int, int, Any], view: dict[str, Any]) -> None:
        qid, step, index, draft = expect
        got = (view.get("type"), view.get("questionnaireId"), view.get("step"), view.get("index"), view.get("draft"))
        if got != ("question", qid, step, index, draft):
            self.session.mismatch(
                f"after a reconnect the view is {got!r}, expected {('question', qid, step, index, draft)!r}"
            )
