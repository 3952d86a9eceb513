"""broker/core/host_form.py: the questionnaire as an MCP host's form, and what a submitted
form means (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core import availability, host_form
from broker.core.errors import BrokerError
from broker.core.host_form import CANCEL_TITLE, CLARIFY_TITLE, FormProblem, FormReply, next_command, read_reply
from broker.core.machine import AnswerQuestion, AskInHost, Cancel, LeaveHost, Questionnaire, Resume, Selection, apply
from tests.helpers.machine import T0, new_questionnaire
from tests.helpers.samples import multi, single
from tests.unit.test_machine_properties import questionnaires

pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")


def labelled() -> Questionnaire:
    return new_questionnaire(
        single("target", ("staging", "production"), label="Target", prompt="Where does it go?"),
        multi("checks", ("unit", "e2e", "lint"), label="Checks", minSelections=1, maxSelections=2),
        single("confirm", ("yes", "no"), allowOther=False, label="Confirm"),
    )


def run(state: Questionnaire, reply: FormReply, now: float = T0 + 1) -> Questionnaire:
    """Apply ``reply`` the way the broker does: the next command, from the state then."""
    for _ in range(50):
        command = next_command(state, reply)
        if command is None:
            return state
        state = apply(state, command, now)
    raise AssertionError("a reply never ran out of commands")


# --- the form's shape ---------------------------------------------------------------------


def test_the_form_has_one_property_per_question_the_others_the_clarification_and_the_cancel() -> None:
    state = labelled()
    form = host_form.form(state)
    assert form["mode"] == "form"
    schema = form["requestedSchema"]
    assert set(schema) == {"type", "properties"}  # no top-level title (Codex refuses one), nothing required
    assert schema["properties"] == {
        "target": {
            "type": "string",
            "title": "Target",
            "description": "Where does it go?",
            "oneOf": [{"const": "staging", "title": "staging"}, {"const": "production", "title": "production"}],
        },
        "target__other": {
            "type": "string",
            "title": "Target: Other (your own answer, as free text)",
            "description": "Instead of an option.",
        },
        "checks": {
            "type": "array",
            "title": "Checks",
            "description": "Pick some for checks?",
            "items": {"anyOf": [{"const": o, "title": o} for o in ("unit", "e2e", "lint")]},
            "minItems": 1,
            "maxItems": 2,
        },
        "checks__other": {
            "type": "string",
            "title": "Checks: Other (your own answer, as free text)",
            "description": "Instead of an option (counts as one choice).",
        },
        "confirm": {
            "type": "string",
            "title": "Confirm",
            "description": "Pick one for confirm?",
            "oneOf": [{"const": "yes", "title": "yes"}, {"const": "no", "title": "no"}],
        },
        "qbroker__ask_the_agent": {
            "type": "string",
            "title": CLARIFY_TITLE,
            "description": "The questionnaire pauses at the first question left empty until the agent answers;"
            " the answers given here are kept.",
            "maxLength": 1000,
        },
        "qbroker__cancel": {"type": "boolean", "title": CANCEL_TITLE, "default": False},
    }
    assert state.id in form["message"] and "3 questions" in form["message"]


def test_the_form_asks_only_what_is_still_open_and_says_why_it_asks_again() -> None:
    state = apply(labelled(), AnswerQuestion("qn-1", 0, "target", ("staging",)), T0 + 1)
    form = host_form.form(state, "the answer was wrong")
    assert list(form["requestedSchema"]["properties"])[:3] == ["checks", "checks__other", "confirm"]
    assert "target" not in form["requestedSchema"]["properties"]
    assert form["message"].startswith("Your answer could not be used: the answer was wrong.")
    assert "asks 2 more questions; 1 of 3 answered (questionnaire qn-1)" in form["message"]


def test_the_extra_fields_never_take_a_question_s_id() -> None:
    state = new_questionnaire(single("a"), single("a__other"), single("qbroker__cancel"))
    keys = host_form.form_keys(state.questions)
    ids = {q.id for q in state.questions}
    assert not ids & ({keys.clarify, keys.cancel} | set(keys.other.values()))
    assert len(set(keys.other.values())) == 3 and keys.cancel == "qbroker__cancel_"


def test_a_questionnaire_not_in_progress_has_nothing_to_ask() -> None:
    state = apply(labelled(), Cancel("qn-1", 0), T0 + 1)
    assert host_form.open_questions(state) == ()
    with pytest.raises(FormProblem):
        read_reply((), {})


# --- reading a reply ------------------------------------------------------------------------


def test_a_full_reply_is_every_answer_with_its_other() -> None:
    state = labelled()
    reply = read_reply(
        state.questions,
        {"target": "production", "checks": ["lint", "unit"], "confirm": "yes", "qbroker__cancel": False},
    )
    assert reply == FormReply(
        {
            "target": Selection(("production",)),
            "checks": Selection(("unit", "lint")),  # in declared order
            "confirm": Selection(("yes",)),
        }
    )
    done = run(state, reply)
    assert done.status == "completed"
    assert [a.selection for a in done.answers] == list(reply.answers.values())


def test_other_stands_alone_on_a_single_question_and_counts_as_a_choice_on_a_multi() -> None:
    state = labelled()
    reply = read_reply(
        state.questions, {"target__other": " canary ", "checks": ["unit"], "checks__other": "smoke", "confirm": "no"}
    )
    assert reply.answers["target"] == Selection((), "canary")
    assert reply.answers["checks"] == Selection(("unit",), "smoke")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ({"target": "production", "target__other": "x", "checks": ["unit"], "confirm": "yes"}, "not both"),
        ({"target": "staging", "checks": ["unit", "e2e"], "checks__other": "x", "confirm": "yes"}, "at most 2"),
        ({"target": "staging", "checks": [], "confirm": "yes"}, "at least 1"),
        ({"target": "moon", "checks": ["unit"], "confirm": "yes"}, 'no option "moon"'),
        ({"target": "staging", "checks": ["unit"], "confirm": "maybe"}, 'no option "maybe"'),
        ({"target": "staging", "checks": ["unit"]}, '"Confirm" has no answer'),
        ({"target": ["staging"], "checks": ["unit"], "confirm": "yes"}, "takes one option"),
        ({"target": "staging", "checks": "unit", "confirm": "yes"}, "takes a list"),
        ({"target": "staging", "checks": ["unit"], "confirm": "yes", "extra": 1}, "no field 'extra'"),
        ({"qbroker__cancel": "yes"}, "must be true or false"),
        ({"qbroker__ask_the_agent": "x" * 1001}, "the limit is 1000"),
    ],
)
def test_a_reply_that_breaks_a_rule_is_refused_with_the_reason(content: dict[str, Any], says: str) -> None:
    with pytest.raises(FormProblem) as refused:
        read_reply(labelled().questions, content)
    assert says in refused.value.reason


def test_the_person_s_cancel_ends_it_user_cancelled() -> None:
    state = labelled()
    reply = read_reply(state.questions, {"target": "staging", "qbroker__cancel": True})
    assert reply.cancel is True
    done = run(state, reply)
    assert done.status == "cancelled" and done.cancellation_reason == "user_cancelled" and not done.answers


def test_a_clarification_pauses_at_the_first_question_left_empty_keeping_the_answers_before_it() -> None:
    state = labelled()
    reply = read_reply(state.questions, {"target": "production", "qbroker__ask_the_agent": " What is e2e? "})
    assert reply.pause_at == "checks" and reply.clarification == "What is e2e?"
    paused = run(state, reply)
    assert paused.status == "needs_clarification" and paused.revision == 1
    assert [a.question_id for a in paused.answers] == ["target"]
    assert paused.clarifications[-1].question_id == "checks"


def test_a_clarification_with_everything_answered_pauses_at_the_last_keeping_its_answer_as_the_draft() -> None:
    state = labelled()
    content = {"target": "staging", "checks": ["unit"], "confirm": "no", "qbroker__ask_the_agent": "Sure?"}
    paused = run(state, read_reply(state.questions, content))
    assert paused.status == "needs_clarification"
    assert [a.question_id for a in paused.answers] == ["target", "checks"]
    assert paused.draft == Selection(("no",)) and paused.clarifications[-1].question_id == "confirm"


def test_answers_to_questions_answered_elsewhere_are_never_applied() -> None:
    state = labelled()
    reply = read_reply(state.questions, {"target": "production", "checks": ["e2e"], "confirm": "yes"})
    # Meanwhile a qbroker client answered the first question otherwise.
    moved = apply(state, AnswerQuestion("qn-1", 0, "target", ("staging",)), T0 + 1)
    done = run(moved, reply)
    assert done.status == "completed"
    assert [a.selection.selected_option_ids for a in done.answers] == [("staging",), ("e2e",), ("yes",)]
    # And once it has an outcome, nothing of the reply applies.
    assert next_command(done, reply) is None


def test_a_clarification_raced_past_its_question_pauses_at_the_first_one_the_form_left_empty() -> None:
    state = labelled()
    reply = read_reply(state.questions, {"target": "production", "qbroker__ask_the_agent": "Why?"})
    moved = apply(state, AnswerQuestion("qn-1", 0, "target", ("staging",)), T0 + 1)
    moved = apply(moved, AnswerQuestion("qn-1", 1, "checks", ("unit",)), T0 + 1)  # a client, past "checks"
    paused = run(moved, reply)
    assert paused.status == "needs_clarification" and paused.clarifications[-1].question_id == "confirm"
    assert [a.selection.selected_option_ids for a in paused.answers] == [("staging",), ("unit",)]


def test_answers_past_the_pause_and_the_draft_are_filled_into_the_next_form() -> None:
    state = labelled()
    reply = read_reply(state.questions, {"target": "production", "confirm": "no", "qbroker__ask_the_agent": "Hm?"})
    paused = run(state, reply)
    kept = host_form.kept_answers(reply, paused)
    assert kept == {"confirm": Selection(("no",))}
    assert host_form.kept_answers_from_wire(host_form.kept_answers_to_wire(kept)) == kept
    resumed = apply(paused, Resume(1, "Because."), T0 + 2)
    properties = host_form.form(resumed, kept=kept)["requestedSchema"]["properties"]
    assert properties["confirm"]["default"] == "no" and "default" not in properties["checks"]
    # The current question's draft (here: given with the clarification) is filled in too.
    drafted = run(
        labelled(),
        read_reply(
            labelled().questions,
            {"target": "staging", "checks": ["e2e"], "confirm": "yes", "qbroker__ask_the_agent": "?"},
        ),
    )
    again = host_form.form(apply(drafted, Resume(1, "ok"), T0 + 2))["requestedSchema"]["properties"]
    assert again["confirm"]["default"] == "yes"


# --- the host's hold ------------------------------------------------------------------------


def test_a_questionnaire_asked_in_a_host_never_becomes_unavailable_until_the_host_leaves() -> None:
    state = apply(labelled(), AskInHost(0), T0 + 1)
    assert state.in_host_since == T0 + 1 and state.version == 1
    far = T0 + 10**6
    assert availability.expired(state, 0, None, far, client_wait=5, reconnect_grace=30) is None
    left = apply(state, LeaveHost(), T0 + 2)
    assert left.in_host_since is None
    assert availability.expired(left, 0, None, far, client_wait=5, reconnect_grace=30) == "ui_unavailable"
    # A form made for an older step is refused (the questionnaire moved on).
    moved = apply(labelled(), AnswerQuestion("qn-1", 0, "target", ("staging",)), T0 + 1)
    with pytest.raises(BrokerError):
        apply(moved, AskInHost(0), T0 + 2)
    assert type(state).from_record(state.to_record()) == state


# --- properties -----------------------------------------------------------------------------


def _field(draw: st.DrawFn, question: Any) -> Any:
    ids = list(question.option_ids) + ["zulu"]
    if question.type == "single":
        return draw(st.sampled_from([*ids, "", None]))
    return draw(st.none() | st.lists(st.sampled_from(ids), max_size=5))


@st.composite
def replies(draw: st.DrawFn) -> tuple[Questionnaire, dict[str, Any]]:
    state = draw(questionnaires())
    keys = host_form.form_keys(state.questions)
    content: dict[str, Any] = {}
    for question in state.questions:
        value = _field(draw, question)
        if value is not None:
            content[question.id] = value
        if question.allow_other and draw(st.booleans()):
            content[keys.other[question.id]] = draw(st.sampled_from(["mine", "  ", ""]))
    if draw(st.integers(0, 5)) == 0:
        content[keys.clarify] = draw(st.sampled_from(["why?", " "]))
    if draw(st.integers(0, 9)) == 0:
        content[keys.cancel] = draw(st.booleans())
    return state, content


@settings(max_examples=300, deadline=None)
@given(replies())
def test_a_form_is_refused_whole_or_applied_exactly_never_half_or_wrong(drawn: tuple[Questionnaire, Any]) -> None:
    state, content = drawn
    try:
        reply = read_reply(state.questions, content)
    except FormProblem:
        return  # nothing was stored: the broker asks again
    done = run(state, reply)  # every command a reply makes is one the machine takes
    if reply.cancel:
        assert done.status == "cancelled"
        return
    given_answers = {a.question_id: a.selection for a in done.answers}
    for question_id, selection in given_answers.items():
        assert reply.answers[question_id] == selection  # stored exactly as the form gave it
    if reply.clarification is None:
        assert done.status == "completed" and len(given_answers) == len(state.questions)
    else:
        assert done.status == "needs_clarification"
        assert done.clarifications[-1].question_id == reply.pause_at
