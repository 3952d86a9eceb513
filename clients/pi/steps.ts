/**
 * One step of a questionnaire as Pi shows it, as plain data: what the broker's `question`
 * frame says (docs/protocol.md, "Broker to client"), turned into the lines above a list and
 * the list's entries, and the person's picks turned back into the selection the broker takes.
 * Pure (no Pi imports): the TUI's selector (selector.ts) and the RPC/WebUI dialogs
 * (dialogs.ts) draw the same entries, and tests/pi/ checks them under node --test.
 */

/** The wire's names: a normalized question, as every `question` frame carries it. */
export interface WireOption {
	id: string;
	label: string;
	description?: string;
}
export interface WireQuestion {
	id: string;
	label: string;
	prompt: string;
	type: "single" | "multi";
	options: WireOption[];
	allowOther: boolean;
	minSelections?: number;
	maxSelections?: number | null;
}
export interface Selection {
	selectedOptionIds: string[];
	other?: string;
}
export interface Clarification {
	revision: number;
	questionId: string;
	request: string;
	response?: string;
}
export interface QuestionFrame {
	type: "question";
	questionnaireId: string;
	revision: number;
	step: number;
	index: number;
	total: number;
	question: WireQuestion;
	draft: Selection | null;
	clarifications: Clarification[];
}

/** What one entry of the list does when chosen. */
export type EntryKind = "option" | "other" | "done" | "ask" | "elsewhere";
export interface Entry {
	kind: EntryKind;
	/** the text shown, unique in the list (RPC's select answers with it) */
	text: string;
	description?: string;
	optionId?: string;
}

export const TEXTS = {
	other: "Other…",
	done: "Done",
	ask: "Ask the agent…",
	elsewhere: "Answer elsewhere (keep waiting for another qbroker client)",
	otherTitle: "Other: your own answer",
	askTitle: "Ask the agent: what should it explain before you answer?",
} as const;

export function emptySelection(): Selection {
	return { selectedOptionIds: [] };
}

/** The frame's stored draft, or nothing chosen yet (a copy: the caller may change it). */
export function selectionOf(frame: QuestionFrame): Selection {
	const draft = frame.draft;
	if (!draft) return emptySelection();
	return draft.other === undefined
		? { selectedOptionIds: [...draft.selectedOptionIds] }
		: { selectedOptionIds: [...draft.selectedOptionIds], other: draft.other };
}

export function sameSelection(a: Selection | null | undefined, b: Selection | null | undefined): boolean {
	const left = a ?? emptySelection();
	const right = b ?? emptySelection();
	const ids = (s: Selection) => [...s.selectedOptionIds].sort().join("\u0000");
	return ids(left) === ids(right) && (left.other ?? "") === (right.other ?? "");
}

/** Tick or untick an option of a multi question; ids stay in the question's declared order. */
export function toggle(question: WireQuestion, selection: Selection, optionId: string): Selection {
	const chosen = new Set(selection.selectedOptionIds);
	if (chosen.has(optionId)) chosen.delete(optionId);
	else chosen.add(optionId);
	const ids = question.options.map((o) => o.id).filter((id) => chosen.has(id));
	return withOther({ selectedOptionIds: ids }, selection.other);
}

/** The selection with its Other text set (blank: none, as the broker counts it). */
export function withOther(selection: Selection, other: string | undefined): Selection {
	const text = other?.trim();
	return text ? { selectedOptionIds: [...selection.selectedOptionIds], other: text } : { selectedOptionIds: [...selection.selectedOptionIds] };
}

/** Why "Done" cannot submit this multi selection yet (the broker's bounds), or undefined. */
export function boundsProblem(question: WireQuestion, selection: Selection): string | undefined {
	if (question.type !== "multi") return undefined;
	const count = selection.selectedOptionIds.length + (selection.other ? 1 : 0);
	const min = question.minSelections ?? 0;
	const max = question.maxSelections ?? null;
	if (count < min) return `Choose at least ${min} (${count} chosen).`;
	if (max !== null && count > max) return `Choose at most ${max} (${count} chosen).`;
	return undefined;
}

/** "choose 1-3", "choose any", ... for a multi question; nothing for a single one. */
export function boundsHint(question: WireQuestion): string | undefined {
	if (question.type !== "multi") return undefined;
	const min = question.minSelections ?? 0;
	const max = question.maxSelections ?? null;
	if (max === null) return min === 0 ? "choose any" : `choose at least ${min}`;
	if (min === max) return `choose ${min}`;
	return `choose ${min}-${max}`;
}

/**
 * The lines above the list: where the person is, the prompt, the agent's answers to what
 * was asked about this question, and how many to choose.
 */
export function headerLines(frame: QuestionFrame, notice?: string): string[] {
	const { question } = frame;
	const lines = [`Question ${frame.index + 1} of ${frame.total} · ${question.label}`, question.prompt];
	for (const c of frame.clarifications) {
		if (c.questionId !== question.id) continue;
		lines.push(`You asked: ${c.request}`);
		if (c.response !== undefined) lines.push(`The agent: ${c.response}`);
	}
	const hint = boundsHint(question);
	if (hint) lines.push(`(${hint}; Space or Enter ticks, Done submits)`);
	if (notice) lines.push(`! ${notice}`);
	return lines;
}

/** The list for this step, `selection` being the multi ticks and Other text in progress. */
export function entries(frame: QuestionFrame, selection: Selection, options: { brokered: boolean }): Entry[] {
	const { question } = frame;
	const multi = question.type === "multi";
	const chosen = new Set(selection.selectedOptionIds);
	const list: Entry[] = question.options.map((option) => ({
		kind: "option",
		optionId: option.id,
		text: multi ? `${chosen.has(option.id) ? "[x]" : "[ ]"} ${option.label}` : option.label,
		description: option.description,
	}));
	if (question.allowOther) {
		const typed = multi && selection.other !== undefined;
		list.push({ kind: "other", text: typed ? `[x] Other: ${JSON.stringify(selection.other)}` : TEXTS.other });
	}
	if (multi) list.push({ kind: "done", text: TEXTS.done });
	list.push({ kind: "ask", text: TEXTS.ask });
	if (options.brokered) list.push({ kind: "elsewhere", text: TEXTS.elsewhere });
	return unique(list);
}

/** Two options with the same label would be one choice to a select: their ids tell them apart. */
function unique(list: Entry[]): Entry[] {
	const counts = new Map<string, number>();
	for (const entry of list) counts.set(entry.text, (counts.get(entry.text) ?? 0) + 1);
	return list.map((entry) =>
		(counts.get(entry.text) ?? 0) > 1 && entry.optionId !== undefined ? { ...entry, text: `${entry.text} [${entry.optionId}]` } : entry,
	);
}

/** A select's line for an entry: its text, and its description after a dash. */
export function selectText(entry: Entry): string {
	return entry.description ? `${entry.text} — ${entry.description}` : entry.text;
}

/** What the person did with a step, as the broker is told it. */
export type Action =
	| { kind: "answer"; selection: Selection }
	| { kind: "clarify"; request: string; draft?: Selection }
	| { kind: "cancel" }
	/** hand the step to the other qbroker clients: the dialog closes, the call keeps waiting */
	| { kind: "elsewhere" };

/** What choosing an entry (or typing a text) leads to: an action, a new draft, a text to type, or a notice. */
export type Next =
	| { next: "action"; action: Action }
	| { next: "draft"; selection: Selection }
	| { next: "type"; purpose: "other" | "ask" }
	| { next: "notice"; notice: string }
	| { next: "stay" };

/** The person chose `entry` of the list, `selection` being what is ticked so far. */
export function choose(question: WireQuestion, selection: Selection, entry: Entry): Next {
	const multi = question.type === "multi";
	switch (entry.kind) {
		case "option":
			if (!multi) return { next: "action", action: { kind: "answer", selection: { selectedOptionIds: [entry.optionId!] } } };
			return { next: "draft", selection: toggle(question, selection, entry.optionId!) };
		case "other":
			return { next: "type", purpose: "other" };
		case "ask":
			return { next: "type", purpose: "ask" };
		case "done": {
			const problem = boundsProblem(question, selection);
			return problem ? { next: "notice", notice: problem } : { next: "action", action: { kind: "answer", selection } };
		}
		case "elsewhere":
			return { next: "action", action: { kind: "elsewhere" } };
	}
}

/** The person typed `text` for Other or for the agent (undefined: they went back). */
export function typed(question: WireQuestion, selection: Selection, purpose: "other" | "ask", text: string | undefined): Next {
	const trimmed = text?.trim() ?? "";
	if (purpose === "ask") {
		if (!trimmed) return { next: "stay" };
		const draft = question.type === "multi" ? selection : undefined;
		return { next: "action", action: draft ? { kind: "clarify", request: trimmed, draft } : { kind: "clarify", request: trimmed } };
	}
	if (text === undefined) return { next: "stay" };
	if (question.type === "single") {
		return trimmed ? { next: "action", action: { kind: "answer", selection: { selectedOptionIds: [], other: trimmed } } } : { next: "stay" };
	}
	return { next: "draft", selection: withOther(selection, trimmed) }; // a blank text takes the Other back
}
