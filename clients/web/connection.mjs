/* The websocket to the broker: the handshake, keep-alive pings, and reconnecting with
 * backoff after a close that a retry can fix (reconnect.mjs says which). It reports what it
 * is doing and hands the frames over; it knows nothing of questionnaires.
 *
 *   connect() -> open -> hello -> welcome -> frames
 *   close 4400/4401/4403  -> onClose, state "failed", no reconnect (refusals.mjs says why)
 *   any other close       -> onClose, then a countdown and a new connect()
 */

import { backoffDelay, closeVerdict, countdown, failedStatus, lostStatus } from "./reconnect.mjs";
import { refusalKind } from "./refusals.mjs";

export const SUBPROTOCOL = "qbroker.v1.json";
const CLIENT = { kind: "web", name: "qbroker web" };
const PING_INTERVAL_MS = 20000;
const PONG_TIMEOUT_MS = 10000;
const HELLO_TIMEOUT_MS = 15000;
const COUNTDOWN_MS = 1000;

const isWelcomeFrame = (frame) => frame.type === "welcome";

/**
 * url, token: the session's websocket and the client token for its hello (a function giving
 *   it for a token that changes, as a signed-in person's does when it is refreshed).
 * signedIn: the token came from signing in (the state line after a refusal says so).
 * renew(): a promise of a fresh token (true) or none (false): a close for an expired token
 *   renews it and connects again instead of failing (a signed-in person's access token ran out).
 * onStatus(state, text, detail): state is connecting | connected | waiting | offline | failed;
 *   `text` says it, `detail` is the countdown next to it.
 * onFrame(frame): every frame (an object), welcome included, after the connection's own
 *   bookkeeping.
 * onClose(code, reason): the socket closed (before the reconnect, if any, is scheduled).
 * onUnreadable(): the broker sent something that is not JSON.
 * isWelcome(frame): the frame that says the hello was accepted (default: `welcome`; the
 *   inbox socket's first list says it too).
 */
export function createConnection({ url, token, signedIn = false, renew = null, onStatus, onFrame, onClose, onUnreadable, isWelcome = isWelcomeFrame }) {
  let ws = null;
  let state = "connecting";
  let text = "";
  let attempt = 0; // reconnect attempts since the last welcome
  let everConnected = false;
  let retryAt = 0;
  let stopped = false;
  const timers = { retry: null, hello: null, pong: null, ping: null, countdown: null };

  function setStatus(next, line, detail) {
    state = next;
    text = line;
    onStatus(next, line, detail || "");
  }

  function clearTimers() {
    ["retry", "hello", "pong"].forEach((name) => { if (timers[name]) window.clearTimeout(timers[name]); });
    ["ping", "countdown"].forEach((name) => { if (timers[name]) window.clearInterval(timers[name]); });
    Object.keys(timers).forEach((name) => { timers[name] = null; });
  }

  function send(frame) {
    if (!ws || ws.readyState !== WebSocket.OPEN || state !== "connected") return false;
    ws.send(JSON.stringify(frame));
    return true;
  }

  function connect() {
    clearTimers();
    if (everConnected && (state === "waiting" || state === "offline")) {
      // Another attempt after a loss: the state ("Connection lost") is unchanged, only the detail.
      setStatus("connecting", text, "· reconnecting…");
    } else {
      setStatus("connecting", everConnected ? "Reconnecting…" : "Connecting…");
    }
    let socket;
    try {
      socket = new WebSocket(url, SUBPROTOCOL);
    } catch (err) {
      scheduleReconnect(null, "");
      return;
    }
    ws = socket;
    socket.onopen = () => {
      if (ws !== socket) return;
      if (socket.protocol !== SUBPROTOCOL) {
        socket.close(4000, "subprotocol not agreed");
        return;
      }
      const current = typeof token === "function" ? token() : token;
      socket.send(JSON.stringify({ type: "hello", token: current, client: CLIENT }));
      timers.hello = window.setTimeout(() => {
        if (ws === socket && state !== "connected") socket.close(4000, "no welcome");
      }, HELLO_TIMEOUT_MS);
    };
    socket.onmessage = (event) => {
      if (ws !== socket) return;
      if (timers.pong) { window.clearTimeout(timers.pong); timers.pong = null; }
      if (typeof event.data !== "string") return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (err) {
        onUnreadable();
        return;
      }
      if (!frame || typeof frame !== "object") return;
      if (state !== "connected" && isWelcome(frame)) welcomed();
      onFrame(frame);
    };
    socket.onerror = () => { /* a close event always follows */ };
    socket.onclose = (event) => {
      if (ws !== socket) return;
      ws = null;
      closed(event.code, event.reason);
    };
  }

  function welcomed() {
    if (timers.hello) { window.clearTimeout(timers.hello); timers.hello = null; }
    attempt = 0;
    everConnected = true;
    setStatus("connected", "Connected");
    startPing();
  }

  function closed(code, reason) {
    clearTimers();
    if (renew && refusalKind(code, reason) === "expired") {
      setStatus("connecting", "Renewing your sign-in…");
      renew().then((ok) => {
        if (stopped) return;
        if (ok) connect();
        else afterClose(code, reason);
      });
      return;
    }
    afterClose(code, reason);
  }

  function afterClose(code, reason) {
    onClose(code, reason);
    const verdict = closeVerdict(code, reason);
    if (verdict === "retry") scheduleReconnect(code, reason);
    else setStatus("failed", failedStatus(code, reason, signedIn));
  }

  function scheduleReconnect(code, reason) {
    const delay = backoffDelay(attempt, code);
    attempt += 1;
    retryAt = Date.now() + delay;
    const why = lostStatus(code, reason, navigator.onLine);
    const tick = () => setStatus(navigator.onLine ? "waiting" : "offline", why, countdown(retryAt, Date.now()));
    tick();
    timers.countdown = window.setInterval(tick, COUNTDOWN_MS);
    timers.retry = window.setTimeout(connect, delay);
  }

  function startPing() {
    timers.ping = window.setInterval(() => {
      if (!send({ type: "ping" })) return;
      if (timers.pong) window.clearTimeout(timers.pong);
      const socket = ws;
      timers.pong = window.setTimeout(() => {
        // Nothing heard for a while: the connection is dead even if the browser has not noticed.
        if (socket && ws === socket) {
          ws = null;
          try { socket.close(4000, "pong timeout"); } catch (e) { /* closing anyway */ }
          closed(1006, "");
        }
      }, PONG_TIMEOUT_MS);
    }, PING_INTERVAL_MS);
  }

  return {
    connect,
    send,
    /** Retry now instead of at the end of the countdown ("Retry now", back online, the tab
     * visible again); nothing while connected or failed. */
    retryNow() {
      if (state === "waiting" || state === "offline") {
        attempt = Math.max(0, attempt - 1);
        connect();
      }
    },
    /** After a close that is not retried: the person's "Try again". */
    restart() {
      attempt = 0;
      connect();
    },
    /** For good (the page switches to another session). */
    stop() {
      stopped = true;
      clearTimers();
      if (ws) {
        const old = ws;
        ws = null;
        try { old.close(1000, "switching session"); } catch (e) { /* closing anyway */ }
      }
    },
  };
}
