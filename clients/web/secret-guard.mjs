/* The stop before a text that looks like a credential is sent: which texts the person has
 * confirmed, and the stop on screen. Pure: no DOM. The rules are secret-shapes.mjs's, the
 * broker's own (docs/secrets-guard.md); the broker refuses such a text unless the frame
 * carries `confirmedNotSecret: true`, which the page adds once the person chose "Send anyway".
 *
 * A text is {kind: "other" | "clarify", text} (trimmed, as the frame carries it). */

import { looksLikeSecret } from "./secret-shapes.mjs";

export const CONFIRM_FIELD = "confirmedNotSecret";

const WHAT = { other: "Your answer", clarify: "Your question for the agent" };

export class SecretGuard {
  constructor() {
    this.confirmed = new Set(); // texts the person chose to send anyway, or the broker already holds
    this.stop = null; // {kind, text, rule, retry}: the stop on screen
  }

  /** The first of `texts` that looks like a secret and is not confirmed: {kind, text, rule}, or null. */
  firstUnconfirmed(texts) {
    for (const t of texts) {
      if (!t.text || this.confirmed.has(t.text)) continue;
      const rule = looksLikeSecret(t.text);
      if (rule) return { kind: t.kind, text: t.text, rule };
    }
    return null;
  }

  /** True when one of `texts` (shape-checked already) was confirmed: the frame says so. */
  vouchesFor(texts) {
    return texts.some((t) => t.text && this.confirmed.has(t.text));
  }

  /** A text the broker sent back (a draft it stored): it was checked, or confirmed, already. */
  accept(text) {
    if (text && looksLikeSecret(text)) this.confirmed.add(text);
  }

  /** Before `frame` goes: true, and the stop is up, when one of its `texts` looks like a
   * secret the person has not confirmed (`retry` names what "Send anyway" does again);
   * otherwise false, and the frame says whether they confirmed one of them. */
  stops(frame, texts, retry) {
    if (this.holdsBack(frame, texts)) {
      this.stop = { ...this.firstUnconfirmed(texts), retry };
      return true;
    }
    return false;
  }

  /** `stops` without the stop: a draft is simply not sent until the person confirms. */
  holdsBack(frame, texts) {
    if (this.firstUnconfirmed(texts)) return true;
    if (this.vouchesFor(texts)) frame[CONFIRM_FIELD] = true;
    return false;
  }

  /** "Send anyway": the text is confirmed, the stop ends; returns it (for its `retry`). */
  confirm() {
    const stop = this.stop;
    this.stop = null;
    if (stop) this.confirmed.add(stop.text);
    return stop;
  }

  /** "Edit", or the question went away: the stop ends; returns it. */
  drop() {
    const stop = this.stop;
    this.stop = null;
    return stop;
  }

  /** A new question: what was confirmed was about the last one. */
  reset() {
    this.confirmed.clear();
    this.stop = null;
  }
}

/** What the stop says: {title, text}. */
export function stopMessage(stop) {
  return {
    title: "This looks like a secret",
    text: WHAT[stop.kind] + " looks like " + stop.rule.sentence + ". Whatever you send goes into the agent's " +
      "context, and agents should never be given passwords, keys or tokens. Send it only if it is not a secret.",
  };
}

/** The line under the Other field while its text is held back from the broker. */
export const HELD_DRAFT = "Not saved: this looks like a secret, so it is sent only if you choose “Send anyway”.";
