/* The page as the inbox: the inbox socket, the list on screen, answering one questionnaire in
 * place and coming back, the tab's count, notifications, and remembering the token.
 *
 *   list --choose--> the session's questionnaire view (app.mjs runs it, with the inbox bar)
 *        <--its `closed` (or `idle`): the next waiting one offered--
 *        <--"Back to the inbox": the questionnaire stays open--
 *
 * The inbox socket stays open all along, so the count in the title and the bar stays live
 * while the person answers. What is decided here is glue; the rules are inbox.mjs's.
 */

import { createConnection } from "./connection.mjs";
import { $ } from "./dom.mjs";
import {
  arrivalAnnouncement, arrivalNotification, inboxTitle, InboxState, itemKey,
  notificationControl, offerAnnouncement, WAITING,
} from "./inbox.mjs";
import { createInboxView } from "./inbox-view.mjs";
import { inboxWebsocketUrl } from "./link.mjs";
import { errorToast } from "./messages.mjs";
import { announce, toast } from "./notices.mjs";
import { refusalScreen } from "./refusals.mjs";
import { canRemember, rememberedToken, rememberToken } from "./token-memory.mjs";

const AGES_MS = 30000; // "3 min ago" is redrawn this often while the list is on screen

/**
 * token: the client token (a pattern such as alice:* or *, for the inbox socket and every
 *   session socket opened from it).
 * view: the page's view (view.mjs): the top bar and the tab's title.
 * openSession(sessionId), closeSession(): app.mjs's, to answer in place.
 * forget(), signIn(): app.mjs's "Forget my token" and "Sign in again".
 * signedIn: the token came from signing in (then `token` is a function: it is refreshed);
 *   `who` is the person signed in, `signOut()` app.mjs's "Sign out", `renew()` a fresh token.
 * target: {session, questionnaire} a link named: opened as soon as the list has it.
 */
export function createInboxPage({
  token, signedIn = false, renew = null, who = "", target = null, view, openSession, closeSession, forget, signIn,
  signOut,
}) {
  const state = new InboxState();
  let fatal = null;
  let asking = false; // the browser's permission prompt is open
  let status = { state: "connecting", text: "Connecting…", detail: "" };
  let agesTimer = null;

  const inboxView = createInboxView({
    choose, answerNext, askNotifications, remember, forget, tryAgain, signIn, signOut,
  });
  let pending = target && target.session ? target : null; // the link's questionnaire, until opened
  $("inbox-back").onclick = back;

  const connection = createConnection({
    url: inboxWebsocketUrl(window.location.href),
    token,
    signedIn,
    renew,
    isWelcome: (frame) => frame.type === "welcome" || frame.type === "inbox",
    onStatus: (next, text, detail) => {
      status = { state: next, text, detail };
      if (!state.answering) view.showConnection(null, next, text, detail);
    },
    onFrame,
    onClose,
    onUnreadable: () => toast({ kind: "error", title: "Unreadable message",
      text: "The broker sent something this page could not parse." }),
  });

  function permission() {
    return typeof Notification === "function" ? Notification.permission : "unsupported";
  }

  function settings() {
    const stored = rememberedToken();
    return { notify: notificationControl(permission()), asking, remembered: !!stored && stored === token,
      storage: canRemember(), signedIn, who };
  }

  function othersWaiting() {
    const open = state.answering ? state.get(state.answering) : null;
    return state.waitingCount() - (open && open.status === WAITING ? 1 : 0);
  }

  /** The list, or the bar over the questionnaire being answered, as the state now is. */
  function refresh() {
    view.retitle();
    if (state.answering) inboxView.showBar(true, othersWaiting());
    else inboxView.render(state, Date.now(), settings(), fatal);
  }

  function onFrame(frame) {
    if (frame.type === "error") toast(errorToast(frame));
    const out = state.receive(frame);
    if (out.unknown !== null && window.console) console.warn("qbroker: ignoring unknown inbox frame type", out.unknown);
    if (!out.changed) return;
    fatal = null;
    refresh();
    if (pending && state.loaded) openTarget();
    if (!out.arrived.length) return;
    if (!state.answering) announce(arrivalAnnouncement(out.arrived, state.waitingCount()));
    notify(out.arrived);
    view.flagTitle();
  }

  function onClose(code, reason) {
    const screen = refusalScreen(code, reason, { remembered: settings().remembered, signedIn });
    if (!screen) return;
    fatal = screen;
    view.showOther("qbroker · " + screen.title);
    if (!state.answering) refresh();
  }

  /** The questionnaire a link named (else the first one waiting in its session), once. */
  function openTarget() {
    const wanted = pending;
    pending = null;
    if (state.answering) return;
    const exact = state.get(itemKey(wanted.session, wanted.questionnaire));
    const inSession = state.list().find((item) => item.sessionId === wanted.session && item.status === WAITING);
    const item = exact || inSession;
    if (item) choose(itemKey(item.sessionId, item.questionnaireId));
    else announce("The question that link named is no longer waiting for you.");
  }

  /** Only in a background tab, only with the person's permission, only the agent's text. */
  function notify(arrived) {
    if (!document.hidden || permission() !== "granted") return;
    const note = arrivalNotification(arrived, state.waitingCount());
    try {
      const shown = new Notification(note.title, { body: note.body, tag: note.tag, renotify: true });
      shown.onclick = () => {
        window.focus();
        shown.close();
        if (note.key && state.get(note.key) && !state.answering) choose(note.key);
      };
    } catch (e) {
      // Some browsers (Chrome on Android) show notifications only from a service worker.
    }
  }

  /** From the button only, never on load: the browser asks the person once. */
  function askNotifications() {
    if (asking || permission() !== "default") return;
    asking = true;
    refresh();
    const done = () => {
      if (!asking) return; // both the callback and the promise report it
      asking = false;
      refresh();
      announce(notificationControl(permission()).text);
      const text = $("notify-text");
      if (text && document.activeElement === document.body) {
        text.setAttribute("tabindex", "-1");
        text.focus();
      }
    };
    try {
      const asked = Notification.requestPermission(done);
      if (asked && typeof asked.then === "function") asked.then(done, done);
    } catch (e) {
      done();
    }
  }

  function remember() {
    if (!rememberToken(token)) {
      toast({ kind: "error", title: "Not remembered", text: "This browser does not let the page keep anything." });
      return;
    }
    refresh();
    announce("This browser now remembers your token.");
    $("forget-token").focus();
  }

  function tryAgain() {
    fatal = null;
    showList(null);
    connection.restart();
  }

  function startAges() {
    if (agesTimer === null) agesTimer = window.setInterval(() => { if (!state.answering) refresh(); }, AGES_MS);
  }

  function stopAges() {
    if (agesTimer !== null) window.clearInterval(agesTimer);
    agesTimer = null;
  }

  function showList(focusKey) {
    inboxView.showBar(false, 0);
    view.showSession(null);
    view.showOther(fatal ? "qbroker · " + fatal.title : "qbroker");
    refresh(); // the list replaces the questionnaire before the top bar speaks of the inbox's socket
    view.showConnection(null, status.state, status.text, status.detail);
    inboxView.focus(focusKey);
    startAges();
  }

  function choose(key) {
    const item = state.get(key);
    if (!item || state.answering) return;
    state.open(key);
    stopAges();
    inboxView.showBar(true, othersWaiting());
    view.showSession(item.sessionId, item.askedBy || null);
    openSession(item.sessionId);
  }

  function answerNext() {
    const next = state.offered();
    if (next) choose(itemKey(next.sessionId, next.questionnaireId));
  }

  /** "Back to the inbox": the questionnaire stays open, the person comes back to it later. */
  function back() {
    const key = state.back();
    if (key === null) return;
    closeSession();
    showList(key);
  }

  return {
    start() {
      showList(null);
      connection.connect();
    },

    stop() {
      stopAges();
      connection.stop();
      inboxView.showBar(false, 0);
    },

    /** The tab's title for a screen titled `title`: the count of what waits in front. */
    title(title) {
      return inboxTitle(state.waitingCount(), title);
    },

    answering() {
      return state.answering !== null;
    },

    /** A frame of the session being answered: its `closed` (or an `idle`: nothing open any
     * more) ends it, and the list comes back with the next one offered. */
    sessionFrame(frame) {
      if (!state.answering || (frame.type !== "closed" && frame.type !== "idle")) return;
      state.ended(frame.type === "closed" ? frame.status : null);
      closeSession();
      showList(null);
      announce(offerAnnouncement(state.offer()));
    },

    retryNow() {
      connection.retryNow();
    },
  };
}
