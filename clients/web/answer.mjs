/* The answer being made to the question on screen: toggles, the Other text, the
 * clarification being typed, and the question's rules about them. Pure: no DOM. */

import { boundsSentence, charCount, plural } from "./text.mjs";

export const OTHER_MAX = 2000;
export const CLARIFY_MAX = 1000;

/** A draft as a comparable key: the toggles in any order, and the Other text. */
export function draftKey(draft) {
  const ids = draft && draft.selectedOptionIds ? draft.selectedOptionIds.slice().sort() : [];
  return JSON.stringify([ids, (draft && draft.other) || ""]);
}

export class Answer {
  constructor(question) {
    this.question = question;
    this.selected = new Set();
    this.otherOpen = false;
    this.otherText = "";
    this.clarifyOpen = false;
    this.clarifyText = "";
  }

  get multi() {
    return !!this.question && this.question.type === "multi";
  }

  toggle(optionId) {
    if (this.selected.has(optionId)) this.selected.delete(optionId); else this.selected.add(optionId);
  }

  /** Take a draft from the broker. `keepText`: the Other field's text stays as it is (the
   * person is typing in it). */
  adopt(draft, keepText) {
    this.selected = new Set((draft && draft.selectedOptionIds) || []);
    const other = draft && typeof draft.other === "string" ? draft.other : "";
    // Other text over the limit was never sent (no draft carries it): it lives only here,
    // and an echo must not replace or hide it.
    const keep = keepText || this.otherTooLong();
    if (other) {
      this.otherOpen = true;
      if (!keep) this.otherText = other;
    } else if (!keep && this.otherOpen && this.otherText.trim()) {
      this.otherOpen = false; // removed elsewhere (another tab)
    }
  }

  /** The draft as the broker would store it: toggles in the question's order, Other text
   * only while it is open and fits. */
  draft() {
    const draft = { selectedOptionIds: this.question.options.map((o) => o.id).filter((id) => this.selected.has(id)) };
    const other = this.otherText.trim();
    if (this.otherOpen && other && charCount(other) <= OTHER_MAX) draft.other = other;
    return draft;
  }

  /** Anything chosen or typed (what "Selections saved" is about). */
  any() {
    return this.selected.size > 0 || !!(this.otherOpen && this.otherText.trim());
  }

  /** Other is open with more text than the broker takes. */
  otherTooLong() {
    return this.otherOpen && charCount(this.otherText.trim()) > OTHER_MAX;
  }

  /** Other counts as a selection once it is open and has text; an empty field is not one. */
  otherSelected() {
    return !!(this.otherOpen && this.otherText.trim());
  }

  selectionCount() {
    return this.selected.size + (this.otherSelected() ? 1 : 0);
  }

  bounds() {
    const q = this.question;
    return {
      min: typeof q.minSelections === "number" ? q.minSelections : 0,
      max: typeof q.maxSelections === "number" ? q.maxSelections : null,
    };
  }

  /** The line under the prompt. */
  rule() {
    if (!this.multi) return "Choose one.";
    const b = this.bounds();
    return boundsSentence(b.min, b.max) + (this.question.allowOther ? " Other counts as one." : "");
  }

  /** Why Continue is not possible yet, or "" when it is. */
  continueProblem() {
    const b = this.bounds();
    const n = this.selectionCount();
    if (this.otherTooLong()) return "Your own answer is longer than " + OTHER_MAX + " characters.";
    if (n < b.min) {
      return "Select " + plural(b.min - n, "more option", "more options") + " to continue (at least " + b.min + ").";
    }
    if (b.max !== null && n > b.max) {
      return "Deselect " + plural(n - b.max, "option", "options") + " to continue (at most " + b.max + ").";
    }
    return "";
  }

  /** Why the typed Other text cannot be the answer to a single question, or "". */
  otherProblem() {
    const text = this.otherText.trim();
    if (!text) return "Type your answer first, or pick one of the options.";
    if (charCount(text) > OTHER_MAX) return "Please shorten your answer to " + OTHER_MAX + " characters.";
    return "";
  }

  /** Why the clarification cannot be sent, or "". */
  clarifyProblem() {
    const text = this.clarifyText.trim();
    if (!text) return "Type your question for the agent first.";
    if (charCount(text) > CLARIFY_MAX) return "Please shorten your question to " + CLARIFY_MAX + " characters.";
    // The clarification carries the draft, and a draft cannot carry this text.
    if (this.otherTooLong()) {
      return "First shorten your own answer (Other) to " + OTHER_MAX +
        " characters: the question comes back with it after the agent's reply.";
    }
    return "";
  }
}
