"""Invariants of the state machine over random command sequences (hypothesis).

Each example builds a random, valid questionnaire, then feeds it a random mix of valid and
invalid commands (wrong steps, wrong ids, unknown or duplicate options, bad texts, stale
revisions, commands after the end) and checks, after every single command:

- a refused command raises ``BrokerError`` and leaves the state identical (``==``);
- an accepted one bumps ``version`` by exactly one; ``revision`` and ``step`` never decrease;
- answers already given never change; a terminal questionnaire accepts nothing more;
- answers are in question order, option ids in declared order, and each answer obeys its
  question's rules; the counters agree with the history.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from broker.core.errors import BrokerError
from broker.core.machine import (
    Abort,
    AnswerQuestion,
    Cancel,
    Clarify,
    Command,
    Draft,
    MarkUnavailable,
    Questionnaire,
    Resume,
    Selection,
    apply,
    start,
)
from broker.core.model import MAX_CLARIFICATION, MAX_OTHER, Question, StartInput, parse_tool_input

# A failing example's report makes hypothesis touch mypy_extensions.TypedDict, whose
# DeprecationWarning (an error under filterwarnings=error) would hide the report.
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

QID = "qn-prop"
# Suited to CI: no per-example deadline (shared runners stall), enough examples to reach deep
# states; the smaller spaces get fewer. The whole unit suite stays well under 20 s.
CI = settings(max_examples=300, deadline=None)
CI_SMALL = settings(max_examples=150, deadline=None)

WIRE_CODES = {
    "stale_step",
    "invalid_answer",
    "unknown_option",
    "other_not_allowed",
    "below_min_selections",
    "above_max_selections",
    "text_too_long",
    "stale_revision",
    "not_awaiting_clarification",
    "invalid_arguments",
    "questionnaire_closed",
}


# --- strategies ---------------------------------------------------------------------


@st.composite
def question_dicts(draw: st.DrawFn, index: int) -> dict[str, Any]:
    count = draw(st.integers(1, 4))
    # Declared order deliberately differs from any sorted order.
    option_ids = draw(st.permutations(["delta", "alpha", "echo", "bravo", "charlie"]))[:count]
    allow_other = draw(st.booleans())
    raw: dict[str, Any] = {
        "id": f"q{index}",
        "prompt": f"Question {index}?",
        "type": draw(st.sampled_from(["single", "multi"])),
        "options": [{"id": option_id} for option_id in option_ids],
        "allowOther": allow_other,
    }
    if raw["type"] == "multi":
        ceiling = count + (1 if allow_other else 0)
        low = draw(st.integers(0, ceiling))
        raw["minSelections"] = low
        high = draw(st.none() | st.integers(max(low, 1), ceiling))
        if high is not None:
            raw["maxSelections"] = high
    return raw


@st.composite
def questionnaires(draw: st.DrawFn) -> Questionnaire:
    count = draw(st.integers(1, 4))
    payload = {"action": "start", "questions": [draw(question_dicts(i)) for i in range(count)]}
    parsed = parse_tool_input(payload)
    assert isinstance(parsed, StartInput)
    return start(QID, "sess-prop", parsed.questions, 0.0)


@dataclass(frozen=True)
class Plan:
    """An abstract command; ``build`` makes it concrete against the current state."""

    kind: str
    on_target: bool  # aimed at the latest state; otherwise ``miss`` says what it gets wrong
    miss: int
    picks: tuple[int, ...]  # option indexes; an index past the options means "zulu" (unknown)
    shape: str  # "fit": a valid answer; "edge": one step off it; "clean": known, distinct; "wild": as drawn
    other: str | None
    text: int  # which request/response text
    with_draft: bool


OTHERS = [None, None, None, "", "   ", " my own ", "x" * (MAX_OTHER + 1)]
REQUESTS = ["why?", " and this? ", "  ", "r" * (MAX_CLARIFICATION + 1)]
RESPONSES = ["ok", "ok", " fine ", "", "  ", "r" * (MAX_CLARIFICATION + 1)]

# Weighted so that sequences get deep (several answers, clarification rounds) before one of
# the rare closing commands (cancel, abort, unavailable) ends them.
KINDS = (
    ["draft"] * 16
    + ["answer"] * 64
    + ["clarify"] * 16
    + ["resume"] * 24
    + ["cancel", "abort", "ui_unavailable", "ui_error"]
)
PLANS = st.builds(
    Plan,
    kind=st.sampled_from(KINDS),
    on_target=st.sampled_from([True] * 3 + [False]),
    miss=st.integers(0, 5),
    picks=st.lists(st.integers(0, 5), max_size=5).map(tuple),
    shape=st.sampled_from(["fit"] * 4 + ["edge"] * 2 + ["clean", "wild"]),
    other=st.sampled_from(OTHERS),
    text=st.integers(0, 5),
    with_draft=st.booleans(),
)


def sequences(longest: int) -> st.SearchStrategy[list[Plan]]:
    """Plan lists of every length up to ``longest`` (plain ``st.lists`` favours short ones)."""
    return st.integers(0, longest).flatmap(lambda n: st.lists(PLANS, min_size=n, max_size=n))


def _picks(plan: Plan, question: Question) -> tuple[tuple[str, ...], str | None]:
    known = question.option_ids
    ids = [known[i] if i < len(known) else "zulu" for i in plan.picks]
    if plan.shape == "wild":
        return tuple(ids), plan.other
    ids = [option_id for option_id in dict.fromkeys(ids) if option_id != "zulu"]
    if plan.shape == "clean":
        return tuple(ids), plan.other
    # "fit": bend the picks (still in the order drawn) into an answer the question accepts.
    other = "my own" if plan.other == " my own " and question.allow_other else None
    if question.type == "single":
        ids, other = ([(ids or [known[0]])[0]], None) if ids or other is None else ([], other)
    else:
        ceiling = question.max_selections or len(known) + 1
        while ids and len(ids) + (other is not None) > ceiling:
            ids.pop()
        if len(ids) + (other is not None) > ceiling:
            other = None
        for option_id in known:
            if len(ids) + (other is not None) >= question.min_selections:
                break
            if option_id not in ids:
                ids.append(option_id)
        if len(ids) + (other is not None) < question.min_selections:
            other = "filler"  # every option is picked; the bound counts Other too
    if plan.shape == "edge":
        # One step off a valid answer: the boundaries are where the bugs live.
        twist = plan.text % 4
        if twist in (0, 1):  # fill up to the ceiling, then one more option or an Other
            ceiling = 1 if question.type == "single" else question.max_selections or len(known) + 1
            for option_id in known:
                if len(ids) + (other is not None) >= ceiling:
                    break
                if option_id not in ids:
                    ids.append(option_id)
            if twist == 0:
                ids += [option_id for option_id in known if option_id not in ids][:1]
            else:
                other = "one more"
        elif twist == 2:
            ids += ids[:1]  # a repeated id
        elif ids:
            ids.pop(0)  # one below what was fine
        else:
            other = None
    return tuple(ids), other


def build(plan: Plan, state: Questionnaire) -> Command:
    question = state.current_question or state.questions[-1]
    if plan.kind == "abort":
        return Abort()
    if plan.kind in ("ui_unavailable", "ui_error"):
        return MarkUnavailable(plan.kind)  # type: ignore[arg-type]
    if plan.kind == "resume":
        revision = state.revision + (0 if plan.on_target else (-1, 1)[plan.miss % 2])
        return Resume(revision, RESPONSES[plan.text % len(RESPONSES)])
    # Client commands miss by naming an old or future step, another questionnaire or
    # (answers only) a question that is not the current one.
    miss = -1 if plan.on_target else plan.miss % (6 if plan.kind == "answer" else 3)
    qid = "qn-other" if miss == 2 else QID
    step = state.step + {0: -1, 1: 1}.get(miss, 0)
    if plan.kind == "cancel":
        return Cancel(qid, step)
    ids, other = _picks(plan, question)
    if plan.kind == "draft":
        return Draft(qid, step, ids, other)
    if plan.kind == "clarify":
        draft = Selection(ids, other) if plan.with_draft else None
        return Clarify(qid, step, REQUESTS[plan.text % len(REQUESTS)], draft)
    question_id = {3: state.questions[0].id, 4: state.questions[-1].id, 5: "ghost"}.get(miss, question.id)
    return AnswerQuestion(qid, step, question_id, ids, other)


def run(state: Questionnaire, plans: list[Plan]) -> Questionnaire:
    """Apply ``plans`` in turn, skipping the refused ones; stop at the end of the questionnaire."""
    for turn, plan in enumerate(plans, start=1):
        if state.is_terminal:
            break
        with contextlib.suppress(BrokerError):  # refusals are checked elsewhere
            state = apply(state, build(plan, state), float(turn))
    return state


# --- invariants ---------------------------------------------------------------------


def check_selection(question: Question, selection: Selection, *, final: bool) -> None:
    ids = selection.selected_option_ids
    assert ids == tuple(o for o in question.option_ids if o in ids), "option ids out of declared order"
    assert len(set(ids)) == len(ids)
    if selection.other is not None:
        assert question.allow_other
        assert selection.other == selection.other.strip() and selection.other
        assert len(selection.other) <= MAX_OTHER
    count = len(ids) + (selection.other is not None)
    if question.type == "single":
        assert len(ids) <= 1
        if final:
            assert count == 1, "single: exactly one option, or only Other"
    elif final:
        assert count >= question.min_selections
        assert question.max_selections is None or count <= question.max_selections


def check_consistent(state: Questionnaire) -> None:
    """Facts that hold in every reachable state."""
    assert len(state.answers) <= len(state.questions)
    for answer, question in zip(state.answers, state.questions, strict=False):
        assert answer.question_id == question.id, "answers out of question order"
        check_selection(question, answer.selection, final=True)
    if state.draft is not None:
        assert state.current_question is not None
        check_selection(state.current_question, state.draft, final=False)
    assert (state.status == "completed") == (len(state.answers) == len(state.questions))
    assert [c.revision for c in state.clarifications] == list(range(1, state.revision + 1))
    assert all(c.response is not None for c in state.clarifications[:-1])
    if state.status == "needs_clarification":
        assert state.pending_clarification is state.clarifications[-1]
        assert state.clarifications[-1].response is None
        assert state.clarifications[-1].question_id == state.questions[state.current_index].id
    if state.status == "in_progress" and state.clarifications:
        assert state.clarifications[-1].response is not None
    assert (state.cancellation_reason is None) == (state.status in ("in_progress", "needs_clarification", "completed"))


def check_accepted(before: Questionnaire, after: Questionnaire, command: Command, now: float) -> None:
    assert not before.is_terminal, f"a terminal questionnaire accepted {command!r}"
    assert after.version == before.version + 1
    assert after.revision >= before.revision
    assert after.step >= before.step
    assert after.answers[: len(before.answers)] == before.answers, "an answer changed"
    assert len(after.answers) - len(before.answers) in (0, 1)
    assert len(after.clarifications) >= len(before.clarifications)
    for old, new in zip(before.clarifications, after.clarifications, strict=False):
        assert (old.revision, old.question_id, old.request) == (new.revision, new.question_id, new.request)
        assert old.response is None or old.response == new.response
    assert (after.id, after.session_id, after.questions, after.created_at) == (
        before.id,
        before.session_id,
        before.questions,
        before.created_at,
    )
    assert after.updated_at == now
    moves_step = isinstance(command, AnswerQuestion | Clarify | Resume | Cancel)
    assert after.step == before.step + (1 if moves_step else 0)
    # Only a command aimed at the latest state is ever accepted.
    if isinstance(command, Resume):
        assert before.status == "needs_clarification" and command.revision == before.revision
    if isinstance(command, Draft | AnswerQuestion | Clarify | Cancel):
        assert command.questionnaire_id == before.id and command.step == before.step
    if isinstance(command, Draft | AnswerQuestion | Clarify):
        assert before.status == "in_progress"
    if isinstance(command, AnswerQuestion):
        assert command.question_id == before.questions[before.current_index].id
        assert after.answers[-1].question_id == command.question_id
        sent = command.selected_option_ids
        assert len(set(sent)) == len(sent), "an answer with a repeated option id was accepted"
        assert set(after.answers[-1].selection.selected_option_ids) == set(sent)
    if isinstance(command, Draft):
        assert len(set(command.selected_option_ids)) == len(command.selected_option_ids)
        assert after.draft is not None and set(after.draft.selected_option_ids) == set(command.selected_option_ids)
    # Suspending and resuming never touch the answers or the stored multi draft.
    if isinstance(command, Resume) or (isinstance(command, Clarify) and command.draft is None):
        assert (after.answers, after.draft) == (before.answers, before.draft)


@CI
@given(initial=questionnaires(), plans=sequences(30))
def test_random_command_sequences_keep_every_invariant(initial: Questionnaire, plans: list[Plan]) -> None:
    state = initial
    check_consistent(state)
    accepted = 0
    for turn, plan in enumerate(plans, start=1):
        command = build(plan, state)
        now = float(turn)
        snapshot = state.to_record()
        try:
            after = apply(state, command, now)
        except BrokerError as exc:
            assert exc.code in WIRE_CODES, exc.code
            assert state.to_record() == snapshot, "a refused command changed the state"
            continue
        check_accepted(state, after, command, now)
        check_consistent(after)
        accepted += 1
        state = after
    assert state.version == accepted
    assert Questionnaire.from_record(state.to_record()) == state
    event(f"ended {state.status}")
    event(f"{len(state.answers)} answer(s), revision {state.revision}")


def every_command(state: Questionnaire) -> list[Command]:
    question = state.questions[-1]
    out: list[Command] = [Abort(), MarkUnavailable("ui_unavailable"), MarkUnavailable("ui_error")]
    for revision in (state.revision - 1, state.revision, state.revision + 1):
        out.append(Resume(revision, "ok"))
    for step in (state.step - 1, state.step, state.step + 1):
        out += [
            Cancel(QID, step),
            Draft(QID, step, ()),
            Draft(QID, step, question.option_ids[:1]),
            Clarify(QID, step, "why?"),
            AnswerQuestion(QID, step, question.id, question.option_ids[:1]),
            AnswerQuestion(QID, step, question.id, (), "other"),
        ]
    return out


ENDINGS = st.sampled_from(["abort", "ui_error", "cancel"])


@CI_SMALL
@given(initial=questionnaires(), plans=sequences(16), ending=ENDINGS)
def test_a_terminal_questionnaire_accepts_nothing_more(initial: Questionnaire, plans: list[Plan], ending: str) -> None:
    state = run(initial, plans)
    if not state.is_terminal:
        closings: dict[str, Command] = {
            "abort": Abort(),
            "ui_error": MarkUnavailable("ui_error"),
            "cancel": Cancel(QID, state.step),
        }
        state = apply(state, closings[ending], 99.0)
    assert state.is_terminal
    record = state.to_record()
    for command in every_command(state):
        try:
            apply(state, command, 100.0)
        except BrokerError:
            pass
        else:
            raise AssertionError(f"terminal {state.status} accepted {command!r}")
    assert state.to_record() == record


@CI_SMALL
@given(initial=questionnaires(), order=st.randoms(use_true_random=False), count=st.integers(0, 5))
def test_option_ids_are_stored_in_declared_order_whatever_order_they_were_sent_in(
    initial: Questionnaire, order: Any, count: int
) -> None:
    question = initial.questions[0]
    chosen = list(question.option_ids[:count])
    order.shuffle(chosen)
    command = AnswerQuestion(QID, 0, question.id, tuple(chosen))
    try:
        after = apply(initial, command, 1.0)
    except BrokerError as exc:  # bounds or single-select rules; the order is never the problem
        assert exc.code in {"invalid_answer", "below_min_selections", "above_max_selections"}
        return
    stored = after.answers[0].selection.selected_option_ids
    assert stored == tuple(o for o in question.option_ids if o in chosen)
    assert sorted(stored) == sorted(chosen)


RACERS = st.tuples(PLANS, st.sampled_from(["answer", "answer", "clarify", "cancel"])).map(
    lambda pair: replace(pair[0], kind=pair[1], on_target=True)
)


@CI_SMALL
@given(initial=questionnaires(), prefix=sequences(12), first=RACERS, second=RACERS)
def test_of_two_racing_commands_at_one_step_only_one_moves_the_questionnaire(
    initial: Questionnaire, prefix: list[Plan], first: Plan, second: Plan
) -> None:
    # Two clients saw the same question frame and both send a step-moving command for it.
    state = run(initial, prefix)
    one, two = build(first, state), build(second, state)
    try:
        after_one = apply(state, one, 100.0)
    except BrokerError:
        return
    event(f"first {type(one).__name__} accepted")
    try:
        apply(after_one, two, 101.0)
    except BrokerError as exc:
        assert exc.code == "stale_step"
    else:
        raise AssertionError(f"both {one!r} and {two!r} moved step {state.step}")


def violated_rules(question: Question, ids: tuple[str, ...], other: str | None) -> set[str]:
    """An independent statement of the answer rules: the codes this answer deserves."""
    rules: set[str] = set()
    if any(option_id not in question.option_ids for option_id in ids):
        rules.add("unknown_option")
    if len(set(ids)) != len(ids):
        rules.add("invalid_answer")
    text = (other or "").strip()
    if len(text) > MAX_OTHER:
        rules.add("text_too_long")
    if text and not question.allow_other:
        rules.add("other_not_allowed")
    count = len(set(ids)) + (1 if text else 0)
    if question.type == "single" and (len(ids) > 1 or count != 1):
        rules.add("invalid_answer")
    if question.type == "multi" and count < question.min_selections:
        rules.add("below_min_selections")
    if question.type == "multi" and question.max_selections is not None and count > question.max_selections:
        rules.add("above_max_selections")
    return rules


@CI
@given(
    initial=questionnaires(),
    picks=st.lists(st.integers(0, 5), max_size=6),
    other=st.sampled_from([*OTHERS, "x" * MAX_OTHER]),
)
def test_an_answer_is_accepted_exactly_when_the_rules_allow_it(
    initial: Questionnaire, picks: list[int], other: str | None
) -> None:
    question = initial.questions[0]
    known = question.option_ids
    ids = tuple(known[i] if i < len(known) else "zulu" for i in picks)
    expected = violated_rules(question, ids, other)
    try:
        after = apply(initial, AnswerQuestion(QID, 0, question.id, ids, other), 1.0)
    except BrokerError as exc:
        assert expected, f"a valid answer was refused: {exc.code}: {exc.message}"
        assert exc.code in expected
        return
    assert not expected, f"an answer breaking {expected} was accepted"
    stored = after.answers[0].selection
    assert stored.selected_option_ids == tuple(o for o in known if o in ids)
    assert stored.other == ((other or "").strip() or None)


@CI_SMALL
@given(rounds=st.integers(1, 4), named=st.integers(-1, 6), data=st.data())
def test_only_the_latest_revision_can_be_resumed(rounds: int, named: int, data: st.DataObject) -> None:
    state = data.draw(questionnaires())
    for turn in range(rounds):
        state = apply(state, Clarify(QID, state.step, f"question {turn}?"), float(turn))
        if turn < rounds - 1:
            state = apply(state, Resume(state.revision, f"answer {turn}"), float(turn))
    assert state.revision == rounds
    try:
        after = apply(state, Resume(named, "late or early"), 50.0)
    except BrokerError as exc:
        assert named != rounds
        assert exc.code == "stale_revision"
        return
    assert named == rounds
    assert after.status == "in_progress"
    # ...and exactly once.
    try:
        apply(after, Resume(named, "again"), 51.0)
    except BrokerError as exc:
        assert exc.code == "not_awaiting_clarification"
    else:
        raise AssertionError("one revision was resumed twice")
