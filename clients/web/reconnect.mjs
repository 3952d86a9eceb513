/* What a closed connection means, and how soon to try again. Pure: the clock and the random
 * source are passed in. */

export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 30000;
const SLOW_DOWN_MS = 5000;

// Close codes after which reconnecting cannot help: say what is wrong instead.
const FATAL_CLOSES = {
  4400: {
    title: "The broker refused this page's handshake",
    text: "The connection broke the protocol (code 4400). Reload the page; if it keeps happening, " +
      "this page and the broker are probably different versions.",
  },
  4401: {
    title: "This link's token was not accepted",
    text: "The token is invalid, has expired, or is not a client token (code 4401). " +
      "Ask for a fresh link, or mint a client token with " +
      "qbroker token --session SESSION --role client.",
  },
  4403: {
    title: "This token belongs to another session",
    text: "The token in the link was issued for a different session than the one named in the link " +
      "(code 4403). Check that the link was copied completely.",
  },
};

/** "expired" (the token ran out: retrying the same one can never work), "fatal" (a retry
 * cannot fix it, but a manual one is offered) or "retry". */
export function closeVerdict(code, reason) {
  if (code === 4401 && /expired/i.test(reason || "")) return "expired";
  return Object.prototype.hasOwnProperty.call(FATAL_CLOSES, code) ? "fatal" : "retry";
}

/** The connection's state line after a close that is not retried. */
export function failedStatus(verdict) {
  return verdict === "expired" ? "Link expired" : "Disconnected";
}

/** The screen for a close that is not retried ({title, text, reason, noRetry}), or null.
 * `open`: a questionnaire was on screen when the connection closed. */
export function fatalScreen(code, reason, open) {
  const verdict = closeVerdict(code, reason);
  if (verdict === "expired") {
    return {
      title: "This link has expired",
      text: (open
        ? "The questionnaire you were answering is still open for a while, and the answers you " +
          "already sent are saved. "
        : "") +
        "Ask for a new link (whoever sent you this one can make it), then open it, here or in a " +
        "new tab" + (open ? ", to carry on where you left off." : "."),
      reason: reason || "",
      noRetry: true,
    };
  }
  if (verdict === "fatal") {
    return { title: FATAL_CLOSES[code].title, text: FATAL_CLOSES[code].text, reason: reason || "", noRetry: false };
  }
  return null;
}

/** Milliseconds before reconnect `attempt` (0-based). Exponential backoff with "equal
 * jitter": half fixed, half random, so a broker restart does not bring every client of every
 * session back in the same millisecond. */
export function backoffDelay(attempt, code, random = Math.random) {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * Math.pow(2, attempt));
  let delay = ceiling / 2 + random() * ceiling / 2;
  if (code === 1008) delay = Math.max(delay, SLOW_DOWN_MS); // rate limited or too slow: back off for real
  return Math.round(delay);
}

/** The state line while waiting to reconnect. */
export function lostStatus(code, reason, online) {
  if (!online) return "You are offline";
  let why = code === 1012 ? "Broker restarting" : code === 1001 ? "Broker going away" :
    code === 1013 ? "Broker busy" : code === 1008 ? "Closed by the broker" : "Connection lost";
  if (reason && (code === 1008 || code === 1013)) why += " (" + reason + ")";
  return why;
}

/** The countdown next to the state line (outside its live region). */
export function countdown(retryAt, now) {
  const left = Math.max(0, Math.ceil((retryAt - now) / 1000));
  return "· retrying " + (left > 0 ? "in " + left + " s" : "now");
}
