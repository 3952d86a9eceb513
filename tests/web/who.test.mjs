// Who answered (clients/web/who.mjs) and what the page does with it (state.mjs): the
// broker's `answeredBy` on the frame that moves on after an answer.
// Run: node --test tests/web/*.test.mjs   (pytest runs them too: tests/unit/test_web_page.py)

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { PageState } from "../../clients/web/state.mjs";
import { answeredByPhrase, answeredNote, ownAnswer } from "../../clients/web/who.mjs";

const T0 = 1_000_000;
const ALICE_TUI = { sub: "alice", role: "client", client: { kind: "tui", name: "qbroker tui" } };

const FIRST = { id: "first", label: "First", prompt: "Pick one?", type: "single", options: [{ id: "a", label: "A" }] };
const SECOND = { id: "second", label: "Second", prompt: "And this?", type: "single", options: [{ id: "b", label: "B" }] };

function question(q, { step = 0, index = 0, answeredBy } = {}) {
  const frame = {
    type: "question", questionnaireId: "qn-1", step, index, total: 2, question: q,
    draft: null, clarifications: [], progress: [],
  };
  if (answeredBy !== undefined) frame.answeredBy = answeredBy;
  return frame;
}

function page() {
  const s = new PageState();
  s.connection("connected");
  s.receive({ type: "welcome", clientId: "c1" }, T0);
  return s;
}

describe("the phrase", () => {
  test("names the person and where they answered", () => {
    assert.equal(answeredByPhrase(ALICE_TUI), "answered by alice in the terminal");
    assert.equal(answeredByPhrase({ sub: "bob", role: "client", client: { kind: "web", name: "qbroker web" } }),
      "answered by bob in the browser");
    assert.equal(answeredByPhrase({ sub: "ci", role: "client", client: { kind: "bot", name: "qbroker-bots 2" } }),
      "answered by ci with qbroker-bots 2");
    assert.equal(answeredByPhrase({ sub: null, role: "client", client: { kind: "bot", name: "" } }),
      "answered with a script");
    assert.equal(answeredByPhrase({ sub: null, role: "client", client: { kind: "web", name: "x" } }),
      "answered in the browser");
  });

  test("says nothing when nothing is known", () => {
    assert.equal(answeredByPhrase(undefined), null);
    assert.equal(answeredByPhrase(null), null);
    assert.equal(answeredByPhrase("alice"), null);
    assert.equal(answeredByPhrase({ sub: "  ", role: "client", client: null }), null);
  });

  test("a page's own answer is the one it sent for the step just before", () => {
    assert.equal(ownAnswer({ questionnaireId: "qn-1", step: 0 }, "qn-1", 0), true);
    assert.equal(ownAnswer({ questionnaireId: "qn-1", step: 0 }, "qn-1", 2), false);
    assert.equal(ownAnswer({ questionnaireId: "qn-0", step: 0 }, "qn-1", 0), false);
    assert.equal(ownAnswer(null, "qn-1", 0), false);
    assert.equal(answeredNote(question(SECOND, { step: 1, index: 1, answeredBy: ALICE_TUI }), null),
      "Question 1 was answered by alice in the terminal.");
  });
});

describe("the page", () => {
  test("says who answered on another screen, over the next question and to screen readers", () => {
    const s = page();
    s.receive(question(FIRST), T0);
    assert.equal(s.answeredNote, null);
    const out = s.receive(question(SECOND, { step: 1, index: 1, answeredBy: ALICE_TUI }), T0);
    assert.equal(s.answeredNote, "Question 1 was answered by alice in the terminal.");
    assert.equal(out.announce, "Question 1 was answered by alice in the terminal. Question 2 of 2: And this?");
  });

  test("says nothing of its own answer", () => {
    const s = page();
    s.receive(question(FIRST), T0);
    const sent = s.pick("a", T0);
    assert.equal(sent.send[0].type, "answer");
    const out = s.receive(question(SECOND, { step: 1, index: 1, answeredBy: { ...ALICE_TUI, client: { kind: "web", name: "qbroker web" } } }), T0);
    assert.equal(s.answeredNote, null);
    assert.equal(out.announce, "Question 2 of 2: And this?");
  });

  test("a page opened later is told who answered the question before", () => {
    const s = page();
    s.receive(question(SECOND, { step: 1, index: 1, answeredBy: ALICE_TUI }), T0);
    assert.equal(s.answeredNote, "Question 1 was answered by alice in the terminal.");
  });

  test("the note goes with the next question that is not about it", () => {
    const s = page();
    s.receive(question(SECOND, { step: 1, index: 1, answeredBy: ALICE_TUI }), T0);
    s.receive({ type: "suspended", questionnaireId: "qn-1", revision: 1, step: 2, questionId: "second", request: "?" }, T0);
    s.receive(question(SECOND, { step: 3, index: 1, answeredBy: ALICE_TUI }), T0); // back from the agent
    assert.equal(s.answeredNote, null);
  });

  test("a questionnaire completed on another screen says who gave the last answer", () => {
    const s = page();
    s.receive(question(SECOND, { step: 1, index: 1, answeredBy: ALICE_TUI }), T0);
    const out = s.receive({ type: "closed", questionnaireId: "qn-1", status: "completed", answeredBy: ALICE_TUI }, T0);
    assert.equal(out.toasts[0].title, "Questionnaire completed");
    assert.equal(out.toasts[0].text, "Answered by alice in the terminal. The agent has the answers.");
    s.receive({ type: "idle" }, T0);
    assert.deepEqual(s.idleNote(), { status: "completed", text: "The last questionnaire was answered by alice in the terminal." });
  });

  test("a questionnaire this page completed thanks the person as before", () => {
    const s = page();
    s.receive(question(SECOND, { step: 1, index: 1 }), T0);
    s.pick("b", T0);
    const out = s.receive({ type: "closed", questionnaireId: "qn-1", status: "completed", answeredBy: ALICE_TUI }, T0);
    assert.equal(out.toasts[0].title, "Answers sent");
    s.receive({ type: "idle" }, T0);
    assert.equal(s.idleNote().text, "Your last answers were sent to the agent.");
  });
});
