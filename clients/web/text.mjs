/* Counting and phrasing shared by the state and the view. Pure: no DOM. */

/** Length in code points, the way the broker (Python) counts characters. */
export function charCount(text) {
  return Array.from(text).length;
}

/** `text` trimmed, with a full stop unless it already ends like a sentence. */
export function sentence(text) {
  const t = String(text).trim();
  return /[.!?…:;。！？]["'”’»)\]]*$/.test(t) ? t : t + ".";
}

export function plural(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

/** The rule of a multi question, as the line under its prompt says it. */
export function boundsSentence(min, max) {
  if (max !== null && min === max) return "Choose exactly " + max + ".";
  if (min > 0 && max !== null) return "Choose " + min + " to " + max + ".";
  if (min > 0) return "Choose at least " + min + ".";
  if (max !== null) return "Choose up to " + max + ".";
  return "Choose any that apply.";
}
