// The browser page's state (clients/web/state.mjs): frames in, frames out, no browser.
// Run: node --test tests/web/*.test.mjs   (pytest runs them too: tests/unit/test_web_page.py)

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { OTHER_MAX } from "../../clients/web/answer.mjs";
import { ENDED_UNSEEN, RACE_TEXT } from "../../clients/web/messages.mjs";
import { BUSY_TIMEOUT_MS, DRAFT_ECHO_GRACE_MS, DRAFT_TEXT_DEBOUNCE_MS, PageState } from "../../clients/web/state.mjs";

const T0 = 1_000_000;

const TARGET = {
  id: "deploy_target", label: "Target", prompt: "Which environment?", type: "single",
  options: [{ id: "staging", label: "Staging" }, { id: "production", label: "Production" }],
};
const CHECKS = {
  id: "checks", label: "Pre-flight checks", prompt: "Which checks must pass?", type: "multi",
  options: [{ id: "unit", label: "Unit" }, { id: "e2e", label: "E2E" }, { id: "lint", label: "Lint" }, { id: "docs", label: "Docs" }],
  allowOther: true, minSelections: 2, maxSelections: 3,
};

function question(q, { qn = "qn-1", step = 0, index = 0, total = 1, draft, clarifications, progress } = {}) {
  return {
    type: "question", questionnaireId: qn, step, index, total, question: q,
    draft: draft || { selectedOptionIds: [] },
    clarifications: clarifications || [],
    progress: progress || [{ questionId: q.id, label: q.label, state: "current" }],
  };
}

function suspended({ qn = "qn-1", step = 0, questionId = "checks", request = "Why?", ...rest } = {}) {
  return { type: "suspended", questionnaireId: qn, revision: 1, step, questionId, request, ...rest };
}

/** A page connected to its session, showing `frame` (if given). */
function page(frame) {
  const s = new PageState();
  s.connection("connected");
  s.receive({ type: "welcome", clientId: "c1" }, T0);
  if (frame) s.receive(frame, T0);
  return s;
}

describe("screens", () => {
  test("a question builds a screen; the same question again only updates it", () => {
    const s = page();
    const before = s.screen;
    const out = s.receive(question(CHECKS, { total: 2 }), T0);
    assert.equal(s.view, "question");
    assert.equal(s.screen, before + 1);
    assert.equal(out.newQuestion, true);
    assert.equal(out.announce, "Question 1 of 2: Which checks must pass?");
    assert.equal(s.title(), "(1/2) Pre-flight checks · qbroker");

    const echo = s.receive(question(CHECKS, { total: 2, draft: { selectedOptionIds: ["unit"] } }), T0);
    assert.equal(s.screen, before + 1);
    assert.equal(echo.refresh, "question");
    assert.equal(echo.newQuestion, false);
    assert.deepEqual([...s.answer.selected], ["unit"]);
  });

  test("the next step is a new screen with a fresh answer", () => {
    const s = page(question(CHECKS, { draft: { selectedOptionIds: ["unit"] } }));
    const screen = s.screen;
    s.receive(question(TARGET, { step: 1, index: 1, total: 2 }), T0);
    assert.equal(s.screen, screen + 1);
    assert.equal(s.answer.selected.size, 0);
    assert.equal(s.answer.rule(), "Choose one.");
  });

  test("idle always draws its screen, and announces only news", () => {
    const s = page();
    const first = s.receive({ type: "idle" }, T0);
    assert.equal(first.announce, "Waiting for questions.");
    const screen = s.screen;
    const again = s.receive({ type: "idle" }, T0);
    assert.equal(again.announce, null);
    assert.equal(s.screen, screen + 1);
    assert.equal(s.title(), "qbroker · waiting for questions");
    assert.equal(s.idleNote(), null);
  });

  test("a closed frame is a message, and the idle note says how the last one ended", () => {
    const s = page(question(TARGET));
    s.receive({ type: "idle" }, T0);
    const cases = [
      [{ status: "completed" }, "Answers sent", "Your last answers were sent to the agent."],
      [{ status: "cancelled", reason: "aborted" }, "Questionnaire cancelled", "The agent withdrew its last questionnaire."],
      [{ status: "cancelled", reason: "user_cancelled" }, "Questionnaire cancelled", "You cancelled the last questionnaire."],
      [{ status: "timed_out", reason: "ui_error" }, "Questionnaire closed", "The last questionnaire closed before it was finished."],
    ];
    for (const [fields, title, note] of cases) {
      const screen = s.screen;
      const out = s.receive({ type: "closed", questionnaireId: "qn-1", ...fields }, T0);
      assert.equal(out.toasts[0].title, title);
      assert.equal(s.screen, screen + 1, "idle is drawn again with the note");
      assert.equal(s.idleNote().text, note);
    }
    const out = s.receive({ type: "closed", status: "timed_out", reason: "ui_unavailable" }, T0);
    assert.equal(out.toasts[0].text, "No answering page was open in time.");
  });

  test("a closed frame over a question does not replace it (the next frame does)", () => {
    const s = page(question(TARGET));
    const screen = s.screen;
    s.receive({ type: "closed", status: "completed" }, T0);
    assert.equal(s.screen, screen);
  });

  test("an unknown frame is reported, a pong is nothing", () => {
    const s = page();
    assert.equal(s.receive({ type: "teleport" }, T0).unknown, "teleport");
    const pong = s.receive({ type: "pong" }, T0);
    assert.equal(pong.unknown, null);
    assert.deepEqual(pong.toasts, []);
  });

  test("the setup and loading screens", () => {
    const s = new PageState();
    const problem = { kind: "no_token", title: "This link is incomplete", text: "…", status: "Link incomplete" };
    s.setup({ session: "demo", token: "" }, problem, true);
    assert.equal(s.view, "setup");
    assert.deepEqual(s.setupInfo, { session: "demo", token: "", problem, signIn: true });
    assert.equal(s.title(), "qbroker · This link is incomplete");
    s.loading();
    assert.equal(s.view, "loading");
    assert.equal(s.title(), "qbroker");
  });
});

describe("a single question", () => {
  test("a click answers it, once", () => {
    const s = page(question(TARGET));
    const out = s.pick("production", T0);
    assert.deepEqual(out.send, [{
      type: "answer", questionnaireId: "qn-1", step: 0, questionId: "deploy_target",
      selectedOptionIds: ["production"], ref: out.send[0].ref,
    }]);
    assert.equal(s.busy.ref, out.send[0].ref);
    assert.deepEqual(s.pick("staging", T0).send, [], "busy: a second click sends nothing");
  });

  test("a busy page frees itself when nothing comes back", () => {
    const s = page(question(TARGET));
    s.pick("production", T0);
    assert.equal(s.nextDeadline(), T0 + BUSY_TIMEOUT_MS);
    s.tick(T0 + BUSY_TIMEOUT_MS - 1);
    assert.notEqual(s.busy, null);
    s.tick(T0 + BUSY_TIMEOUT_MS);
    assert.equal(s.busy, null);
    assert.equal(s.nextDeadline(), null);
    assert.equal(s.pick("staging", T0 + BUSY_TIMEOUT_MS).send.length, 1);
  });

  test("while disconnected nothing is sent, and the person is told", () => {
    const s = page(question(TARGET));
    s.connection("waiting");
    const out = s.pick("production", T0);
    assert.deepEqual(out.send, []);
    assert.equal(out.toasts[0].title, "Not connected");
    assert.match(out.toasts[0].text, /^Nothing was sent\./);
  });

  test("Other: empty and too long are refused in the field, the text is sent trimmed", () => {
    const s = page(question({ ...TARGET, allowOther: true }));
    s.toggleOther(T0);
    assert.deepEqual(s.submitOther(T0).fieldError,
      { kind: "other", text: "Type your answer first, or pick one of the options." });
    s.typeOther("x".repeat(OTHER_MAX + 1), T0);
    assert.deepEqual(s.submitOther(T0).fieldError,
      { kind: "other", text: "Please shorten your answer to 2000 characters." });
    s.typeOther("  Ping the #release channel  ", T0);
    const out = s.submitOther(T0);
    assert.deepEqual(out.send[0].selectedOptionIds, []);
    assert.equal(out.send[0].other, "Ping the #release channel");
    assert.equal(s.draftTextDue, null, "the answer carries the text: no late draft");
  });

  test("Other counts characters as the broker does (code points)", () => {
    const s = page(question({ ...TARGET, allowOther: true }));
    s.toggleOther(T0);
    s.typeOther("😀".repeat(OTHER_MAX), T0); // 4000 UTF-16 units, 2000 characters
    assert.equal(s.submitOther(T0).send.length, 1);
  });
});

describe("a multi question", () => {
  test("its rule, and why Continue waits", () => {
    const s = page(question(CHECKS));
    assert.equal(s.answer.rule(), "Choose 2 to 3. Other counts as one.");
    assert.equal(s.answer.continueProblem(), "Select 2 more options to continue (at least 2).");
    s.pick("unit", T0);
    assert.equal(s.answer.continueProblem(), "Select 1 more option to continue (at least 2).");
    s.pick("docs", T0);
    assert.equal(s.answer.continueProblem(), "");
    s.pick("lint", T0);
    s.pick("e2e", T0);
    assert.equal(s.answer.selectionCount(), 4);
    assert.equal(s.answer.continueProblem(), "Deselect 1 option to continue (at most 3).");
    const refused = s.submitMulti(T0);
    assert.deepEqual(refused.send, []);
    assert.equal(refused.hint, "Deselect 1 option to continue (at most 3).");
  });

  test("each toggle is a draft, in the question's order; Continue answers with them", () => {
    const s = page(question(CHECKS));
    const first = s.pick("lint", T0);
    assert.equal(first.refresh, "question");
    assert.deepEqual(first.send.map((f) => [f.type, f.selectedOptionIds]), [["draft", ["lint"]]]);
    const second = s.pick("unit", T0);
    assert.deepEqual(second.send[0].selectedOptionIds, ["unit", "lint"]);
    assert.deepEqual(s.draftStatus(), { state: "saving", text: "Saving…" });
    const out = s.submitMulti(T0);
    assert.equal(out.send[0].type, "answer");
    assert.deepEqual(out.send[0].selectedOptionIds, ["unit", "lint"]);
    assert.equal(out.send[0].other, undefined);
  });

  test("an older echo never undoes a toggle in flight; the matching echo settles it", () => {
    const s = page(question(CHECKS));
    s.pick("unit", T0);
    s.pick("lint", T0 + 10);
    // The broker's echo of the first draft arrives after the second toggle.
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["unit"] } }), T0 + 20);
    assert.deepEqual([...s.answer.selected].sort(), ["lint", "unit"]);
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["lint", "unit"] } }), T0 + 30);
    assert.equal(s.draftPending, null);
    assert.deepEqual(s.draftStatus(), { state: "saved", text: "Selections saved" });
  });

  test("after the grace period another tab's draft wins", () => {
    const s = page(question(CHECKS));
    s.pick("unit", T0);
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["docs"] } }), T0 + DRAFT_ECHO_GRACE_MS);
    assert.deepEqual([...s.answer.selected], ["docs"]);
    assert.equal(s.draftPending, null);
  });

  test("another tab's toggles show here", () => {
    const s = page(question(CHECKS));
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["e2e"], other: "Smoke" } }), T0);
    assert.deepEqual([...s.answer.selected], ["e2e"]);
    assert.equal(s.answer.otherOpen, true);
    assert.equal(s.answer.otherText, "Smoke");
    // ...and removing the Other text there closes it here.
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["e2e"] } }), T0);
    assert.equal(s.answer.otherOpen, false);
  });

  test("typed Other text is saved after a pause, and an echo never overwrites the typing", () => {
    const s = page(question(CHECKS));
    s.toggleOther(T0);
    const typed = s.typeOther("Smoke test", T0);
    assert.equal(typed.send.length, 0);
    assert.equal(s.nextDeadline(), T0 + DRAFT_TEXT_DEBOUNCE_MS);
    assert.deepEqual(s.draftStatus(), { state: "saving", text: "Saving…" });
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["unit"] } }), T0 + 100, true);
    assert.equal(s.answer.otherText, "Smoke test");
    assert.equal(s.answer.selected.size, 0, "the person is typing: their state wins");

    const out = s.tick(T0 + DRAFT_TEXT_DEBOUNCE_MS);
    assert.deepEqual(out.send.map((f) => [f.type, f.other]), [["draft", "Smoke test"]]);
    assert.equal(out.refresh, "draft");
    assert.equal(s.draftTextDue, null);
  });

  test("an echo while the field has focus keeps the field's text", () => {
    const s = page(question(CHECKS, { draft: { selectedOptionIds: [], other: "Smoke" } }));
    s.answer.otherText = "Smoke te"; // typed, not yet sent (the debounce has passed)
    s.receive(question(CHECKS, { draft: { selectedOptionIds: [], other: "Smoke" } }), T0, true);
    assert.equal(s.answer.otherText, "Smoke te");
    s.receive(question(CHECKS, { draft: { selectedOptionIds: [], other: "Smoke" } }), T0, false);
    assert.equal(s.answer.otherText, "Smoke");
  });

  test("an empty Other is open but not a selection", () => {
    const s = page(question(CHECKS));
    s.toggleOther(T0);
    assert.equal(s.answer.otherOpen, true);
    assert.equal(s.answer.otherSelected(), false);
    assert.equal(s.answer.selectionCount(), 0);
    s.typeOther("Smoke", T0);
    assert.equal(s.answer.selectionCount(), 1);
    s.typeOther("   ", T0);
    assert.equal(s.answer.selectionCount(), 0);
  });

  test("opening and closing Other: focus moves, text already there is saved", () => {
    const s = page(question(CHECKS));
    const open = s.toggleOther(T0);
    assert.equal(open.focus, "other-input");
    assert.equal(open.send.length, 0);
    s.typeOther("Smoke", T0);
    s.tick(T0 + DRAFT_TEXT_DEBOUNCE_MS);
    const closed = s.closeOther(true, T0 + 500);
    assert.equal(closed.focus, "other-open");
    assert.equal(closed.send[0].other, undefined, "a closed Other is not part of the draft");
    const reopened = s.toggleOther(T0 + 600);
    assert.equal(reopened.send[0].other, "Smoke");
    assert.equal(s.toggleOther(T0 + 700).focus, null, "a click on the open Other closes it");
  });

  test("Other text over the limit is never sent and never dropped", () => {
    const s = page(question(CHECKS));
    s.toggleOther(T0);
    s.typeOther("x".repeat(OTHER_MAX + 1), T0);
    const flushed = s.tick(T0 + DRAFT_TEXT_DEBOUNCE_MS);
    assert.deepEqual(flushed.send, []);
    assert.deepEqual(s.draftStatus(), { state: "unsaved", text: "Not saved: your own answer is over 2000 characters" });
    assert.equal(s.answer.continueProblem(), "Your own answer is longer than 2000 characters.");
    assert.deepEqual(s.pick("unit", T0 + 500).send, [], "a toggle does not send the draft without the text");
    // The broker's echo of the last draft that fitted changes nothing here.
    s.receive(question(CHECKS, { draft: { selectedOptionIds: [], other: "Smoke" } }), T0 + 600);
    assert.equal(s.answer.otherText, "x".repeat(OTHER_MAX + 1));
    // A clarification would carry the draft: refused until the text fits.
    s.toggleClarify();
    s.typeClarify("Is a smoke test enough?");
    const clarify = s.sendClarify(T0 + 700);
    assert.deepEqual(clarify.send, []);
    assert.equal(clarify.fieldError.kind, "clarify");
    assert.match(clarify.fieldError.text, /2000 characters/);
  });

  test("Enter in Other continues a multi question", () => {
    const s = page(question({ ...CHECKS, minSelections: 1 }));
    s.toggleOther(T0);
    s.typeOther("Smoke test on the canary", T0);
    const out = s.submitOther(T0);
    assert.deepEqual(out.send.map((f) => [f.type, f.selectedOptionIds, f.other]),
      [["answer", [], "Smoke test on the canary"]]);
  });

  test("the rule line for every kind of bounds", () => {
    const rule = (min, max) => page(question({ ...CHECKS, allowOther: false, minSelections: min, maxSelections: max })).answer.rule();
    assert.equal(rule(2, 2), "Choose exactly 2.");
    assert.equal(rule(1, undefined), "Choose at least 1.");
    assert.equal(rule(undefined, 3), "Choose up to 3.");
    assert.equal(rule(undefined, undefined), "Choose any that apply.");
  });
});

describe("clarifications", () => {
  test("clarify carries the draft, waits, and comes back with the reply", () => {
    const s = page(question(CHECKS, { total: 3, progress: [
      { questionId: "checks", label: "Pre-flight checks", state: "current" },
      { questionId: "b", label: "B", state: "pending" }, { questionId: "c", label: "C", state: "pending" }] }));
    s.pick("e2e", T0);
    assert.equal(s.toggleClarify().focus, "clarify-input");
    assert.deepEqual(s.sendClarify(T0).fieldError, { kind: "clarify", text: "Type your question for the agent first." });
    s.typeClarify("x".repeat(1001));
    assert.match(s.sendClarify(T0).fieldError.text, /1000 characters/);
    s.typeClarify("  Do they need staging?  ");
    const out = s.sendClarify(T0);
    assert.deepEqual(out.send, [{
      type: "clarify", questionnaireId: "qn-1", step: 0, request: "Do they need staging?", ref: out.send[0].ref,
      draft: { selectedOptionIds: ["e2e"] },
    }]);

    const wait = s.receive(suspended({ request: "Do they need staging?" }), T0);
    assert.equal(s.view, "suspended");
    assert.equal(s.busy, null);
    assert.equal(wait.announce, "Waiting for the agent to answer your question.");
    assert.equal(s.title(), "Waiting for the agent · qbroker");
    const w = s.waiting();
    assert.equal(w.label, "Pre-flight checks");
    assert.equal(w.place, "", "the progress is on screen: no need to say where");
    assert.equal(w.questionFrame.question.id, "checks");
    const screen = s.screen;
    s.receive(suspended({ request: "Do they need staging?" }), T0);
    assert.equal(s.screen, screen, "the same wait is not drawn again");

    const back = s.receive(question(CHECKS, {
      total: 3,
      draft: { selectedOptionIds: ["e2e"] },
      clarifications: [{ questionId: "checks", revision: 1, request: "Do they need staging?", response: "Yes." }],
    }), T0);
    assert.equal(back.announce, "The agent replied: Yes. Back to Pre-flight checks.");
    assert.deepEqual([...s.answer.selected], ["e2e"]);
  });

  test("a reply without a full stop gets one, once", () => {
    const s = page(suspended({ questionId: "checks" }));
    const back = s.receive(question(CHECKS, {
      clarifications: [{ questionId: "checks", revision: 1, request: "?", response: "Only for docs/ changes" }],
    }), T0);
    assert.equal(back.announce, "The agent replied: Only for docs/ changes. Back to Pre-flight checks.");
  });

  test("a page opened during the wait says which question it was and where", () => {
    const s = page(suspended({ label: "Rollout", index: 1, total: 3 }));
    const w = s.waiting();
    assert.equal(w.questionFrame, null);
    assert.equal(w.label, "Rollout");
    assert.equal(w.place, " (question 2 of 3)");
  });
});

describe("cancelling", () => {
  test("the dialog is about the questionnaire on screen, and confirming cancels it", () => {
    const s = page(question(TARGET));
    assert.equal(s.openCancel().dialog, "open");
    assert.equal(s.cancelFor, "qn-1");
    const out = s.confirmCancel(T0);
    assert.equal(out.dialog, "close");
    assert.deepEqual(out.send, [{ type: "cancel", questionnaireId: "qn-1", step: 0, ref: out.send[0].ref }]);
  });

  test("Keep answering closes it and a late confirmation does nothing", () => {
    const s = page(question(TARGET));
    s.openCancel();
    assert.equal(s.closeCancel().dialog, "close");
    assert.deepEqual(s.confirmCancel(T0).send, []);
  });

  test("the dialog closes when its questionnaire goes and never cancels the next", () => {
    const s = page(question(TARGET));
    s.openCancel();
    const next = s.receive(question(TARGET, { qn: "qn-2" }), T0);
    assert.equal(next.dialog, "close");
    assert.equal(next.toasts[0].title, "Nothing was cancelled");
    assert.deepEqual(s.confirmCancel(T0).send, []);
  });

  test("an update of the same questionnaire keeps the dialog open", () => {
    const s = page(question(CHECKS));
    s.openCancel();
    const echo = s.receive(question(CHECKS, { draft: { selectedOptionIds: ["unit"] } }), T0);
    assert.equal(echo.dialog, null);
    assert.equal(s.cancelFor, "qn-1");
  });

  test("cancelling works while waiting for the agent", () => {
    const s = page(question(CHECKS));
    s.receive(suspended(), T0);
    s.openCancel();
    assert.equal(s.confirmCancel(T0).send[0].type, "cancel");
  });

  test("idle closes the dialog: nothing is left to cancel", () => {
    const s = page(question(TARGET));
    s.openCancel();
    assert.equal(s.receive({ type: "idle" }, T0).dialog, "close");
  });

  test("nothing to cancel, no dialog", () => {
    const s = page();
    s.receive({ type: "idle" }, T0);
    assert.equal(s.openCancel().dialog, null);
  });
});

describe("errors", () => {
  test("a lost race is a human message, the code kept but not shown", () => {
    const s = page(question(TARGET));
    const out = s.receive({ type: "error", code: "stale_step", message: "answer names step 0; the current step is 1" }, T0);
    assert.deepEqual(out.toasts, [{
      kind: "info", title: "That question had already moved on", text: RACE_TEXT, ttl: 8000,
      code: "stale_step", hideCode: true,
    }]);
  });

  test("other errors show their title, the broker's message and the code", () => {
    const s = page(question(TARGET));
    const out = s.receive({ type: "error", code: "unknown_option", message: 'no option "moon"' }, T0);
    assert.deepEqual(out.toasts, [{
      kind: "error", title: "That option is not part of this question", text: 'no option "moon"', ttl: 12000,
      code: "unknown_option", hideCode: false,
    }]);
    const odd = s.receive({ type: "error", code: "constructor" }, T0);
    assert.equal(odd.toasts[0].title, "Something went wrong");
  });

  test("the error for the answer in flight frees the page; one for a draft settles it", () => {
    const s = page(question(CHECKS));
    s.pick("unit", T0);
    const draftError = s.receive({ type: "error", code: "rate_limited", ref: s.draftPending.ref }, T0);
    assert.equal(s.draftPending, null);
    assert.equal(draftError.refresh, "draft");
    s.pick("docs", T0);
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["unit", "docs"] } }), T0);
    const answer = s.submitMulti(T0).send[0];
    s.receive({ type: "error", code: "store_unavailable", ref: "someone-else" }, T0);
    assert.notEqual(s.busy, null);
    s.receive({ type: "error", code: "store_unavailable", ref: answer.ref }, T0);
    assert.equal(s.busy, null);
  });

  test("a frame that could not be sent awaits nothing", () => {
    const s = page(question(CHECKS));
    const draft = s.pick("unit", T0).send[0];
    assert.equal(s.unsent(draft).refresh, "draft");
    assert.equal(s.draftPending, null);
    s.pick("docs", T0);
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["unit", "docs"] } }), T0);
    const answer = s.submitMulti(T0).send[0];
    s.unsent(answer);
    assert.equal(s.busy, null);
  });
});

describe("the connection", () => {
  test("a reconnect is announced by a message; the first welcome is not", () => {
    const s = new PageState();
    assert.deepEqual(s.receive({ type: "welcome" }, T0).toasts, []);
    assert.equal(s.receive({ type: "welcome" }, T0).toasts[0].title, "Reconnected");
  });

  test("the offline banner shows once a connection that worked is lost", () => {
    const s = new PageState();
    assert.equal(s.offlineBannerShown(), false, "still connecting for the first time");
    s.connection("connected");
    s.receive({ type: "welcome" }, T0);
    assert.equal(s.offlineBannerShown(), false);
    for (const state of ["waiting", "offline", "connecting", "failed"]) {
      s.connection(state);
      assert.equal(s.offlineBannerShown(), true, state);
    }
  });

  test("an expired token shows its own screen, without a retry", () => {
    const s = page(question(TARGET));
    s.pick("staging", T0);
    s.disconnected(4401, "token expired");
    assert.equal(s.busy, null);
    assert.equal(s.view, "fatal");
    assert.equal(s.fatalInfo.title, "This link has expired");
    assert.equal(s.fatalInfo.action, null);
    assert.match(s.fatalInfo.text, /still open for a while/);
    assert.equal(s.title(), "qbroker · This link has expired");
  });

  test("a rejected token shows its screen without a retry; other closes change no screen", () => {
    const s = page(question(TARGET));
    const screen = s.screen;
    s.disconnected(1006, "");
    s.disconnected(1012, "restart");
    assert.equal(s.screen, screen);
    assert.equal(s.view, "question");
    s.disconnected(4403, "");
    assert.equal(s.fatalInfo.title, "This link is for another session");
    assert.equal(s.fatalInfo.action, null);
    s.disconnected(4401, "token expired", { signedIn: true });
    assert.equal(s.fatalInfo.title, "You have been signed out");
    assert.equal(s.fatalInfo.action, "signIn");
  });

  test("a questionnaire that ended while disconnected is explained on the idle screen", () => {
    const s = page(question(TARGET));
    s.connection("waiting");
    s.connection("connected");
    s.receive({ type: "welcome" }, T0);
    const out = s.receive({ type: "idle" }, T0);
    assert.equal(out.announce, ENDED_UNSEEN + " Waiting for questions.");
    assert.equal(s.idleNote().status, "ended");
    assert.match(s.idleNote().text, /could not see how/);
  });

  test("...and above another questionnaire, until that one goes", () => {
    const s = page(question(TARGET));
    s.receive({ type: "welcome" }, T0);
    const out = s.receive(question(TARGET, { qn: "qn-2" }), T0);
    assert.match(out.announce, /^The questionnaire you were answering ended/);
    assert.equal(s.endedNoteFor("qn-2"), true);
    s.receive(question(TARGET, { qn: "qn-2" }), T0);
    assert.equal(s.endedNoteFor("qn-2"), true, "an update keeps the note");
    s.receive({ type: "idle" }, T0);
    assert.equal(s.endedNote, null);
    assert.equal(s.idleNote(), null);
  });

  test("the same questionnaire after a reconnect is no news", () => {
    const s = page(question(TARGET));
    s.receive({ type: "welcome" }, T0);
    s.receive(question(TARGET), T0);
    assert.equal(s.endedNote, null);
    s.receive({ type: "welcome" }, T0);
    s.receive(question(TARGET, { step: 1, index: 1, total: 2 }), T0);
    assert.equal(s.endedNote, null);
  });

  test("a dismissed note stays dismissed", () => {
    const s = page(question(TARGET));
    s.receive({ type: "welcome" }, T0);
    s.receive(question(TARGET, { qn: "qn-2" }), T0);
    s.dismissEndedNote();
    assert.equal(s.endedNoteFor("qn-2"), false);
  });
});
