/* The token this browser remembers, only when the person asked it to ("Remember my token"),
 * until they say "Forget my token". localStorage may be missing or refuse (private windows,
 * storage turned off): then nothing is remembered, and the page says so by not offering it. */

const KEY = "qbroker.token";

/** The remembered token, or "". */
export function rememberedToken() {
  try {
    return window.localStorage.getItem(KEY) || "";
  } catch (e) {
    return "";
  }
}

/** True when the token is now remembered. */
export function rememberToken(token) {
  try {
    window.localStorage.setItem(KEY, token);
    return window.localStorage.getItem(KEY) === token;
  } catch (e) {
    return false;
  }
}

export function forgetToken() {
  try {
    window.localStorage.removeItem(KEY);
  } catch (e) { /* nothing was kept */ }
}

/** Whether this browser lets the page remember anything at all. */
export function canRemember() {
  try {
    return !!window.localStorage;
  } catch (e) {
    return false;
  }
}
