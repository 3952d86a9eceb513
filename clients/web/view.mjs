/* The page's screens (loading, setup, fatal, idle, the question, the wait) and the top bar,
 * drawn from the state (state.mjs). A screen is built when the state says a new one is due
 * (its `screen` counter moved); otherwise the one shown is updated in place. */

import { $, h, touchScreen } from "./dom.mjs";
import { formProblem, fragmentFor } from "./link.mjs";
import { endedNoteNode, offlineBanner, progressNode } from "./parts.mjs";
import { questionCard, updateDraftState, updateQuestion } from "./question-view.mjs";
import { refusalPanel } from "./refusal-view.mjs";

const CARDS = ".question-card, .waiting-card";

/** `actions`: what the page's controls do (see app.mjs). `titleFor(title)`: the tab's title
 * for the screen's own (the inbox puts its count in front). */
export function createView(actions, titleFor = (title) => title) {
  let shownModel = null; // the state and screen the page shows
  let shownScreen = -1;
  let screenTitle = ""; // the screen's own title
  let titleBase = ""; // the tab's title without the flag
  let titleFlag = false;

  function showTitle() {
    titleBase = titleFor(screenTitle);
    document.title = (titleFlag ? "● " : "") + titleBase;
  }

  function setView(name, node, title) {
    const main = $("main");
    main.setAttribute("data-view", name);
    main.replaceChildren(node);
    screenTitle = title;
    showTitle();
  }

  function mainFocusIfLost() {
    const active = document.activeElement;
    if (!active || active === document.body || !document.contains(active)) $("main").focus({ preventScroll: true });
  }

  function focusFirst(selector) {
    // Keyboard-first: the highlight starts on the first option, as in the terminal client.
    // Not on touch screens, where a focus ring on an untouched button is only noise.
    if (touchScreen()) return;
    const el = document.querySelector(selector);
    if (el && !$("cancel-dialog").open) {
      try { el.focus({ preventScroll: true }); } catch (e) { el.focus(); }
    }
  }

  function updateOfflineBanner(model) {
    const banner = $("offline-banner");
    if (banner) banner.hidden = !model.offlineBannerShown();
  }

  function syncBusy(model) {
    document.body.classList.toggle("is-busy", !!model.busy);
    const card = document.querySelector(CARDS);
    if (!card) return;
    if (model.busy) card.setAttribute("aria-busy", "true");
    else card.removeAttribute("aria-busy");
  }

  function loadingScreen() {
    return h("section", { class: "panel panel-center", "aria-busy": "true" },
      h("div", { class: "spinner", "aria-hidden": "true" }),
      h("p", { class: "panel-text", text: "Connecting to the broker…" }));
  }

  /** No usable token: what the person can do (info.problem, link.mjs), the Sign in button
   * where the page signs people in, and a form for a token pasted by hand. */
  function setupScreen(info) {
    const sessionInput = h("input", { id: "setup-session", type: "text", autocomplete: "off", spellcheck: "false",
      value: info.session, "aria-describedby": "setup-session-help" });
    const tokenInput = h("input", { id: "setup-token", type: "password", autocomplete: "off", spellcheck: "false",
      value: info.token, required: true });
    const error = h("p", { class: "field-error", id: "setup-error", role: "alert" });
    const form = h("form", { class: "setup-form", novalidate: true, onsubmit: (e) => {
      e.preventDefault();
      const sid = sessionInput.value.trim();
      const tok = tokenInput.value.trim();
      const problem = formProblem(sid, tok);
      if (problem) {
        error.textContent = problem.text;
        (problem.field === "session" ? sessionInput : tokenInput).focus();
        return;
      }
      window.location.hash = fragmentFor(sid, tok); // the page starts over on hashchange
    } },
      h("div", { class: "field" }, h("label", { for: "setup-token", text: "Token" }), tokenInput),
      h("div", { class: "field" },
        h("label", { for: "setup-session", text: "Session (optional)" }), sessionInput,
        h("span", { class: "field-help", id: "setup-session-help",
          text: "Leave it empty to see everything waiting for you" })),
      error,
      h("button", { type: "submit", class: "btn btn-primary", text: "Open" }));

    return h("section", { class: "panel setup", "aria-labelledby": "setup-title", "data-kind": info.problem.kind },
      h("h1", { class: "panel-title", id: "setup-title", text: info.problem.title }),
      h("p", { class: "panel-text", id: "setup-text", text: info.problem.text }),
      info.signIn ? h("button", { type: "button", class: "btn btn-primary", id: "sign-in", text: "Sign in",
        onclick: () => actions.signIn() }) : null,
      h("details", { class: "setup-details" },
        h("summary", { text: "I was given a token to paste" }), form));
  }

  function idleScreen(model) {
    const note = model.idleNote();
    return h("section", { class: "panel panel-center idle", "aria-labelledby": "idle-title" },
      h("div", { class: "idle-art", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
      h("h1", { class: "panel-title", id: "idle-title", text: "Waiting for questions" }),
      h("p", { class: "panel-text", text: "When the agent asks you something it appears here straight away. Keep this page open." }),
      note ? h("p", { class: "idle-note", "data-status": note.status, text: note.text }) : null);
  }

  function waitingCard(model) {
    const w = model.waiting();
    return h("article", { class: "card waiting-card", "aria-labelledby": "waiting-title" },
      offlineBanner(),
      endedNoteNode(model, model.suspended.questionnaireId, () => actions.dismissEndedNote()),
      w.questionFrame ? progressNode(w.questionFrame) : null,
      h("div", { class: "waiting" },
        h("div", { class: "waiting-spinner", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
        h("h1", { class: "waiting-title", id: "waiting-title", text: "Waiting for the agent…" }),
        h("p", { class: "panel-text", text: "You asked about " + (w.label ? "“" + w.label + "”" : "this question") + w.place + ":" }),
        h("blockquote", { class: "waiting-request", text: w.request }),
        h("p", { class: "panel-text muted",
          text: "The agent is preparing an answer. The same question comes back here with its reply, and your selections so far are kept." })),
      h("div", { class: "secondary-actions" },
        h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "cancel-open",
          text: "Cancel questionnaire", onclick: (e) => actions.openCancel(e.currentTarget) })));
  }

  function build(model) {
    const title = model.title();
    switch (model.view) {
      case "setup":
        setView("setup", setupScreen(model.setupInfo), title);
        break;
      case "fatal":
        setView("fatal", refusalPanel(model.fatalInfo, actions), title);
        break;
      case "idle": {
        const active = document.activeElement;
        setView("idle", idleScreen(model), title);
        if (active && active !== document.body && !document.contains(active)) $("main").focus({ preventScroll: true });
        break;
      }
      case "question":
        setView("question", questionCard(model, actions), title);
        updateQuestion(model);
        updateOfflineBanner(model);
        window.scrollTo(0, 0);
        focusFirst(model.answer.multi ? ".options .option[aria-pressed='true'], .options .option" : ".options .option");
        break;
      case "suspended":
        setView("suspended", waitingCard(model), title);
        updateOfflineBanner(model);
        window.scrollTo(0, 0);
        mainFocusIfLost();
        break;
      default:
        setView("loading", loadingScreen(), title);
    }
  }

  return {
    /** Build the screen the state asks for, or bring the one shown up to date:
     * `refresh` is the state's ("question", "draft" or null). */
    render(model, refresh) {
      if (model !== shownModel || model.screen !== shownScreen) {
        shownModel = model;
        shownScreen = model.screen;
        build(model);
      } else if (refresh === "question") {
        updateQuestion(model);
      } else if (refresh === "draft") {
        updateDraftState(model);
      }
      syncBusy(model);
    },

    /** The top bar. `text` is the state, in a live region: it is only written when it
     * changes, so a screen reader hears it once. `detail` (the reconnect countdown) sits
     * outside the live region. */
    showConnection(model, state, text, detail) {
      $("conn").setAttribute("data-state", state);
      const live = $("conn-text");
      if (live.textContent !== text) live.textContent = text;
      $("conn-detail").textContent = detail || "";
      $("conn-retry").hidden = !(state === "waiting" || state === "offline");
      document.body.classList.toggle("is-disconnected", state !== "connected");
      if (model && document.querySelector(CARDS)) updateOfflineBanner(model);
    },

    /** The session in the top bar, and the agent asking (`askedBy`, the agent token's
     * `sub`, when known); null hides them. */
    showSession(sid, askedBy = null) {
      $("session-line").hidden = sid === null;
      const name = $("session-name");
      name.textContent = sid || "";
      name.title = sid ? "Session " + sid : "";
      const agent = $("session-agent");
      agent.hidden = !(sid && askedBy);
      agent.textContent = sid && askedBy ? "asked by " + askedBy : "";
    },

    /** A screen drawn by someone else (the inbox): its title, and nothing of the last
     * session's screen is taken to be on show any more. */
    showOther(title) {
      shownModel = null;
      shownScreen = -1;
      screenTitle = title;
      showTitle();
    },

    /** The tab's title again, after what `titleFor` says changed. */
    retitle() {
      showTitle();
    },

    focus(id) {
      const el = $(id);
      if (el) el.focus();
    },

    fieldError(kind, text) {
      const err = $(kind + "-error");
      if (err) err.textContent = text;
      const input = $(kind + "-input");
      if (input) input.focus();
    },

    hint(text) {
      const el = $("continue-hint");
      if (el) el.textContent = text;
    },

    otherFocused() {
      const input = $("other-input");
      return !!input && document.activeElement === input;
    },

    /** A new question in a background tab: "● " in front of the title until it is seen. */
    flagTitle() {
      if (document.hidden && titleBase) {
        titleFlag = true;
        showTitle();
      }
    },

    unflagTitle() {
      if (titleFlag && titleBase) {
        document.title = titleBase;
        titleFlag = false;
      }
    },
  };
}
