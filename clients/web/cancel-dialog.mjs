/* The "Cancel this questionnaire?" dialog: a modal <dialog>, never window.confirm. Which
 * questionnaire it is about is the state's (PageState.cancelFor); this module shows it,
 * hides it, and gives the focus back to the button that opened it. */

import { $ } from "./dom.mjs";

/** `actions.closeCancel()` for "Keep answering", Escape and the backdrop;
 * `actions.confirmCancel()` for the confirmation. */
export function createCancelDialog(actions) {
  const dialog = $("cancel-dialog");
  let opener = null;

  $("cancel-keep").addEventListener("click", () => actions.closeCancel());
  $("cancel-confirm").addEventListener("click", () => actions.confirmCancel());
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) actions.closeCancel(); // a click on the backdrop
  });
  // Escape goes through the state like every other way out, at once: the browser's own
  // handling would tell it only later, with the `close` event.
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      actions.closeCancel();
    }
  });
  dialog.addEventListener("close", () => {
    const back = opener;
    opener = null;
    if (back && document.contains(back)) back.focus();
    if (!dialog.open) actions.cancelDialogClosed(); // however it closed, the state knows
  });

  return {
    open(from) {
      opener = from || null;
      if (typeof dialog.showModal === "function") dialog.showModal(); else dialog.setAttribute("open", "");
      $("cancel-keep").focus();
    },
    close() {
      if (!dialog.open) return;
      if (typeof dialog.close === "function") dialog.close(); else dialog.removeAttribute("open");
    },
    isOpen() {
      return dialog.open;
    },
  };
}
