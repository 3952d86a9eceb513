// The answer being made to one question (clients/web/answer.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { Answer, CLARIFY_MAX, draftKey, OTHER_MAX } from "../../clients/web/answer.mjs";

const MULTI = {
  id: "checks", type: "multi", allowOther: true, minSelections: 1, maxSelections: 2,
  options: [{ id: "a" }, { id: "b" }, { id: "c" }],
};

test("draft keys ignore the order of the toggles", () => {
  assert.equal(draftKey({ selectedOptionIds: ["b", "a"] }), draftKey({ selectedOptionIds: ["a", "b"], other: "" }));
  assert.notEqual(draftKey({ selectedOptionIds: ["a"] }), draftKey({ selectedOptionIds: ["a"], other: "x" }));
  assert.equal(draftKey(null), draftKey({ selectedOptionIds: [] }));
});

test("the draft lists toggles in the question's order, and Other only while open and within the limit", () => {
  const a = new Answer(MULTI);
  a.toggle("c");
  a.toggle("a");
  a.otherText = " canary ";
  assert.deepEqual(a.draft(), { selectedOptionIds: ["a", "c"] });
  a.otherOpen = true;
  assert.deepEqual(a.draft(), { selectedOptionIds: ["a", "c"], other: "canary" });
  a.otherText = "x".repeat(OTHER_MAX + 1);
  assert.deepEqual(a.draft(), { selectedOptionIds: ["a", "c"] });
  assert.equal(a.otherTooLong(), true);
  a.toggle("c");
  assert.deepEqual(a.draft().selectedOptionIds, ["a"]);
});

test("adopting a draft: a field being typed in, or over the limit, keeps its text", () => {
  const a = new Answer(MULTI);
  a.adopt({ selectedOptionIds: ["b"], other: "from the broker" }, false);
  assert.deepEqual([...a.selected], ["b"]);
  assert.equal(a.otherOpen, true);
  assert.equal(a.otherText, "from the broker");
  a.otherText = "typing";
  a.adopt({ selectedOptionIds: [], other: "from the broker" }, true);
  assert.equal(a.otherText, "typing");
  a.adopt({ selectedOptionIds: [] }, true);
  assert.equal(a.otherOpen, true, "not closed under the person's fingers");
  a.adopt({ selectedOptionIds: [] }, false);
  assert.equal(a.otherOpen, false, "removed in another tab");
  a.otherOpen = true;
  a.otherText = "y".repeat(OTHER_MAX + 1);
  a.adopt({ selectedOptionIds: [], other: "short" }, false);
  assert.equal(a.otherText, "y".repeat(OTHER_MAX + 1));
});

test("what stops Continue, an Other answer and a clarification", () => {
  const a = new Answer(MULTI);
  assert.equal(a.continueProblem(), "Select 1 more option to continue (at least 1).");
  a.otherOpen = true;
  assert.equal(a.selectionCount(), 0, "an empty Other is no selection");
  a.otherText = "x";
  assert.equal(a.continueProblem(), "");
  a.toggle("a");
  a.toggle("b");
  assert.equal(a.continueProblem(), "Deselect 1 option to continue (at most 2).");
  assert.equal(a.rule(), "Choose 1 to 2. Other counts as one.");

  assert.equal(a.clarifyProblem(), "Type your question for the agent first.");
  a.clarifyText = "z".repeat(CLARIFY_MAX + 1);
  assert.equal(a.clarifyProblem(), "Please shorten your question to 1000 characters.");
  a.clarifyText = "Why?";
  assert.equal(a.clarifyProblem(), "");

  const single = new Answer({ id: "t", type: "single", options: [{ id: "a" }] });
  assert.equal(single.rule(), "Choose one.");
  assert.equal(single.otherProblem(), "Type your answer first, or pick one of the options.");
  single.otherText = "   ";
  assert.equal(single.otherProblem(), "Type your answer first, or pick one of the options.");
  single.otherText = "fine";
  assert.equal(single.otherProblem(), "");
});
