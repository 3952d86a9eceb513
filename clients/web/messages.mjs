/* What the page says about what the broker tells it: error codes, how a questionnaire
 * ended. Pure: no DOM. */

import { RULES } from "./secret-shapes.mjs";
import { sentence } from "./text.mjs";

function capitalized(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

const ERROR_TITLES = {
  stale_step: "That question had already moved on",
  stale_revision: "That question had already moved on",
  invalid_answer: "That answer was not accepted",
  unknown_option: "That option is not part of this question",
  other_not_allowed: "This question does not take a custom answer",
  below_min_selections: "Too few selections",
  above_max_selections: "Too many selections",
  text_too_long: "That text is too long",
  looks_like_secret: "Not sent: it looks like a secret",
  bad_frame: "The broker could not read a message from this page",
  unauthorized: "Not authorised",
  forbidden: "Not allowed",
  rate_limited: "Slow down a little",
  store_unavailable: "The broker's storage is unavailable",
  shutting_down: "The broker is shutting down",
  unknown_questionnaire: "That questionnaire no longer exists",
  questionnaire_closed: "That questionnaire is already closed",
};

// Refusals that only mean "someone else got there first": the broker's wording ("answer
// names step 0; the current step is 1") means nothing to the person, and the fresh state
// that follows the error is the real answer.
export const RACE_TEXT = "Another window answered it first, or the agent changed the questionnaire. " +
  "Here is where things stand now.";
const RACE_ERRORS = new Set(["stale_step", "stale_revision"]);

// The questionnaire on screen is gone after a reconnect, and no `closed` frame said how.
export const ENDED_UNSEEN = "The questionnaire you were answering ended while this page was disconnected.";
export const ENDED_UNSEEN_WHY = "This page could not see how: the agent may have withdrawn it, or it " +
  "stopped waiting for this page to come back. Ask the agent if you need to know.";

export const NOT_CONNECTED = "Nothing was sent. The page reconnects by itself; answers you already sent " +
  "are saved by the broker.";

/** A toast for an `error` frame: {kind, title, text, ttl, code, hideCode}. */
export function errorToast(frame) {
  const code = String(frame.code || "error");
  const title = Object.prototype.hasOwnProperty.call(ERROR_TITLES, code) ? ERROR_TITLES[code] : "Something went wrong";
  if (RACE_ERRORS.has(code)) return { kind: "info", title, text: RACE_TEXT, ttl: 8000, code, hideCode: true };
  if (code === "looks_like_secret") return { kind: "error", title, text: secretRefusal(frame), ttl: 12000, code, hideCode: true };
  return { kind: "error", title, text: frame.message || null, ttl: 12000, code, hideCode: false };
}

/** The broker held back a text this page did not stop (its message is for programs). */
function secretRefusal(frame) {
  const rule = RULES.find((r) => r.code === frame.rule);
  return "The broker held it back" + (rule ? ": it looks like " + rule.sentence : "") +
    ". Nothing was sent; agents should never be given passwords, keys or tokens.";
}

/** A toast for a `closed` frame; `answeredBy`: "answered by alice in the terminal" when
 * another screen gave the last answer (who.mjs), else null. */
export function closedToast(frame, answeredBy = null) {
  const reason = frame.reason;
  if (frame.status === "completed") {
    if (answeredBy) {
      return { kind: "success", title: "Questionnaire completed", text: sentence(capitalized(answeredBy)) +
        " The agent has the answers.", ttl: 8000, code: null, hideCode: false };
    }
    return { kind: "success", title: "Answers sent", text: "The agent has your answers.", ttl: 8000, code: null, hideCode: false };
  }
  if (frame.status === "cancelled") {
    return { kind: "info", title: "Questionnaire cancelled", ttl: 8000, code: null, hideCode: false,
      text: reason === "aborted" ? "The agent withdrew its questions." : "The agent has been told you cancelled." };
  }
  return { kind: "info", title: "Questionnaire closed", ttl: 8000, code: null, hideCode: false,
    text: reason === "ui_error" ? "It waited too long for this page to come back." :
      reason === "ui_unavailable" ? "No answering page was open in time." : "It is no longer available." };
}

/** The note under "Waiting for questions" about the last `closed` frame (`answeredBy`: as
 * for closedToast). */
export function lastClosedNote(frame, answeredBy = null) {
  if (frame.status === "completed" && answeredBy) return "The last questionnaire was " + answeredBy + ".";
  if (frame.status === "completed") return "Your last answers were sent to the agent.";
  if (frame.status === "cancelled") {
    return frame.reason === "aborted" ? "The agent withdrew its last questionnaire." : "You cancelled the last questionnaire.";
  }
  return "The last questionnaire closed before it was finished.";
}
