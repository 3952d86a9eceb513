/* The screen for a close no retry can fix (refusals.mjs says what it says), shared by the
 * session page and the inbox. */

import { h } from "./dom.mjs";

/** `info`: refusalScreen's; `actions`: {tryAgain(), signIn(), forget()}. */
export function refusalPanel(info, actions) {
  return h("section", { class: "panel panel-center fatal", role: "alert", "aria-labelledby": "fatal-title",
      "data-kind": info.kind },
    h("div", { class: "fatal-icon", "aria-hidden": "true", text: "!" }),
    h("h1", { class: "panel-title", id: "fatal-title", text: info.title }),
    h("p", { class: "panel-text", text: info.text }),
    info.reason ? h("p", { class: "panel-text muted" }, "Server said: ", h("q", { text: info.reason })) : null,
    h("div", { class: "fatal-actions" }, action(info.action, actions),
      info.forget ? h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "forget-token",
        text: "Forget my token", onclick: () => actions.forget() }) : null));
}

function action(kind, actions) {
  if (kind === "retry") {
    return h("button", { type: "button", class: "btn btn-secondary", text: "Try again", onclick: () => actions.tryAgain() });
  }
  if (kind === "signIn") {
    return h("button", { type: "button", class: "btn btn-primary", id: "sign-in", text: "Sign in again",
      onclick: () => actions.signIn() });
  }
  return null;
}
