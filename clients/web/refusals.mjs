/* What the page says when the broker turns its token or link away for good (closes 4400,
 * 4401, 4403), in a person's words, and what is left to try. The session page and the
 * inbox say the same. Pure: no DOM.
 *
 * A 4401's reason tells its causes apart (the broker's fixed texts: "token expired",
 * "token revoked", "a(n) <role> token cannot be used by a client", anything else is a
 * token it could not read). None of them is fixed by trying the same token again, so none
 * offers "Try again": the way on is a new link, or signing in again where the page signs
 * people in. Only 4400 (this page and the broker disagree on the protocol) offers a retry:
 * a reload may bring the page that matches.
 */

const KINDS = [
  ["expired", /expired/i],
  ["revoked", /revoked/i],
  ["wrong_role", /cannot be used by/i],
];

/** "protocol" | "expired" | "revoked" | "wrong_role" | "invalid" | "wrong_session" for a
 * close that no retry can fix, else null. */
export function refusalKind(code, reason) {
  if (code === 4400) return "protocol";
  if (code === 4403) return "wrong_session";
  if (code !== 4401) return null;
  const found = KINDS.find(([, pattern]) => pattern.test(reason || ""));
  return found ? found[0] : "invalid";
}

// {title, status (the top bar's pill), text}: `thing` is "link" on a page opened with a
// link, "sign-in" where the person signed in.
const LINK_TEXTS = {
  expired: {
    title: "This link has expired",
    status: "Link expired",
    text: "Links stop working after a while. Ask for a new link (whoever sent you this one can make it), then open it, here or in a new tab.",
  },
  revoked: {
    title: "This link has been withdrawn",
    status: "Link withdrawn",
    text: "Someone switched this link off, so it no longer opens anything. If you still need to answer, ask whoever sent it for a new link.",
  },
  wrong_role: {
    title: "This link is not for answering",
    status: "Wrong kind of link",
    text: "It was made for a program that asks questions, not for a person who answers them. Ask whoever sent it for a link made for you.",
  },
  invalid: {
    title: "This link does not work",
    status: "Link not accepted",
    text: "Part of it may have been lost when it was copied, or it was made for another server. Open it again from the message you got, or ask for a new link.",
  },
  wrong_session: {
    title: "This link is for another session",
    status: "Wrong session",
    text: "The link's key opens a different session than the one it names: it was probably not copied completely. Open it again from the message you got, or ask for a new link.",
  },
  protocol: {
    title: "This page is out of date",
    status: "Disconnected",
    text: "The page and the server no longer understand each other. Reload the page; if it keeps happening, tell whoever runs qbroker.",
  },
};

const SIGN_IN_TEXTS = {
  expired: {
    title: "You have been signed out",
    status: "Signed out",
    text: "Your sign-in ran out. Sign in again to carry on.",
  },
  revoked: {
    title: "Your sign-in was withdrawn",
    status: "Signed out",
    text: "Your access was switched off. Sign in again; if that does not help, ask whoever runs qbroker.",
  },
  wrong_role: {
    title: "This account cannot answer questions",
    status: "Not allowed",
    text: "Your account is set up for programs that ask questions, not for answering them. Ask whoever runs qbroker to give it a person's role.",
  },
  invalid: {
    title: "Your sign-in was not accepted",
    status: "Signed out",
    text: "The server could not use it. Sign in again; if that does not help, ask whoever runs qbroker.",
  },
  wrong_session: {
    title: "This session is not yours",
    status: "Not allowed",
    text: "Your account does not cover the session this link names. If it should, ask whoever runs qbroker; the questions waiting for you are in your inbox, at this page's address without the link's part after #.",
  },
  protocol: LINK_TEXTS.protocol,
};

const OPEN_NOTE = "The questionnaire you were answering is still open for a while, and the answers you already sent are saved. ";
const REMEMBERED_NOTE = " This browser still remembers it: forget it below.";

/**
 * The screen for a close no retry can fix ({kind, title, status, text, reason, action,
 * forget}), or null for a close that is retried. `action`: "retry" (a manual Try again),
 * "signIn", or null (nothing this page can do: the way on is a new link); `forget`: offer
 * "Forget my token" (the refused token is the one this browser remembers).
 * open: a questionnaire was on screen; remembered: the token came from this browser's
 * memory; signedIn: the token came from signing in.
 */
export function refusalScreen(code, reason, { open = false, remembered = false, signedIn = false } = {}) {
  const kind = refusalKind(code, reason);
  if (kind === null) return null;
  const words = (signedIn ? SIGN_IN_TEXTS : LINK_TEXTS)[kind];
  let text = words.text;
  if (open && kind === "expired") text = OPEN_NOTE + text;
  const forget = remembered && !signedIn && kind !== "protocol";
  if (forget) text += REMEMBERED_NOTE;
  let action = null;
  if (kind === "protocol") action = "retry";
  else if (signedIn && kind !== "wrong_role" && kind !== "wrong_session") action = "signIn";
  return { kind, title: words.title, status: words.status, text, reason: reason || "", action, forget };
}
