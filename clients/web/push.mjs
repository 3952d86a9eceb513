/* Web push, the page's side (pure): "Notify me on this device" and what it posts.
 *
 * The browser glue is notify-button.mjs; the service worker is sw.js (with sw-logic.js).
 * Here: the VAPID key as pushManager.subscribe wants it, what the button says in each state,
 * and what the broker's answers mean (docs/protocol.md, "Browser push subscriptions").
 */

/** The broker's VAPID public key (base64url, no padding) as the applicationServerKey bytes. */
export function keyBytes(base64url) {
  if (typeof base64url !== "string" || !/^[A-Za-z0-9_-]+=*$/.test(base64url)) {
    throw new Error("the push key is not base64url");
  }
  const base64 = base64url.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
  const binary = atob(padded);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  if (bytes.length !== 65 || bytes[0] !== 4) throw new Error("the push key is not a P-256 public key");
  return bytes;
}

function base64urlText(part) {
  const base64 = part.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return decodeURIComponent(Array.from(binary, (c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0")).join(""));
}

/** Who a token is for, as a string: its claims but those that change from one token of the
 * same holder and scope to the next (exp, iat, nbf, jti). Two links for the same person and
 * session give the same holder; a link with someone else's token does not. "" when the
 * token cannot be read. (Read, not checked: the broker checks the token.) */
export function tokenHolder(token) {
  try {
    const claims = JSON.parse(base64urlText(String(token).split(".")[1] || ""));
    if (!claims || typeof claims !== "object") return "";
    const kept = Object.keys(claims).filter((k) => !["exp", "iat", "nbf", "jti"].includes(k)).sort();
    return JSON.stringify(kept.map((k) => [k, claims[k]]));
  } catch (e) {
    return "";
  }
}

/** Whether the page may post this device's subscription again with `token` at load: only
 * for the holder it was made for (`madeFor`, what tokenHolder said then). A link with
 * another holder's token must not move the device's notifications under that token: the
 * person is offered the button instead, and a click moves it. */
export function mayRepost(madeFor, token) {
  const holder = tokenHolder(token);
  return holder !== "" && holder === madeFor;
}

/** Whether this browser can take pushes at all: the APIs exist and the page is a secure
 * context (HTTPS or localhost). `env`: { serviceWorker, pushManager, notification, secure }. */
export function pushSupport(env) {
  if (!env.secure) return { ok: false, why: "Notifications need this page over HTTPS." };
  if (!env.serviceWorker || !env.pushManager || !env.notification) {
    return { ok: false, why: "This browser cannot show notifications from a web page." };
  }
  return { ok: true, why: null };
}

/** What the button says and does, from: the permission ("default" | "granted" | "denied"),
 * whether this device is subscribed here, and whether a request is under way. */
export function buttonState({ permission, subscribed, busy }) {
  if (busy) return { label: "Working…", action: null, disabled: true, title: "" };
  if (permission === "denied") {
    return {
      label: "Notifications blocked",
      action: null,
      disabled: true,
      title: "This browser blocks notifications from this page: allow them in the site settings.",
    };
  }
  if (subscribed) {
    return { label: "Stop notifications on this device", action: "unsubscribe", disabled: false, title: "" };
  }
  return {
    label: "Notify me on this device",
    action: "subscribe",
    disabled: false,
    title: "Get a notification here when an agent waits for your answer.",
  };
}

/** The body POST /v1/push/subscriptions takes: the subscription's JSON, nothing else. */
export function subscriptionBody(subscriptionJson) {
  const keys = subscriptionJson && subscriptionJson.keys;
  if (!subscriptionJson || typeof subscriptionJson.endpoint !== "string" || !keys) {
    throw new Error("the browser gave no usable subscription");
  }
  return {
    endpoint: subscriptionJson.endpoint,
    expirationTime: subscriptionJson.expirationTime ?? null,
    keys: { p256dh: keys.p256dh, auth: keys.auth },
  };
}

/** What the page tells the person after the broker answered a subscription (status, body). */
export function subscribeOutcome(status, body) {
  if (status === 201) return { ok: true, text: "This device will be notified when an agent waits for you." };
  const message = body && body.error && typeof body.error.message === "string"
    ? body.error.message.replace(/^push: /, "") : "";
  if (status === 401) return { ok: false, text: "Your token was refused; open a fresh link." };
  if (status === 404) return { ok: false, text: "This broker sends no notifications." };
  return { ok: false, text: message ? `The broker refused: ${message}` : `The broker answered ${status}.` };
}
