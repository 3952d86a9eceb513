"""What comes in from the broker does to the state: its frames, and the connection going up or down.

The broker is the authority, and this is where its word lands: a ``question`` frame replaces
the question (keeping the highlight, the scroll and what was typed when it is the same one
again), ``suspended`` shows the wait for the agent, ``idle`` the empty screen, ``closed`` and
``error`` say what became of the last action. Multi toggles are sent as drafts and shown at
once; the broker echoes every draft to every screen of the session, so the echoes of this
client's own drafts still in flight are ignored (fast toggling never flickers) while another
screen's draft is adopted. A question frame is checked whole before anything changes, so a
malformed one leaves the state as it was.
"""

from __future__ import annotations

from broker.core.secret_shapes import RULES
from clients.tui import secret_stop
from clients.tui.state import Frame, Notice, TuiState
from clients.tui.who import answered_by_phrase, own_answer

ERROR_TEXT: dict[str, str] = {
    "stale_step": "That question changed meanwhile (answered on another screen?) — showing the latest.",
    "bad_frame": "The broker did not understand the client (bad frame).",
    "rate_limited": "Too many actions at once — slow down a little.",
}


def connecting(state: TuiState, attempt: int) -> None:
    state.conn = "connecting"
    state.attempt = attempt
    state.retry_at = None


def disconnected(state: TuiState, reason: str, retry_at: float | None) -> None:
    if state.lost is None and state.view in ("question", "suspended"):
        on_screen = state.suspended if state.view == "suspended" else state.frame
        if on_screen is not None:
            state.lost = str(on_screen["questionnaireId"])
    state.conn = "offline"
    state.offline_reason = reason
    state.retry_at = retry_at
    state.busy = False
    state.draft_refs.clear()


def fatal(state: TuiState, message: str) -> None:
    state.conn = "offline"
    state.fatal_message = message
    state.retry_at = None


def apply(state: TuiState, frame: Frame) -> None:
    kind = frame.get("type")
    if kind == "welcome":
        state.conn = "connected"
        state.attempt = 0
        state.retry_at = None
        state.offline_reason = ""
        if state.notice is not None and state.notice.conn:
            state.notice = None  # "Not connected — nothing was sent" is over
    elif kind == "question":
        _apply_question(state, frame)
        _check_lost(state, frame["questionnaireId"])
    elif kind == "suspended":
        if not isinstance(frame.get("questionnaireId"), str) or not isinstance(frame.get("step"), int):
            raise ValueError("suspended frame without questionnaireId/step")
        _check_lost(state, frame["questionnaireId"])
        previous = state.suspended if state.view == "suspended" else None
        if previous is None or (previous["questionnaireId"], previous["step"]) != (
            frame["questionnaireId"],
            frame["step"],
        ):
            state.scroll.text_top = 0  # the person's request is read from its start
        state.view = "suspended"
        state.suspended = frame
        state.busy = False
        state.draft_refs.clear()
        secret_stop.drop(state)
        if state.mode != "confirm":
            state.mode = "list"
    elif kind == "idle":
        _check_lost(state, None)
        state.view = "idle"
        state.frame = None
        state.suspended = None
        secret_stop.drop(state)
        state.mode = "list"
        state.busy = False
        state.draft_refs.clear()
    elif kind == "closed":
        state.busy = False
        state.notice = _closed_notice(frame, _completed_elsewhere(state, frame))
        if frame.get("questionnaireId") == state.lost:
            state.lost = None  # the closed notice says what became of it
    elif kind == "error":
        state.busy = False
        ref = frame.get("ref")
        if isinstance(ref, int):
            state.draft_refs.discard(ref)
        code = str(frame.get("code", "error"))
        text = ERROR_TEXT.get(code) or str(frame.get("message") or code)
        if code == "looks_like_secret":  # (the broker's message is written for programs)
            sentence = next((r.sentence for r in RULES if r.code == frame.get("rule")), "a password, key or token")
            text = f"Not sent: the broker says it looks like {sentence}."
        state.notice = Notice("error", f"{text} [{code}]")


def _check_lost(state: TuiState, shown: str | None) -> None:
    """The broker, back after a disconnection, shows ``shown`` (None: nothing)."""
    lost, state.lost = state.lost, None
    if lost is not None and shown != lost:
        state.notice = Notice("warn", "The questionnaire you were answering ended while you were offline.")


def _apply_question(state: TuiState, frame: Frame) -> None:
    _check_question(frame)  # before anything changes: a bad frame leaves the state alone
    resumed = (
        state.view == "suspended"
        and state.suspended is not None
        and state.suspended["questionnaireId"] == frame["questionnaireId"]
    )
    old = state.frame if state.view == "question" else None
    same_questionnaire = old is not None and old["questionnaireId"] == frame["questionnaireId"]
    same_step = same_questionnaire and old is not None and old["step"] == frame["step"]
    previous = state.frame
    same_question = (
        previous is not None
        and previous["questionnaireId"] == frame["questionnaireId"]
        and previous["question"]["id"] == frame["question"]["id"]
    )
    if state.notice is not None and state.notice.about not in (None, frame["questionnaireId"]):
        state.notice = None  # "completed" was about the last questionnaire, not this one
    state.view = "question"
    state.frame = frame
    state.suspended = None
    if same_step:
        # A draft echo, another screen's toggle, or a resync after reconnecting.
        if state.draft_refs:
            state.draft_refs.pop()
        else:
            _adopt_draft(state, frame)
    else:
        state.busy = False
        state.draft_refs.clear()
        secret_stop.drop(state)  # the question moved on: nothing held is sent
        if not same_question:
            state.confirmed_texts.clear()  # what was confirmed was about the last question
        _adopt_draft(state, frame)
        if not same_question:
            state.highlight = 0
            state.scroll.list_top = 0
            state.scroll.text_top = 0
            state.last_other = state.other or ""
            state.last_clarify = ""
        told = _answered_elsewhere(frame, state.sent_answer) if not resumed else None
        if told is not None:
            state.notice = Notice("info", told, frame["questionnaireId"])
        if resumed:
            # Back from a clarification: on the first chosen option, as the browser does,
            # so that Enter continues rather than reopening "Ask to clarify…".
            state.highlight = state.first_selected_row()
            state.scroll.list_top = 0
            state.scroll.text_top = 0  # it scrolled the request on the waiting screen
            state.scroll.to_reply = True
        if state.mode != "confirm" or not same_questionnaire:
            state.mode = "list"
    state.highlight = max(0, min(state.highlight, len(state.rows()) - 1))


def _adopt_draft(state: TuiState, frame: Frame) -> None:
    draft = frame.get("draft") or {}
    state.selected = set(draft.get("selectedOptionIds") or [])
    other = draft.get("other")
    state.other = other if isinstance(other, str) and other.strip() else None
    secret_stop.accept(state, state.other)


def _check_question(frame: Frame) -> None:
    """Raise ValueError unless ``frame`` has the shape the drawing code relies on."""
    q = frame.get("question")
    ok = (
        isinstance(frame.get("questionnaireId"), str)
        and isinstance(frame.get("step"), int)
        and isinstance(frame.get("index"), int)
        and isinstance(frame.get("total"), int)
        and isinstance(q, dict)
        and isinstance(q.get("id"), str)
        and q.get("type") in ("single", "multi")
        and isinstance(q.get("options"), list)
        and len(q["options"]) > 0
        and all(
            isinstance(o, dict) and isinstance(o.get("id"), str) and isinstance(o.get("label"), str)
            for o in q["options"]
        )
        and isinstance(frame.get("progress") or [], list)
        and isinstance(frame.get("clarifications") or [], list)
        and isinstance(frame.get("draft") or {}, dict)
    )
    if not ok:
        raise ValueError("malformed question frame")


def _answered_elsewhere(frame: Frame, sent: tuple[str, int] | None) -> str | None:
    """ "Question 1 was answered by alice in the browser." over a question that another
    screen moved on to; None when it was this client's answer or nothing is said."""
    phrase = answered_by_phrase(frame.get("answeredBy"))
    if phrase is None or frame["index"] < 1 or own_answer(sent, frame["questionnaireId"], frame["step"] - 1):
        return None
    return f"Question {frame['index']} was {phrase}."


def _completed_elsewhere(state: TuiState, frame: Frame) -> str | None:
    """Who completed the questionnaire of ``frame`` (a ``closed``) on another screen, as
    a phrase; None when it was this client (it answered the last question shown)."""
    if frame.get("status") != "completed":
        return None
    shown = state.frame
    step = shown["step"] if shown is not None and shown["questionnaireId"] == frame.get("questionnaireId") else None
    if own_answer(state.sent_answer, frame.get("questionnaireId"), step):
        return None
    return answered_by_phrase(frame.get("answeredBy"))


def _closed_notice(frame: Frame, answered_elsewhere: str | None = None) -> Notice:
    status = frame.get("status")
    reason = frame.get("reason")
    about = frame.get("questionnaireId")
    if status == "completed" and answered_elsewhere:
        return Notice("ok", f"Questionnaire completed — {answered_elsewhere}.", about)
    if status == "completed":
        return Notice("ok", "Questionnaire completed — your answers were sent to the agent.", about)
    if status == "cancelled":
        if reason == "aborted":
            return Notice("info", "The agent withdrew the questionnaire.", about)
        return Notice("info", "Questionnaire cancelled — the agent was told.", about)
    return Notice("warn", f"The questionnaire closed unanswered ({reason or status}).", about)
