/* The page's link: the session and client token in the URL fragment, and the websocket URL
 * derived from the page's own address. Pure: locations come in as strings. */

export const SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const SESSION_RULE = "1–128 letters, digits or . _ : -";

/** {session, token} from `location.hash` (either may be ""). */
export function parseFragment(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  return { session: (params.get("session") || "").trim(), token: (params.get("token") || "").trim() };
}

/** Why the link cannot be used (a sentence for the setup screen), or null when it can.
 * `search` is `location.search`: people paste the fragment's parameters after `?` too. */
export function linkProblem(params, search) {
  if (!params.session || !params.token) {
    const query = new URLSearchParams(String(search || ""));
    if (query.get("token") || query.get("session")) {
      return "The session and token must come after a # sign, not a ? — a query string ends up in server logs.";
    }
    if (!params.session && !params.token) return "This link does not say which session to join.";
    return !params.session ? "The link has a token but no session id." : "The link names a session but has no token.";
  }
  if (!SESSION_RE.test(params.session)) {
    return "“" + params.session + "” is not a valid session id (" + SESSION_RULE + ").";
  }
  return null;
}

/** What is wrong with the setup form's values ({field, text}), or null. */
export function formProblem(session, token) {
  if (!SESSION_RE.test(session)) return { field: "session", text: "A session id is " + SESSION_RULE };
  if (!token) return { field: "token", text: "Paste the client token too." };
  return null;
}

/** The fragment that opens `session` with `token`. */
export function fragmentFor(session, token) {
  return "session=" + encodeURIComponent(session) + "&token=" + encodeURIComponent(token);
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
