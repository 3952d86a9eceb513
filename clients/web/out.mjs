/* What every input of the page's state (state.mjs) returns: an Out, which the page (app.mjs)
 * carries out in its order. Pure: a record and the two rules for filling it.
 *
 *   send        frames for the broker, in order (the caller hands back any it could not
 *               send with `unsent(frame)`)
 *   refresh     "question": bring the question on screen in line with `answer` in place;
 *               "draft": only the line that says whether the draft is saved; null: nothing
 *   toasts      messages for the corner ({kind, title, text, ttl, code, hideCode})
 *   announce    a sentence for screen readers
 *   focus       the id of the element to focus once the screen is up to date
 *   fieldError  {kind: "other" | "clarify", text}: under that field, which gets the focus
 *   hint        a new text for the line next to Continue
 *   dialog      "open" | "close": the cancel dialog
 *   secret      "open" | "close": the stop before a text that looks like a secret
 *               (secret-guard.mjs: `guard.stop` is what it is about)
 *   newQuestion true when a question (not an update of the one shown) came in
 *   unknown     the type of a frame this page does not know
 */

const REFRESH_RANK = { draft: 1, question: 2 };

/** An Out that asks for nothing. */
export function newOut() {
  return {
    send: [], refresh: null, toasts: [], announce: null, focus: null, fieldError: null, hint: null,
    dialog: null, secret: null, newQuestion: false, unknown: null,
  };
}

/** Ask for a refresh of `level`, unless a larger one ("question" covers "draft") is asked already. */
export function refresh(out, level) {
  if (!out.refresh || REFRESH_RANK[level] > REFRESH_RANK[out.refresh]) out.refresh = level;
}

/** A toast for the corner (8 s unless `ttl` says otherwise). */
export function toast(kind, title, text, ttl) {
  return { kind, title, text: text || null, ttl: ttl || 8000, code: null, hideCode: false };
}
