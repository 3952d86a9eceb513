/* Who answered, as the page says it: "answered by alice in the terminal". The broker sends
 * it as `answeredBy` ({sub, role, client: {kind, name}}) on the frame that moves on after an
 * answer (docs/protocol.md). Pure: no DOM. */

const PLACES = { tui: "in the terminal", web: "in the browser" };

/** "answered by alice in the terminal", "answered in the browser" (a token that names
 * nobody), "answered by ci with qbroker-bots 2" (a program); null when `by` says nothing. */
export function answeredByPhrase(by) {
  if (!by || typeof by !== "object") return null;
  const sub = typeof by.sub === "string" && by.sub.trim() ? by.sub.trim() : null;
  const client = by.client && typeof by.client === "object" ? by.client : null;
  const name = client && typeof client.name === "string" ? client.name.trim() : "";
  let place = "";
  if (client && Object.prototype.hasOwnProperty.call(PLACES, client.kind)) place = PLACES[client.kind];
  else if (client) place = "with " + (name || "a script");
  const words = ["answered"];
  if (sub) words.push("by " + sub);
  if (place) words.push(place);
  return words.length > 1 ? words.join(" ") : null;
}

/** Whether the answer the broker moved on after is this page's own: it sent one for the
 * step just before. `sent` is {questionnaireId, step} of the last answer it sent (or null). */
export function ownAnswer(sent, questionnaireId, answeredStep) {
  return !!sent && sent.questionnaireId === questionnaireId && sent.step === answeredStep;
}

/** The note over a question another screen moved on to: "Question 1 was answered by alice
 * in the terminal.", or null (nothing said, or it was this page's own answer). */
export function answeredNote(frame, sent) {
  const phrase = answeredByPhrase(frame.answeredBy);
  if (!phrase || frame.index < 1 || ownAnswer(sent, frame.questionnaireId, frame.step - 1)) return null;
  return "Question " + frame.index + " was " + phrase + ".";
}
