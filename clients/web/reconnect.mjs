/* What a closed connection means, and how soon to try again. Pure: the clock and the random
 * source are passed in. */

import { refusalKind, refusalScreen } from "./refusals.mjs";

export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 30000;
const SLOW_DOWN_MS = 5000;

/** "refused" (4400, 4401, 4403: the broker turned the page away, and trying again on
 * its own cannot help; refusals.mjs says what to tell the person) or "retry". */
export function closeVerdict(code, reason) {
  return refusalKind(code, reason) === null ? "retry" : "refused";
}

/** The connection's state line (the pill) after a close that is not retried, in the
 * words of the screen under it. `signedIn`: the token came from signing in. */
export function failedStatus(code, reason, signedIn = false) {
  const screen = refusalScreen(code, reason, { signedIn });
  return screen ? screen.status : "Disconnected";
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
