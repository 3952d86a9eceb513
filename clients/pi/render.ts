/**
 * The compact view of a questionnaire in Pi's TUI, as plain data: lines of toned pieces of
 * text, which questionnaire.ts colours with Pi's theme. Pure (no Pi imports), so it is tested
 * under node --test (tests/pi/).
 *
 * A result reads as the person's answers, each a label with its id beside it:
 *
 *     ✓ completed · 2 of 2 answered
 *       Target [deploy_target]: Production [production]
 *       Pre-flight checks [checks]: Unit tests [unit], End-to-end tests [e2e], Other "Manual smoke test"
 *
 * It is drawn from the result's `details` (docs/protocol.md, DETAILS version 1); anything
 * it does not recognise falls back to the text the model read.
 */

export type Tone = "success" | "warning" | "error" | "accent" | "muted" | "dim" | "toolTitle";
export interface Piece {
	text: string;
	tone?: Tone;
}
export type Line = Piece[];

interface Option {
	id: string;
	label?: string;
}
interface Question {
	id: string;
	label?: string;
	options?: Option[];
}
interface Answer {
	questionId: string;
	selectedOptionIds?: string[];
	other?: string;
}
interface Details {
	version?: number;
	status?: string;
	cancellationReason?: string;
	questions?: Question[];
	answers?: Answer[];
	clarificationRequest?: { questionId?: string; request?: string };
	questionnaireId?: string;
	revision?: number;
}

const REASONS: Record<string, string> = {
	user_cancelled: "the user cancelled",
	aborted: "aborted by the agent",
	ui_unavailable: "nobody had the session open",
	ui_error: "the user's client went away",
};

/** `Label [id]`, or just `id` when the label says nothing more. */
function named(label: string | undefined, id: string): Piece[] {
	if (!label || label === id) return [{ text: id, tone: "accent" }];
	return [{ text: `${label} ` }, { text: `[${id}]`, tone: "dim" }];
}

/** One answered question: its label and id, then each chosen option's label and id. */
function answerLine(answer: Answer, questions: Question[]): Line {
	const question = questions.find((q) => q.id === answer.questionId);
	const line: Line = [{ text: "  " }, ...named(question?.label, answer.questionId), { text: ": " }];
	const chosen: Piece[][] = (answer.selectedOptionIds ?? []).map((id) =>
		named(question?.options?.find((o) => o.id === id)?.label, id),
	);
	if (answer.other !== undefined) chosen.push([{ text: "Other " }, { text: JSON.stringify(answer.other), tone: "accent" }]);
	if (chosen.length === 0) chosen.push([{ text: "(nothing)", tone: "muted" }]);
	chosen.forEach((pieces, index) => {
		if (index > 0) line.push({ text: ", " });
		line.push(...pieces);
	});
	return line;
}

/** The compact lines for a final result, or undefined when `details` is not one of ours. */
export function resultLines(details: unknown): Line[] | undefined {
	if (typeof details !== "object" || details === null) return undefined;
	const d = details as Details;
	if (d.version !== 1 || typeof d.status !== "string" || !Array.isArray(d.questions)) return undefined;
	const questions = d.questions;
	const answers = Array.isArray(d.answers) ? d.answers : [];
	const total = questions.length;
	const lines: Line[] = [];
	switch (d.status) {
		case "completed":
			lines.push([
				{ text: "✓ completed", tone: "success" },
				{ text: ` · ${answers.length} of ${total} answered`, tone: "muted" },
			]);
			break;
		case "needs_clarification": {
			const request = d.clarificationRequest ?? {};
			const about = questions.find((q) => q.id === request.questionId);
			lines.push([
				{ text: "? the user asks", tone: "warning" },
				{ text: " about " },
				...named(about?.label, request.questionId ?? "?"),
				{ text: `: ${JSON.stringify(request.request ?? "")}` },
			]);
			if (answers.length > 0) lines.push([{ text: `  answered so far (${answers.length} of ${total}):`, tone: "muted" }]);
			break;
		}
		case "cancelled":
		case "unavailable": {
			const reason = d.cancellationReason ?? "";
			lines.push([
				{ text: `✗ ${d.status}`, tone: "error" },
				{ text: ` · ${REASONS[reason] ?? reason}`, tone: "muted" },
			]);
			if (answers.length > 0) lines.push([{ text: `  answered before (${answers.length} of ${total}):`, tone: "muted" }]);
			break;
		}
		default:
			return undefined;
	}
	for (const answer of answers) lines.push(answerLine(answer, questions));
	return lines;
}

/** The call's header: what the model asked. */
export function callLine(args: unknown): Line {
	const input = (typeof args === "object" && args !== null ? args : {}) as {
		action?: unknown;
		questions?: unknown;
		questionnaireId?: unknown;
		revision?: unknown;
	};
	const line: Line = [{ text: "questionnaire ", tone: "toolTitle" }];
	if (input.action === "resume") {
		line.push({ text: "resume ", tone: "muted" }, { text: `${String(input.questionnaireId)} r${String(input.revision)}`, tone: "dim" });
		return line;
	}
	const questions = Array.isArray(input.questions) ? (input.questions as Question[]) : [];
	const labels = questions.map((q) => q?.label || q?.id).filter(Boolean);
	line.push({ text: `${questions.length} question${questions.length === 1 ? "" : "s"}`, tone: "muted" });
	if (labels.length > 0) line.push({ text: ` (${labels.join(", ")})`, tone: "dim" });
	return line;
}

/** While the call waits: where the person is. */
export function pendingLine(details: unknown): Line {
	const { step, index, total } = (details ?? {}) as { step?: unknown; index?: unknown; total?: unknown };
	const suffix =
		typeof index === "number" && typeof total === "number"
			? ` (question ${index + 1} of ${total})`
			: typeof step === "number"
				? ` (step ${step})`
				: "";
	return [{ text: `… waiting for the user to answer${suffix}`, tone: "muted" }];
}
