/**
 * The agent side of qbroker's HTTP API (docs/protocol.md), for the Pi extension: one tool
 * call in, the broker's tool result out. No Pi imports here; questionnaire.ts wires it in.
 *
 * The rules are the Python SDK's (clients/agent/exchange.py), so every agent behaves alike:
 *
 * - A `start` carries an `Idempotency-Key` made once per tool call; every retry repeats it,
 *   so a retried start re-attaches to the questionnaire the first attempt created.
 * - The broker holds each request up to `wait` seconds; a `202` (the person is still
 *   answering) is followed by `GET .../questionnaires/{id}?wait=` until there is an outcome.
 * - The broker unreachable, or `429/502/503/504`, is retried with exponential backoff and
 *   jitter (`Retry-After` when the broker sends one); after the last retry the error is
 *   thrown, and Pi reports a thrown error to the model as a tool error.
 * - A `resume` retried after an attempt that may have reached the broker can meet `409`
 *   because that attempt succeeded: then one look (`GET ?wait=0`) tells, before the 409
 *   is believed.
 * - Abort (Pi's signal): the questionnaire is ended as the agent (`DELETE`, outcome
 *   `cancelled` / `aborted`) and that result is returned, so the person is not left
 *   answering into the void.
 * - Any other refusal throws the broker's message and its code, e.g.
 *   `questionnaire: ... (error code: invalid_arguments)`, for the model to fix its call.
 */

import { randomUUID } from "node:crypto";

/** What `execute` returns to Pi: the broker's `content` and `details`, unchanged. */
export interface ToolResult {
	content: Array<{ type: "text"; text: string }>;
	details: Record<string, unknown>;
}

/** The broker's 202: the person is still answering. */
export interface Pending {
	status: "pending";
	questionnaireId: string;
	revision: number;
	step: number;
}

export interface BrokerSettings {
	url: string;
	session: string;
	token: string;
	/** seconds the broker may hold one request (0-300) */
	wait: number;
	/** retries of one request on a transient failure */
	retries: number;
	/** seconds before the first retry; doubles each time, up to `maxBackoff` */
	backoff: number;
	maxBackoff: number;
}

export const DEFAULTS = { wait: 30, retries: 8, backoff: 0.25, maxBackoff: 5 } as const;
const TRANSIENT_STATUS = new Set([429, 502, 503, 504]);
/** A 202 sooner than this after its request is followed by a pause, so polling never spins. */
const POLL_INTERVAL = 0.25;
/** How long ending a questionnaire may take once Pi has given up on it. */
const ABORT_TIMEOUT = 15;
const USER_AGENT = "qbroker-pi/0.1";

/** The names of the settings, as the environment spells them. */
export const ENVIRONMENT = {
	url: "QBROKER_URL",
	session: "QBROKER_SESSION",
	token: "QBROKER_TOKEN",
	retries: "QBROKER_RETRIES",
} as const;

/** A refusal, or a broker that cannot be reached: the message is what the model reads. */
export class BrokerError extends Error {
	constructor(
		message: string,
		readonly code: string,
		readonly status?: number,
	) {
		super(message);
		this.name = "BrokerError";
	}
}

/** The settings from the environment, or a BrokerError naming every variable to set. */
export function settingsFromEnv(env: Record<string, string | undefined>): BrokerSettings {
	const url = env[ENVIRONMENT.url]?.trim() ?? "";
	const session = env[ENVIRONMENT.session]?.trim() ?? "";
	const token = env[ENVIRONMENT.token]?.trim() ?? "";
	const missing: string[] = [];
	if (!url) missing.push(`${ENVIRONMENT.url} (the broker's base URL, e.g. http://127.0.0.1:8700)`);
	if (!session) missing.push(`${ENVIRONMENT.session} (the session id the person has open)`);
	if (!token) missing.push(`${ENVIRONMENT.token} (an agent token: qbroker token --session <id> --role agent)`);
	if (missing.length > 0) {
		throw new BrokerError(
			`questionnaire: qbroker is not configured. Set ${missing.join(", ")} in the environment pi runs in, then restart pi. ` +
				"Until then no question can reach the user: ask in plain text instead.",
			"not_configured",
		);
	}
	let retries: number = DEFAULTS.retries;
	const rawRetries = env[ENVIRONMENT.retries]?.trim();
	if (rawRetries) {
		retries = Number(rawRetries);
		if (!Number.isInteger(retries) || retries < 0) {
			throw new BrokerError(
				`questionnaire: ${ENVIRONMENT.retries} must be a whole number >= 0, got ${JSON.stringify(rawRetries)}`,
				"not_configured",
			);
		}
	}
	let parsed: URL;
	try {
		parsed = new URL(url);
	} catch {
		throw new BrokerError(`questionnaire: ${ENVIRONMENT.url} is not a URL: ${JSON.stringify(url)}`, "not_configured");
	}
	if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
		throw new BrokerError(`questionnaire: ${ENVIRONMENT.url} must be an http(s) URL, got ${parsed.protocol}`, "not_configured");
	}
	return { ...DEFAULTS, url: url.replace(/\/+$/, ""), session, token, retries };
}

/** Pi's start-up warning when the settings cannot work, naming only what is missing or
 * wrong (a person who set two of the three should not hunt for which); null when they work. */
export function settingsWarning(env: Record<string, string | undefined>): string | null {
	try {
		settingsFromEnv(env);
		return null;
	} catch (error) {
		const missing = [ENVIRONMENT.url, ENVIRONMENT.session, ENVIRONMENT.token].filter((name) => !env[name]?.trim());
		if (missing.length > 0) return `questionnaire (qbroker): set ${missing.join(", ")} to reach the user`;
		return `questionnaire (qbroker): ${(error as Error).message.replace(/^questionnaire: /, "")}`;
	}
}

/** What the exchange needs from the outside world; tests hand in their own. */
export interface Io {
	fetch: typeof fetch;
	sleep(seconds: number, signal?: AbortSignal): Promise<void>;
	random(): number;
}

export const realIo: Io = {
	fetch: (...args) => fetch(...args),
	sleep: (seconds, signal) =>
		new Promise((resolve, reject) => {
			if (signal?.aborted) return reject(abortError(signal));
			const timer = setTimeout(() => {
				signal?.removeEventListener("abort", onAbort);
				resolve();
			}, seconds * 1000);
			const onAbort = () => {
				clearTimeout(timer);
				reject(abortError(signal));
			};
			signal?.addEventListener("abort", onAbort, { once: true });
		}),
	random: Math.random,
};

export interface CallOptions {
	signal?: AbortSignal;
	/** Called on each 202: the person is still answering. */
	onPending?: (pending: Pending) => void;
	/** A start's Idempotency-Key (default: a fresh uuid). */
	idempotencyKey?: string;
	/** The first request's `wait` (default: the settings'): 0 learns the questionnaire's id at once. */
	firstWait?: number;
}

/** A response whose body was read: its status, headers and parsed JSON. */
interface Reply {
	status: number;
	headers: Headers;
	body: unknown;
}

export class BrokerClient {
	constructor(
		readonly settings: BrokerSettings,
		private readonly io: Io = realIo,
	) {}

	/** Send a tool input exactly as the model wrote it; return the outcome's tool result. */
	async call(input: Record<string, unknown>, options: CallOptions = {}): Promise<ToolResult> {
		const { signal, onPending } = options;
		// Aborted before anything was sent: nothing to start, nothing to end.
		if (signal?.aborted) throw new BrokerError("questionnaire: aborted before it was sent", "aborted");
		const isStart = input.action === "start";
		const key = isStart ? (options.idempotencyKey ?? randomUUID()) : undefined;
		// What to end if Pi aborts: the resumed questionnaire, or whatever the start created.
		let known: string | undefined =
			input.action === "resume" && typeof input.questionnaireId === "string" ? input.questionnaireId : undefined;
		try {
			const headers: Record<string, string> = { "content-type": "application/json" };
			if (key) headers["idempotency-key"] = key;
			const sent = await this.send("POST", this.path(), { body: JSON.stringify(input), headers, signal, wait: options.firstWait });
			let reply = sent.reply;
			const resumeOf = resumed(input);
			if (resumeOf && sent.ambiguous && reply.status === 409) {
				reply = (await this.resumedAfterAll(resumeOf, signal)) ?? reply;
			}
			for (let polls = 0; ; polls++) {
				if (reply.status === 200) return toolResult(reply);
				if (reply.status !== 202) throw refusal(reply);
				const pending = toPending(reply);
				known = pending.questionnaireId;
				onPending?.(pending);
				const started = Date.now();
				reply = (await this.send("GET", this.path(pending.questionnaireId), { signal, wait: this.settings.wait })).reply;
				const elapsed = (Date.now() - started) / 1000;
				if (reply.status === 202 && elapsed < POLL_INTERVAL) {
					await this.io.sleep(Math.min(POLL_INTERVAL * 2 ** Math.min(polls, 4), 2) - elapsed, signal);
				}
			}
		} catch (error) {
			if (!signal?.aborted) throw error;
			return this.endAborted(known, isStart ? { input, key: key! } : undefined);
		}
	}

	/** End a questionnaire as the agent: `cancelled` / `aborted` (or its outcome, if it had one). */
	async abort(questionnaireId: string): Promise<ToolResult> {
		const signal = AbortSignal.timeout(ABORT_TIMEOUT * 1000);
		const { reply } = await this.send("DELETE", this.path(questionnaireId), { signal, wait: null });
		if (reply.status !== 200) throw refusal(reply);
		return toolResult(reply);
	}

	/** Pi aborted the call: end what it started, and hand back that result. */
	private async endAborted(
		known: string | undefined,
		start: { input: Record<string, unknown>; key: string } | undefined,
	): Promise<ToolResult> {
		if (known === undefined && start !== undefined) {
			// The start may or may not have reached the broker: its key tells, creating it if
			// not (then it ends at once), so no questionnaire is left behind with the person.
			const signal = AbortSignal.timeout(ABORT_TIMEOUT * 1000);
			const headers = { "content-type": "application/json", "idempotency-key": start.key };
			const { reply } = await this.send("POST", this.path(), { body: JSON.stringify(start.input), headers, signal, wait: 0 });
			if (reply.status === 200) return toolResult(reply); // it already had an outcome
			if (reply.status !== 202) throw refusal(reply); // refused: nothing was started
			known = toPending(reply).questionnaireId;
		}
		if (known === undefined) throw new BrokerError("questionnaire: aborted", "aborted");
		return this.abort(known);
	}

	/** After an ambiguous resume's 409: was it resumed after all? (The SDK's rule.) */
	private async resumedAfterAll(resumeOf: { id: string; revision: number }, signal?: AbortSignal): Promise<Reply | undefined> {
		const { reply } = await this.send("GET", this.path(resumeOf.id), { signal, wait: 0 });
		if (reply.status === 202) return reply; // resumed, and back with the person
		if (reply.status === 200) {
			const details = (reply.body as { details?: { status?: unknown; revision?: unknown } }).details;
			if (details && (details.status !== "needs_clarification" || Number(details.revision) > resumeOf.revision)) {
				return reply;
			}
		}
		return undefined;
	}

	private path(questionnaireId?: string): string {
		const session = `/v1/sessions/${encodeURIComponent(this.settings.session)}`;
		return questionnaireId === undefined
			? `${session}/questionnaire`
			: `${session}/questionnaires/${encodeURIComponent(questionnaireId)}`;
	}

	/**
	 * One request, retried on a transient failure. `ambiguous`: an earlier attempt may have
	 * reached the broker (a connection lost after sending, a proxy's 502/504).
	 */
	private async send(
		method: string,
		path: string,
		options: { body?: string; headers?: Record<string, string>; signal?: AbortSignal; wait?: number | null },
	): Promise<{ reply: Reply; ambiguous: boolean }> {
		const wait = options.wait === undefined ? this.settings.wait : options.wait;
		const url = `${this.settings.url}${path}${wait === null ? "" : `?wait=${wait}`}`;
		const headers = {
			accept: "application/json",
			"user-agent": USER_AGENT,
			authorization: `Bearer ${this.settings.token}`,
			...options.headers,
		};
		// A broker that stops answering mid-wait counts as lost after its wait and a margin.
		const patience = ((wait ?? 0) + 15) * 1000;
		let ambiguous = false;
		for (let attempt = 0; ; attempt++) {
			const signals = [AbortSignal.timeout(patience), ...(options.signal ? [options.signal] : [])];
			let delay: number | undefined;
			try {
				const response = await this.io.fetch(url, {
					method,
					headers,
					body: options.body,
					signal: AbortSignal.any(signals),
				});
				const reply = await readReply(response);
				if (!TRANSIENT_STATUS.has(reply.status) || attempt >= this.settings.retries) return { reply, ambiguous };
				if (reply.status === 502 || reply.status === 504) ambiguous = true; // a proxy cannot tell
				delay = retryAfter(reply.headers);
			} catch (error) {
				if (options.signal?.aborted || error instanceof BrokerError) throw error;
				if (!refusedBeforeSending(error)) ambiguous = true;
				if (attempt >= this.settings.retries) {
					throw new BrokerError(
						`questionnaire: cannot reach the broker at ${this.settings.url} (${describe(error)}) after ${attempt + 1} attempt(s)`,
						"unreachable",
					);
				}
			}
			if (delay === undefined) {
				delay = Math.min(this.settings.maxBackoff, this.settings.backoff * 2 ** attempt);
				delay *= 0.5 + this.io.random() / 2; // jitter: 50-100 % of the step
			}
			await this.io.sleep(delay, options.signal);
		}
	}
}

function resumed(input: Record<string, unknown>): { id: string; revision: number } | undefined {
	if (input.action !== "resume") return undefined;
	const { questionnaireId: id, revision } = input;
	return typeof id === "string" && Number.isInteger(revision) ? { id, revision: revision as number } : undefined;
}

async function readReply(response: Response): Promise<Reply> {
	const text = await response.text();
	let body: unknown;
	try {
		body = text ? JSON.parse(text) : undefined;
	} catch {
		body = undefined;
	}
	if (body === undefined && !TRANSIENT_STATUS.has(response.status)) {
		throw new BrokerError(
			`questionnaire: the broker answered HTTP ${response.status} with a body that is not JSON`,
			"protocol_error",
			response.status,
		);
	}
	return { status: response.status, headers: response.headers, body };
}

function toolResult(reply: Reply): ToolResult {
	const body = reply.body as { content?: unknown; details?: unknown };
	if (!Array.isArray(body?.content) || typeof body.details !== "object" || body.details === null) {
		throw new BrokerError("questionnaire: the broker returned a malformed tool result", "protocol_error", reply.status);
	}
	return { content: body.content as ToolResult["content"], details: body.details as Record<string, unknown> };
}

function toPending(reply: Reply): Pending {
	const body = reply.body as Partial<Pending> | undefined;
	if (typeof body?.questionnaireId !== "string") {
		throw new BrokerError("questionnaire: the broker returned a malformed 202", "protocol_error", reply.status);
	}
	return body as Pending;
}

/** The broker's refusal as the model should read it: its message, then its code. */
function refusal(reply: Reply): BrokerError {
	const error = (reply.body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
	const code = typeof error?.code === "string" ? error.code : `http_${reply.status}`;
	const message = typeof error?.message === "string" ? error.message : `questionnaire: the broker answered HTTP ${reply.status}`;
	return new BrokerError(`${message} (error code: ${code})`, code, reply.status);
}

function retryAfter(headers: Headers): number | undefined {
	const raw = headers.get("retry-after");
	if (raw === null) return undefined;
	const seconds = Number(raw);
	return Number.isFinite(seconds) ? Math.max(0, Math.min(seconds, 60)) : undefined;
}

/** undici's fetch wraps the socket's error in `cause`: ECONNREFUSED never reached the broker. */
function refusedBeforeSending(error: unknown): boolean {
	const code = (error as { cause?: { code?: unknown } })?.cause?.code;
	return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
}

function describe(error: unknown): string {
	if (error instanceof Error) {
		const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
		if (error.name === "TimeoutError") return "no answer in time";
		if (cause && typeof cause.code === "string") return cause.code;
		if (cause && typeof cause.message === "string") return cause.message;
		return error.message;
	}
	return String(error);
}

function abortError(signal?: AbortSignal): unknown {
	return signal?.reason ?? new DOMException("This operation was aborted", "AbortError");
}
