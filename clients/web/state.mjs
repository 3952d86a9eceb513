/* The page's state: what is shown, and what each frame from the broker and each action of
 * the person does to it. No DOM, no WebSocket, no timers: time comes in as `now`
 * (milliseconds), and the page keeps the one deadline `nextDeadline()` names, calling
 * `tick(now)` when it is due.
 *
 * Theory of operation
 *   The broker is the source of truth: every screen is built from the latest frame it sent
 *   (`question`, `suspended`, `idle`), and the only state kept here besides is what the
 *   person is doing right now (toggles not yet echoed, text being typed, which field is
 *   open, whether the cancel dialog is open and for which questionnaire).
 *
 *   Every input returns an Out (out.mjs: the frames to send, what to refresh, toasts, focus
 *   and the rest), and a new screen is due whenever `screen` changes (a new step rebuilds the view; frames
 *   for the same questionnaire, step and question update it in place, so focus and
 *   half-typed text survive).
 */

import { Answer, draftKey, OTHER_MAX } from "./answer.mjs";
import { closedToast, ENDED_UNSEEN, ENDED_UNSEEN_WHY, errorToast, lastClosedNote, NOT_CONNECTED } from "./messages.mjs";
import { newOut, refresh, toast } from "./out.mjs";
import { refusalScreen } from "./refusals.mjs";
import { HELD_DRAFT, SecretGuard } from "./secret-guard.mjs";
import { sentence } from "./text.mjs";
import { answeredByPhrase, answeredNote, ownAnswer } from "./who.mjs";

export const DRAFT_TEXT_DEBOUNCE_MS = 400;
export const DRAFT_ECHO_GRACE_MS = 3000;
export const BUSY_TIMEOUT_MS = 10000;

/** The clarifications of the frame's question that the agent has answered, oldest first. */
export function answeredClarifications(frame) {
  return (frame.clarifications || []).filter(
    (c) => c.questionId === frame.question.id && typeof c.response === "string");
}

export class PageState {
  constructor() {
    this.conn = "connecting"; // as the connection reports it: connecting | connected | waiting | offline | failed
    this.everConnected = false;
    this.clientId = null;
    this.view = "loading"; // loading | setup | fatal | idle | question | suspended
    this.viewKey = null; // questionnaireId:step(:questionId) of the question or wait shown
    this.screen = 0; // bumped whenever a new screen is due
    this.setupInfo = null; // {session, token, problem, signIn} on the setup screen
    this.fatalInfo = null; // {kind, title, status, text, reason, action} on the fatal screen (refusals.mjs)
    this.frame = null; // latest question frame
    this.suspended = null; // latest suspended frame
    this.answer = null; // the Answer being made to the question shown (answer.mjs)
    this.draftPending = null; // {key, at, ref}: a draft sent whose echo has not come back yet
    this.draftTextDue = null; // when typed Other text is sent as a draft (the person is typing)
    this.busy = null; // {ref, until}: an answer/clarify/cancel awaiting its effect
    this.lastClosed = null;
    this.lastClosedBy = null; // "answered by alice in the terminal" when another screen completed it
    this.sentAnswer = null; // {questionnaireId, step} of the last answer this page sent
    this.answeredNote = null; // over the question: who answered the one before, on another screen
    this.reconnectFrom = null; // after a reconnect's welcome: the questionnaire on screen before it
    this.endedNote = null; // {shownId}: the one on screen ended unseen while disconnected
    this.cancelFor = null; // the questionnaire the open cancel dialog is about
    this.guard = new SecretGuard(); // texts confirmed despite looking like a secret, and the stop on screen
    this.refSeq = 0;
  }

  // ---------------------------------------------------------------- screens and connection

  show(view, key) {
    this.view = view;
    this.viewKey = key === undefined ? null : key;
    this.screen += 1;
  }

  loading() {
    this.show("loading");
    return newOut();
  }

  /** No usable token: `problem` is link.mjs's ({kind, title, text, status}); `signIn`: the
   * page can sign the person in. */
  setup(params, problem, signIn) {
    this.setupInfo = { session: params.session || "", token: params.token || "", problem, signIn };
    this.show("setup");
    return newOut();
  }

  /** What the connection says it is doing. */
  connection(status) {
    this.conn = status;
  }

  /** The connection closed with `code`: a close a retry cannot fix shows its own screen.
   * `token`: {remembered, signedIn}, where the page's token came from. */
  disconnected(code, reason, token = {}) {
    this.busy = null;
    const screen = refusalScreen(code, reason, { ...token, open: !!(this.suspended || this.frame) });
    if (screen) {
      this.fatalInfo = screen;
      this.show("fatal");
    }
    return newOut();
  }

  /** The banner over a question or wait: shown once a connection that worked is lost. */
  offlineBannerShown() {
    return !(this.conn === "connected" || (this.conn === "connecting" && !this.everConnected));
  }

  title() {
    switch (this.view) {
      case "setup": return "qbroker · " + this.setupInfo.problem.title;
      case "fatal": return "qbroker · " + this.fatalInfo.title;
      case "idle": return "qbroker · waiting for questions";
      case "suspended": return "Waiting for the agent · qbroker";
      case "question": {
        const f = this.frame;
        return "(" + (f.index + 1) + "/" + f.total + ") " + (f.question.label || f.question.id) + " · qbroker";
      }
      default: return "qbroker";
    }
  }

  /** The note under "Waiting for questions" ({status, text}), or null. */
  idleNote() {
    if (this.endedNote) return { status: "ended", text: ENDED_UNSEEN + " " + ENDED_UNSEEN_WHY };
    if (!this.lastClosed) return null;
    return { status: this.lastClosed.status, text: lastClosedNote(this.lastClosed, this.lastClosedBy) };
  }

  /** True when the questionnaire `shownId` gets the note that the one before it ended unseen. */
  endedNoteFor(shownId) {
    return !!this.endedNote && this.endedNote.shownId === shownId;
  }

  dismissEndedNote() {
    this.endedNote = null;
    return newOut();
  }

  /** What the waiting screen says: {questionFrame, label, place, request}. `questionFrame`
   * is the question frame of the same questionnaire, when this page saw one (its progress is
   * shown); a page opened during the wait has none. */
  waiting() {
    const s = this.suspended;
    const q = this.frame && this.frame.questionnaireId === s.questionnaireId ? this.frame : null;
    let label = s.label || null;
    if (!label && q && q.progress) {
      q.progress.forEach((p) => { if (p.questionId === s.questionId) label = p.label; });
    }
    const place = !q && typeof s.index === "number" && s.total > 1
      ? " (question " + (s.index + 1) + " of " + s.total + ")" : "";
    return { questionFrame: q, label, place, request: s.request || "" };
  }

  /** "Saving…" until the broker echoes the draft back, then "Selections saved":
   * {state: "saving" | "saved" | "unsaved", text}. */
  draftStatus() {
    const a = this.answer;
    if (a && a.otherTooLong()) {
      return { state: "unsaved", text: "Not saved: your own answer is over " + OTHER_MAX + " characters" };
    }
    if (a && this.guard.firstUnconfirmed([{ kind: "other", text: a.draft().other || "" }])) {
      return { state: "unsaved", text: HELD_DRAFT };
    }
    const saving = !!(this.draftPending || this.draftTextDue !== null);
    return { state: saving ? "saving" : "saved", text: saving ? "Saving…" : a && a.any() ? "Selections saved" : "" };
  }

  // ---------------------------------------------------------------- frames from the broker

  /** A frame from the broker. `otherFocused`: the person is typing in the Other field. */
  receive(frame, now, otherFocused = false) {
    const out = newOut();
    switch (frame.type) {
      case "welcome": this.onWelcome(frame, out); break;
      case "question": this.onQuestion(frame, now, otherFocused, out); break;
      case "suspended": this.onSuspended(frame, out); break;
      case "idle": this.onIdle(out); break;
      case "closed": this.onClosed(frame, out); break;
      case "error": this.onError(frame, out); break;
      case "pong": break;
      default: out.unknown = String(frame.type);
    }
    return out;
  }

  onWelcome(frame, out) {
    this.clientId = frame.clientId || null;
    const wasReconnect = this.everConnected;
    this.everConnected = true;
    // The broker answers a reconnect with the current view only, never with a `closed`
    // frame for what this page showed before (the reconnect grace ran out, or a broker
    // with the memory store restarted): the first view frame is compared with it.
    const before = this.suspended || this.frame;
    this.reconnectFrom = wasReconnect && before ? before.questionnaireId : null;
    if (wasReconnect) out.toasts.push(toast("info", "Reconnected", null, 2500));
  }

  /** Called with the questionnaire each view frame shows (null: idle). True when the one on
   * screen before a reconnect is gone without a word, which the page then says. */
  checkEndedWhileAway(shownId) {
    const before = this.reconnectFrom;
    this.reconnectFrom = null;
    if (this.endedNote && this.endedNote.shownId !== shownId) this.endedNote = null;
    if (!before || before === shownId) return false;
    this.endedNote = { shownId };
    this.lastClosed = null; // about an earlier questionnaire
    return true;
  }

  /** The questionnaire the cancel dialog was opened for is no longer the one shown (the agent
   * withdrew it, or it was answered elsewhere, and another one may have taken its place):
   * close the dialog, so that a confirmation can never cancel a questionnaire the person has
   * not seen. */
  dropStaleCancel(shownId, out) {
    if (this.cancelFor === null || this.cancelFor === shownId) return;
    this.cancelFor = null;
    out.dialog = "close";
    out.toasts.push(toast("info", "Nothing was cancelled",
      "The questionnaire you were about to cancel ended before you confirmed.", 8000));
  }

  onQuestion(frame, now, otherFocused, out) {
    const q = frame.question || {};
    const endedUnseen = this.checkEndedWhileAway(frame.questionnaireId);
    const key = frame.questionnaireId + ":" + frame.step + ":" + q.id;
    const same = this.view === "question" && this.viewKey === key;
    this.dropStaleCancel(frame.questionnaireId, out); // before the new screen, so the focus can move
    this.frame = frame;
    this.suspended = null;
    if (same) {
      this.answer.question = q;
      this.guard.accept(frame.draft && frame.draft.other);
      this.adoptDraft(frame.draft, now, otherFocused);
      refresh(out, "question");
      return;
    }
    // Back from waiting on the agent (also on a page opened during the wait, which never
    // had this questionnaire's question frame).
    const resumed = this.view === "suspended" && String(this.viewKey).indexOf(frame.questionnaireId + ":") === 0;
    this.busy = null;
    this.draftPending = null;
    this.draftTextDue = null;
    this.answer = new Answer(q);
    this.answer.adopt(frame.draft, false);
    this.dropSecretStop(out);
    this.guard.reset(); // what was confirmed was about the step before
    this.guard.accept(frame.draft && frame.draft.other);
    this.answeredNote = resumed ? null : answeredNote(frame, this.sentAnswer);
    this.show("question", key);
    const label = q.label || q.id || "";
    if (resumed) {
      const answered = answeredClarifications(frame);
      const latest = answered.length ? answered[answered.length - 1] : null;
      out.announce = "The agent replied" + (latest ? ": " + sentence(latest.response) : ".") + " Back to " + label + ".";
    } else {
      out.announce = (endedUnseen ? ENDED_UNSEEN + " " : "") + (this.answeredNote ? this.answeredNote + " " : "") +
        "Question " + (frame.index + 1) + " of " + frame.total + ": " + (q.prompt || label);
    }
    out.newQuestion = true;
  }

  /** A draft echoed for the question shown: its own echoes are awaited (a quick series of
   * toggles never flickers back to an older state), and text being typed wins. */
  adoptDraft(draft, now, otherFocused) {
    if (this.draftPending) {
      if (draftKey(draft) === this.draftPending.key) {
        this.draftPending = null;
      } else if (now - this.draftPending.at < DRAFT_ECHO_GRACE_MS) {
        return; // an older echo; ours is still on its way
      } else {
        this.draftPending = null;
      }
    }
    if (this.draftTextDue !== null) return; // the person is typing; their text wins
    this.answer.adopt(draft, otherFocused);
  }

  onSuspended(frame, out) {
    const endedUnseen = this.checkEndedWhileAway(frame.questionnaireId);
    this.dropStaleCancel(frame.questionnaireId, out);
    this.suspended = frame;
    this.busy = null;
    this.dropSecretStop(out);
    const key = frame.questionnaireId + ":" + frame.step;
    if (this.view === "suspended" && this.viewKey === key) return;
    this.show("suspended", key);
    out.announce = (endedUnseen ? ENDED_UNSEEN + " " : "") + "Waiting for the agent to answer your question.";
  }

  onIdle(out) {
    const endedUnseen = this.checkEndedWhileAway(null);
    this.frame = null;
    this.suspended = null;
    this.busy = null;
    this.dropStaleCancel(null, out); // nothing left to cancel
    this.dropSecretStop(out);
    const news = this.view !== "idle" || endedUnseen;
    this.show("idle");
    if (news) out.announce = (endedUnseen ? ENDED_UNSEEN + " " : "") + "Waiting for questions.";
  }

  onClosed(frame, out) {
    // Completed on another screen: the last question shown was answered there, not here.
    const shownStep = this.frame && this.frame.questionnaireId === frame.questionnaireId ? this.frame.step : null;
    const elsewhere = frame.status === "completed" && !ownAnswer(this.sentAnswer, frame.questionnaireId, shownStep);
    this.lastClosed = frame;
    this.lastClosedBy = elsewhere ? answeredByPhrase(frame.answeredBy) : null;
    this.busy = null;
    out.toasts.push(closedToast(frame, this.lastClosedBy));
    if (this.view === "idle") this.show("idle"); // the note says how the last one ended
  }

  onError(frame, out) {
    out.toasts.push(errorToast(frame));
    if (frame.ref !== undefined && frame.ref !== null && this.busy && frame.ref === this.busy.ref) this.busy = null;
    if (this.draftPending) {
      this.draftPending = null;
      refresh(out, "draft");
    }
  }

  // ---------------------------------------------------------------- time

  /** The next moment `tick` has something to do, or null. */
  nextDeadline() {
    const times = [this.draftTextDue, this.busy && this.busy.until].filter((t) => typeof t === "number");
    return times.length ? Math.min(...times) : null;
  }

  tick(now) {
    const out = newOut();
    if (this.draftTextDue !== null && now >= this.draftTextDue) this.sendDraft(now, out);
    // Never stay stuck: if nothing came back the person can try again.
    if (this.busy && now >= this.busy.until) this.busy = null;
    return out;
  }

  // ---------------------------------------------------------------- actions

  nextRef() {
    this.refSeq += 1;
    return this.refSeq;
  }

  canAct(out) {
    if (this.busy) return false;
    if (this.conn !== "connected") {
      out.toasts.push(toast("error", "Not connected", NOT_CONNECTED, 5000));
      return false;
    }
    return true;
  }

  /** A frame the caller could not send (the socket was already closing): nothing awaits it. */
  unsent(frame) {
    const out = newOut();
    if (this.busy && this.busy.ref === frame.ref) this.busy = null;
    if (this.draftPending && this.draftPending.ref === frame.ref) {
      this.draftPending = null;
      refresh(out, "draft");
    }
    return out;
  }

  sendDraft(now, out) {
    this.draftTextDue = null;
    if (!this.frame || this.busy) return;
    // A draft without the text would drop it without a word: send nothing until it fits, and
    // say so next to the Continue button.
    if (this.answer.otherTooLong()) {
      refresh(out, "draft");
      return;
    }
    const draft = this.answer.draft();
    const texts = [{ kind: "other", text: draft.other || "" }];
    const ref = this.nextRef();
    const frame = {
      type: "draft", questionnaireId: this.frame.questionnaireId, step: this.frame.step,
      selectedOptionIds: draft.selectedOptionIds, ref,
    };
    if (draft.other !== undefined) frame.other = draft.other;
    // Held back until the person says it may go (the broker would refuse it): the line next
    // to Continue says so, and Continue asks.
    if (this.guard.holdsBack(frame, texts)) {
      refresh(out, "draft");
      return;
    }
    if (this.conn === "connected") {
      out.send.push(frame);
      this.draftPending = { key: draftKey(draft), at: now, ref };
    }
    refresh(out, "draft");
  }

  /** Sends `frame` (an answer, a clarification, a cancel) and waits for its effect. */
  command(frame, now, out) {
    frame.ref = this.nextRef();
    out.send.push(frame);
    this.busy = { ref: frame.ref, until: now + BUSY_TIMEOUT_MS };
  }

  /** `retry`: the action that sent it, done again after "Send anyway". */
  answerWith(selectedOptionIds, other, now, out, retry) {
    if (!this.canAct(out)) return;
    const f = this.frame;
    const frame = { type: "answer", questionnaireId: f.questionnaireId, step: f.step, questionId: f.question.id,
      selectedOptionIds };
    if (other !== undefined) frame.other = other;
    if (this.guard.stops(frame, [{ kind: "other", text: other || "" }], retry)) {
      out.secret = "open";
      return;
    }
    this.draftTextDue = null; // the answer carries the text; a late draft would only be stale
    this.command(frame, now, out);
    this.sentAnswer = { questionnaireId: f.questionnaireId, step: f.step };
  }

  /** "Send anyway": the text is confirmed and what was stopped is done again. */
  sendAnyway(now) {
    const stop = this.guard.confirm();
    if (!stop) return newOut();
    const out = this[stop.retry](now);
    if (!out.secret) out.secret = "close"; // (another of its texts may stop it again)
    return out;
  }

  /** "Edit", Escape: back to the text, as it was typed. */
  editSecret() {
    const out = newOut();
    const stop = this.guard.drop();
    out.secret = "close";
    if (!stop || this.view !== "question") return out;
    if (stop.kind === "other") this.answer.otherOpen = true; else this.answer.clarifyOpen = true;
    refresh(out, "question");
    out.focus = stop.kind + "-input";
    return out;
  }

  /** The question changed under the stop: it goes, and nothing was sent. */
  dropSecretStop(out) {
    if (this.guard.drop()) out.secret = "close";
  }

  /** A click on an option: answers a single question, toggles one on a multi question. */
  pick(optionId, now) {
    const out = newOut();
    if (!this.answer.multi) {
      this.answerWith([optionId], undefined, now, out, null);
      return out;
    }
    if (this.busy) return out;
    if (this.conn !== "connected") {
      this.canAct(out);
      return out;
    }
    this.answer.toggle(optionId);
    refresh(out, "question");
    this.sendDraft(now, out);
    return out;
  }

  toggleOther(now) {
    const a = this.answer;
    if (a.otherOpen) return this.closeOther(false, now);
    const out = newOut();
    a.otherOpen = true;
    refresh(out, "question");
    out.focus = "other-input";
    if (a.otherText.trim()) this.sendDraft(now, out);
    return out;
  }

  /** `refocus`: the focus goes back to the Other button (Escape in the field). */
  closeOther(refocus, now) {
    const out = newOut();
    const a = this.answer;
    const hadText = !!a.otherText.trim();
    a.otherOpen = false;
    refresh(out, "question");
    if (hadText) this.sendDraft(now, out);
    if (refocus) out.focus = "other-open";
    return out;
  }

  /** Text typed into Other: saved too (debounced), so a reload or a clarification keeps it. */
  typeOther(text, now) {
    const out = newOut();
    this.answer.otherText = text;
    this.draftTextDue = now + DRAFT_TEXT_DEBOUNCE_MS;
    refresh(out, "question");
    return out;
  }

  /** Enter in the Other field: submits a single question, continues a multi question. */
  submitOther(now) {
    if (this.answer.multi) return this.submitMulti(now);
    const out = newOut();
    const problem = this.answer.otherProblem();
    if (problem) out.fieldError = { kind: "other", text: problem };
    else this.answerWith([], this.answer.otherText.trim(), now, out, "submitOther");
    return out;
  }

  submitMulti(now) {
    const out = newOut();
    const problem = this.answer.continueProblem();
    if (problem) {
      out.hint = problem;
      return out;
    }
    const draft = this.answer.draft();
    this.answerWith(draft.selectedOptionIds, draft.other, now, out, "submitMulti");
    return out;
  }

  toggleClarify() {
    if (this.answer.clarifyOpen) return this.closeClarify(false);
    const out = newOut();
    this.answer.clarifyOpen = true;
    refresh(out, "question");
    out.focus = "clarify-input";
    return out;
  }

  /** `refocus`: the focus goes back to the "Ask to clarify…" button. */
  closeClarify(refocus) {
    const out = newOut();
    this.answer.clarifyOpen = false;
    refresh(out, "question");
    if (refocus) out.focus = "clarify-open";
    return out;
  }

  typeClarify(text) {
    this.answer.clarifyText = text;
    return newOut();
  }

  sendClarify(now) {
    const out = newOut();
    const problem = this.answer.clarifyProblem();
    if (problem) {
      out.fieldError = { kind: "clarify", text: problem };
      return out;
    }
    if (!this.canAct(out)) return out;
    const f = this.frame;
    const frame = { type: "clarify", questionnaireId: f.questionnaireId, step: f.step,
      request: this.answer.clarifyText.trim(), draft: this.answer.draft() };
    const texts = [{ kind: "clarify", text: frame.request }, { kind: "other", text: frame.draft.other || "" }];
    if (this.guard.stops(frame, texts, "sendClarify")) {
      out.secret = "open";
      return out;
    }
    this.draftTextDue = null; // the clarify frame carries the draft
    this.command(frame, now, out);
    return out;
  }

  /** The dialog is about the questionnaire on screen now, and no other (see dropStaleCancel). */
  openCancel() {
    const out = newOut();
    const target = this.suspended || this.frame;
    if (!target) return out;
    this.cancelFor = target.questionnaireId;
    out.dialog = "open";
    return out;
  }

  /** "Keep answering", Escape, a click on the backdrop. */
  closeCancel() {
    const out = newOut();
    this.cancelFor = null;
    out.dialog = "close";
    return out;
  }

  confirmCancel(now) {
    const out = newOut();
    const questionnaireId = this.cancelFor;
    this.cancelFor = null;
    out.dialog = "close";
    const target = this.suspended || this.frame;
    // Only ever the questionnaire the dialog was opened for.
    if (!target || !questionnaireId || target.questionnaireId !== questionnaireId) return out;
    if (!this.canAct(out)) return out;
    this.draftTextDue = null;
    this.command({ type: "cancel", questionnaireId: target.questionnaireId, step: target.step }, now, out);
    return out;
  }
}
