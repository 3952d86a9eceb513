/**
 * A step through Pi's plain dialogs, `ctx.ui.select` and `ctx.ui.input`: what Pi offers
 * without its TUI (RPC mode, where each dialog is an `extension_ui_request` to the driver;
 * the WebUI, where they are buttons and a text field). Each dialog takes the step's
 * AbortSignal, so a step answered elsewhere is withdrawn (in RPC mode silently: the next
 * request simply arrives).
 *
 * One select a step: the options (multi ones as `[x]`/`[ ]` ticks: choosing one toggles
 * it and shows the list again), "Other…" and "Ask the agent…" (each opens an input),
 * "Done" for a multi question, and "Answer elsewhere" when a broker holds the questionnaire.
 * Dismissing the select (Esc, `cancelled: true`) cancels the questionnaire, as the seed does;
 * dismissing an input goes back to the list.
 */

import type { ExtensionUIContext } from "@mariozechner/pi-coding-agent";
import type { Step, StepIo, Surface } from "./asker.ts";
import { type Action, choose, entries, headerLines, selectText, TEXTS, typed } from "./steps.ts";

export class DialogSurface implements Surface {
	constructor(private readonly ui: ExtensionUIContext) {}

	async ask(step: Step, io: StepIo): Promise<Action | undefined> {
		const { signal } = io;
		const question = step.frame.question;
		let selection = step.selection;
		let notice = step.notice;
		for (;;) {
			const list = entries(step.frame, selection, { brokered: step.brokered });
			const title = headerLines(step.frame, notice).join("\n");
			const picked = await this.ui.select(title, list.map(selectText), { signal });
			if (signal.aborted) return undefined;
			if (picked === undefined) return { kind: "cancel" };
			const entry = list.find((e) => selectText(e) === picked);
			if (!entry) continue;
			notice = undefined;
			let next = choose(question, selection, entry);
			if (next.next === "type") {
				const purpose = next.purpose;
				const title = purpose === "other" ? `${TEXTS.otherTitle}\n${question.prompt}` : `${TEXTS.askTitle}\n${question.label}: ${question.prompt}`;
				const text = await this.ui.input(title, purpose === "other" ? (selection.other ?? "") : "", { signal });
				if (signal.aborted) return undefined;
				next = typed(question, selection, purpose, text);
			}
			switch (next.next) {
				case "action":
					return next.action;
				case "draft":
					selection = next.selection;
					io.draft(selection);
					break;
				case "notice":
					notice = next.notice;
					break;
			}
		}
	}

	async confirmSecret(message: string, signal: AbortSignal): Promise<boolean> {
		return this.ui.confirm("This looks like a secret", `${message}\nSend it to the agent anyway?`, { signal });
	}
}
