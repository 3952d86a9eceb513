/**
 * The client side of qbroker's websockets, for the Pi extension while its call waits:
 *
 * - `SessionSocket`: `/v1/sessions/{sid}/ws`, the socket every qbroker client answers on
 *   (docs/protocol.md, "The client websocket"): the hello with the client token, then every
 *   frame to a listener; commands go out with a `ref` and a `ping` behind them, so that the
 *   broker's refusal of that command (an `error` with its ref, sent before the `pong`) comes
 *   back as the command's reply. Re-opened with backoff when the broker goes away, until
 *   closed; 4400/4401/4403 end it (a retry cannot change the reason).
 * - `Presence`: `/v1/inbox/ws` with the same token, which says how many clients have each
 *   session open (`clients`): what `QBROKER_IN_HOST=fallback` decides by.
 *
 * WebSocket: Node 22 and later have one built in; on Node 20 the `ws` package (a dependency
 * in package.json) is loaded, lazily, so that Pi without it still loads the extension.
 */

import type { Command } from "./local.ts";

/** What the broker said about a command: nothing (taken), or its refusal. */
export type Reply = { ok: true } | { ok: false; code: string; message: string; rule?: string };
export type ServerFrame = { type: string; [key: string]: unknown };

/** The browser's WebSocket, as much of it as is used here (ws's class has the same). */
interface Socket {
	readonly readyState: number;
	send(data: string): void;
	close(code?: number, reason?: string): void;
	onopen: ((event: unknown) => void) | null;
	onmessage: ((event: { data: unknown }) => void) | null;
	onclose: ((event: { code: number; reason: string }) => void) | null;
	onerror: ((event: unknown) => void) | null;
}
type SocketClass = new (url: string, protocols?: string | string[]) => Socket;

const SUBPROTOCOL = "qbroker.v1.json";
const FATAL = new Map([
	[4400, "the broker rejected the hello"],
	[4401, "the broker refused the client token (QBROKER_CLIENT_TOKEN must be a client token for this session)"],
	[4403, "the client token is for another session"],
]);
const REPLY_TIMEOUT = 15_000;
const MAX_BACKOFF = 5_000;

let socketClass: Promise<SocketClass> | undefined;

/** The WebSocket class to use: Node's own, else the `ws` package's. */
export function loadWebSocket(): Promise<SocketClass> {
	const builtIn = (globalThis as { WebSocket?: SocketClass }).WebSocket;
	if (builtIn) return Promise.resolve(builtIn);
	socketClass ??= import("ws").then(
		(module) => (module.WebSocket ?? module.default) as unknown as SocketClass,
		(error: unknown) => {
			socketClass = undefined;
			throw new Error(
				`this Node.js (${process.version}) has no WebSocket, and the ws package is not installed beside the extension: ` +
					`run npm install in its folder, or use Node 22 (${error instanceof Error ? error.message : String(error)})`,
			);
		},
	);
	return socketClass;
}

/** `http(s)://host/base` -> `ws(s)://host/base/v1/...`. */
export function socketUrl(brokerUrl: string, path: string): string {
	const url = new URL(brokerUrl.replace(/\/+$/, "") + path);
	url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
	return url.toString();
}

export interface SocketOptions {
	url: string;
	token: string;
	/** the hello's client: kind and name, as the broker records who answered */
	client: { kind: "tui" | "web" | "bot"; name: string };
}

/** One websocket at a time to `url`, hello first, re-opened with backoff until closed. */
class Connection {
	private socket: Socket | undefined;
	private stopped = false;
	private attempt = 0;
	private timer: ReturnType<typeof setTimeout> | undefined;

	constructor(
		private readonly options: SocketOptions,
		private readonly onFrame: (frame: ServerFrame) => void,
		/** the connection is over for good (a fatal close): why */
		private readonly onFatal: (reason: string) => void,
		/** the socket closed; it is being re-opened */
		private readonly onLost: () => void = () => {},
	) {}

	async open(): Promise<void> {
		if (this.stopped) return;
		const Class = await loadWebSocket();
		if (this.stopped) return;
		const socket = new Class(this.options.url, [SUBPROTOCOL]);
		this.socket = socket;
		socket.onopen = () => {
			socket.send(JSON.stringify({ type: "hello", token: this.options.token, client: this.options.client }));
		};
		socket.onmessage = (event) => {
			let frame: ServerFrame;
			try {
				frame = JSON.parse(String(event.data)) as ServerFrame;
			} catch {
				return;
			}
			if (frame.type === "welcome" || frame.type === "inbox") this.attempt = 0;
			this.onFrame(frame);
		};
		socket.onerror = () => {}; // a close follows, and says what to do
		socket.onclose = (event) => {
			if (this.socket !== socket) return;
			this.socket = undefined;
			if (this.stopped) return;
			const fatal = FATAL.get(event.code);
			if (fatal) {
				this.stopped = true;
				this.onFatal(`${fatal}${event.reason ? `: ${event.reason}` : ""}`);
				return;
			}
			this.onLost();
			const delay = Math.min(MAX_BACKOFF, 250 * 2 ** this.attempt++) * (0.5 + Math.random() / 2);
			this.timer = setTimeout(() => void this.open().catch((error) => this.fail(error)), delay);
		};
	}

	private fail(error: unknown): void {
		this.stopped = true;
		this.onFatal(error instanceof Error ? error.message : String(error));
	}

	/** Send a frame now; false when the socket is not open (the state comes again on reconnect). */
	send(frame: Record<string, unknown>): boolean {
		const socket = this.socket;
		if (!socket || socket.readyState !== 1) return false;
		socket.send(JSON.stringify(frame));
		return true;
	}

	close(): void {
		this.stopped = true;
		clearTimeout(this.timer);
		const socket = this.socket;
		this.socket = undefined;
		if (socket && socket.readyState <= 1) socket.close(1000, "done");
	}
}

/** The session's websocket: frames in, commands out, each with its reply. */
export class SessionSocket {
	private readonly connection: Connection;
	private nextRef = 1;
	private readonly waiting = new Map<number, { refusal?: Reply; settle: (reply: Reply) => void }>();
	private welcomed!: { resolve: () => void; reject: (error: Error) => void };
	/** resolves at the first `welcome`, rejects when the socket cannot be opened */
	readonly ready: Promise<void>;

	constructor(
		options: SocketOptions,
		private readonly onFrame: (frame: ServerFrame) => void,
		onFatal: (reason: string) => void,
	) {
		this.ready = new Promise((resolve, reject) => (this.welcomed = { resolve, reject }));
		this.ready.catch(() => {});
		this.connection = new Connection(
			options,
			(frame) => this.receive(frame),
			(reason) => {
				this.welcomed.reject(new Error(reason));
				this.settleAll({ ok: false, code: "disconnected", message: reason });
				onFatal(reason);
			},
			() => this.settleAll({ ok: false, code: "disconnected", message: "the connection to the broker was lost" }),
		);
		this.connection.open().catch((error: unknown) => {
			const message = error instanceof Error ? error.message : String(error);
			this.welcomed.reject(new Error(message));
			onFatal(message);
		});
	}

	private receive(frame: ServerFrame): void {
		if (frame.type === "welcome") this.welcomed.resolve();
		const ref = typeof frame.ref === "number" ? frame.ref : undefined;
		if (frame.type === "error" && ref !== undefined && this.waiting.has(ref)) {
			const entry = this.waiting.get(ref)!;
			entry.refusal ??= {
				ok: false,
				code: String(frame.code),
				message: String(frame.message),
				...(typeof frame.rule === "string" ? { rule: frame.rule } : {}),
			};
			return;
		}
		if (frame.type === "pong" && ref !== undefined) {
			const entry = this.waiting.get(ref);
			if (entry) {
				this.waiting.delete(ref);
				entry.settle(entry.refusal ?? { ok: true });
			}
			return;
		}
		this.onFrame(frame);
	}

	/** A command, then a ping with the same ref: its refusal (if any) comes before the pong. */
	send(command: Command, extra: { confirmedNotSecret?: boolean } = {}): Promise<Reply> {
		const ref = this.nextRef++;
		return new Promise<Reply>((resolve) => {
			const timer = setTimeout(() => {
				this.waiting.delete(ref);
				resolve({ ok: false, code: "timeout", message: "the broker did not answer in time" });
			}, REPLY_TIMEOUT);
			const settle = (reply: Reply) => {
				clearTimeout(timer);
				resolve(reply);
			};
			this.waiting.set(ref, { settle });
			const sent =
				this.connection.send({ ...command, ...(extra.confirmedNotSecret ? { confirmedNotSecret: true } : {}), ref }) &&
				this.connection.send({ type: "ping", ref });
			if (!sent) {
				this.waiting.delete(ref);
				settle({ ok: false, code: "disconnected", message: "not connected to the broker" });
			}
		});
	}

	private settleAll(reply: Reply): void {
		for (const [ref, entry] of this.waiting) {
			this.waiting.delete(ref);
			entry.settle(reply);
		}
	}

	close(): void {
		this.connection.close();
		this.settleAll({ ok: false, code: "closed", message: "closed" });
	}
}

/**
 * How many qbroker clients have a session open, from the inbox socket: `onChange(n)` with
 * the session's `clients` whenever it is known or changes (undefined until it is).
 */
export class Presence {
	private readonly connection: Connection;
	clients: number | undefined;

	constructor(
		options: SocketOptions,
		private readonly session: string,
		private readonly onChange: (clients: number) => void,
		onFatal: (reason: string) => void,
	) {
		this.connection = new Connection(options, (frame) => this.receive(frame), onFatal);
		this.connection.open().catch((error: unknown) => onFatal(error instanceof Error ? error.message : String(error)));
	}

	private receive(frame: ServerFrame): void {
		const items =
			frame.type === "inbox" && Array.isArray(frame.items)
				? (frame.items as Array<Record<string, unknown>>)
				: frame.type === "inbox_item" && frame.item
					? [frame.item as Record<string, unknown>]
					: [];
		for (const item of items) {
			if (item.sessionId === this.session && typeof item.clients === "number" && item.clients !== this.clients) {
				this.clients = item.clients;
				this.onChange(item.clients);
			}
		}
	}

	close(): void {
		this.connection.close();
	}
}
