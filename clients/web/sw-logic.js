/* The service worker's rules (pure; a classic script: sw.js loads it with importScripts, and
 * tests/web/sw-logic.test.mjs runs it in a node:vm context).
 *
 * A push's payload is the broker's {title, body, link, session, questionnaire}
 * (broker/notify/webpush.py). It becomes one notification per session (tag: a newer one
 * replaces the older); a click focuses a tab of the page already open on that session, or
 * navigates one of the page's tabs there, or opens a new one: always a page of this worker's
 * own scope (a link elsewhere is never opened).
 */
"use strict";

(function (root) {
  const FALLBACK_TITLE = "An agent is waiting for your answer";

  /** showNotification's arguments for a push's text (a payload that is not ours still shows
   * a notification: browsers require one for every push, and penalise pages that skip it). */
  function notificationFor(text, scope) {
    let data = null;
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = null;
    }
    if (!data || typeof data !== "object") data = {};
    const session = typeof data.session === "string" ? data.session : "";
    const title = typeof data.title === "string" && data.title ? data.title : FALLBACK_TITLE;
    const body = typeof data.body === "string" ? data.body : "";
    return {
      title,
      options: {
        body,
        tag: session ? `qbroker-session-${session}` : "qbroker",
        renotify: true,
        requireInteraction: true,
        data: { url: clickTarget(data, scope), session },
      },
    };
  }

  /** Where a click goes: the payload's link when it is a page of this scope, else the scope
   * with the session in the fragment, else the scope itself. */
  function clickTarget(data, scope) {
    const base = new URL(scope);
    if (data && typeof data.link === "string") {
      try {
        const link = new URL(data.link, base);
        if (link.origin === base.origin && link.pathname.startsWith(base.pathname)) return link.href;
      } catch (_) {
        // not a URL: fall through
      }
    }
    if (data && typeof data.session === "string" && data.session) {
      return `${base.origin}${base.pathname}#session=${encodeURIComponent(data.session)}`;
    }
    return base.href;
  }

  /** Which open tab to use for `target`: one showing that very page, else any tab of the
   * scope (navigated there), else none (open a new window). `windows`: [{url, focused}]. */
  function pickWindow(windows, target, scope) {
    const exact = windows.find((w) => w.url === target);
    if (exact) return { index: windows.indexOf(exact), navigate: false };
    const base = new URL(scope);
    const ours = windows.findIndex((w) => {
      try {
        const url = new URL(w.url);
        return url.origin === base.origin && url.pathname.startsWith(base.pathname);
      } catch (_) {
        return false;
      }
    });
    return ours >= 0 ? { index: ours, navigate: true } : null;
  }

  root.qbrokerPush = { notificationFor, clickTarget, pickWindow };
})(typeof self !== "undefined" ? self : globalThis);
