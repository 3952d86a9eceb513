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

const ASK_AGAIN = "Open it again from the message you got, or ask whoever sent it for a new link.";

/** What the setup screen says when the page has no usable token ({kind, title, text,
 * status}: `status` is the top bar's pill), in a person's words: how links are made is
 * for docs/web-client.md, not for the person holding one. */
export const NO_LINK = {
  kind: "none",
  title: "Open the link you were sent",
  text: "This page shows the questions an agent asks you. Open it from the link in the message " +
    "that told you about them: an email, a chat message or a notification.",
  status: "No link",
};

/** Why the link cannot be used (see NO_LINK for its shape), or null when it can. A token
 * without a session opens the inbox; a session needs a token (`stored`: the token this
 * browser remembers, "" for none). `search` is `location.search`: people paste the
 * fragment's parameters after `?` too. */
export function linkProblem(params, search, stored = "") {
  const token = params.token || stored;
  if (!token) {
    const query = new URLSearchParams(String(search || ""));
    if (query.get("token") || query.get("session")) {
      // A query string ends up in server logs; the fragment (after #) never leaves the browser.
      return { kind: "query", title: "This link is incomplete", status: "Link incomplete",
        text: "Its parts come after a “?” where this page expects a “#”: it was changed on its way here. " + ASK_AGAIN };
    }
    if (!params.session) return NO_LINK;
    return { kind: "no_token", title: "This link is incomplete", status: "Link incomplete",
      text: "It names the session “" + params.session + "” but not the key that opens it: part of it " +
        "was probably lost when it was copied. " + ASK_AGAIN };
  }
  if (params.session && !SESSION_RE.test(params.session)) {
    return { kind: "bad_session", title: "This link does not work", status: "Link not accepted",
      text: "“" + params.session + "” is not a session this page can open (a session is " + SESSION_RULE + "). " + ASK_AGAIN };
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
