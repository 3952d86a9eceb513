// Asking in Pi as the frames say (clients/pi/asker.ts), with a scripted surface and channel:
// each step shown once, withdrawn when another client moves on, the answer sent at its step.
// Run by tests/e2e/test_pi_extension.py under node --test with Pi's own TypeScript loader.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Asker, type Channel, type Step, type StepIo, type Surface } from "../../clients/pi/asker.ts";
import type { Command } from "../../clients/pi/local.ts";
import type { Reply } from "../../clients/pi/socket.ts";
import type { Action, QuestionFrame } from "../../clients/pi/steps.ts";

const QUESTION = { id: "q", label: "Q", prompt: "?", type: "multi" as const, options: [{ id: "a", label: "A" }], allowOther: true, minSelections: 0, maxSelections: null };

function frame(step: number, draft: QuestionFrame["draft"] = null): QuestionFrame {
	return { type: "question", questionnaireId: "q1", revision: 0, step, index: 0, total: 1, question: QUESTION, draft, clarifications: [] };
}

/** A surface that records each step shown and waits for the test to act (or the withdrawal). */
class ScriptedSurface implements Surface {
	shown: Array<{ step: Step; io: StepIo; act: (action: Action) => void; withdrawn: boolean }> = [];
	private waiter: (() => void) | undefined;
	ask(step: Step, io: StepIo): Promise<Action | undefined> {
		return new Promise((resolve) => {
			const entry = { step, io, act: resolve, withdrawn: false };
			io.signal.addEventListener("abort", () => {
				entry.withdrawn = true;
				resolve(undefined);
			});
			this.shown.push(entry);
			this.waiter?.();
		});
	}
	async confirmSecret(): Promise<boolean> {
		return true;
	}
	async next(count: number): Promise<void> {
		while (this.shown.length < count) await new Promise<void>((resolve) => (this.waiter = resolve));
	}
}

class ScriptedChannel implements Channel {
	sent: Command[] = [];
	replies: Reply[] = [];
	async send(command: Command, extra?: { confirmedNotSecret?: boolean }): Promise<Reply> {
		this.sent.push(extra?.confirmedNotSecret ? { ...command, confirmed: true } as Command : command);
		return this.replies.shift() ?? { ok: true };
	}
}

test("another client's answer withdraws the step, and the next one is shown", async () => {
	const surface = new ScriptedSurface();
	const channel = new ScriptedChannel();
	const asker = new Asker("q1", channel, surface, { brokered: true });
	const running = asker.run();
	asker.onFrame(frame(0));
	await surface.next(1);
	asker.onFrame(frame(1)); // someone else answered step 0
	await surface.next(2);
	assert.equal(surface.shown[0]!.withdrawn, true);
	assert.equal(surface.shown[1]!.step.frame.step, 1);
	surface.shown[1]!.act({ kind: "answer", selection: { selectedOptionIds: ["a"] } });
	await new Promise((resolve) => setTimeout(resolve, 10));
	assert.deepEqual(channel.sent, [{ type: "answer", questionnaireId: "q1", step: 1, questionId: "q", selectedOptionIds: ["a"] }]);
	asker.onFrame({ type: "closed", questionnaireId: "q1", status: "completed" });
	asker.stop();
	assert.equal(await running, "stopped");
});

test("Pi's own draft echoes back without withdrawing the step; another client's draft is shown", async () => {
	const surface = new ScriptedSurface();
	const asker = new Asker("q1", new ScriptedChannel(), surface, { brokered: true });
	const running = asker.run();
	asker.onFrame(frame(0));
	await surface.next(1);
	surface.shown[0]!.io.draft({ selectedOptionIds: ["a"] });
	asker.onFrame(frame(0, { selectedOptionIds: ["a"] })); // the echo
	assert.equal(surface.shown[0]!.withdrawn, false);
	asker.onFrame(frame(0, { selectedOptionIds: [], other: "theirs" }));
	await surface.next(2);
	assert.equal(surface.shown[0]!.withdrawn, true);
	assert.deepEqual(surface.shown[1]!.step.selection, { selectedOptionIds: [], other: "theirs" });
	asker.stop();
	await running;
});

test("a refusal shows the step again with the broker's words; a stale step says nothing", async () => {
	const surface = new ScriptedSurface();
	const channel = new ScriptedChannel();
	channel.replies = [
		{ ok: false, code: "below_min_selections", message: "needs at least 1" },
		{ ok: false, code: "stale_step", message: "old step" },
	];
	const asker = new Asker("q1", channel, surface, { brokered: true });
	const running = asker.run();
	asker.onFrame(frame(0));
	await surface.next(1);
	surface.shown[0]!.act({ kind: "answer", selection: { selectedOptionIds: [] } });
	await surface.next(2);
	assert.equal(surface.shown[1]!.step.notice, "needs at least 1");
	surface.shown[1]!.act({ kind: "answer", selection: { selectedOptionIds: ["a"] } });
	await surface.next(3);
	assert.equal(surface.shown[2]!.step.notice, undefined);
	asker.stop();
	await running;
});

test("fallback: nothing is shown while another client is there, and Pi stays once it asked", async () => {
	const surface = new ScriptedSurface();
	let others = 1;
	const asker = new Asker("q1", new ScriptedChannel(), surface, { brokered: true, mayAsk: () => others === 0 });
	const running = asker.run();
	asker.onFrame(frame(0));
	await new Promise((resolve) => setTimeout(resolve, 10));
	assert.equal(surface.shown.length, 0);
	others = 0;
	asker.wake();
	await surface.next(1);
	others = 1; // someone opens the session: the race, Pi's dialog stays
	asker.wake();
	assert.equal(surface.shown[0]!.withdrawn, false);
	surface.shown[0]!.act({ kind: "elsewhere" });
	assert.equal(await running, "elsewhere");
});

test("a text that looks like a secret is sent again once the person confirms", async () => {
	const surface = new ScriptedSurface();
	const channel = new ScriptedChannel();
	channel.replies = [{ ok: false, code: "looks_like_secret", message: "looks like a GitHub token" }];
	const asker = new Asker("q1", channel, surface, { brokered: true });
	const running = asker.run();
	asker.onFrame(frame(0));
	await surface.next(1);
	surface.shown[0]!.act({ kind: "answer", selection: { selectedOptionIds: [], other: "ghp_x" } });
	await new Promise((resolve) => setTimeout(resolve, 10));
	assert.equal(channel.sent.length, 2);
	assert.equal((channel.sent[1] as unknown as { confirmed?: boolean }).confirmed, true);
	asker.stop();
	await running;
});
