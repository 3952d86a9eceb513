/* Messages in the corner (toasts) and the screen-reader announcer. */

import { $, h } from "./dom.mjs";

const MAX_TOASTS = 4;
const GAP_PX = 8;

/** Toasts sit in the bottom corner, but above the footer while it is on screen: the
 * footer's line ("Never type passwords…") must never be hidden behind "Answers sent". */
function clearFooter() {
  const box = $("toasts");
  const footer = document.querySelector(".footer");
  if (!box || !footer) return;
  box.style.bottom = "";
  if (!box.children.length) return;
  const top = footer.getBoundingClientRect().top;
  const base = parseFloat(window.getComputedStyle(box).bottom) || 0;
  const over = window.innerHeight - top + GAP_PX;
  if (over > base) box.style.bottom = over + "px";
}

window.addEventListener("scroll", clearFooter, { passive: true });
window.addEventListener("resize", clearFooter);
// A new view changes the page's height (a long question gives way to "Waiting for
// questions"), which brings the footer on screen without any scroll or resize.
new ResizeObserver(() => clearFooter()).observe(document.body);

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
      onclick: () => { node.remove(); clearFooter(); } }));
  box.appendChild(node);
  clearFooter();
  window.setTimeout(() => { node.remove(); clearFooter(); }, ttl || 8000);
}

export function announce(text) {
  const el = $("announcer");
  el.textContent = "";
  // A fresh text node after a tick makes screen readers announce repeats too.
  window.setTimeout(() => { el.textContent = text; }, 30);
}
