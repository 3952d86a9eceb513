"""What a bot session will do, and how to check what the agent got back (pure, no I/O).

A ``Plan`` is drawn from a seeded ``random.Random`` before the agent starts a questionnaire:
the tool input (questions of the configured shape), the answer the bots will give to each
question, where (if anywhere) the person asks for clarification and where they cancel. The
bots play the plan; the agent loop keeps an ``Expectation`` in step with what the bots have
actually sent, and ``verify_result`` compares a tool result (the ``details`` and the text
lines) against it. Any difference is a ``verify_mismatch``: a lost or altered answer is the
worst bug a broker can have, so the checks are exact.

The bots deliberately send option ids in a shuffled order and Other texts with surrounding
whitespace; the expectation holds the normalized form (declared order, trimmed), so the
verifier also checks the broker's normalization.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Final

from broker.core.model import MAX_OPTIONS, MAX_QUESTIONS
from broker.core.results import DETAILS_VERSION, MARKERS

_ANSWER_LINE: Final = re.compile(r"^[A-Za-z0-9_.:-]+: optionIds=\[")


@dataclass(frozen=True)
class Shape:
    """How questionnaires look: sizes and the share of multi questions and Other answers."""

    questions: int = 3
    options: int = 4
    multi_share: float = 0.3
    other_share: float = 0.1

    def __post_init__(self) -> None:
        if not 1 <= self.questions <= MAX_QUESTIONS:
            raise ValueError(f"--questions must be 1-{MAX_QUESTIONS}")
        if not 1 <= self.options <= MAX_OPTIONS:
            raise ValueError(f"--options must be 1-{MAX_OPTIONS}")
        for name in ("multi_share", "other_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be between 0 and 1")


@dataclass(frozen=True)
class Rates:
    """Per-questionnaire probabilities of the person's detours."""

    clarify: float = 0.0  # the person asks the agent something (once; sometimes twice)
    cancel: float = 0.0  # the person cancels at some question
    churn: float = 0.0  # per question: the answering bot drops and reconnects before answering


@dataclass(frozen=True)
class Pick:
    """One answer or draft: what the bot sends, and the normalized form the broker must keep."""

    sent_ids: tuple[str, ...]
    sent_other: str | None
    expected: dict[str, Any]  # {"selectedOptionIds": [...], "other"?: str}

    def selection(self) -> dict[str, Any]:
        """The selection as a frame sends it (``selectedOptionIds`` and maybe ``other``)."""
        out: dict[str, Any] = {"selectedOptionIds": list(self.sent_ids)}
        if self.sent_other is not None:
            out["other"] = self.sent_other
        return out


@dataclass
class Plan:
    tag: str
    tool_input: dict[str, Any]  # the start call, exactly as posted
    snapshot: list[dict[str, Any]]  # the normalized questions the broker must report back
    answers: list[Pick]  # one per question
    drafts: list[Pick | None]  # a partial multi selection to send as a draft (churn / clarify)
    clarify_at: list[int]  # question indexes, ascending (a repeat = a second clarification there)
    cancel_at: int | None  # question index at which the person cancels, or None

    @property
    def total(self) -> int:
        return len(self.snapshot)

    @property
    def expected_status(self) -> str:
        return "cancelled" if self.cancel_at is not None else "completed"

    def request(self, number: int) -> str:
        """The text of the person's ``number``-th (1-based) clarification request."""
        return f'  Was bedeutet das genau? \u2013 {self.tag} #{number} "quoted"  '

    def response(self, revision: int) -> str:
        return f"Because of reason {revision} for {self.tag} \u2013 ok"


def make_plan(rng: random.Random, shape: Shape, rates: Rates, tag: str) -> Plan:
    questions: list[dict[str, Any]] = []
    snapshot: list[dict[str, Any]] = []
    answers: list[Pick] = []
    drafts: list[Pick | None] = []
    for index in range(shape.questions):
        qid = f"q{index + 1}"
        options = [{"id": f"o{n + 1}", "label": f"Option {n + 1} \u00e9"} for n in range(shape.options)]
        multi = rng.random() < shape.multi_share
        allow_other = rng.random() >= 0.2 or shape.other_share >= 1.0
        question: dict[str, Any] = {
            "id": qid,
            "label": f"Question {index + 1}",
            "prompt": f"What about {qid} ({tag})?",
            "type": "multi" if multi else "single",
            "options": options,
            "allowOther": allow_other,
        }
        wire = dict(question)
        if multi:
            ceiling = shape.options + (1 if allow_other else 0)
            minimum = rng.choice((0, 1))
            maximum = rng.choice((None, ceiling, max(minimum, 1)))
            question["minSelections"] = minimum
            if maximum is not None:
                question["maxSelections"] = maximum
            wire["minSelections"], wire["maxSelections"] = minimum, maximum
        questions.append(question)
        snapshot.append(wire)
        answers.append(_pick_answer(rng, wire, shape.other_share, tag))
        drafts.append(_pick_draft(rng, wire, tag) if multi else None)

    clarify_at: list[int] = []
    if rng.random() < rates.clarify:
        clarify_at.append(rng.randrange(shape.questions))
        if rng.random() < 0.25:
            clarify_at.append(rng.randrange(clarify_at[0], shape.questions))
    cancel_at = rng.randrange(shape.questions) if rng.random() < rates.cancel else None
    if cancel_at is not None:
        clarify_at = [i for i in clarify_at if i <= cancel_at]
    return Plan(
        tag=tag,
        tool_input={"action": "start", "questions": questions},
        snapshot=snapshot,
        answers=answers,
        drafts=drafts,
        clarify_at=sorted(clarify_at),
        cancel_at=cancel_at,
    )


def _other_text(rng: random.Random, tag: str) -> tuple[str, str]:
    core = f'other "{tag}" {rng.randrange(10**6)} \u00fc\u00f1\u00ee\nsecond line'
    return f"  {core}\t ", core


def _pick_answer(rng: random.Random, question: dict[str, Any], other_share: float, tag: str) -> Pick:
    ids = [o["id"] for o in question["options"]]
    use_other = question["allowOther"] and rng.random() < other_share
    if question["type"] == "single":
        if use_other:
            sent, trimmed = _other_text(rng, tag)
            return Pick((), sent, {"selectedOptionIds": [], "other": trimmed})
        choice = rng.choice(ids)
        return Pick((choice,), None, {"selectedOptionIds": [choice]})
    minimum = question["minSelections"]
    maximum = question["maxSelections"]
    ceiling = len(ids) + (1 if question["allowOther"] else 0)
    maximum = ceiling if maximum is None else maximum
    if use_other and maximum < 1:
        use_other = False
    room = maximum - (1 if use_other else 0)
    floor = max(0, minimum - (1 if use_other else 0))
    count = rng.randint(floor, max(floor, min(room, len(ids))))
    chosen = rng.sample(ids, count)
    return _multi_pick(rng, ids, chosen, use_other, tag)


def _pick_draft(rng: random.Random, question: dict[str, Any], tag: str) -> Pick:
    """A draft is not held to min/max: any distinct known ids (plus maybe Other)."""
    ids = [o["id"] for o in question["options"]]
    chosen = rng.sample(ids, rng.randint(0, len(ids)))
    use_other = question["allowOther"] and rng.random() < 0.3
    return _multi_pick(rng, ids, chosen, use_other, tag)


def _multi_pick(rng: random.Random, ids: list[str], chosen: list[str], use_other: bool, tag: str) -> Pick:
    sent_ids = list(chosen)
    rng.shuffle(sent_ids)  # the broker must put them back in declared order
    expected: dict[str, Any] = {"selectedOptionIds": [i for i in ids if i in set(chosen)]}
    sent_other = None
    if use_other:
        sent_other, expected["other"] = _other_text(rng, tag)
    return Pick(tuple(sent_ids), sent_other, expected)


# --- expectations and verification ------------------------------------------------


@dataclass
class Expectation:
    """What the agent should read back, kept in step with what the bots actually sent."""

    plan: Plan
    questionnaire_id: str | None = None
    answers: list[dict[str, Any]] = field(default_factory=list)  # committed answers (wire form)
    clarifications: list[dict[str, Any]] = field(default_factory=list)
    draft: dict[str, Any] | None = None  # the multi draft the broker should hold now
    cancelled: bool = False

    @property
    def revision(self) -> int:
        return len(self.clarifications)

    def answered(self, index: int) -> None:
        self.answers.append({"questionId": self.plan.snapshot[index]["id"], **self.plan.answers[index].expected})
        self.draft = None

    def asked(self, index: int, request: str, draft: dict[str, Any] | None) -> None:
        revision = self.revision + 1
        self.clarifications.append(
            {"revision": revision, "questionId": self.plan.snapshot[index]["id"], "request": request.strip()}
        )
        if draft is not None:
            self.draft = draft

    def responded(self, revision: int, response: str) -> None:
        self.clarifications[revision - 1]["response"] = response.strip()


def answer_line(answer: dict[str, Any]) -> str:
    """The text line the protocol defines for one answer."""
    line = f"{answer['questionId']}: optionIds=[{', '.join(answer['selectedOptionIds'])}]"
    if "other" in answer:
        line += f" other={json.dumps(answer['other'], ensure_ascii=False)}"
    return line


def verify_result(expected: Expectation, status: str, result: Any) -> list[str]:
    """Differences between a 200 tool result and what the bots did; empty when it matches.

    ``status`` is the outcome the agent loop expects now: ``needs_clarification`` right after
    a clarify, else the plan's final status.
    """
    problems: list[str] = []

    def check(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    if not isinstance(result, dict) or not isinstance(result.get("details"), dict):
        return ["the result has no details object"]
    details: dict[str, Any] = result["details"]
    content = result.get("content")
    text = ""
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = str(content[0].get("text", ""))
    check(result.get("isError") is False, "isError is not false")
    qid = expected.questionnaire_id
    revision = expected.revision
    check(details.get("version") == DETAILS_VERSION, f"details.version is {details.get('version')!r}")
    if qid is not None:
        check(details.get("questionnaireId") == qid, f"questionnaireId {details.get('questionnaireId')!r} != {qid}")
    else:
        qid = str(details.get("questionnaireId"))
    check(details.get("status") == status, f"status {details.get('status')!r}, expected {status}")
    check(details.get("revision") == revision, f"revision {details.get('revision')!r}, expected {revision}")
    check(details.get("questions") == expected.plan.snapshot, "the questions snapshot differs from what was sent")
    check(
        details.get("answers") == expected.answers,
        f"answers differ: got {details.get('answers')!r}, bots answered {expected.answers!r}",
    )
    check(
        details.get("currentQuestionIndex") == len(expected.answers),
        f"currentQuestionIndex {details.get('currentQuestionIndex')!r}, expected {len(expected.answers)}",
    )
    check(
        details.get("clarifications") == expected.clarifications,
        f"clarifications differ: got {details.get('clarifications')!r}, expected {expected.clarifications!r}",
    )
    want_draft = None if status == "completed" else expected.draft
    check(
        details.get("draftAnswer") == want_draft, f"draftAnswer {details.get('draftAnswer')!r}, expected {want_draft!r}"
    )
    if status == "cancelled":
        check(
            details.get("cancellationReason") == "user_cancelled",
            f"cancellationReason {details.get('cancellationReason')!r}, expected user_cancelled",
        )
    else:
        check("cancellationReason" not in details, "cancellationReason present on a non-cancelled result")
    if status == "needs_clarification":
        pending = expected.clarifications[-1] if expected.clarifications else None
        check(
            pending is not None and details.get("clarificationRequest") == pending,
            f"clarificationRequest {details.get('clarificationRequest')!r}, expected {pending!r}",
        )
    else:
        check("clarificationRequest" not in details, "clarificationRequest present outside needs_clarification")

    # The text, line by line, for a model.
    lines = text.split("\n")
    marker = MARKERS.get(status, "?")
    check(lines[0] == f"{marker} questionnaireId={qid} revision={revision}", f"first text line is {lines[0]!r}")
    got_lines = [line for line in lines[1:] if _ANSWER_LINE.match(line)]
    want_lines = [answer_line(a) for a in expected.answers]
    check(got_lines == want_lines, f"answer lines differ: got {got_lines!r}, expected {want_lines!r}")
    if status == "needs_clarification" and expected.clarifications:
        request = expected.clarifications[-1]["request"]
        check(json.dumps(request, ensure_ascii=False) in lines, "the clarification request is not in the text")
        calls = [line for line in lines if line.startswith('{"action": "resume"')]
        call: Any = None
        if len(calls) == 1:
            try:
                call = json.loads(calls[0])
            except ValueError:
                call = None
        check(
            isinstance(call, dict) and call.get("questionnaireId") == qid and call.get("revision") == revision,
            f"the resume call in the text is {calls!r}",
        )
    return problems
