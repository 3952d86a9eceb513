/* The question card: built once per step from the state, then brought in line with it in
 * place (so focus and half-typed text survive a draft echo). */

import { $, h, touchScreen } from "./dom.mjs";
import { endedNoteNode, offlineBanner, progressNode } from "./parts.mjs";
import { CLARIFY_MAX, OTHER_MAX } from "./answer.mjs";
import { answeredClarifications } from "./state.mjs";
import { charCount, plural } from "./text.mjs";

const ARROW_KEYS = ["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"];

function clarificationsNode(frame) {
  const list = answeredClarifications(frame);
  if (!list.length) return null;
  const card = (c, latest) =>
    h("div", { class: "clar" + (latest ? " clar-latest" : ""), "data-revision": c.revision },
      h("div", { class: "clar-row clar-ask" },
        h("span", { class: "clar-who", text: "You asked" }),
        h("p", { class: "clar-text", text: c.request })),
      h("div", { class: "clar-row clar-reply" },
        h("span", { class: "clar-who", text: "Agent" }),
        h("p", { class: "clar-text clar-response", text: c.response })));
  const earlier = list.slice(0, -1);
  return h("section", { class: "clarifications", "aria-label": "The agent's clarification" },
    earlier.length ? h("details", { class: "clar-earlier" },
      h("summary", { text: "Earlier clarifications (" + earlier.length + ")" }),
      earlier.map((c) => card(c, false))) : null,
    card(list[list.length - 1], true));
}

function optionButton(q, option, actions) {
  const multi = q.type === "multi";
  return h("button", { type: "button", class: "option", "data-option-id": option.id,
      "aria-pressed": multi ? "false" : null, onclick: () => actions.pick(option.id) },
    h("span", { class: "option-mark", "aria-hidden": "true" }),
    h("span", { class: "option-body" },
      h("span", { class: "option-label", text: option.label }),
      option.description ? h("span", { class: "option-desc", text: option.description }) : null),
    !multi ? h("span", { class: "option-go", "aria-hidden": "true", text: "→" }) : null);
}

/** kind: "other" | "clarify". */
function textField(kind, opts) {
  const inputId = kind + "-input";
  const input = h(opts.multiline ? "textarea" : "input", {
    id: inputId, class: "text-input", autocomplete: "off", rows: opts.multiline ? 3 : null,
    type: opts.multiline ? null : "text", placeholder: opts.placeholder,
    "aria-describedby": kind + "-help " + kind + "-count " + kind + "-error",
  });
  input.addEventListener("input", () => { opts.onInput(input.value); updateCounter(kind); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); opts.onEnter(); }
    else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); opts.onEscape(); }
  });
  return h("div", { class: "field field-" + kind, id: kind + "-panel", hidden: true },
    h("label", { for: inputId, class: "field-label", text: opts.label }),
    h("div", { class: "field-row" }, input, opts.button || null),
    h("div", { class: "field-meta" },
      h("span", { class: "field-help", id: kind + "-help", text: opts.help }),
      h("span", { class: "counter", id: kind + "-count", "aria-live": "off" })),
    h("span", { class: "field-error", id: kind + "-error", role: "alert" }));
}

/** The field's "n / limit" counter, and the error line when the text is over the limit. */
export function updateCounter(kind) {
  const input = $(kind + "-input");
  const counter = $(kind + "-count");
  if (!input || !counter) return;
  const limit = kind === "other" ? OTHER_MAX : CLARIFY_MAX;
  const n = charCount(input.value.trim());
  counter.textContent = n + " / " + limit;
  counter.classList.toggle("over", n > limit);
  counter.classList.toggle("near", n <= limit && n > limit * 0.9);
  counter.setAttribute("aria-label", n + " of " + limit + " characters used");
  const err = $(kind + "-error");
  if (err) err.textContent = n > limit ? "That is " + plural(n - limit, "character", "characters") + " too long." : "";
}

/** Arrow keys, Home and End move between the options, wrapping around. */
function onOptionsKey(e) {
  if (ARROW_KEYS.indexOf(e.key) < 0) return;
  const buttons = Array.from(document.querySelectorAll(".options .option"));
  const i = buttons.indexOf(document.activeElement);
  if (i < 0) return;
  e.preventDefault();
  let next = i;
  if (e.key === "ArrowDown" || e.key === "ArrowRight") next = (i + 1) % buttons.length;
  else if (e.key === "ArrowUp" || e.key === "ArrowLeft") next = (i - 1 + buttons.length) % buttons.length;
  else if (e.key === "Home") next = 0;
  else if (e.key === "End") next = buttons.length - 1;
  buttons[next].focus();
}

/** The card for the state's question; `actions` are the page's (see app.mjs). */
export function questionCard(model, actions) {
  const frame = model.frame;
  const q = frame.question;
  const multi = q.type === "multi";

  const options = q.options.map((o) => optionButton(q, o, actions));
  if (q.allowOther) {
    options.push(h("button", { type: "button", class: "option option-other", id: "other-open",
        "aria-expanded": "false", "aria-controls": "other-panel", "aria-pressed": multi ? "false" : null,
        onclick: () => actions.toggleOther() },
      h("span", { class: "option-mark", "aria-hidden": "true" }),
      h("span", { class: "option-body" },
        h("span", { class: "option-label", text: "Other…" }),
        h("span", { class: "option-desc", text: "Type your own answer" }))));
  }
  const optionsGroup = h("div", { class: "options", role: "group", "aria-labelledby": "q-prompt",
    "aria-describedby": "q-hint", onkeydown: onOptionsKey }, options);

  const otherField = q.allowOther ? textField("other", {
    label: multi ? "Your own answer (counts as one selection)" : "Your own answer",
    placeholder: "Type your answer",
    // Keys to press mean nothing on a touch screen: there the multi field says how to tap it away.
    help: touchScreen() ? (multi ? "Tap “Other…” again to remove it" : "")
      : multi ? "Enter continues · Esc removes it" : "Enter submits · Esc closes",
    multiline: false,
    button: multi ? null : h("button", { type: "button", class: "btn btn-primary", id: "other-submit",
      text: "Submit", onclick: () => actions.submitOther() }),
    onInput: (value) => actions.typeOther(value),
    onEnter: () => actions.submitOther(),
    onEscape: () => actions.closeOther(true),
  }) : null;

  const continueRow = multi ? h("div", { class: "continue-row" },
    h("button", { type: "button", class: "btn btn-primary btn-continue", id: "continue",
      "aria-describedby": "continue-hint", onclick: () => actions.submitMulti() }),
    h("p", { class: "continue-hint", id: "continue-hint", "aria-live": "polite" }),
    h("span", { class: "draft-state", id: "draft-state", "data-state": "saved" })) : null;

  const clarifyField = textField("clarify", {
    label: "What would you like to ask the agent about this question?",
    placeholder: "e.g. What does the release window involve?",
    help: touchScreen() ? "" : "Enter sends · Shift+Enter adds a line · Esc closes",
    multiline: true,
    button: null,
    onInput: (value) => actions.typeClarify(value),
    onEnter: () => actions.sendClarify(),
    onEscape: () => actions.closeClarify(true),
  });
  clarifyField.appendChild(h("div", { class: "field-actions" },
    h("button", { type: "button", class: "btn btn-secondary", text: "Close", onclick: () => actions.closeClarify(true) }),
    h("button", { type: "button", class: "btn btn-primary", id: "clarify-send", text: "Send",
      onclick: () => actions.sendClarify() })));

  const secondary = h("div", { class: "secondary-actions" },
    h("button", { type: "button", class: "btn btn-ghost", id: "clarify-open", "aria-expanded": "false",
      "aria-controls": "clarify-panel", text: "Ask to clarify…", onclick: () => actions.toggleClarify() }),
    h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "cancel-open",
      text: "Cancel questionnaire", onclick: (e) => actions.openCancel(e.currentTarget) }));

  return h("article", { class: "card question-card", "aria-labelledby": "q-label q-prompt",
      "data-question-id": q.id, "data-question-type": q.type },
    offlineBanner(),
    endedNoteNode(model, frame.questionnaireId, () => actions.dismissEndedNote()),
    progressNode(frame),
    model.answeredNote ? h("p", { class: "answered-note", id: "answered-note", role: "note", text: model.answeredNote }) : null,
    clarificationsNode(frame),
    h("header", { class: "q-head" },
      h("p", { class: "q-label", id: "q-label", text: q.label || q.id }),
      h("h1", { class: "q-prompt", id: "q-prompt", text: q.prompt }),
      h("p", { class: "q-hint", id: "q-hint", text: model.answer.rule() })),
    optionsGroup,
    otherField,
    continueRow,
    secondary,
    clarifyField);
}

/** "Saving…", "Selections saved" or "Not saved: …" next to the Continue button. */
export function updateDraftState(model) {
  const el = $("draft-state");
  if (!el) return;
  const status = model.draftStatus();
  el.setAttribute("data-state", status.state);
  el.textContent = status.text;
}

/** Bring the question on screen in line with the state (its answer) without rebuilding it. */
export function updateQuestion(model) {
  if (model.view !== "question" || !model.frame || !model.answer) return;
  const a = model.answer;
  const multi = a.multi;
  if (multi) {
    document.querySelectorAll(".options .option[data-option-id]").forEach((btn) => {
      btn.setAttribute("aria-pressed", a.selected.has(btn.getAttribute("data-option-id")) ? "true" : "false");
    });
  }
  const otherBtn = $("other-open");
  const otherPanel = $("other-panel");
  if (otherBtn && otherPanel) {
    otherBtn.setAttribute("aria-expanded", a.otherOpen ? "true" : "false");
    // Pressed (a tick) exactly when it counts as a selection, as "Continue with N" counts it.
    if (multi) otherBtn.setAttribute("aria-pressed", a.otherSelected() ? "true" : "false");
    otherPanel.hidden = !a.otherOpen;
    const input = $("other-input");
    if (input.value !== a.otherText && document.activeElement !== input) input.value = a.otherText;
    updateCounter("other");
  }
  $("clarify-panel").hidden = !a.clarifyOpen;
  $("clarify-open").setAttribute("aria-expanded", a.clarifyOpen ? "true" : "false");
  updateCounter("clarify");
  if (multi) {
    const problem = a.continueProblem();
    const btn = $("continue");
    btn.textContent = "Continue with " + plural(a.selectionCount(), "selection", "selections");
    btn.disabled = !!problem;
    const hint = $("continue-hint");
    hint.textContent = problem;
    hint.hidden = !problem;
    updateDraftState(model);
  }
  // The progress list and clarifications are part of the step: a new step rebuilds the card.
}
