/* "Notify me on this device" (the browser's side; the rules are push.mjs's).
 *
 * Shown in the top bar, over the questionnaire and over the inbox, where the broker sends
 * pushes (GET /v1/push/key answers) and the browser can take them. A click asks the
 * permission (from the click: browsers allow the prompt only then), registers the service
 * worker (sw.js, scope: the page), subscribes with the broker's key and posts the
 * subscription with the page's token. Already subscribed: the page posts it again at load
 * with its current token (that keeps it as long as the token) only when that token is for
 * the holder the subscription was made for (kept in localStorage; push.mjs's mayRepost), and
 * the button withdraws it; a link with another holder's token shows the button instead.
 */

import { $ } from "./dom.mjs";
import { toast } from "./notices.mjs";
import {
  buttonState, keyBytes, mayRepost, pushSupport, subscribeOutcome, subscriptionBody, tokenHolder,
} from "./push.mjs";

const PAGE = new URL(".", window.location.href); // the page's folder: its root, or a proxy's prefix
const API = new URL("v1/push/", PAGE);

async function brokerKey() {
  try {
    const response = await fetch(new URL("key", API), { cache: "no-cache" });
    if (!response.ok) return null;
    const body = await response.json();
    return typeof body.publicKey === "string" ? body.publicKey : null;
  } catch (_) {
    return null;
  }
}

const HOLDER_KEY = "qbroker.push-holder"; // who this device's subscription was made for

function madeFor() {
  try {
    return window.localStorage.getItem(HOLDER_KEY) || "";
  } catch (_) {
    return "";
  }
}

function keepMadeFor(holder) {
  try {
    if (holder) window.localStorage.setItem(HOLDER_KEY, holder);
    else window.localStorage.removeItem(HOLDER_KEY);
  } catch (_) { /* storage refused: the page will offer the button again */ }
}

async function send(method, token, body) {
  const response = await fetch(new URL("subscriptions", API), {
    method,
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  let answer = null;
  try {
    answer = await response.json();
  } catch (_) {
    answer = null;
  }
  return { status: response.status, body: answer };
}

/** Offer push for `token` (the page's client token); returns { stop } for when the page
 * moves on to another token. */
export function createNotifyButton({ token }) {
  const button = $("push-toggle");
  let stopped = false;
  let key = null;
  let subscription = null;
  let busy = false;

  const support = pushSupport({
    serviceWorker: "serviceWorker" in navigator,
    pushManager: "PushManager" in window,
    notification: "Notification" in window,
    secure: window.isSecureContext,
  });

  function render() {
    const state = buttonState({ permission: Notification.permission, subscribed: subscription !== null, busy });
    button.textContent = state.label;
    button.disabled = state.disabled;
    button.title = state.title;
    button.dataset.action = state.action || "";
    button.hidden = stopped;
  }

  async function registration() {
    const registered = await navigator.serviceWorker.register(new URL("sw.js", PAGE), { scope: PAGE.pathname });
    return registered.active ? registered : navigator.serviceWorker.ready;
  }

  async function subscribe() {
    // First, from the click itself: the permission prompt needs the person's gesture.
    const permission = await Notification.requestPermission();
    if (permission !== "granted") {
      render();
      return;
    }
    const ready = await registration();
    const made = await ready.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
    const answer = await send("POST", token, subscriptionBody(made.toJSON()));
    const outcome = subscribeOutcome(answer.status, answer.body);
    if (outcome.ok) {
      subscription = made;
      keepMadeFor(tokenHolder(token));
    }
    toast({ kind: outcome.ok ? "success" : "error", title: outcome.ok ? "Notifications on" : "Not subscribed", text: outcome.text });
  }

  async function unsubscribe() {
    const gone = subscription;
    subscription = null;
    await send("DELETE", token, { endpoint: gone.endpoint });
    await gone.unsubscribe();
    keepMadeFor("");
    toast({ kind: "info", title: "Notifications off", text: "This device will not be notified any more." });
  }

  async function onClick() {
    if (busy || stopped) return;
    const action = button.dataset.action;
    busy = true;
    render();
    try {
      if (action === "subscribe") await subscribe();
      else if (action === "unsubscribe") await unsubscribe();
    } catch (error) {
      toast({ kind: "error", title: "Notifications", text: `This browser could not subscribe: ${error.message}` });
    } finally {
      busy = false;
      if (!stopped) render();
    }
  }

  async function begin() {
    if (!support.ok) return;
    key = await brokerKey();
    if (key === null || stopped) return; // no webpush route: no button
    const existing = await navigator.serviceWorker.getRegistration(PAGE.href);
    const current = existing ? await existing.pushManager.getSubscription() : null;
    if (current !== null && Notification.permission === "granted" && mayRepost(madeFor(), token)) {
      // Posted again with this page's token (the same holder's): kept as long as the token is.
      const answer = await send("POST", token, subscriptionBody(current.toJSON()));
      if (answer.status === 201) subscription = current;
    }
    if (stopped) return;
    button.addEventListener("click", onClick);
    render();
  }

  begin().catch(() => {});
  return {
    stop() {
      stopped = true;
      button.hidden = true;
      button.removeEventListener("click", onClick);
    },
  };
}
