/* Messages in the corner (toasts) and the screen-reader announcer. */

import { $, h } from "./dom.mjs";

const MAX_TOASTS = 4;

/** {kind, title, text, ttl, code, hideCode}: `code` is shown (small) unless `hideCode`, and
 * always kept in data-code. */
export function toast({ kind, title, text, ttl, code, hideCode }) {
  const box = $("toasts");
  while (box.children.length >= MAX_TOASTS) box.removeChild(box.firstChild);
  const node = h("div", { class: "toast toast-" + kind, role: kind === "error" ? "alert" : "status",
      "data-code": code || null },
    h("div", { class: "toast-body" },
      h("strong", { class: "toast-title", text: title }),
      text ? h("span", { class: "toast-text", text }) : null,
      code && !hideCode ? h("span", { class: "toast-code", text: code }) : null),
    h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss message", text: "×",
      onclick: () => node.remove() }));
  box.appendChild(node);
  window.setTimeout(() => node.remove(), ttl || 8000);
}

export function announce(text) {
  const el = $("announcer");
  el.textContent = "";
  // A fresh text node after a tick makes screen readers announce repeats too.
  window.setTimeout(() => { el.textContent = text; }, 30);
}
