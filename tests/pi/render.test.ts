// The compact view of a questionnaire in Pi's TUI (clients/pi/render.ts), as plain text.
// Run by tests/e2e/test_pi_extension.py under node --test with Pi's own TypeScript loader.

import assert from "node:assert/strict";
import { test } from "node:test";
import { callLine, type Line, pendingLine, resultLines } from "../../clients/pi/render.ts";

const plain = (lines: Line[] | undefined) => lines?.map((line) => line.map((piece) => piece.text).join(""));

const QUESTIONS = [
	{
		id: "deploy_target",
		label: "Target",
		options: [
			{ id: "staging", label: "Staging" },
			{ id: "production", label: "Production" },
		],
	},
	{
		id: "checks",
		label: "Pre-flight checks",
		options: [
			{ id: "unit", label: "Unit tests" },
			{ id: "e2e", label: "e2e" },
		],
	},
];

test("a completed questionnaire shows each answer as labels with their ids", () => {
	const details = {
		version: 1,
		status: "completed",
		questions: QUESTIONS,
		answers: [
			{ questionId: "deploy_target", selectedOptionIds: ["production"] },
			{ questionId: "checks", selectedOptionIds: ["unit", "e2e"], other: "Manual smoke test" },
		],
	};
	assert.deepEqual(plain(resultLines(details)), [
		"✓ completed · 2 of 2 answered",
		"  Target [deploy_target]: Production [production]",
		'  Pre-flight checks [checks]: Unit tests [unit], e2e, Other "Manual smoke test"',
	]);
});

test("a clarification request shows the question asked about and the answers so far", () => {
	const details = {
		version: 1,
		status: "needs_clarification",
		questions: QUESTIONS,
		answers: [{ questionId: "deploy_target", selectedOptionIds: ["production"] }],
		clarificationRequest: { revision: 1, questionId: "checks", request: "Against which environment?" },
	};
	assert.deepEqual(plain(resultLines(details)), [
		'? the user asks about Pre-flight checks [checks]: "Against which environment?"',
		"  answered so far (1 of 2):",
		"  Target [deploy_target]: Production [production]",
	]);
});

test("cancelled and unavailable say why, in words", () => {
	const base = { version: 1, questions: QUESTIONS, answers: [] };
	assert.deepEqual(plain(resultLines({ ...base, status: "cancelled", cancellationReason: "aborted" })), [
		"✗ cancelled · aborted by the agent",
	]);
	assert.deepEqual(plain(resultLines({ ...base, status: "unavailable", cancellationReason: "ui_unavailable" })), [
		"✗ unavailable · nobody had the session open",
	]);
});

test("an Other-only answer to a single question shows just the Other text", () => {
	const details = {
		version: 1,
		status: "completed",
		questions: QUESTIONS.slice(0, 1),
		answers: [{ questionId: "deploy_target", selectedOptionIds: [], other: "the canary" }],
	};
	assert.deepEqual(plain(resultLines(details))?.[1], '  Target [deploy_target]: Other "the canary"');
});

test("details that are not a questionnaire's fall back to the text (undefined)", () => {
	assert.equal(resultLines(undefined), undefined);
	assert.equal(resultLines({}), undefined);
	assert.equal(resultLines({ version: 2, status: "completed", questions: [] }), undefined);
	assert.equal(resultLines({ version: 1, status: "pending", questions: [] }), undefined);
});

test("the call line names the questions, or the questionnaire being resumed", () => {
	assert.deepEqual(plain([callLine({ action: "start", questions: [{ id: "a", label: "Target" }, { id: "checks" }] })]), [
		"questionnaire 2 questions (Target, checks)",
	]);
	assert.deepEqual(plain([callLine({ action: "resume", questionnaireId: "qid", revision: 3 })]), ["questionnaire resume qid r3"]);
	assert.deepEqual(plain([callLine(undefined)]), ["questionnaire 0 questions"]);
});

test("while waiting, the step is shown", () => {
	assert.deepEqual(plain([pendingLine({ status: "pending", questionnaireId: "q", revision: 0, step: 2 })]), [
		"… waiting for the user to answer (step 2)",
	]);
	assert.deepEqual(plain([pendingLine({ status: "pending", questionnaireId: "q", revision: 0, step: 3, index: 1, total: 2 })]), [
		"… waiting for the user to answer (question 2 of 2)",
	]);
	assert.deepEqual(plain([pendingLine(undefined)]), ["… waiting for the user to answer"]);
});
