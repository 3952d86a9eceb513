/* The page's service worker: shows the broker's pushes, and a click brings the person to the
 * session (the rules: sw-logic.js). Served from the page's root so that it controls the page
 * (scope "./"); registered by notify-button.mjs when the person asks for notifications. */
"use strict";

importScripts("sw-logic.js");

const { notificationFor, pickWindow } = self.qbrokerPush;

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  const text = event.data ? event.data.text() : "";
  const { title, options } = notificationFor(text, self.registration.scope);
  event.waitUntil(self.registration.showNotification(title, options));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = (event.notification.data && event.notification.data.url) || self.registration.scope;
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const chosen = pickWindow(windows.map((w) => ({ url: w.url, focused: w.focused })), target, self.registration.scope);
    if (chosen === null) return self.clients.openWindow(target);
    const client = windows[chosen.index];
    if (!chosen.navigate) return client.focus();
    try {
      const moved = await client.navigate(target); // (only a tab this worker controls)
      return (moved || client).focus();
    } catch (_) {
      return self.clients.openWindow(target);
    }
  })());
});
