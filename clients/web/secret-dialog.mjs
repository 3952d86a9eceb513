/* The stop before a text that looks like a secret: a modal alert dialog with "Edit" (the
 * focus starts there, and Escape means it) and "Send anyway". What it is about is the
 * state's (PageState.guard.stop); this module shows it and hides it. */

import { $ } from "./dom.mjs";
import { stopMessage } from "./secret-guard.mjs";

/** `actions.editSecret()` for "Edit", Escape and the backdrop; `actions.sendAnyway()`. */
export function createSecretDialog(actions) {
  const dialog = $("secret-dialog");

  $("secret-edit").addEventListener("click", () => actions.editSecret());
  $("secret-send").addEventListener("click", () => actions.sendAnyway());
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) actions.editSecret(); // a click on the backdrop
  });
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      actions.editSecret();
    }
  });
  dialog.addEventListener("close", () => {
    if (!dialog.open) actions.secretDialogClosed(); // however it closed, the state knows
  });

  return {
    /** Show `stop` (or show it anew: "Send anyway" may stop at the frame's next text). */
    open(stop) {
      const message = stopMessage(stop);
      $("secret-title").textContent = message.title;
      $("secret-desc").textContent = message.text;
      dialog.setAttribute("data-rule", stop.rule.code);
      if (!dialog.open) {
        if (typeof dialog.showModal === "function") dialog.showModal(); else dialog.setAttribute("open", "");
      }
      $("secret-edit").focus();
    },
    close() {
      if (!dialog.open) return;
      if (typeof dialog.close === "function") dialog.close(); else dialog.removeAttribute("open");
    },
  };
}
