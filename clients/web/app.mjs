/* qbroker browser client: the page's entry point, which puts the parts together.
 *
 * Native ES modules, no build step, no dependencies. Opened with a session link, the page
 * joins that session over the broker's websocket (subprotocol qbroker.v1.json) and shows its
 * current questionnaire one question at a time. Opened with a token alone (or the one this
 * browser remembers), it is the inbox: every questionnaire waiting in the sessions the token
 * covers, each answered in place with the same questionnaire view.
 *
 *   pure (no DOM, no socket, no timers; tests/web/ runs them under node --test):
 *     state.mjs          what is shown and what each frame and action does to it
 *     out.mjs            what each of those returns for the page to do (frames, refreshes, toasts)
 *     answer.mjs         the answer being made to the question shown, and its rules
 *     secret-guard.mjs   the stop before a text that looks like a secret
 *     secret-shapes.mjs  what a secret looks like (the broker's rules, in JavaScript)
 *     messages.mjs       what the page says about error codes and ended questionnaires
 *     reconnect.mjs      what a close means, and the backoff
 *     refusals.mjs       what the page says when the broker turns its token away
 *     link.mjs           the link in the URL fragment, what it opens, the websockets' URLs
 *     signin.mjs         signing in with the team's identity provider (code flow with PKCE)
 *     inbox.mjs          the inbox's list, its order and count, the next one to offer
 *     text.mjs           counting characters as the broker does, phrasing
 *     push.mjs           web push: the key's bytes, the button's states, the broker's answers
 *     sw-logic.js        the service worker's rules (a classic script sw.js imports)
 *   in the browser:
 *     connection.mjs     the websocket: handshake, pings, reconnecting
 *     view.mjs           the screens and the top bar
 *     refusal-view.mjs   the screen for a refused token (the session page's and the inbox's)
 *     inbox-page.mjs     the page as the inbox; inbox-view.mjs its screen
 *     token-memory.mjs   the token remembered in this browser, when the person asks
 *     sign-in-page.mjs   the sign-in's round trip, its tokens, renewing them
 *     address-bar.mjs    the link's token out of the address bar (kept for this tab)
 *     question-view.mjs  the question card; parts.mjs what it shares with the wait
 *     cancel-dialog.mjs  the confirmation before cancelling
 *     secret-dialog.mjs  "This looks like a secret": Edit, or Send anyway
 *     notify-button.mjs  "Notify me on this device" (push.mjs its rules; sw.js the worker)
 *     notices.mjs        toasts and screen-reader announcements
 *     dom.mjs            $() and h()
 *
 * Everything the person or the broker does goes through `apply(model.something(...))`:
 * the state changes, its frames go out, the screen follows, and the one deadline the state
 * keeps (a draft to save, a wait that must not hang) gets a timer.
 */

import { createCancelDialog } from "./cancel-dialog.mjs";
import { createConnection } from "./connection.mjs";
import { $ } from "./dom.mjs";
import { createInboxPage } from "./inbox-page.mjs";
import { route, websocketUrl } from "./link.mjs";
import { createSignIn, loadSignInSettings } from "./sign-in-page.mjs";
import { linkTarget, parseCallback, SIGN_IN_ENDED, SIGNED_OUT, signInProblem, targetFragment, tokenSubject } from "./signin.mjs";
import { announce, toast } from "./notices.mjs";
import { createNotifyButton } from "./notify-button.mjs";
import { createSecretDialog } from "./secret-dialog.mjs";
import { PageState } from "./state.mjs";
import { forgetToken, rememberedToken } from "./token-memory.mjs";
import { forgetLink, takeLink } from "./address-bar.mjs";
import { createView } from "./view.mjs";

let model = new PageState();
let connection = null; // the session's websocket
let deadline = { at: null, timer: null };
let inbox = null; // the inbox (inbox-page.mjs) when the page was opened as one
let notifyButton = null; // "Notify me on this device", for the page's token
let auth = null; // the person's sign-in (sign-in-page.mjs) where the broker has one

const now = () => Date.now();

const actions = {
  pick: (optionId) => apply(model.pick(optionId, now())),
  toggleOther: () => apply(model.toggleOther(now())),
  closeOther: (refocus) => apply(model.closeOther(refocus, now())),
  typeOther: (text) => apply(model.typeOther(text, now())),
  submitOther: () => apply(model.submitOther(now())),
  submitMulti: () => apply(model.submitMulti(now())),
  toggleClarify: () => apply(model.toggleClarify()),
  closeClarify: (refocus) => apply(model.closeClarify(refocus)),
  typeClarify: (text) => apply(model.typeClarify(text)),
  sendClarify: () => apply(model.sendClarify(now())),
  openCancel: (opener) => apply(model.openCancel(), opener),
  closeCancel: () => apply(model.closeCancel()),
  cancelDialogClosed: () => { if (model.cancelFor !== null) apply(model.closeCancel()); },
  confirmCancel: () => apply(model.confirmCancel(now())),
  sendAnyway: () => apply(model.sendAnyway(now())),
  editSecret: () => apply(model.editSecret()),
  secretDialogClosed: () => { if (model.guard.stop) apply(model.editSecret()); },
  dismissEndedNote: () => model.dismissEndedNote(), // the note removes itself
  tryAgain: () => {
    apply(model.loading());
    if (connection) connection.restart();
  },
  forget: () => forget(),
  signIn: () => signIn(),
};

const view = createView(actions, (title) => (inbox ? inbox.title(title) : title));
const dialog = createCancelDialog(actions);
const secretDialog = createSecretDialog(actions);

function apply(out, opener) {
  let refresh = out.refresh;
  for (const frame of out.send) {
    if (connection && connection.send(frame)) continue;
    const undone = model.unsent(frame);
    if (undone.refresh && refresh !== "question") refresh = undone.refresh;
  }
  if (out.dialog === "close") dialog.close(); // before a new screen, so that its focus can move
  if (out.secret === "close") secretDialog.close();
  view.render(model, refresh);
  if (out.dialog === "open") dialog.open(opener);
  if (out.secret === "open") secretDialog.open(model.guard.stop);
  if (out.focus) view.focus(out.focus);
  if (out.fieldError) view.fieldError(out.fieldError.kind, out.fieldError.text);
  if (out.hint !== null) view.hint(out.hint);
  out.toasts.forEach(toast);
  if (out.announce) announce(out.announce);
  if (out.newQuestion) view.flagTitle();
  if (out.unknown !== null && window.console) console.warn("qbroker: ignoring unknown frame type", out.unknown);
  armDeadline();
}

/** One timer, for the state's next deadline. */
function armDeadline() {
  const at = model.nextDeadline();
  if (at === deadline.at) return;
  if (deadline.timer) window.clearTimeout(deadline.timer);
  deadline = { at, timer: null };
  if (at === null) return;
  deadline.timer = window.setTimeout(() => {
    deadline = { at: null, timer: null };
    apply(model.tick(Math.max(now(), at))); // a timer may fire a hair early by the wall clock
  }, Math.max(0, at - now()));
}

function onStatus(state, text, detail) {
  model.connection(state);
  if (!inbox || inbox.answering()) view.showConnection(model, state, text, detail);
}

/** Leave the session shown (for another one, the inbox's list, or a new link). */
function stopSession() {
  if (connection) {
    connection.stop();
    connection = null;
  }
  if (deadline.timer) window.clearTimeout(deadline.timer);
  deadline = { at: null, timer: null };
  model = new PageState(); // a new session: nothing of the last one applies
  dialog.close(); // whatever it was about is not on screen any more
  secretDialog.close();
}

/** `origin`: {remembered, signedIn}, where the token came from (for what a refusal says). */
function startSession(session, token, origin) {
  stopSession();
  apply(model.loading());
  connection = createConnection({
    url: websocketUrl(session, window.location.href),
    token,
    signedIn: origin.signedIn,
    renew: origin.signedIn ? () => auth.renew() : null,
    onStatus,
    onFrame: (frame) => {
      apply(model.receive(frame, now(), view.otherFocused()));
      if (inbox) inbox.sessionFrame(frame);
    },
    onClose: (code, reason) => apply(model.disconnected(code, reason, origin)),
    onUnreadable: () => toast({ kind: "error", title: "Unreadable message",
      text: "The broker sent something this page could not parse." }),
  });
  connection.connect();
}

/** "Forget my token": this browser keeps it no more, and it leaves the address bar too. */
function forget() {
  forgetToken();
  forgetLink(window.sessionStorage);
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  start({ kind: "forgotten", title: "This browser has forgotten your token", status: "No link",
    text: "To answer again, open the link from the message that told you about the questions." });
  announce("This browser has forgotten your token.");
}

/** The setup screen: `problem` in link.mjs's shape; `signIn`: offer "Sign in". */
function showSetup(where, problem, signIn) {
  view.showSession(null);
  apply(model.setup(where, problem, signIn));
  onStatus("failed", problem.status); // the pill says what the screen says
}

// Whether this load of the page is a reload (the tab's link token is used again then only).
let reloaded = (performance.getEntriesByType("navigation")[0] || {}).type === "reload";

/** (Re)start from the link in the fragment: at load, and whenever the fragment changes.
 * `note`: what the setup screen says instead of what is wrong with the link (link.mjs's
 * shape). A link's own token wins; then the person's sign-in, where the broker has one; then
 * the token this browser remembers. */
function start(note) {
  stopSession();
  if (inbox) {
    inbox.stop();
    inbox = null;
  }
  if (notifyButton) {
    notifyButton.stop();
    notifyButton = null;
  }
  const params = takeLink(window.location, window.history, window.sessionStorage, reloaded);
  reloaded = false; // (a later start is a new link, not the reload)
  // Signed in, or not yet and no token remembered from before people signed in here.
  if (auth && !params.token && (auth.signedIn() || !rememberedToken())) {
    startSignedIn(linkTarget(window.location.hash), note);
    return;
  }
  const where = route(params, window.location.search, rememberedToken());
  if (where.mode === "setup") {
    showSetup(where, note && note.title ? note : where.problem, false);
    return;
  }
  const origin = { remembered: where.remembered, signedIn: false };
  notifyButton = createNotifyButton({ token: where.token });
  if (where.mode === "inbox") {
    inbox = createInboxPage({
      token: where.token,
      view,
      openSession: (session) => startSession(session, where.token, origin),
      closeSession: stopSession,
      forget,
    });
    inbox.start();
    return;
  }
  view.showSession(where.session);
  startSession(where.session, where.token, origin);
}

/** Where people sign in: the inbox of the person's sessions, opening the questionnaire a
 * link names (`target`); "Sign in" until they have. */
function startSignedIn(target, note) {
  if (!auth.signedIn()) {
    showSetup({ session: target.session, token: "" }, note && note.title ? note : signInProblem(target), true);
    return;
  }
  const origin = { remembered: false, signedIn: true };
  const token = () => auth.token();
  inbox = createInboxPage({
    token,
    signedIn: true,
    renew: () => auth.renew(),
    who: tokenSubject(auth.token()),
    target,
    view,
    openSession: (session) => startSession(session, token, origin),
    closeSession: stopSession,
    forget,
    signIn,
    signOut,
  });
  inbox.start();
}

/** "Sign in" (again): to the provider, back at the question the link names, if any. */
function signIn() {
  const target = linkTarget(window.location.hash);
  auth.begin(target.session ? target : null).catch((err) => {
    showSetup({ session: target.session, token: "" }, { kind: "provider", title: "Sign-in is not available",
      status: "Signed out", text: "The sign-in service could not be reached (" + err.message + "). Try again in a moment." }, true);
  });
}

function signOut() {
  auth.signOut().finally(() => {
    window.history.replaceState(null, "", window.location.pathname);
    start(SIGNED_OUT);
    announce("You have signed out.");
  });
}

/** The sign-in ended by itself (its refresh was refused): "Sign in" again, where the person was. */
function signInLost() {
  start(SIGN_IN_ENDED);
}

function retryNow() {
  if (connection) connection.retryNow();
  if (inbox) inbox.retryNow();
}

/** Back from the provider, or opened anew: what sign-in there is, then the page. */
async function boot() {
  const settings = await loadSignInSettings();
  if (settings) {
    auth = createSignIn(settings, signInLost);
    const callback = parseCallback(window.location.hash);
    if (callback) {
      try {
        const target = await auth.complete(callback);
        // The code leaves the address bar; the question the link named comes back.
        window.history.replaceState(null, "", window.location.pathname + targetFragment(target));
      } catch (err) {
        window.history.replaceState(null, "", window.location.pathname);
        start({ kind: "sign_in_failed", title: "Sign-in did not finish", status: "Signed out",
          text: "The sign-in service said: " + err.message + ". Sign in again." });
        return;
      }
    } else {
      await auth.resume();
    }
  }
  window.addEventListener("hashchange", () => start());
  start();
}

$("conn-retry").addEventListener("click", retryNow);
window.addEventListener("online", retryNow);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    view.unflagTitle();
    retryNow();
  }
});
boot();
