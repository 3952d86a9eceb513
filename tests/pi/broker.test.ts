// The Pi extension's exchange with the broker (clients/pi/broker.ts), against a scripted
// fetch: no broker, no network, no clock (sleeps are recorded, not slept).
// Run by tests/e2e/test_pi_extension.py under node --test with Pi's own TypeScript loader.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BrokerClient, BrokerError, type BrokerSettings, DEFAULTS, type Io, settingsFromEnv, settingsWarning } from "../../clients/pi/broker.ts";

const SETTINGS: BrokerSettings = { ...DEFAULTS, url: "http://broker.test", session: "s 1", token: "tok" };
const START = { action: "start", questions: [{ id: "q", prompt: "?", type: "single", options: [{ id: "a" }] }] };
const RESUME = { action: "resume", questionnaireId: "qid", revision: 1, clarificationResponse: "because" };

function result(status: string, extra: Record<string, unknown> = {}) {
	return {
		content: [{ type: "text", text: `QUESTIONNAIRE_${status.toUpperCase()} questionnaireId=qid revision=1` }],
		details: { version: 1, questionnaireId: "qid", revision: 1, status, ...extra },
		isError: false,
	};
}
const PENDING = { status: "pending", questionnaireId: "qid", revision: 0, step: 1 };

interface Sent {
	method: string;
	url: string;
	headers: Record<string, string>;
	body?: string;
}
type Answer = { status: number; body?: unknown; headers?: Record<string, string> } | Error | "hang";

/** A fetch that answers from a script, one entry a request, and records what was sent. */
function scripted(...answers: Answer[]) {
	const sent: Sent[] = [];
	const sleeps: number[] = [];
	const io: Io = {
		fetch: (async (url: string, init: RequestInit) => {
			sent.push({
				method: String(init.method),
				url,
				headers: init.headers as Record<string, string>,
				body: init.body as string | undefined,
			});
			const answer = answers.shift();
			if (answer === undefined) throw new Error(`no answer scripted for ${init.method} ${url}`);
			if (answer === "hang") {
				return new Promise((_resolve, reject) => {
					const signal = init.signal as AbortSignal;
					signal.addEventListener("abort", () => reject(signal.reason), { once: true });
				});
			}
			if (answer instanceof Error) throw answer;
			return new Response(answer.body === undefined ? "" : JSON.stringify(answer.body), {
				status: answer.status,
				headers: answer.headers,
			});
		}) as typeof fetch,
		sleep: async (seconds) => {
			sleeps.push(seconds);
		},
		random: () => 1, // the top of the jitter: the full step
	};
	return { io, sent, sleeps, left: answers };
}

function refused(): Error {
	return new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
}
function reset(): Error {
	return new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
}

test("a start is posted verbatim with a key, the token and the wait, and its result comes back unchanged", async () => {
	const { io, sent } = scripted({ status: 200, body: result("completed") });
	const got = await new BrokerClient(SETTINGS, io).call(START);
	assert.deepEqual(got, { content: result("completed").content, details: result("completed").details });
	assert.equal(sent.length, 1);
	assert.equal(sent[0].method, "POST");
	assert.equal(sent[0].url, "http://broker.test/v1/sessions/s%201/questionnaire?wait=30");
	assert.equal(sent[0].headers.authorization, "Bearer tok");
	assert.match(sent[0].headers["idempotency-key"], /^[0-9a-f-]{36}$/);
	assert.deepEqual(JSON.parse(sent[0].body!), START);
});

test("a resume carries no idempotency key", async () => {
	const { io, sent } = scripted({ status: 200, body: result("completed") });
	await new BrokerClient(SETTINGS, io).call(RESUME);
	assert.equal(sent[0].headers["idempotency-key"], undefined);
	assert.deepEqual(JSON.parse(sent[0].body!), RESUME);
});

test("a 202 is followed with GET on the questionnaire until there is an outcome, reporting each", async () => {
	const { io, sent } = scripted({ status: 202, body: PENDING }, { status: 202, body: { ...PENDING, step: 2 } }, {
		status: 200,
		body: result("completed"),
	});
	const pendings: number[] = [];
	const got = await new BrokerClient(SETTINGS, io).call(START, { onPending: (p) => pendings.push(p.step) });
	assert.equal(got.details.status, "completed");
	assert.deepEqual(
		sent.map((s) => `${s.method} ${s.url}`),
		[
			"POST http://broker.test/v1/sessions/s%201/questionnaire?wait=30",
			"GET http://broker.test/v1/sessions/s%201/questionnaires/qid?wait=30",
			"GET http://broker.test/v1/sessions/s%201/questionnaires/qid?wait=30",
		],
	);
	assert.deepEqual(pendings, [1, 2]);
});

test("an unreachable broker is retried with backoff, repeating the start's key", async () => {
	const { io, sent, sleeps } = scripted(refused(), reset(), { status: 200, body: result("completed") });
	await new BrokerClient(SETTINGS, io).call(START);
	assert.equal(sent.length, 3);
	assert.equal(new Set(sent.map((s) => s.headers["idempotency-key"])).size, 1);
	assert.deepEqual(sleeps, [0.25, 0.5]);
});

test("after the last retry the error is thrown, saying where and how often", async () => {
	const { io, sent, sleeps } = scripted(refused(), refused(), refused());
	await assert.rejects(new BrokerClient({ ...SETTINGS, retries: 2 }, io).call(START), (error: unknown) => {
		assert.ok(error instanceof BrokerError);
		assert.equal(error.code, "unreachable");
		assert.equal(error.message, "questionnaire: cannot reach the broker at http://broker.test (ECONNREFUSED) after 3 attempt(s)");
		return true;
	});
	assert.equal(sent.length, 3);
	assert.deepEqual(sleeps, [0.25, 0.5]);
});

test("the backoff doubles up to its ceiling", async () => {
	const { io, sleeps } = scripted(...Array.from({ length: 8 }, refused), { status: 200, body: result("completed") });
	await new BrokerClient(SETTINGS, io).call(START);
	assert.deepEqual(sleeps, [0.25, 0.5, 1, 2, 4, 5, 5, 5]);
});

test("503 is retried after the broker's Retry-After; a lasting one is reported as the broker's refusal", async () => {
	const unavailable = {
		status: 503,
		body: { error: { code: "store_unavailable", message: "questionnaire: the store is unavailable" } },
		headers: { "retry-after": "2" },
	};
	const { io, sleeps } = scripted(unavailable, { status: 200, body: result("completed") });
	await new BrokerClient(SETTINGS, io).call(START);
	assert.deepEqual(sleeps, [2]);

	const lasting = scripted(unavailable, unavailable);
	await assert.rejects(new BrokerClient({ ...SETTINGS, retries: 1 }, lasting.io).call(START), {
		message: "questionnaire: the store is unavailable (error code: store_unavailable)",
	});
});

test("a refusal is thrown with the broker's message and code, and not retried", async () => {
	const message = 'questionnaire: question "q": "minSelections" is only for multi questions';
	const { io, sent } = scripted({ status: 400, body: { error: { code: "invalid_arguments", message } } });
	await assert.rejects(new BrokerClient(SETTINGS, io).call(START), (error: unknown) => {
		assert.ok(error instanceof BrokerError);
		assert.equal(error.message, `${message} (error code: invalid_arguments)`);
		assert.equal(error.code, "invalid_arguments");
		assert.equal(error.status, 400);
		return true;
	});
	assert.equal(sent.length, 1);
});

test("a body that is not JSON is a protocol error, not a crash", async () => {
	const { io } = scripted({ status: 200 });
	await assert.rejects(new BrokerClient(SETTINGS, io).call(START), { name: "BrokerError", code: "protocol_error" });
});

test("abort while the person answers ends the questionnaire as the agent and returns that result", async () => {
	const aborted = result("cancelled", { cancellationReason: "aborted" });
	const { io, sent } = scripted({ status: 202, body: PENDING }, "hang", { status: 200, body: aborted });
	const controller = new AbortController();
	const call = new BrokerClient(SETTINGS, io).call(START, { signal: controller.signal, onPending: () => setImmediate(() => controller.abort()) });
	const got = await call;
	assert.deepEqual(got.details, aborted.details);
	assert.deepEqual(
		sent.map((s) => `${s.method} ${s.url}`),
		[
			"POST http://broker.test/v1/sessions/s%201/questionnaire?wait=30",
			"GET http://broker.test/v1/sessions/s%201/questionnaires/qid?wait=30",
			"DELETE http://broker.test/v1/sessions/s%201/questionnaires/qid",
		],
	);
});

test("abort before the start's answer re-sends the start with its key to learn what to end", async () => {
	const aborted = result("cancelled", { cancellationReason: "aborted" });
	const { io, sent } = scripted("hang", { status: 202, body: PENDING }, { status: 200, body: aborted });
	const controller = new AbortController();
	setImmediate(() => controller.abort());
	const got = await new BrokerClient(SETTINGS, io).call(START, { signal: controller.signal });
	assert.equal(got.details.cancellationReason, "aborted");
	assert.deepEqual(
		sent.map((s) => `${s.method} ${s.url}`),
		[
			"POST http://broker.test/v1/sessions/s%201/questionnaire?wait=30",
			"POST http://broker.test/v1/sessions/s%201/questionnaire?wait=0",
			"DELETE http://broker.test/v1/sessions/s%201/questionnaires/qid",
		],
	);
	assert.equal(sent[0].headers["idempotency-key"], sent[1].headers["idempotency-key"]);
	assert.equal(sent[0].body, sent[1].body);
});

test("a call aborted before it starts sends nothing", async () => {
	const { io, sent } = scripted();
	const controller = new AbortController();
	controller.abort();
	await assert.rejects(new BrokerClient(SETTINGS, io).call(START, { signal: controller.signal }), { code: "aborted" });
	assert.equal(sent.length, 0);
});

test("abort of a resume ends the questionnaire it names", async () => {
	const aborted = result("cancelled", { cancellationReason: "aborted" });
	const { io, sent } = scripted("hang", { status: 200, body: aborted });
	const controller = new AbortController();
	setImmediate(() => controller.abort());
	await new BrokerClient(SETTINGS, io).call(RESUME, { signal: controller.signal });
	assert.equal(sent[1].method, "DELETE");
	assert.equal(sent[1].url, "http://broker.test/v1/sessions/s%201/questionnaires/qid");
});

test("a 409 after an ambiguous resume is checked: resumed after all, it is followed", async () => {
	const conflict = { status: 409, body: { error: { code: "not_awaiting_clarification", message: "questionnaire: not waiting" } } };
	const { io, sent } = scripted(reset(), conflict, { status: 202, body: PENDING }, { status: 200, body: result("completed") });
	const got = await new BrokerClient(SETTINGS, io).call(RESUME);
	assert.equal(got.details.status, "completed");
	assert.deepEqual(
		sent.map((s) => `${s.method} ${s.url.replace("http://broker.test/v1/sessions/s%201", "")}`),
		["POST /questionnaire?wait=30", "POST /questionnaire?wait=30", "GET /questionnaires/qid?wait=0", "GET /questionnaires/qid?wait=30"],
	);
});

test("a 409 to a resume that reached the broker once stands", async () => {
	const conflict = { status: 409, body: { error: { code: "stale_revision", message: "questionnaire: stale" } } };
	const { io, sent } = scripted(conflict);
	await assert.rejects(new BrokerClient(SETTINGS, io).call(RESUME), { code: "stale_revision" });
	assert.equal(sent.length, 1);
});

test("the settings come from QBROKER_URL, QBROKER_SESSION and QBROKER_TOKEN", () => {
	const settings = settingsFromEnv({ QBROKER_URL: "http://127.0.0.1:8700/", QBROKER_SESSION: "demo", QBROKER_TOKEN: "t" });
	assert.equal(settings.url, "http://127.0.0.1:8700");
	assert.equal(settings.session, "demo");
	assert.equal(settings.token, "t");
	assert.equal(settings.retries, DEFAULTS.retries);
	assert.equal(settingsFromEnv({ QBROKER_URL: "http://x", QBROKER_SESSION: "s", QBROKER_TOKEN: "t", QBROKER_RETRIES: "0" }).retries, 0);
});

test("with nothing set, the error names every variable to set", () => {
	assert.throws(() => settingsFromEnv({}), (error: unknown) => {
		assert.ok(error instanceof BrokerError);
		assert.equal(error.code, "not_configured");
		for (const name of ["QBROKER_URL", "QBROKER_SESSION", "QBROKER_TOKEN"]) assert.ok(error.message.includes(name), name);
		return true;
	});
	assert.throws(() => settingsFromEnv({ QBROKER_URL: "http://x", QBROKER_SESSION: "s" }), (error: unknown) => {
		const message = (error as Error).message;
		return message.includes("QBROKER_TOKEN") && !message.includes("QBROKER_URL");
	});
});

test("the start-up warning names only what is missing, or what is wrong", () => {
	assert.equal(settingsWarning({ QBROKER_URL: "http://x", QBROKER_SESSION: "s", QBROKER_TOKEN: "t" }), null);
	assert.equal(
		settingsWarning({ QBROKER_URL: "http://x", QBROKER_SESSION: "demo" }),
		"questionnaire (qbroker): set QBROKER_TOKEN to reach the user",
	);
	assert.equal(settingsWarning({}), "questionnaire (qbroker): set QBROKER_URL, QBROKER_SESSION, QBROKER_TOKEN to reach the user");
	assert.equal(
		settingsWarning({ QBROKER_URL: "http://x", QBROKER_SESSION: "s", QBROKER_TOKEN: "t", QBROKER_RETRIES: "many" }),
		'questionnaire (qbroker): QBROKER_RETRIES must be a whole number >= 0, got "many"',
	);
});

test("a bad URL or retry count is refused in one line", () => {
	const base = { QBROKER_SESSION: "s", QBROKER_TOKEN: "t" };
	assert.throws(() => settingsFromEnv({ ...base, QBROKER_URL: "not a url" }), /QBROKER_URL is not a URL/);
	assert.throws(() => settingsFromEnv({ ...base, QBROKER_URL: "ftp://x" }), /QBROKER_URL must be an http\(s\) URL/);
	assert.throws(() => settingsFromEnv({ ...base, QBROKER_URL: "http://x", QBROKER_RETRIES: "-1" }), /QBROKER_RETRIES/);
});
