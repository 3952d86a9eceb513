/* The page's link: the session and client token in the URL fragment (or a token this browser
 * remembers), what the page opens with them, and the websocket URLs derived from the page's
 * own address. Pure: locations and the remembered token come in as strings. */

export const SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const SESSION_RULE = "1–128 letters, digits or . _ : -";

/** {session, token} from `location.hash` (either may be ""). */
export function parseFragment(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  return { session: (params.get("session") || "").trim(), token: (params.get("token") || "").trim() };
}

/** Why the link cannot be used (a sentence for the setup screen), or null when it can.
 * A token without a session opens the inbox; a session needs a token (`stored`: the token
 * this browser remembers, "" for none). `search` is `location.search`: people paste the
 * fragment's parameters after `?` too. */
export function linkProblem(params, search, stored = "") {
  const token = params.token || stored;
  if (!token) {
    const query = new URLSearchParams(String(search || ""));
    if (query.get("token") || query.get("session")) {
      return "The session and token must come after a # sign, not a ? — a query string ends up in server logs.";
    }
    return params.session ? "The link names a session but has no token." : "This link carries no token.";
  }
  if (params.session && !SESSION_RE.test(params.session)) {
    return "“" + params.session + "” is not a valid session id (" + SESSION_RULE + ").";
  }
  return null;
}

/** What the page opens: {mode: "session" | "inbox" | "setup", session, token, remembered,
 * problem}. A session link opens that session (with the remembered token when it carries
 * none); a token alone opens the inbox of every session it covers; nothing at all opens
 * the inbox with the remembered token, if any. */
export function route(params, search, stored = "") {
  const problem = linkProblem(params, search, stored);
  if (problem) return { mode: "setup", session: params.session, token: params.token, remembered: false, problem };
  const remembered = !params.token;
  const token = params.token || stored;
  if (params.session) return { mode: "session", session: params.session, token, remembered, problem: null };
  return { mode: "inbox", session: "", token, remembered, problem: null };
}

/** The inbox's websocket URL, resolved relative to the page as the session's is. */
export function inboxWebsocketUrl(href) {
  const page = new URL(href);
  const url = new URL("v1/inbox/ws", page);
  url.protocol = page.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.toString();
}

/** What is wrong with the setup form's values ({field, text}), or null. No session id opens
 * the inbox. */
export function formProblem(session, token) {
  if (session && !SESSION_RE.test(session)) return { field: "session", text: "A session id is " + SESSION_RULE };
  if (!token) return { field: "token", text: "Paste the client token too." };
  return null;
}

/** The fragment that opens `session` with `token`, or the inbox when `session` is "". */
export function fragmentFor(session, token) {
  const t = "token=" + encodeURIComponent(token);
  return session ? "session=" + encodeURIComponent(session) + "&" + t : t;
}

/** The session's websocket URL, resolved relative to the page (`href`) so that a broker
 * behind a path prefix still works; ws: or wss: to match the page's http: or https:. */
export function websocketUrl(session, href) {
  const page = new URL(href);
  const url = new URL("v1/sessions/" + encodeURIComponent(session) + "/ws", page);
  url.protocol = page.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.toString();
}
