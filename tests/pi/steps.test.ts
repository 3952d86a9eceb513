// One step as Pi shows it (clients/pi/steps.ts): the lines, the list, and what a pick means.
// Run by tests/e2e/test_pi_extension.py under node --test with Pi's own TypeScript loader.

import assert from "node:assert/strict";
import { test } from "node:test";
import { choose, entries, headerLines, type QuestionFrame, selectionOf, selectText, TEXTS, toggle, typed, type WireQuestion } from "../../clients/pi/steps.ts";

const SINGLE: WireQuestion = {
	id: "deploy_target",
	label: "Target",
	prompt: "Which environment?",
	type: "single",
	options: [
		{ id: "staging", label: "Staging" },
		{ id: "production", label: "Production", description: "Needs a release window" },
	],
	allowOther: false,
};
const MULTI: WireQuestion = {
	id: "checks",
	label: "Checks",
	prompt: "Which checks?",
	type: "multi",
	options: [
		{ id: "unit", label: "Unit tests" },
		{ id: "e2e", label: "End-to-end tests" },
		{ id: "lint", label: "Lint" },
	],
	allowOther: true,
	minSelections: 1,
	maxSelections: 2,
};

function frame(question: WireQuestion, extra: Partial<QuestionFrame> = {}): QuestionFrame {
	return { type: "question", questionnaireId: "q1", revision: 0, step: 0, index: 0, total: 2, question, draft: null, clarifications: [], ...extra };
}

test("a single question lists its options, then asking the agent; no Other when it is not allowed", () => {
	const list = entries(frame(SINGLE), selectionOf(frame(SINGLE)), { brokered: true });
	assert.deepEqual(list.map(selectText), ["Staging", "Production — Needs a release window", TEXTS.ask, TEXTS.elsewhere]);
	assert.deepEqual(choose(SINGLE, { selectedOptionIds: [] }, list[1]!), {
		next: "action",
		action: { kind: "answer", selection: { selectedOptionIds: ["production"] } },
	});
});

test("without a broker there is nobody to hand the step to", () => {
	const list = entries(frame(SINGLE), { selectedOptionIds: [] }, { brokered: false });
	assert.ok(!list.some((e) => e.kind === "elsewhere"));
});

test("a multi question shows the stored draft as ticks and its Other text, then Done", () => {
	const shown = frame(MULTI, { draft: { selectedOptionIds: ["e2e"], other: "Smoke" } });
	const list = entries(shown, selectionOf(shown), { brokered: false });
	assert.deepEqual(
		list.map((e) => e.text),
		["[ ] Unit tests", "[x] End-to-end tests", "[ ] Lint", '[x] Other: "Smoke"', "Done", TEXTS.ask],
	);
});

test("ticks keep the declared order; Done checks the bounds, Other counting as one", () => {
	let selection = toggle(MULTI, { selectedOptionIds: [] }, "lint");
	selection = toggle(MULTI, selection, "unit");
	assert.deepEqual(selection, { selectedOptionIds: ["unit", "lint"] });
	assert.deepEqual(toggle(MULTI, selection, "unit"), { selectedOptionIds: ["lint"] });
	const done = { kind: "done", text: "Done" } as const;
	assert.deepEqual(choose(MULTI, { selectedOptionIds: [] }, done), { next: "notice", notice: "Choose at least 1 (0 chosen)." });
	assert.deepEqual(choose(MULTI, { selectedOptionIds: ["unit", "lint"], other: "x" }, done), {
		next: "notice",
		notice: "Choose at most 2 (3 chosen).",
	});
	assert.equal(choose(MULTI, { selectedOptionIds: ["unit"], other: "x" }, done).next, "action");
});

test("a typed Other answers a single question, and is a draft of a multi one; blank takes it back", () => {
	const single = { ...SINGLE, allowOther: true };
	assert.deepEqual(typed(single, { selectedOptionIds: [] }, "other", "  Canary  "), {
		next: "action",
		action: { kind: "answer", selection: { selectedOptionIds: [], other: "Canary" } },
	});
	assert.deepEqual(typed(single, { selectedOptionIds: [] }, "other", "   "), { next: "stay" });
	assert.deepEqual(typed(MULTI, { selectedOptionIds: ["unit"] }, "other", "Smoke"), {
		next: "draft",
		selection: { selectedOptionIds: ["unit"], other: "Smoke" },
	});
	assert.deepEqual(typed(MULTI, { selectedOptionIds: ["unit"], other: "Smoke" }, "other", ""), {
		next: "draft",
		selection: { selectedOptionIds: ["unit"] },
	});
});

test("asking the agent carries a multi question's ticks, and needs words", () => {
	assert.deepEqual(typed(MULTI, { selectedOptionIds: ["unit"] }, "ask", " Why? "), {
		next: "action",
		action: { kind: "clarify", request: "Why?", draft: { selectedOptionIds: ["unit"] } },
	});
	assert.deepEqual(typed(SINGLE, { selectedOptionIds: [] }, "ask", "Why?"), { next: "action", action: { kind: "clarify", request: "Why?" } });
	assert.deepEqual(typed(SINGLE, { selectedOptionIds: [] }, "ask", undefined), { next: "stay" });
});

test("the header says where the person is, what the agent answered, and how many to choose", () => {
	const shown = frame(MULTI, {
		index: 1,
		clarifications: [
			{ revision: 1, questionId: "checks", request: "Which is slow?", response: "End-to-end." },
			{ revision: 2, questionId: "other", request: "Not this one", response: "-" },
		],
	});
	assert.deepEqual(headerLines(shown, "Choose at least 1 (0 chosen)."), [
		"Question 2 of 2 · Checks",
		"Which checks?",
		"You asked: Which is slow?",
		"The agent: End-to-end.",
		"(choose 1-2; Space or Enter ticks, Done submits)",
		"! Choose at least 1 (0 chosen).",
	]);
});

test("two options with one label stay two choices", () => {
	const twins: WireQuestion = { ...SINGLE, options: [{ id: "a", label: "Same" }, { id: "b", label: "Same" }] };
	assert.deepEqual(entries(frame(twins), { selectedOptionIds: [] }, { brokered: false }).slice(0, 2).map((e) => e.text), ["Same [a]", "Same [b]"]);
});
