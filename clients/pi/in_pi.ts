/**
 * Asking in Pi's own UI while a call waits, two ways:
 *
 * - `AskingInPi`: with a broker. Pi is one more qbroker client of the session: its session
 *   websocket (the client token, QBROKER_CLIENT_TOKEN) brings each step, and the person's
 *   answers go back over it like any client's. With QBROKER_IN_HOST=fallback (the default)
 *   Pi asks only while no other qbroker client has the session open (the inbox socket's
 *   `clients` says how many do, Pi's own connection included), and stays in the race once it
 *   has asked; with `race` it always asks; `off` is the agent alone, as before.
 * - `askAlone`: no broker could be reached. The questionnaire is kept in Pi (local.ts) and
 *   asked there, with the seed's rules and results, the details saying it was not brokered.
 */

import type { BrokerSettings, ToolResult } from "./broker.ts";
import { BrokerError } from "./broker.ts";
import { Asker, type Channel, type Surface } from "./asker.ts";
import { LocalQuestionnaire, LocalRefusal } from "./local.ts";
import { Presence, SessionSocket, socketUrl } from "./socket.ts";
import type { QuestionFrame } from "./steps.ts";

export type InHostMode = "fallback" | "race" | "off";
export const IN_HOST_MODES: readonly InHostMode[] = ["fallback", "race", "off"];

export const IN_HOST_ENVIRONMENT = { clientToken: "QBROKER_CLIENT_TOKEN", inHost: "QBROKER_IN_HOST" } as const;

export interface InHostSettings {
	mode: InHostMode;
	/** a client token for the session: without one Pi cannot be a client, only the agent */
	clientToken: string | undefined;
}

export function inHostFromEnv(env: Record<string, string | undefined>): InHostSettings {
	const raw = env[IN_HOST_ENVIRONMENT.inHost]?.trim().toLowerCase() || "fallback";
	if (!(IN_HOST_MODES as readonly string[]).includes(raw)) {
		throw new BrokerError(
			`questionnaire: ${IN_HOST_ENVIRONMENT.inHost} must be one of ${IN_HOST_MODES.join(", ")}, got ${JSON.stringify(env[IN_HOST_ENVIRONMENT.inHost])}`,
			"not_configured",
		);
	}
	return { mode: raw as InHostMode, clientToken: env[IN_HOST_ENVIRONMENT.clientToken]?.trim() || undefined };
}

/** How long fallback waits to hear how many clients there are before it asks anyway. */
const PRESENCE_PATIENCE = 3_000;
/** Who Pi is on the session's record ("answered by alice in the terminal"). */
const CLIENT = { kind: "tui", name: "pi" } as const;

/** Pi as a client of the session for one questionnaire, until stopped. */
export class AskingInPi {
	private readonly socket: SessionSocket;
	private presence: Presence | undefined;
	private presenceUnknown = false;
	private readonly asker: Asker;
	private readonly timer: ReturnType<typeof setTimeout> | undefined;

	constructor(
		settings: BrokerSettings,
		inHost: InHostSettings & { clientToken: string },
		questionnaireId: string,
		surface: Surface,
		/** a reason Pi cannot ask (a refused token, ...) or that it handed off: said once in Pi */
		say: (message: string) => void,
		/** each step the session's clients are shown, Pi asking or not */
		onQuestion: (frame: QuestionFrame) => void = () => {},
	) {
		const channel: Channel = { send: (command, extra) => this.socket.send(command, extra) };
		this.asker = new Asker(questionnaireId, channel, surface, {
			brokered: true,
			mayAsk: () => inHost.mode === "race" || this.presenceUnknown || this.othersThere() === false,
		});
		const options = { token: inHost.clientToken, client: CLIENT };
		const session = `/v1/sessions/${encodeURIComponent(settings.session)}/ws`;
		this.socket = new SessionSocket(
			{ ...options, url: socketUrl(settings.url, session) },
			(frame) => {
				if (frame.type === "question" && frame.questionnaireId === questionnaireId) onQuestion(frame as unknown as QuestionFrame);
				this.asker.onFrame(frame);
			},
			(reason) => {
				say(`questionnaire: Pi cannot ask here (${reason}); answer in a qbroker client`);
				this.stop();
			},
		);
		if (inHost.mode === "fallback") {
			this.socket.ready.then(
				() => {
					if (this.stopped) return;
					this.presence = new Presence(
						{ ...options, url: socketUrl(settings.url, "/v1/inbox/ws") },
						settings.session,
						() => this.asker.wake(),
						() => this.presenceLost(),
					);
				},
				() => {},
			);
			this.timer = setTimeout(() => {
				if (this.presence?.clients === undefined) this.presenceLost();
			}, PRESENCE_PATIENCE);
		}
		void this.asker.run().then((how) => {
			if (how === "elsewhere") {
				say("questionnaire: handed off; the questionnaire waits for another qbroker client");
				this.stop();
			}
		});
	}

	private stopped = false;

	/** Is another client there? undefined while nobody has said. */
	private othersThere(): boolean | undefined {
		const clients = this.presence?.clients;
		return clients === undefined ? undefined : clients - 1 > 0; // Pi's own socket counts too
	}

	/** Nobody can say how many clients there are: Pi asks rather than leave the person without a way. */
	private presenceLost(): void {
		this.presenceUnknown = true;
		this.asker.wake();
	}

	stop(): void {
		if (this.stopped) return;
		this.stopped = true;
		clearTimeout(this.timer);
		this.asker.stop();
		this.socket.close();
		this.presence?.close();
	}
}

/**
 * Ask `questionnaire` in Pi alone until it has an outcome (or `signal` aborts it, ending it
 * `aborted` as a broker would); its result.
 */
export async function askAlone(questionnaire: LocalQuestionnaire, surface: Surface, signal?: AbortSignal): Promise<ToolResult> {
	let finished!: () => void;
	const outcome = new Promise<void>((resolve) => (finished = resolve));
	const publish = () => {
		asker.onFrame(questionnaire.frame() ?? { type: "closed", questionnaireId: questionnaire.id, status: questionnaire.status });
		if (questionnaire.isOutcome) finished();
	};
	const channel: Channel = {
		async send(command) {
			try {
				questionnaire.apply(command);
			} catch (error) {
				if (error instanceof LocalRefusal) return { ok: false, code: error.code, message: error.message };
				throw error;
			}
			queueMicrotask(publish);
			return { ok: true };
		},
	};
	const asker = new Asker(questionnaire.id, channel, surface, { brokered: false });
	const onAbort = () => {
		questionnaire.abort();
		publish();
	};
	if (signal?.aborted) onAbort();
	else signal?.addEventListener("abort", onAbort, { once: true });
	publish();
	const running = asker.run();
	try {
		await outcome;
	} finally {
		signal?.removeEventListener("abort", onAbort);
		asker.stop();
		await running;
	}
	return questionnaire.result();
}
