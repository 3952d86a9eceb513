/**
 * The questionnaire without a broker: when no broker can be reached, Pi asks the person
 * itself, with the seed's rules and the seed's results, so nobody is left without a way to
 * answer because a server is down. Pure (no Pi imports, no I/O); tested in tests/pi/.
 *
 * It is a small copy of the broker's state machine (broker/core/machine.py) and result text
 * (broker/core/results.py): the same `question` frames go to Pi's dialogs, the same client
 * commands come back, and the outcome is the same text and DETAILS (version 1) a broker
 * would write, plus `brokered: false` and the reason, so a program can tell. The state lives
 * in the Pi process: a clarification's `resume` works as long as that Pi runs.
 */

import { randomUUID } from "node:crypto";
import type { Clarification, QuestionFrame, Selection, WireQuestion } from "./steps.ts";
import type { ToolResult } from "./broker.ts";

export type Status = "in_progress" | "needs_clarification" | "completed" | "cancelled";
export interface Answer extends Selection {
	questionId: string;
}

/** A client command, as the websocket's frames spell them (without `type`'s siblings we never send). */
export type Command =
	| { type: "draft"; questionnaireId: string; step: number; selectedOptionIds: string[]; other?: string }
	| { type: "answer"; questionnaireId: string; step: number; questionId: string; selectedOptionIds: string[]; other?: string }
	| { type: "clarify"; questionnaireId: string; step: number; request: string; draft?: Selection }
	| { type: "cancel"; questionnaireId: string; step: number };

export class LocalRefusal extends Error {
	constructor(
		readonly code: string,
		message: string,
	) {
		super(message);
		this.name = "LocalRefusal";
	}
}

const MAX_OTHER = 2000;
const MAX_CLARIFICATION = 1000;

export class LocalQuestionnaire {
	readonly id = randomUUID();
	status: Status = "in_progress";
	revision = 0;
	step = 0;
	answers: Answer[] = [];
	draft: Selection | null = null;
	clarifications: Clarification[] = [];
	cancellationReason: string | undefined;

	constructor(
		readonly questions: WireQuestion[],
		/** why no broker took it: the details say so */
		readonly notBrokered: string,
	) {}

	/** The `start` input's questions, normalized as the broker does (or a refusal naming the rule). */
	static start(input: Record<string, unknown>, notBrokered: string): LocalQuestionnaire {
		if (input.action !== "start" || !Array.isArray(input.questions)) {
			throw new LocalRefusal("invalid_arguments", 'questionnaire: only a "start" can be asked without the broker');
		}
		return new LocalQuestionnaire(normalize(input.questions), notBrokered);
	}

	get index(): number {
		return this.answers.length;
	}

	get isOutcome(): boolean {
		return this.status !== "in_progress";
	}

	/** What a client is shown now: the current question, as a broker's `question` frame. */
	frame(): QuestionFrame | undefined {
		if (this.status !== "in_progress") return undefined;
		return {
			type: "question",
			questionnaireId: this.id,
			revision: this.revision,
			step: this.step,
			index: this.index,
			total: this.questions.length,
			question: this.questions[this.index]!,
			draft: this.draft,
			clarifications: this.clarifications.map((c) => ({ ...c })),
		};
	}

	/** A client command, under the broker's rules (stale steps, options, bounds). */
	apply(command: Command): void {
		if (command.questionnaireId !== this.id || this.status !== "in_progress" || command.step !== this.step) {
			throw new LocalRefusal("stale_step", `${command.type} names step ${command.step}; the current step is ${this.step}`);
		}
		const question = this.questions[this.index]!;
		switch (command.type) {
			case "draft":
				this.draft = checked(question, command, false);
				return;
			case "answer": {
				if (command.questionId !== question.id) {
					throw new LocalRefusal("invalid_answer", `answer names question "${command.questionId}", not "${question.id}"`);
				}
				const selection = checked(question, command, true);
				this.answers.push({ questionId: question.id, ...selection });
				this.draft = null;
				this.step += 1;
				if (this.answers.length === this.questions.length) this.status = "completed";
				return;
			}
			case "clarify": {
				const request = bounded(command.request, "request", MAX_CLARIFICATION);
				if (!request) throw new LocalRefusal("invalid_answer", "a clarification request must not be empty");
				if (command.draft) this.draft = checked(question, command.draft, false);
				this.revision += 1;
				this.step += 1;
				this.status = "needs_clarification";
				this.clarifications.push({ revision: this.revision, questionId: question.id, request });
				return;
			}
			case "cancel":
				this.status = "cancelled";
				this.cancellationReason = "user_cancelled";
				this.step += 1;
				return;
		}
	}

	/** The agent's `resume`: the broker's checks and words. */
	resume(revision: unknown, response: unknown): void {
		if (revision !== this.revision) {
			const which = typeof revision === "number" && revision < this.revision ? "stale" : "not a revision of it yet";
			throw new LocalRefusal(
				"stale_revision",
				`questionnaire: revision ${String(revision)} is ${which}; the latest revision of questionnaire ${this.id} is ${this.revision}`,
			);
		}
		if (this.status !== "needs_clarification") {
			throw new LocalRefusal(
				"not_awaiting_clarification",
				`questionnaire: questionnaire ${this.id} (revision ${this.revision}) is ${this.status.replace("_", " ")}, not awaiting clarification`,
			);
		}
		const text = bounded(typeof response === "string" ? response : "", "clarificationResponse", MAX_CLARIFICATION);
		if (!text) throw new LocalRefusal("invalid_arguments", 'questionnaire: "clarificationResponse" must not be empty');
		this.clarifications[this.clarifications.length - 1]!.response = text;
		this.status = "in_progress";
		this.step += 1;
	}

	/** Pi aborted the call: as the broker's DELETE does. */
	abort(): void {
		if (this.status === "completed" || this.status === "cancelled") return;
		this.status = "cancelled";
		this.cancellationReason = "aborted";
		this.step += 1;
	}

	/** The tool result a broker would have returned, and that it did not take it. */
	result(): ToolResult {
		return { content: [{ type: "text", text: resultText(this) }], details: details(this) };
	}
}

function details(q: LocalQuestionnaire): Record<string, unknown> {
	const out: Record<string, unknown> = { version: 1, questionnaireId: q.id, revision: q.revision, status: q.status };
	if (q.status === "cancelled") out.cancellationReason = q.cancellationReason;
	out.currentQuestionIndex = q.index;
	out.questions = q.questions;
	out.answers = q.answers.map(answerWire);
	out.draftAnswer = q.draft;
	const pending = q.status === "needs_clarification" ? q.clarifications[q.clarifications.length - 1] : undefined;
	if (pending) out.clarificationRequest = { revision: pending.revision, questionId: pending.questionId, request: pending.request };
	out.clarifications = q.clarifications;
	out.brokered = false;
	out.notBrokered = q.notBrokered;
	return out;
}

const MARKERS: Record<Exclude<Status, "in_progress">, string> = {
	completed: "QUESTIONNAIRE_COMPLETED",
	needs_clarification: "QUESTIONNAIRE_NEEDS_CLARIFICATION",
	cancelled: "QUESTIONNAIRE_CANCELLED",
};

/** broker/core/results.py's result_text, line for line. */
export function resultText(q: LocalQuestionnaire): string {
	if (q.status === "in_progress") throw new Error(`questionnaire ${q.id} has no outcome yet`);
	const lines = [`${MARKERS[q.status]} questionnaireId=${q.id} revision=${q.revision}`];
	const total = q.questions.length;
	if (q.status === "completed") {
		lines.push(`The user answered all ${total} question(s). Answers, in question order:`);
		lines.push(...q.answers.map(answerLine));
		lines.push("Option ids are the ids you declared; act on them, not on the labels.");
	} else if (q.status === "needs_clarification") {
		const request = q.clarifications[q.clarifications.length - 1]!;
		const question = q.questions[q.index]!;
		lines.push(`The user paused at question ${q.index + 1} of ${total} (${question.id}: ${JSON.stringify(question.label)}) and asks:`);
		lines.push(JSON.stringify(request.request));
		if (q.answers.length > 0) lines.push("Answers so far (already stored):", ...q.answers.map(answerLine));
		const resumeCall = {
			action: "resume",
			questionnaireId: q.id,
			revision: q.revision,
			clarificationResponse: `<a concise summary of your explanation, at most ${MAX_CLARIFICATION} characters>`,
		};
		lines.push(
			"Answer the user's request now in normal assistant text, concretely and briefly. Then immediately call questionnaire again with exactly:",
			JSON.stringify(resumeCall),
			"Do not resend questions, do not start a new questionnaire and do not guess the pending answer: the user still has to choose.",
		);
	} else if (q.cancellationReason === "aborted") {
		lines.push("The questionnaire was aborted by the agent before the user finished it.");
		lines.push(...partialAnswers(q));
		lines.push("The user did not decline these questions. Do not guess the missing answers.");
	} else {
		lines.push(`The user cancelled the questionnaire at question ${q.index + 1} of ${total}.`);
		lines.push(...partialAnswers(q));
		lines.push("Treat this as the user's real decision. Do not guess the missing answers.");
	}
	return lines.join("\n");
}

function partialAnswers(q: LocalQuestionnaire): string[] {
	if (q.answers.length === 0) return ["No question had been answered."];
	return ["Answers given before it ended:", ...q.answers.map(answerLine)];
}

function answerLine(answer: Answer): string {
	let line = `${answer.questionId}: optionIds=[${answer.selectedOptionIds.join(", ")}]`;
	if (answer.other !== undefined) line += ` other=${JSON.stringify(answer.other)}`;
	return line;
}

function answerWire(answer: Answer): Answer {
	return answer.other === undefined
		? { questionId: answer.questionId, selectedOptionIds: answer.selectedOptionIds }
		: { questionId: answer.questionId, selectedOptionIds: answer.selectedOptionIds, other: answer.other };
}

function bounded(value: string, name: string, limit: number): string {
	const text = value.trim();
	if (text.length > limit) throw new LocalRefusal("text_too_long", `${name} is ${text.length} characters; the limit is ${limit}`);
	return text;
}

/** broker/core/machine.py's _selection: known, distinct options in declared order; Other; bounds when final. */
function checked(question: WireQuestion, picked: Selection, final: boolean): Selection {
	const known = question.options.map((o) => o.id);
	for (const id of picked.selectedOptionIds) {
		if (!known.includes(id)) throw new LocalRefusal("unknown_option", `question "${question.id}" has no option "${id}"`);
	}
	if (new Set(picked.selectedOptionIds).size !== picked.selectedOptionIds.length) {
		throw new LocalRefusal("invalid_answer", `question "${question.id}": option ids must be distinct`);
	}
	let other: string | undefined = picked.other === undefined ? undefined : bounded(picked.other, "other", MAX_OTHER);
	if (other === "") other = undefined;
	if (other !== undefined && !question.allowOther) {
		throw new LocalRefusal("other_not_allowed", `question "${question.id}" does not allow an Other answer`);
	}
	const ids = known.filter((id) => picked.selectedOptionIds.includes(id));
	const count = ids.length + (other === undefined ? 0 : 1);
	if (question.type === "single") {
		if (ids.length > 1) throw new LocalRefusal("invalid_answer", `single question "${question.id}" takes at most one option`);
		if (final && ids.length > 0 && other !== undefined) {
			throw new LocalRefusal("invalid_answer", `single question "${question.id}" takes one option or only Other, not both`);
		}
		if (final && count === 0) {
			throw new LocalRefusal("invalid_answer", `single question "${question.id}" needs exactly one option, or only Other`);
		}
	} else if (final) {
		const min = question.minSelections ?? 0;
		const max = question.maxSelections ?? null;
		if (count < min) throw new LocalRefusal("below_min_selections", `question "${question.id}" needs at least ${min} choice(s), got ${count}`);
		if (max !== null && count > max) {
			throw new LocalRefusal("above_max_selections", `question "${question.id}" allows at most ${max} choice(s), got ${count}`);
		}
	}
	return other === undefined ? { selectedOptionIds: ids } : { selectedOptionIds: ids, other };
}

/**
 * The start's questions as the broker normalizes them: texts trimmed, labels defaulting to
 * the id, Other allowed unless said otherwise, bounds only on multi questions; the rules a
 * schema cannot say (unique ids, bounds that fit) are checked. Pi has already held the input
 * to the tool's JSON Schema (lengths, counts, types).
 */
export function normalize(raw: unknown[]): WireQuestion[] {
	const seen = new Set<string>();
	return raw.map((value) => {
		const q = value as Record<string, unknown>;
		const id = text(q.id);
		if (seen.has(id)) throw new LocalRefusal("invalid_arguments", `questionnaire: question id "${id}" is used twice`);
		seen.add(id);
		const type = q.type === "multi" ? "multi" : "single";
		const optionIds = new Set<string>();
		const options = (Array.isArray(q.options) ? q.options : []).map((o) => {
			const option = o as Record<string, unknown>;
			const optionId = text(option.id);
			if (optionIds.has(optionId)) {
				throw new LocalRefusal("invalid_arguments", `questionnaire: question "${id}": option id "${optionId}" is used twice`);
			}
			optionIds.add(optionId);
			const description = typeof option.description === "string" && option.description.trim() ? option.description.trim() : undefined;
			const label = typeof option.label === "string" && option.label.trim() ? option.label.trim() : optionId;
			return description === undefined ? { id: optionId, label } : { id: optionId, label, description };
		});
		const question: WireQuestion = {
			id,
			label: typeof q.label === "string" && q.label.trim() ? q.label.trim() : id,
			prompt: text(q.prompt),
			type,
			options,
			allowOther: q.allowOther !== false,
		};
		if (type === "multi") {
			question.minSelections = typeof q.minSelections === "number" ? q.minSelections : 0;
			question.maxSelections = typeof q.maxSelections === "number" ? q.maxSelections : null;
			const ceiling = options.length + (question.allowOther ? 1 : 0);
			const max = question.maxSelections ?? ceiling;
			if (question.minSelections > max || max > ceiling) {
				throw new LocalRefusal("invalid_arguments", `questionnaire: question "${id}": selection bounds do not fit its ${ceiling} choice(s)`);
			}
		} else if (q.minSelections != null || q.maxSelections != null) {
			throw new LocalRefusal("invalid_arguments", `questionnaire: question "${id}": selection bounds are only for multi questions`);
		}
		return question;
	});
}

function text(value: unknown): string {
	return typeof value === "string" ? value.trim() : "";
}
