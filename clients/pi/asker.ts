/**
 * Asking in Pi, step by step, exactly as the frames say: the latest `question` frame of the
 * call's questionnaire is shown on a `Surface` (Pi's TUI selector, or its select/input
 * dialogs), and what the person does goes back over a `Channel` (the session's websocket, or
 * the questionnaire kept in Pi when no broker answers). No Pi imports: tests/pi/ drives it
 * with a scripted surface and channel.
 *
 * The race: every client of the session sees the same step, and the first answer wins. A
 * frame that moves the questionnaire on (another client answered, asked, cancelled, or the
 * agent resumed) withdraws the open dialog through its AbortSignal, and the next step or
 * nothing (the call's outcome is on its way) is shown. An answer from Pi that arrives after
 * another's names an old step: the broker refuses it (`stale_step`) and nothing changes.
 */

import type { Command } from "./local.ts";
import type { Reply, ServerFrame } from "./socket.ts";
import { type Action, type QuestionFrame, type Selection, sameSelection, selectionOf } from "./steps.ts";

/** What Pi shows for one step. */
export interface Step {
	frame: QuestionFrame;
	/** the multi ticks and Other text in progress (the stored draft, then the person's changes) */
	selection: Selection;
	/** a refusal to show above the list (bounds, a broker's message) */
	notice?: string;
	/** a broker holds the questionnaire: "answer elsewhere" is offered */
	brokered: boolean;
}

export interface StepIo {
	/** aborted when the step is withdrawn (another client moved on, or the call ended) */
	signal: AbortSignal;
	/** the person ticked, unticked or typed: the draft every client sees */
	draft(selection: Selection): void;
}

export interface Surface {
	/** Show the step until the person acts (or the signal withdraws it: undefined). */
	ask(step: Step, io: StepIo): Promise<Action | undefined>;
	/** The broker says a text looks like a credential: does the person send it anyway? */
	confirmSecret(message: string, signal: AbortSignal): Promise<boolean>;
}

export interface Channel {
	send(command: Command, extra?: { confirmedNotSecret?: boolean }): Promise<Reply>;
}

/** How long to wait for the frame that follows an accepted answer before showing the step again. */
const SETTLE_TIMEOUT = 10_000;

export class Asker {
	private frame: QuestionFrame | undefined;
	private selection: Selection = { selectedOptionIds: [] };
	private notice: string | undefined;
	/** drafts Pi sent whose echo has not come back yet (their echo withdraws nothing) */
	private sentDrafts: string[] = [];
	private dialog: AbortController | undefined;
	private stopped = false;
	private wakeUp: (() => void) | undefined;
	/** Pi showed a step of this questionnaire: it stays in the race from then on */
	shown = false;

	constructor(
		readonly questionnaireId: string,
		private readonly channel: Channel,
		private readonly surface: Surface,
		private readonly options: {
			brokered: boolean;
			/** may Pi ask now? (QBROKER_IN_HOST=fallback: only while no other client is there) */
			mayAsk?: () => boolean;
		},
	) {}

	/** A frame from the broker (or the local questionnaire). */
	onFrame(frame: ServerFrame | QuestionFrame): void {
		if (frame.type === "question" && frame.questionnaireId === this.questionnaireId) {
			const next = frame as unknown as QuestionFrame;
			const current = this.frame;
			if (current === undefined || current.step !== next.step) {
				this.frame = next;
				this.selection = selectionOf(next);
				this.notice = undefined;
				this.sentDrafts = [];
				this.withdraw();
			} else {
				this.frame = next;
				const echoed = this.sentDrafts.indexOf(key(next.draft));
				if (echoed >= 0) this.sentDrafts.splice(0, echoed + 1);
				else if (!sameSelection(next.draft, this.selection)) {
					this.selection = selectionOf(next); // another client ticked: show theirs
					this.withdraw();
				}
			}
		} else if (["question", "suspended", "closed", "idle"].includes(frame.type)) {
			// Ours is waiting for the agent, over, or not the one the session shows.
			if (frame.type === "closed" && frame.questionnaireId !== this.questionnaireId && this.frame) return;
			this.frame = undefined;
			this.withdraw();
		}
		this.wake();
	}

	/** Something changed that may let Pi ask (another client left). */
	wake(): void {
		this.wakeUp?.();
	}

	stop(): void {
		this.stopped = true;
		this.withdraw();
		this.wake();
	}

	private withdraw(): void {
		this.dialog?.abort();
		this.dialog = undefined;
	}

	private changed(timeout?: number): Promise<void> {
		return new Promise((resolve) => {
			const timer = timeout === undefined ? undefined : setTimeout(resolve, timeout);
			this.wakeUp = () => {
				clearTimeout(timer);
				this.wakeUp = undefined;
				resolve();
			};
		});
	}

	/** Show each step until stopped; "elsewhere" when the person handed the questionnaire off. */
	async run(): Promise<"stopped" | "elsewhere"> {
		while (!this.stopped) {
			const frame = this.frame;
			if (!frame || !(this.shown || (this.options.mayAsk?.() ?? true))) {
				await this.changed();
				continue;
			}
			this.shown = true;
			const dialog = new AbortController();
			this.dialog = dialog;
			const step: Step = { frame, selection: this.selection, brokered: this.options.brokered };
			if (this.notice) step.notice = this.notice;
			const action = await this.surface.ask(step, {
				signal: dialog.signal,
				draft: (selection) => this.sendDraft(frame, selection),
			});
			if (this.dialog === dialog) this.dialog = undefined;
			if (this.stopped || action === undefined || dialog.signal.aborted) continue;
			if (action.kind === "elsewhere") return "elsewhere";
			this.notice = undefined;
			await this.act(frame, action);
		}
		return "stopped";
	}

	private sendDraft(frame: QuestionFrame, selection: Selection): void {
		this.selection = selection;
		this.sentDrafts.push(key(selection));
		void this.channel.send({ type: "draft", questionnaireId: frame.questionnaireId, step: frame.step, ...selection });
	}

	private async act(frame: QuestionFrame, action: Exclude<Action, { kind: "elsewhere" }>): Promise<void> {
		const at = { questionnaireId: frame.questionnaireId, step: frame.step };
		const command: Command =
			action.kind === "answer"
				? { type: "answer", ...at, questionId: frame.question.id, ...action.selection }
				: action.kind === "clarify"
					? { type: "clarify", ...at, request: action.request, ...(action.draft ? { draft: action.draft } : {}) }
					: { type: "cancel", ...at };
		if (action.kind === "answer") this.selection = action.selection;
		let reply = await this.channel.send(command);
		if (!reply.ok && reply.code === "looks_like_secret") {
			const withdrawn = new AbortController();
			this.dialog = withdrawn;
			const send = await this.surface.confirmSecret(reply.message, withdrawn.signal);
			if (this.dialog === withdrawn) this.dialog = undefined;
			if (!send || withdrawn.signal.aborted) return;
			reply = await this.channel.send(command, { confirmedNotSecret: true });
		}
		if (reply.ok) {
			// Taken: wait for the frame that moves on, rather than show this step again meanwhile.
			const deadline = Date.now() + SETTLE_TIMEOUT;
			while (!this.stopped && this.frame?.step === frame.step && Date.now() < deadline) {
				await this.changed(deadline - Date.now());
			}
		} else if (reply.code !== "stale_step") {
			// Refused (bounds, a text too long, ...): the same step again, saying why. A stale
			// step means another client was first: the frames already show what is next.
			this.notice = reply.message;
		}
	}
}

function key(selection: Selection | null | undefined): string {
	const s = selection ?? { selectedOptionIds: [] };
	return JSON.stringify([[...s.selectedOptionIds].sort(), s.other ?? ""]);
}
