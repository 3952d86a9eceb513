// The questionnaire kept in Pi when no broker answers (clients/pi/local.ts): the broker's
// rules and the broker's result text, line for line.
// Run by tests/e2e/test_pi_extension.py under node --test with Pi's own TypeScript loader.

import assert from "node:assert/strict";
import { test } from "node:test";
import { LocalQuestionnaire, LocalRefusal } from "../../clients/pi/local.ts";

const START = {
	action: "start",
	questions: [
		{ id: " target ", prompt: "Where?", type: "single", options: [{ id: "staging" }, { id: "production", label: "Production" }] },
		{ id: "checks", label: "Checks", prompt: "Which?", type: "multi", options: [{ id: "unit" }, { id: "e2e" }], minSelections: 1 },
	],
};

function refused(code: string, act: () => unknown) {
	assert.throws(act, (error: unknown) => error instanceof LocalRefusal && error.code === code);
}

test("the start is normalized as the broker does", () => {
	const q = LocalQuestionnaire.start(START, "no broker");
	assert.deepEqual(q.questions[0], {
		id: "target",
		label: "target",
		prompt: "Where?",
		type: "single",
		options: [
			{ id: "staging", label: "staging" },
			{ id: "production", label: "Production" },
		],
		allowOther: true,
	});
	assert.equal(q.questions[1]!.maxSelections, null);
	refused("invalid_arguments", () =>
		LocalQuestionnaire.start({ action: "start", questions: [START.questions[0], START.questions[0]] }, "x"),
	);
	refused("invalid_arguments", () =>
		LocalQuestionnaire.start({ action: "start", questions: [{ ...START.questions[0], minSelections: 1 }] }, "x"),
	);
});

test("answered to the end: the broker's completed text, and details that say it was not brokered", () => {
	const q = LocalQuestionnaire.start(START, "cannot reach the broker");
	const at = () => ({ questionnaireId: q.id, step: q.step });
	q.apply({ type: "answer", ...at(), questionId: "target", selectedOptionIds: ["production"] });
	refused("below_min_selections", () => q.apply({ type: "answer", ...at(), questionId: "checks", selectedOptionIds: [] }));
	refused("stale_step", () => q.apply({ type: "answer", questionnaireId: q.id, step: 0, questionId: "checks", selectedOptionIds: ["unit"] }));
	q.apply({ type: "draft", ...at(), selectedOptionIds: ["e2e"] });
	assert.deepEqual(q.frame()!.draft, { selectedOptionIds: ["e2e"] });
	q.apply({ type: "answer", ...at(), questionId: "checks", selectedOptionIds: ["e2e", "unit"], other: " Smoke " });
	const result = q.result();
	assert.equal(
		result.content[0]!.text,
		[
			`QUESTIONNAIRE_COMPLETED questionnaireId=${q.id} revision=0`,
			"The user answered all 2 question(s). Answers, in question order:",
			"target: optionIds=[production]",
			'checks: optionIds=[unit, e2e] other="Smoke"',
			"Option ids are the ids you declared; act on them, not on the labels.",
		].join("\n"),
	);
	assert.equal(result.details.status, "completed");
	assert.equal(result.details.brokered, false);
	assert.equal(result.details.notBrokered, "cannot reach the broker");
});

test("a clarification: the resume call to make, then the broker's checks on the resume", () => {
	const q = LocalQuestionnaire.start(START, "x");
	q.apply({ type: "answer", questionnaireId: q.id, step: 0, questionId: "target", selectedOptionIds: ["staging"] });
	q.apply({ type: "clarify", questionnaireId: q.id, step: 1, request: "Which is slow?", draft: { selectedOptionIds: ["unit"] } });
	const text = q.result().content[0]!.text.split("\n");
	assert.equal(text[0], `QUESTIONNAIRE_NEEDS_CLARIFICATION questionnaireId=${q.id} revision=1`);
	assert.equal(text[1], 'The user paused at question 2 of 2 (checks: "Checks") and asks:');
	assert.equal(text[2], '"Which is slow?"');
	assert.ok(text.includes(JSON.stringify({ action: "resume", questionnaireId: q.id, revision: 1, clarificationResponse: "<a concise summary of your explanation, at most 1000 characters>" })));
	refused("stale_revision", () => q.resume(0, "e2e"));
	refused("invalid_arguments", () => q.resume(1, "  "));
	q.resume(1, "End-to-end.");
	refused("not_awaiting_clarification", () => q.resume(1, "again"));
	const shown = q.frame()!;
	assert.equal(shown.step, 3);
	assert.deepEqual(shown.draft, { selectedOptionIds: ["unit"] });
	assert.equal(shown.clarifications[0]!.response, "End-to-end.");
});

test("cancelled by the person, or aborted by the agent: the broker's words", () => {
	const q = LocalQuestionnaire.start(START, "x");
	q.apply({ type: "cancel", questionnaireId: q.id, step: 0 });
	assert.deepEqual(q.result().content[0]!.text.split("\n").slice(1), [
		"The user cancelled the questionnaire at question 1 of 2.",
		"No question had been answered.",
		"Treat this as the user's real decision. Do not guess the missing answers.",
	]);
	assert.equal(q.result().details.cancellationReason, "user_cancelled");
	const r = LocalQuestionnaire.start(START, "x");
	r.abort();
	assert.equal(r.result().details.cancellationReason, "aborted");
	assert.match(r.result().content[0]!.text, /aborted by the agent/);
});
