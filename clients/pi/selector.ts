/**
 * A step in Pi's TUI: a native selector built from Pi's own components (`ctx.ui.custom` with
 * a `SelectList`, and an `Editor` for typed texts), with the seed's keys:
 *
 *     ↑/↓      move                    Space   tick/untick a multi option
 *     Enter    choose (single), tick (multi), submit on "Done", open "Other…" / "Ask the agent…"
 *     Esc      cancel the questionnaire (in a text: back to the list)
 *     Tab      answer elsewhere: the dialog closes, the call keeps waiting for other clients
 *
 * The step's AbortSignal closes it (another client answered first). `piSurface` picks this
 * selector where Pi has a TUI and the plain dialogs (dialogs.ts) where it has none: in RPC
 * mode `custom()` resolves at once without building the component.
 */

import { DynamicBorder, type ExtensionUIContext, type Theme } from "@mariozechner/pi-coding-agent";
import { type Component, Editor, type EditorTheme, Key, matchesKey, SelectList, type SelectListTheme, type TUI, truncateToWidth } from "@mariozechner/pi-tui";
import type { Step, StepIo, Surface } from "./asker.ts";
import { DialogSurface } from "./dialogs.ts";
import { type Action, choose, type Entry, entries, headerLines, type Next, type Selection, TEXTS, typed } from "./steps.ts";

const MAX_VISIBLE = 12;

/** Pi's TUI selector while there is a TUI; Pi's select/input dialogs once it shows there is none. */
export function piSurface(ui: ExtensionUIContext): Surface {
	const dialogs = new DialogSurface(ui);
	let tui = true;
	return {
		async ask(step, io) {
			if (tui) {
				const shown = await askInTui(ui, step, io);
				if (shown !== NO_TUI) return shown;
				tui = false;
			}
			return dialogs.ask(step, io);
		},
		confirmSecret: (message, signal) => dialogs.confirmSecret(message, signal),
	};
}

const NO_TUI = Symbol("no TUI");

async function askInTui(ui: ExtensionUIContext, step: Step, io: StepIo): Promise<Action | undefined | typeof NO_TUI> {
	if (io.signal.aborted) return undefined;
	let built = false;
	const action = await ui.custom<Action | undefined>((tui, theme, _keybindings, done) => {
		built = true;
		return new StepComponent(tui, theme, step, io, done);
	});
	return built ? action : NO_TUI;
}

class StepComponent implements Component {
	private selection: Selection;
	private notice: string | undefined;
	private list!: SelectList;
	private shown: Entry[] = [];
	private editing: { purpose: "other" | "ask"; editor: Editor } | undefined;
	private finished = false;
	private readonly listTheme: SelectListTheme;

	constructor(
		private readonly tui: TUI,
		private readonly theme: Theme,
		private readonly step: Step,
		private readonly io: StepIo,
		private readonly done: (action: Action | undefined) => void,
	) {
		this.selection = step.selection;
		this.notice = step.notice;
		this.listTheme = {
			selectedPrefix: (t) => theme.fg("accent", t),
			selectedText: (t) => theme.fg("accent", t),
			description: (t) => theme.fg("muted", t),
			scrollInfo: (t) => theme.fg("dim", t),
			noMatch: (t) => theme.fg("warning", t),
		};
		this.rebuild(0);
		io.signal.addEventListener("abort", () => this.finish(undefined), { once: true });
	}

	private finish(action: Action | undefined): void {
		if (this.finished) return;
		this.finished = true;
		this.done(action);
	}

	/** The list for the current ticks, the cursor kept on the same row. */
	private rebuild(cursor: number): void {
		this.shown = entries(this.step.frame, this.selection, { brokered: this.step.brokered });
		const items = this.shown.map((entry, index) => ({ value: String(index), label: entry.text, description: entry.description }));
		this.list = new SelectList(items, Math.min(items.length, MAX_VISIBLE), this.listTheme);
		this.list.setSelectedIndex(Math.min(cursor, items.length - 1));
		this.list.onSelect = (item) => this.follow(choose(this.step.frame.question, this.selection, this.shown[Number(item.value)]!));
		this.list.onCancel = () => this.finish({ kind: "cancel" });
	}

	private cursor(): number {
		return Number(this.list.getSelectedItem()?.value ?? 0);
	}

	private follow(next: Next): void {
		this.notice = undefined;
		switch (next.next) {
			case "action":
				this.finish(next.action);
				return;
			case "draft":
				this.selection = next.selection;
				this.io.draft(next.selection);
				this.rebuild(this.cursor());
				break;
			case "notice":
				this.notice = next.notice;
				break;
			case "type": {
				const editorTheme: EditorTheme = { borderColor: (s) => this.theme.fg("accent", s), selectList: this.listTheme };
				const editor = new Editor(this.tui, editorTheme);
				const purpose = next.purpose;
				if (purpose === "other" && this.selection.other) editor.setText(this.selection.other);
				editor.onSubmit = (text) => {
					this.editing = undefined;
					this.follow(typed(this.step.frame.question, this.selection, purpose, text));
				};
				this.editing = { purpose, editor };
				break;
			}
			case "stay":
				break;
		}
		this.tui.requestRender();
	}

	handleInput(data: string): void {
		if (this.finished) return;
		if (this.editing) {
			if (matchesKey(data, Key.escape)) this.editing = undefined;
			else this.editing.editor.handleInput(data);
		} else if (matchesKey(data, Key.space)) {
			const entry = this.shown[this.cursor()];
			if (entry?.kind === "option" && this.step.frame.question.type === "multi") {
				this.follow(choose(this.step.frame.question, this.selection, entry));
			}
		} else if (matchesKey(data, Key.tab) && this.step.brokered) {
			this.finish({ kind: "elsewhere" });
		} else {
			this.list.handleInput(data);
		}
		this.tui.requestRender();
	}

	invalidate(): void {
		this.list.invalidate();
		this.editing?.editor.invalidate();
	}

	render(width: number): string[] {
		const theme = this.theme;
		const lines: string[] = [];
		const add = (text: string) => lines.push(truncateToWidth(text, width));
		lines.push(...new DynamicBorder((s) => theme.fg("accent", s)).render(width));
		const [where, prompt, ...rest] = headerLines(this.step.frame, this.notice);
		add(theme.fg("accent", theme.bold(` Questionnaire · ${where}`)));
		add(` ${prompt}`);
		for (const line of rest) add(theme.fg(line.startsWith("! ") ? "warning" : "muted", ` ${line}`));
		lines.push("");
		if (this.editing) {
			add(theme.fg("muted", ` ${this.editing.purpose === "other" ? TEXTS.otherTitle : TEXTS.askTitle}`));
			for (const line of this.editing.editor.render(Math.max(10, width - 2))) add(` ${line}`);
			lines.push("");
			add(theme.fg("dim", " Enter send • Esc back to the list"));
		} else {
			lines.push(...this.list.render(width));
			lines.push("");
			const multi = this.step.frame.question.type === "multi";
			const keys = ["↑↓ move", multi ? "Space tick" : "Enter choose", multi ? "Enter tick or choose" : undefined, "Esc cancel the questionnaire"];
			if (this.step.brokered) keys.push("Tab answer elsewhere");
			add(theme.fg("dim", ` ${keys.filter(Boolean).join(" • ")}`));
		}
		lines.push(...new DynamicBorder((s) => theme.fg("accent", s)).render(width));
		return lines;
	}
}
