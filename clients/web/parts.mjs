/* Pieces shared by the question and the waiting screens. */

import { h } from "./dom.mjs";
import { ENDED_UNSEEN, ENDED_UNSEEN_WHY } from "./messages.mjs";

/** "Question 2 of 5", a bar, and one chip per question. */
export function progressNode(frame) {
  const progress = frame.progress || [];
  const items = progress.map((p) => {
    const state = p.state;
    const stateText = state === "answered" ? "answered" : state === "current" ? "current question" : "not answered yet";
    return h("li", { class: "step step-" + state, "aria-current": state === "current" ? "step" : null, title: p.label },
      h("span", { class: "step-icon", "aria-hidden": "true", text: state === "answered" ? "✓" : "" }),
      h("span", { class: "step-label", text: p.label }),
      h("span", { class: "sr-only", text: " (" + stateText + ")" }));
  });
  const done = progress.filter((p) => p.state === "answered").length;
  const total = frame.total || items.length || 1;
  const bar = h("span", { class: "progress-fill" });
  bar.style.width = Math.round(100 * done / total) + "%";
  return h("nav", { class: "progress", "aria-label": "Progress" },
    h("div", { class: "progress-head" },
      h("span", { class: "progress-count", id: "progress-count", text: "Question " + (frame.index + 1) + " of " + total }),
      h("span", { class: "progress-done", text: done + " answered" })),
    h("div", { class: "progress-bar", "aria-hidden": "true" }, bar),
    h("ol", { class: "steps" }, items));
}

/** Shown while the connection is lost (see updateOfflineBanner). */
export function offlineBanner() {
  return h("div", { class: "offline-banner", id: "offline-banner", role: "status", hidden: true },
    h("strong", { text: "Connection lost." }),
    " Reconnecting by itself. Answers you already sent are saved by the broker; " +
    "nothing you do here is sent until the connection is back.");
}

/** Above a questionnaire shown right after a reconnect, when the one before ended unseen. */
export function endedNoteNode(model, shownId, onDismiss) {
  if (!model.endedNoteFor(shownId)) return null;
  const node = h("div", { class: "ended-note", role: "note" },
    h("p", { class: "ended-note-text" },
      h("strong", { text: ENDED_UNSEEN }), " " + ENDED_UNSEEN_WHY + " The questions below are another questionnaire."),
    h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss this note", text: "×",
      onclick: () => { onDismiss(); node.remove(); } }));
  return node;
}
