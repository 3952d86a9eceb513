// The stop before a text that looks like a secret (clients/web/secret-guard.mjs, driven by
// clients/web/state.mjs): nothing goes out until the person chooses "Send anyway", which
// sends the same frame with confirmedNotSecret: true; "Edit" goes back to the text.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { errorToast } from "../../clients/web/messages.mjs";
import { SecretGuard, stopMessage } from "../../clients/web/secret-guard.mjs";
import { DRAFT_TEXT_DEBOUNCE_MS, PageState } from "../../clients/web/state.mjs";

const T0 = 1_000_000;
// Fabricated, and put together here so that no secret scanner flags this file.
const TOKEN = "ghp_" + "Zr4mQ8vNc2Lx7Tb1Wk9Hs3Jd6Fp0Ya5GeR2u";
const PAIR = "DB_PASSWORD=" + "Wq7!zR2mK9";

const DB = {
  id: "db", label: "Database", prompt: "Which database?", type: "single",
  options: [{ id: "pg", label: "Postgres" }, { id: "my", label: "MySQL" }], allowOther: true,
};
const CHECKS = {
  id: "checks", label: "Checks", prompt: "Which checks?", type: "multi",
  options: [{ id: "unit", label: "Unit" }, { id: "e2e", label: "E2E" }], allowOther: true, minSelections: 1,
};

function question(q, { step = 0, draft } = {}) {
  return {
    type: "question", questionnaireId: "qn-1", step, index: 0, total: 1, question: q,
    draft: draft || { selectedOptionIds: [] }, clarifications: [],
    progress: [{ questionId: q.id, label: q.label, state: "current" }],
  };
}

function page(q, options) {
  const s = new PageState();
  s.connection("connected");
  s.receive({ type: "welcome", clientId: "c1" }, T0);
  s.receive(question(q, options), T0);
  return s;
}

function typeOther(s, text) {
  s.toggleOther(T0);
  s.typeOther(text, T0);
}

describe("an Other answer that looks like a secret", () => {
  test("stops before sending and says why, without the text", () => {
    const s = page(DB);
    typeOther(s, "use " + TOKEN);
    const out = s.submitOther(T0);
    assert.deepEqual(out.send, []);
    assert.equal(out.secret, "open");
    assert.equal(s.busy, null);
    assert.equal(s.guard.stop.kind, "other");
    assert.equal(s.guard.stop.rule.code, "github_token");
    const message = stopMessage(s.guard.stop);
    assert.equal(message.title, "This looks like a secret");
    assert.match(message.text, /^Your answer looks like a GitHub token \(ghp_…/);
    assert.ok(!message.text.includes(TOKEN.slice(4)));
  });

  test("Send anyway sends the same answer, saying the person confirmed", () => {
    const s = page(DB);
    typeOther(s, "use " + TOKEN);
    s.submitOther(T0);
    const out = s.sendAnyway(T0);
    assert.equal(out.secret, "close");
    assert.equal(out.send.length, 1);
    const [frame] = out.send;
    assert.equal(frame.type, "answer");
    assert.equal(frame.other, "use " + TOKEN);
    assert.equal(frame.confirmedNotSecret, true);
    assert.equal(s.guard.stop, null);
    assert.ok(s.busy);
  });

  test("Edit goes back to the field with the text as typed, and sends nothing", () => {
    const s = page(DB);
    typeOther(s, "use " + TOKEN);
    s.submitOther(T0);
    const out = s.editSecret();
    assert.deepEqual(out.send, []);
    assert.equal(out.secret, "close");
    assert.equal(out.focus, "other-input");
    assert.equal(s.answer.otherText, "use " + TOKEN);
    assert.equal(s.guard.stop, null);
    // Changed, it goes without a stop and without the flag.
    s.typeOther("use the token from the vault", T0);
    const sent = s.submitOther(T0).send;
    assert.equal(sent.length, 1);
    assert.equal(sent[0].confirmedNotSecret, undefined);
  });

  test("an ordinary answer goes at once, without the flag", () => {
    const s = page(DB);
    typeOther(s, "Postgres 16 on the staging cluster");
    const out = s.submitOther(T0);
    assert.equal(out.secret, null);
    assert.equal(out.send.length, 1);
    assert.equal("confirmedNotSecret" in out.send[0], false);
  });
});

describe("a multi question's Other text", () => {
  test("is held back from the drafts, and the line next to Continue says so", () => {
    const s = page(CHECKS);
    s.pick("unit", T0);
    typeOther(s, PAIR);
    const out = s.tick(T0 + DRAFT_TEXT_DEBOUNCE_MS);
    assert.deepEqual(out.send, []);
    assert.equal(s.draftStatus().state, "unsaved");
    assert.match(s.draftStatus().text, /looks like a secret/);
  });

  test("Continue stops; Send anyway answers with the flag", () => {
    const s = page(CHECKS);
    s.pick("unit", T0);
    typeOther(s, PAIR);
    const stop = s.submitMulti(T0);
    assert.equal(stop.secret, "open");
    assert.deepEqual(stop.send, []);
    assert.equal(s.guard.stop.rule.code, "secret_assignment");
    const out = s.sendAnyway(T0);
    assert.equal(out.send[0].type, "answer");
    assert.deepEqual(out.send[0].selectedOptionIds, ["unit"]);
    assert.equal(out.send[0].other, PAIR);
    assert.equal(out.send[0].confirmedNotSecret, true);
  });

  test("a draft the broker echoes with such a text was confirmed elsewhere: no stop here", () => {
    const s = page(CHECKS);
    s.receive(question(CHECKS, { draft: { selectedOptionIds: ["e2e"], other: PAIR } }), T0);
    const out = s.submitMulti(T0);
    assert.equal(out.secret, null);
    assert.equal(out.send[0].other, PAIR);
    assert.equal(out.send[0].confirmedNotSecret, true);
  });
});

describe("a clarification", () => {
  test("that looks like a secret stops; Send anyway sends it with the flag", () => {
    const s = page(DB);
    s.toggleClarify();
    s.typeClarify("is " + TOKEN + " the right one?");
    const out = s.sendClarify(T0);
    assert.equal(out.secret, "open");
    assert.equal(s.guard.stop.kind, "clarify");
    assert.match(stopMessage(s.guard.stop).text, /^Your question for the agent looks like/);
    const sent = s.sendAnyway(T0).send;
    assert.equal(sent[0].type, "clarify");
    assert.equal(sent[0].confirmedNotSecret, true);
  });

  test("Edit goes back to the clarification field", () => {
    const s = page(DB);
    s.toggleClarify();
    s.typeClarify(PAIR);
    s.sendClarify(T0);
    const out = s.editSecret();
    assert.equal(out.focus, "clarify-input");
    assert.equal(s.answer.clarifyOpen, true);
    assert.equal(s.answer.clarifyText, PAIR);
  });

  test("carrying a held Other text stops for each text in turn", () => {
    const s = page(CHECKS);
    typeOther(s, PAIR);
    s.toggleClarify();
    s.typeClarify("and what about " + TOKEN + "?");
    const first = s.sendClarify(T0);
    assert.equal(first.secret, "open");
    assert.equal(s.guard.stop.kind, "clarify");
    const second = s.sendAnyway(T0);
    assert.equal(second.secret, "open");
    assert.deepEqual(second.send, []);
    assert.equal(s.guard.stop.kind, "other");
    const third = s.sendAnyway(T0);
    assert.equal(third.secret, "close");
    assert.equal(third.send[0].draft.other, PAIR);
    assert.equal(third.send[0].confirmedNotSecret, true);
  });
});

describe("the stop goes away", () => {
  test("when the question moves on (answered elsewhere), and nothing is sent", () => {
    const s = page(DB);
    typeOther(s, TOKEN);
    s.submitOther(T0);
    const out = s.receive(question(DB, { step: 1 }), T0);
    assert.equal(out.secret, "close");
    assert.equal(s.guard.stop, null);
    assert.deepEqual(s.sendAnyway(T0).send, []);
  });

  test("when the questionnaire waits for the agent or ends", () => {
    for (const frame of [{ type: "idle" }, { type: "suspended", questionnaireId: "qn-1", step: 1, questionId: "db", request: "?" }]) {
      const s = page(DB);
      typeOther(s, TOKEN);
      s.submitOther(T0);
      assert.equal(s.receive(frame, T0).secret, "close");
    }
  });

  test("what was confirmed is forgotten with the question", () => {
    const s = page(DB);
    typeOther(s, TOKEN);
    s.submitOther(T0);
    s.sendAnyway(T0);
    s.receive(question(DB, { step: 1 }), T0);
    typeOther(s, TOKEN);
    assert.equal(s.submitOther(T0).secret, "open");
  });
});

test("once confirmed, the text's drafts go too, saying so", () => {
  const s = page(CHECKS);
  typeOther(s, PAIR);
  s.toggleClarify();
  s.typeClarify("Why these checks?");
  s.sendClarify(T0);
  s.sendAnyway(T0); // the clarification carried the Other text
  s.receive({ type: "error", code: "stale_step", message: "…", ref: s.busy.ref }, T0); // (it raced, say)
  s.typeOther(PAIR + " ", T0);
  const out = s.tick(T0 + DRAFT_TEXT_DEBOUNCE_MS);
  assert.equal(out.send[0].type, "draft");
  assert.equal(out.send[0].other, PAIR);
  assert.equal(out.send[0].confirmedNotSecret, true);
});

test("the guard vouches only for what was confirmed", () => {
  const guard = new SecretGuard();
  const frame = {};
  assert.equal(guard.stops(frame, [{ kind: "other", text: TOKEN }], "submitOther"), true);
  guard.confirm();
  const again = {};
  assert.equal(guard.stops(again, [{ kind: "other", text: TOKEN }], "submitOther"), false);
  assert.equal(again.confirmedNotSecret, true);
  const plain = {};
  assert.equal(guard.stops(plain, [{ kind: "other", text: "fine" }], "submitOther"), false);
  assert.equal("confirmedNotSecret" in plain, false);
});

test("a refusal from the broker reads as a sentence, not as the broker's note to programs", () => {
  const toast = errorToast({ type: "error", code: "looks_like_secret", rule: "github_token", message: "…" });
  assert.equal(toast.title, "Not sent: it looks like a secret");
  assert.match(toast.text, /^The broker held it back: it looks like a GitHub token/);
});
