/* qbroker browser client.
 *
 * One file, no build step, no dependencies. It joins one session over the broker's
 * websocket (subprotocol qbroker.v1.json) and shows the session's current questionnaire
 * one question at a time. The broker is the source of truth: every view is rendered from
 * the latest frame it sent (`question`, `suspended`, `idle`), and the only state kept here
 * is what the person is doing right now (toggles not yet echoed, text being typed, which
 * field is open).
 *
 * Theory of operation
 *   connect() -> open -> hello -> welcome -> question | suspended | idle
 *   close 4400/4401/4403  -> a message explaining what is wrong, no reconnect
 *   any other close       -> reconnect with exponential backoff and full jitter
 *   question frames for the same questionnaire+step update the view in place (focus and
 *   half-typed text survive); a new step rebuilds it.
 */
(function () {
  "use strict";

  var SUBPROTOCOL = "qbroker.v1.json";
  var PING_INTERVAL_MS = 20000;
  var PONG_TIMEOUT_MS = 10000;
  var HELLO_TIMEOUT_MS = 15000;
  var BACKOFF_BASE_MS = 500;
  var BACKOFF_MAX_MS = 30000;
  var OTHER_MAX = 2000;
  var CLARIFY_MAX = 1000;
  var DRAFT_TEXT_DEBOUNCE_MS = 400;
  var DRAFT_ECHO_GRACE_MS = 3000;
  var SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;

  // Close codes after which reconnecting cannot help: say what is wrong instead.
  var FATAL_CLOSES = {
    4400: {
      title: "The broker refused this page's handshake",
      text: "The connection broke the protocol (code 4400). Reload the page; if it keeps happening, " +
        "this page and the broker are probably different versions.",
    },
    4401: {
      title: "This link's token was not accepted",
      text: "The token is invalid, has expired, or is not a client token (code 4401). " +
        "Ask for a fresh link, or mint a client token with " +
        "qbroker token --session SESSION --role client.",
    },
    4403: {
      title: "This token belongs to another session",
      text: "The token in the link was issued for a different session than the one named in the link " +
        "(code 4403). Check that the link was copied completely.",
    },
  };

  var ERROR_TITLES = {
    stale_step: "That question had already moved on",
    stale_revision: "That question had already moved on",
    invalid_answer: "That answer was not accepted",
    unknown_option: "That option is not part of this question",
    other_not_allowed: "This question does not take a custom answer",
    below_min_selections: "Too few selections",
    above_max_selections: "Too many selections",
    text_too_long: "That text is too long",
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
  var RACE_TEXT = "Another window answered it first, or the agent changed the questionnaire. " +
    "Here is where things stand now.";
  var RACE_ERRORS = { stale_step: true, stale_revision: true };

  // The questionnaire on screen is gone after a reconnect, and no `closed` frame said how.
  var ENDED_UNSEEN = "The questionnaire you were answering ended while this page was disconnected.";
  var ENDED_UNSEEN_WHY = "This page could not see how: the agent may have withdrawn it, or it " +
    "stopped waiting for this page to come back. Ask the agent if you need to know.";

  // ------------------------------------------------------------------ small helpers

  function $(id) { return document.getElementById(id); }

  /** h("button", {class: "x", onclick: fn}, "text", child) — text is always textContent. */
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) return;
        if (key.slice(0, 2) === "on" && typeof value === "function") {
          el.addEventListener(key.slice(2), value);
        } else if (key === "class") {
          el.className = value;
        } else if (key === "text") {
          el.textContent = value;
        } else if (value === true) {
          el.setAttribute(key, "");
        } else {
          el.setAttribute(key, String(value));
        }
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) {
        child.forEach(function (c) { if (c) el.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
      } else {
        el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
      }
    }
    return el;
  }

  /** Length in code points, the way the broker (Python) counts characters. */
  function charCount(text) { return Array.from(text).length; }

  /** `text` trimmed, with a full stop unless it already ends like a sentence. */
  function sentence(text) {
    var t = String(text).trim();
    return /[.!?…:;。！？]["'”’»)\]]*$/.test(t) ? t : t + ".";
  }

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  function announce(text) {
    var el = $("announcer");
    el.textContent = "";
    // A fresh text node after a tick makes screen readers announce repeats too.
    window.setTimeout(function () { el.textContent = text; }, 30);
  }

  // ------------------------------------------------------------------ state

  var S = {
    sid: null,
    token: null,
    ws: null,
    conn: "connecting",      // connecting | connected | waiting | offline | failed
    attempt: 0,               // reconnect attempts since the last welcome
    everConnected: false,
    retryAt: 0,
    retryTimer: null,
    countdownTimer: null,
    pingTimer: null,
    pongTimer: null,
    helloTimer: null,
    clientId: null,
    refSeq: 0,
    view: "loading",          // loading | setup | fatal | idle | question | suspended
    frame: null,              // latest question frame
    suspended: null,          // latest suspended frame
    viewKey: null,            // questionnaireId:step:questionId of the rendered question
    local: null,              // {selected: Set, otherOpen, otherText, clarifyOpen}
    draftPending: null,       // {key, at}: a draft sent whose echo has not come back yet
    draftTextTimer: null,
    busyRef: null,            // ref of an answer/clarify/cancel awaiting its effect
    busyTimer: null,
    lastClosed: null,
    reconnectFrom: null,      // after a reconnect's welcome: the questionnaire on screen before it
    endedNote: null,          // {shownId}: the one on screen ended unseen while disconnected
    titleFlag: false,
  };

  // ------------------------------------------------------------------ fragment

  function parseFragment() {
    var raw = window.location.hash.replace(/^#/, "");
    var params = new URLSearchParams(raw);
    return { session: (params.get("session") || "").trim(), token: (params.get("token") || "").trim() };
  }

  function wsUrl() {
    // Resolve relative to the page so a broker behind a path prefix still works.
    var url = new URL("v1/sessions/" + encodeURIComponent(S.sid) + "/ws", window.location.href);
    url.protocol = window.location.protocol === "https:" ? "wss:" : "ws:";
    url.hash = "";
    url.search = "";
    return url.toString();
  }

  // ------------------------------------------------------------------ connection

  function nextRef() { S.refSeq += 1; return S.refSeq; }

  function send(frame) {
    if (!S.ws || S.ws.readyState !== WebSocket.OPEN || S.conn !== "connected") return false;
    S.ws.send(JSON.stringify(frame));
    return true;
  }

  /** `text` is the state, in a live region: it is only written when it changes, so a screen
   * reader hears it once. `detail` (the reconnect countdown) sits outside the live region. */
  function setConn(state, text, detail) {
    S.conn = state;
    var el = $("conn");
    el.setAttribute("data-state", state);
    var live = $("conn-text");
    if (live.textContent !== text) live.textContent = text;
    $("conn-detail").textContent = detail || "";
    $("conn-retry").hidden = !(state === "waiting" || state === "offline");
    document.body.classList.toggle("is-disconnected", state !== "connected");
    var card = document.querySelector(".question-card, .waiting-card");
    if (card) updateOfflineBanner();
  }

  function clearTimers() {
    [S.retryTimer, S.helloTimer, S.pongTimer].forEach(function (t) { if (t) window.clearTimeout(t); });
    [S.pingTimer, S.countdownTimer].forEach(function (t) { if (t) window.clearInterval(t); });
    S.retryTimer = S.helloTimer = S.pongTimer = S.pingTimer = S.countdownTimer = null;
  }

  function connect() {
    clearTimers();
    if (S.everConnected && (S.conn === "waiting" || S.conn === "offline")) {
      // Another attempt after a loss: the state ("Connection lost") is unchanged, only the detail.
      setConn("connecting", $("conn-text").textContent, "· reconnecting…");
    } else {
      setConn("connecting", S.everConnected ? "Reconnecting…" : "Connecting…");
    }
    var ws;
    try {
      ws = new WebSocket(wsUrl(), SUBPROTOCOL);
    } catch (err) {
      scheduleReconnect(null, "");
      return;
    }
    S.ws = ws;
    ws.onopen = function () {
      if (S.ws !== ws) return;
      if (ws.protocol !== SUBPROTOCOL) {
        ws.close(4000, "subprotocol not agreed");
        return;
      }
      ws.send(JSON.stringify({ type: "hello", token: S.token, client: { kind: "web", name: "qbroker web" } }));
      S.helloTimer = window.setTimeout(function () {
        if (S.ws === ws && S.conn !== "connected") ws.close(4000, "no welcome");
      }, HELLO_TIMEOUT_MS);
    };
    ws.onmessage = function (event) {
      if (S.ws !== ws) return;
      if (S.pongTimer) { window.clearTimeout(S.pongTimer); S.pongTimer = null; }
      if (typeof event.data !== "string") return;
      var frame;
      try {
        frame = JSON.parse(event.data);
      } catch (err) {
        toast("error", "Unreadable message", "The broker sent something this page could not parse.");
        return;
      }
      if (frame && typeof frame === "object") handleFrame(frame);
    };
    ws.onerror = function () { /* a close event always follows */ };
    ws.onclose = function (event) {
      if (S.ws !== ws) return;
      S.ws = null;
      onClose(event.code, event.reason);
    };
  }

  function onClose(code, reason) {
    clearTimers();
    clearBusy();
    if (code === 4401 && /expired/i.test(reason || "")) {
      // The same token can never work again: no "Try again", only what to do instead.
      setConn("failed", "Link expired");
      var open = S.suspended || S.frame;
      renderFatal("This link has expired",
        (open
          ? "The questionnaire you were answering is still open for a while, and the answers you " +
            "already sent are saved. "
          : "") +
        "Ask for a new link (whoever sent you this one can make it), then open it, here or in a " +
        "new tab" + (open ? ", to carry on where you left off." : "."),
        reason, true);
      return;
    }
    var fatal = FATAL_CLOSES[code];
    if (fatal) {
      setConn("failed", "Disconnected");
      renderFatal(fatal.title, fatal.text, reason);
      return;
    }
    scheduleReconnect(code, reason);
  }

  function backoffDelay(attempt, code) {
    // Exponential backoff with "equal jitter": half fixed, half random, so a broker restart
    // does not bring every client of every session back in the same millisecond.
    var ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * Math.pow(2, attempt));
    var delay = ceiling / 2 + Math.random() * ceiling / 2;
    if (code === 1008) delay = Math.max(delay, 5000); // rate limited or too slow: back off for real
    return Math.round(delay);
  }

  function scheduleReconnect(code, reason) {
    var delay = backoffDelay(S.attempt, code);
    S.attempt += 1;
    S.retryAt = Date.now() + delay;
    var why = code === 1012 ? "Broker restarting" : code === 1001 ? "Broker going away" :
      code === 1013 ? "Broker busy" : code === 1008 ? "Closed by the broker" : "Connection lost";
    if (reason && (code === 1008 || code === 1013)) why += " (" + reason + ")";
    if (!navigator.onLine) why = "You are offline";
    var tick = function () {
      var left = Math.max(0, Math.ceil((S.retryAt - Date.now()) / 1000));
      setConn(navigator.onLine ? "waiting" : "offline", why, "· retrying " + (left > 0 ? "in " + left + " s" : "now"));
    };
    tick();
    S.countdownTimer = window.setInterval(tick, 1000);
    S.retryTimer = window.setTimeout(connect, delay);
  }

  function retryNow() {
    if (S.conn === "waiting" || S.conn === "offline") { S.attempt = Math.max(0, S.attempt - 1); connect(); }
  }

  function startPing() {
    S.pingTimer = window.setInterval(function () {
      if (!send({ type: "ping" })) return;
      if (S.pongTimer) window.clearTimeout(S.pongTimer);
      var ws = S.ws;
      S.pongTimer = window.setTimeout(function () {
        // Nothing heard for a while: the connection is dead even if the browser has not noticed.
        if (ws && S.ws === ws) { S.ws = null; try { ws.close(4000, "pong timeout"); } catch (e) { /* ignore */ } onClose(1006, ""); }
      }, PONG_TIMEOUT_MS);
    }, PING_INTERVAL_MS);
  }

  // ------------------------------------------------------------------ frames

  function handleFrame(frame) {
    switch (frame.type) {
      case "welcome":
        if (S.helloTimer) { window.clearTimeout(S.helloTimer); S.helloTimer = null; }
        S.clientId = frame.clientId || null;
        S.attempt = 0;
        var wasReconnect = S.everConnected;
        S.everConnected = true;
        // The broker answers a reconnect with the current view only, never with a `closed`
        // frame for what this page showed before (the reconnect grace ran out, or a broker
        // with the memory store restarted): the first view frame is compared with it.
        var before = S.suspended || S.frame;
        S.reconnectFrom = wasReconnect && before ? before.questionnaireId : null;
        setConn("connected", "Connected");
        startPing();
        if (wasReconnect) toast("info", "Reconnected", null, 2500);
        break;
      case "question": onQuestion(frame); break;
      case "suspended": onSuspended(frame); break;
      case "idle": onIdle(); break;
      case "closed": onClosed(frame); break;
      case "error": onError(frame); break;
      case "pong": break;
      default:
        if (window.console) console.warn("qbroker: ignoring unknown frame type", frame.type);
    }
  }

  /** Called with the questionnaire each view frame shows (null: idle). True when the one on
   * screen before a reconnect is gone without a word, which the page then says. */
  function checkEndedWhileAway(shownId) {
    var before = S.reconnectFrom;
    S.reconnectFrom = null;
    if (S.endedNote && S.endedNote.shownId !== shownId) S.endedNote = null;
    if (!before || before === shownId) return false;
    S.endedNote = { shownId: shownId };
    S.lastClosed = null; // about an earlier questionnaire
    return true;
  }

  function onQuestion(frame) {
    var q = frame.question || {};
    var endedUnseen = checkEndedWhileAway(frame.questionnaireId);
    var key = frame.questionnaireId + ":" + frame.step + ":" + q.id;
    var same = S.view === "question" && S.viewKey === key;
    dropStaleCancelDialog(frame.questionnaireId); // before rendering, so the focus can move
    S.frame = frame;
    S.suspended = null;
    if (same) {
      adoptDraft(frame.draft);
      updateQuestion();
      return;
    }
    // Back from waiting on the agent (also on a page opened during the wait, which never
    // had this questionnaire's question frame).
    var resumed = S.view === "suspended" && String(S.viewKey).indexOf(frame.questionnaireId + ":") === 0;
    clearBusy();
    S.draftPending = null;
    if (S.draftTextTimer) { window.clearTimeout(S.draftTextTimer); S.draftTextTimer = null; }
    S.local = { selected: new Set(), otherOpen: false, otherText: "", clarifyOpen: false, clarifyText: "" };
    adoptDraft(frame.draft, true);
    renderQuestion(frame, resumed);
    var label = q.label || q.id || "";
    if (resumed) {
      var latest = latestResponse(frame);
      announce("The agent replied" + (latest ? ": " + sentence(latest.response) : ".") + " Back to " + label + ".");
    } else {
      announce((endedUnseen ? ENDED_UNSEEN + " " : "") +
        "Question " + (frame.index + 1) + " of " + frame.total + ": " + (q.prompt || label));
    }
    flagTitle();
  }

  function onSuspended(frame) {
    var endedUnseen = checkEndedWhileAway(frame.questionnaireId);
    dropStaleCancelDialog(frame.questionnaireId);
    S.suspended = frame;
    clearBusy();
    if (S.view === "suspended" && S.viewKey === frame.questionnaireId + ":" + frame.step) return;
    renderSuspended(frame);
    announce((endedUnseen ? ENDED_UNSEEN + " " : "") + "Waiting for the agent to answer your question.");
  }

  function onIdle() {
    var endedUnseen = checkEndedWhileAway(null);
    S.frame = null;
    S.suspended = null;
    clearBusy();
    dropStaleCancelDialog(null); // nothing left to cancel
    if (S.view !== "idle" || endedUnseen) {
      renderIdle();
      announce((endedUnseen ? ENDED_UNSEEN + " " : "") + "Waiting for questions.");
    } else {
      renderIdle();
    }
  }

  function onClosed(frame) {
    S.lastClosed = frame;
    clearBusy();
    var status = frame.status;
    var reason = frame.reason;
    if (status === "completed") {
      toast("success", "Answers sent", "The agent has your answers.");
    } else if (status === "cancelled") {
      toast("info", "Questionnaire cancelled",
        reason === "aborted" ? "The agent withdrew its questions." : "The agent has been told you cancelled.");
    } else {
      toast("info", "Questionnaire closed",
        reason === "ui_error" ? "It waited too long for this page to come back." :
          reason === "ui_unavailable" ? "No answering page was open in time." : "It is no longer available.");
    }
    if (S.view === "idle") renderIdle();
  }

  function onError(frame) {
    var code = String(frame.code || "error");
    var title = ERROR_TITLES[code] || "Something went wrong";
    if (RACE_ERRORS[code]) toast("info", title, RACE_TEXT, 8000, code, true);
    else toast("error", title, frame.message || "", 12000, code);
    if (frame.ref !== undefined && frame.ref !== null && frame.ref === S.busyRef) clearBusy();
    if (S.draftPending) { S.draftPending = null; updateDraftState(); }
  }

  // ------------------------------------------------------------------ local answer state

  function draftKey(draft) {
    var ids = (draft && draft.selectedOptionIds) ? draft.selectedOptionIds.slice().sort() : [];
    return JSON.stringify([ids, (draft && draft.other) || ""]);
  }

  function adoptDraft(draft, initial) {
    var L = S.local;
    if (!L) return;
    var incoming = draftKey(draft);
    if (!initial && S.draftPending) {
      if (incoming === S.draftPending.key) {
        S.draftPending = null;
      } else if (Date.now() - S.draftPending.at < DRAFT_ECHO_GRACE_MS) {
        return; // an older echo; ours is still on its way
      } else {
        S.draftPending = null;
      }
    }
    if (!initial && S.draftTextTimer) return; // the person is typing; their text wins
    L.selected = new Set((draft && draft.selectedOptionIds) || []);
    var other = (draft && typeof draft.other === "string") ? draft.other : "";
    var input = $("other-input");
    var typing = input && document.activeElement === input;
    // Other text over the limit was never sent (see sendDraft): it lives only here, and an
    // echo must not replace or hide it.
    var unsent = otherTooLong();
    if (other) {
      L.otherOpen = true;
      if (!typing && !unsent) L.otherText = other;
    } else if (!typing && !unsent && L.otherOpen && L.otherText.trim()) {
      L.otherOpen = false; // removed elsewhere (another tab)
    }
  }

  function currentDraft() {
    var q = S.frame.question;
    var L = S.local;
    var ids = q.options.map(function (o) { return o.id; }).filter(function (id) { return L.selected.has(id); });
    var draft = { selectedOptionIds: ids };
    var other = L.otherText.trim();
    if (L.otherOpen && other && charCount(other) <= OTHER_MAX) draft.other = other;
    return draft;
  }

  function isMulti() { return !!(S.frame && S.frame.question && S.frame.question.type === "multi"); }

  /** Other is open with more text than the broker takes. */
  function otherTooLong() {
    var L = S.local;
    return !!(L && L.otherOpen && charCount(L.otherText.trim()) > OTHER_MAX);
  }

  function sendDraft() {
    dropDraftTimer();
    if (!S.frame || S.busyRef !== null) return;
    // A draft without the text would drop it without a word: send nothing until it fits, and
    // say so next to the Continue button.
    if (otherTooLong()) { updateDraftState(); return; }
    var draft = currentDraft();
    var frame = { type: "draft", questionnaireId: S.frame.questionnaireId, step: S.frame.step,
      selectedOptionIds: draft.selectedOptionIds, ref: nextRef() };
    if (draft.other !== undefined) frame.other = draft.other;
    if (send(frame)) S.draftPending = { key: draftKey(draft), at: Date.now() };
    updateDraftState();
  }

  /** "Saving…" until the broker echoes the toggles back, then "Selections saved". */
  function updateDraftState() {
    var el = $("draft-state");
    if (!el) return;
    if (otherTooLong()) {
      el.setAttribute("data-state", "unsaved");
      el.textContent = "Not saved: your own answer is over " + OTHER_MAX + " characters";
      return;
    }
    var saving = !!(S.draftPending || S.draftTextTimer);
    el.setAttribute("data-state", saving ? "saving" : "saved");
    var any = S.local && (S.local.selected.size > 0 || (S.local.otherOpen && S.local.otherText.trim()));
    el.textContent = saving ? "Saving…" : any ? "Selections saved" : "";
  }

  /** Other counts as a selection once it is open and has text; an empty field is not one. */
  function otherSelected() {
    var L = S.local;
    return !!(L.otherOpen && L.otherText.trim());
  }

  function selectionCount() {
    return S.local.selected.size + (otherSelected() ? 1 : 0);
  }

  function bounds() {
    var q = S.frame.question;
    var min = typeof q.minSelections === "number" ? q.minSelections : 0;
    var max = typeof q.maxSelections === "number" ? q.maxSelections : null;
    return { min: min, max: max };
  }

  function boundsSentence(min, max) {
    if (max !== null && min === max) return "Choose exactly " + max + ".";
    if (min > 0 && max !== null) return "Choose " + min + " to " + max + ".";
    if (min > 0) return "Choose at least " + min + ".";
    if (max !== null) return "Choose up to " + max + ".";
    return "Choose any that apply.";
  }

  /** Why Continue is not possible yet, or "" when it is. */
  function continueProblem() {
    var b = bounds();
    var n = selectionCount();
    var L = S.local;
    if (L.otherOpen && charCount(L.otherText.trim()) > OTHER_MAX) {
      return "Your own answer is longer than " + OTHER_MAX + " characters.";
    }
    if (n < b.min) {
      return "Select " + plural(b.min - n, "more option", "more options") + " to continue (at least " + b.min + ").";
    }
    if (b.max !== null && n > b.max) {
      return "Deselect " + plural(n - b.max, "option", "options") + " to continue (at most " + b.max + ").";
    }
    return "";
  }

  // ------------------------------------------------------------------ busy

  function setBusy(ref) {
    S.busyRef = ref;
    var card = document.querySelector(".question-card, .waiting-card");
    if (card) card.setAttribute("aria-busy", "true");
    document.body.classList.add("is-busy");
    if (S.busyTimer) window.clearTimeout(S.busyTimer);
    // Never stay stuck: if nothing comes back the person can try again.
    S.busyTimer = window.setTimeout(clearBusy, 10000);
  }

  function clearBusy() {
    S.busyRef = null;
    if (S.busyTimer) { window.clearTimeout(S.busyTimer); S.busyTimer = null; }
    document.body.classList.remove("is-busy");
    var card = document.querySelector("[aria-busy='true']");
    if (card && card.id !== "view-loading") card.removeAttribute("aria-busy");
  }

  function canAct() {
    if (S.busyRef !== null) return false;
    if (S.conn !== "connected") {
      toast("error", "Not connected", "Nothing was sent. The page reconnects by itself; answers you already sent are saved by the broker.", 5000);
      return false;
    }
    return true;
  }

  // ------------------------------------------------------------------ commands

  function dropDraftTimer() {
    if (S.draftTextTimer) { window.clearTimeout(S.draftTextTimer); S.draftTextTimer = null; }
  }

  function answerWith(selectedOptionIds, other) {
    if (!canAct()) return;
    dropDraftTimer(); // the answer carries the text; a late draft would only be stale
    var f = S.frame;
    var ref = nextRef();
    var frame = { type: "answer", questionnaireId: f.questionnaireId, step: f.step, questionId: f.question.id,
      selectedOptionIds: selectedOptionIds, ref: ref };
    if (other !== undefined) frame.other = other;
    if (send(frame)) setBusy(ref);
  }

  function chooseSingle(optionId) { answerWith([optionId]); }

  function toggleMulti(optionId) {
    if (S.busyRef !== null) return;
    if (S.conn !== "connected") { canAct(); return; }
    var L = S.local;
    if (L.selected.has(optionId)) L.selected.delete(optionId); else L.selected.add(optionId);
    updateQuestion();
    sendDraft();
  }

  function submitOtherSingle() {
    var text = S.local.otherText.trim();
    if (!text) { setFieldError("other", "Type an answer first, or press Escape to close."); return; }
    if (charCount(text) > OTHER_MAX) { setFieldError("other", "Please shorten your answer to " + OTHER_MAX + " characters."); return; }
    answerWith([], text);
  }

  function submitMulti() {
    var problem = continueProblem();
    if (problem) { $("continue-hint").textContent = problem; return; }
    var draft = currentDraft();
    answerWith(draft.selectedOptionIds, draft.other);
  }

  function sendClarify() {
    var text = S.local.clarifyText.trim();
    if (!text) { setFieldError("clarify", "Type your question for the agent first."); return; }
    if (charCount(text) > CLARIFY_MAX) { setFieldError("clarify", "Please shorten your question to " + CLARIFY_MAX + " characters."); return; }
    if (otherTooLong()) {
      // The clarification carries the draft, and a draft cannot carry this text.
      setFieldError("clarify", "First shorten your own answer (Other) to " + OTHER_MAX +
        " characters: the question comes back with it after the agent's reply.");
      return;
    }
    if (!canAct()) return;
    dropDraftTimer(); // the clarify frame carries the draft
    var f = S.frame;
    var ref = nextRef();
    var frame = { type: "clarify", questionnaireId: f.questionnaireId, step: f.step, request: text, ref: ref };
    frame.draft = currentDraft();
    if (send(frame)) setBusy(ref);
  }

  function openCancelDialog(opener) {
    var dialog = $("cancel-dialog");
    var target = S.suspended || S.frame;
    if (!target) return;
    dialog._opener = opener || null;
    // The dialog is about this questionnaire and no other: see dropStaleCancelDialog().
    dialog._questionnaireId = target.questionnaireId;
    if (typeof dialog.showModal === "function") dialog.showModal(); else dialog.setAttribute("open", "");
    $("cancel-keep").focus();
  }

  function closeCancelDialog() {
    var dialog = $("cancel-dialog");
    if (dialog.open) { if (typeof dialog.close === "function") dialog.close(); else dialog.removeAttribute("open"); }
  }

  /** The questionnaire the cancel dialog was opened for is no longer the one shown (the agent
   * withdrew it, or it was answered elsewhere, and another one may have taken its place):
   * close the dialog, so that a confirmation can never cancel a questionnaire the person has
   * not seen. */
  function dropStaleCancelDialog(shownId) {
    var dialog = $("cancel-dialog");
    if (!dialog.open || dialog._questionnaireId === shownId) return;
    dialog._questionnaireId = null;
    closeCancelDialog();
    toast("info", "Nothing was cancelled",
      "The questionnaire you were about to cancel ended before you confirmed.", 8000);
  }

  function confirmCancel() {
    var dialog = $("cancel-dialog");
    var questionnaireId = dialog._questionnaireId;
    dialog._questionnaireId = null;
    closeCancelDialog();
    var target = S.suspended || S.frame;
    // Only ever the questionnaire the dialog was opened for.
    if (!target || !questionnaireId || target.questionnaireId !== questionnaireId) return;
    if (!canAct()) return;
    dropDraftTimer();
    var ref = nextRef();
    if (send({ type: "cancel", questionnaireId: target.questionnaireId, step: target.step, ref: ref })) setBusy(ref);
  }

  // ------------------------------------------------------------------ views

  function setView(name, key, node, title) {
    var main = $("main");
    S.view = name;
    S.viewKey = key;
    main.setAttribute("data-view", name);
    main.replaceChildren(node);
    document.title = title;
    S.titleBase = title;
  }

  function flagTitle() {
    if (document.hidden && S.titleBase) {
      S.titleFlag = true;
      document.title = "● " + S.titleBase;
    }
  }

  function focusFirst(selector) {
    // Keyboard-first: the highlight starts on the first option, as in the terminal client.
    // Not on touch screens, where a focus ring on an untouched button is only noise.
    if (window.matchMedia && window.matchMedia("(pointer: coarse)").matches) return;
    var el = document.querySelector(selector);
    if (el && !$("cancel-dialog").open) {
      try { el.focus({ preventScroll: true }); } catch (e) { el.focus(); }
    }
  }

  function renderSetup(params, hint) {
    var example = window.location.origin + window.location.pathname + "#session=SESSION_ID&token=CLIENT_TOKEN";
    var sessionInput = h("input", { id: "setup-session", type: "text", autocomplete: "off", spellcheck: "false",
      value: params.session || "", required: true, "aria-describedby": "setup-session-help" });
    var tokenInput = h("input", { id: "setup-token", type: "password", autocomplete: "off", spellcheck: "false",
      value: params.token || "", required: true });
    var error = h("p", { class: "field-error", id: "setup-error", role: "alert" });
    var form = h("form", { class: "setup-form", novalidate: true, onsubmit: function (e) {
      e.preventDefault();
      var sid = sessionInput.value.trim();
      var tok = tokenInput.value.trim();
      if (!SESSION_RE.test(sid)) { error.textContent = "A session id is 1–128 letters, digits or . _ : -"; sessionInput.focus(); return; }
      if (!tok) { error.textContent = "Paste the client token too."; tokenInput.focus(); return; }
      window.location.hash = "session=" + encodeURIComponent(sid) + "&token=" + encodeURIComponent(tok);
    } },
      h("div", { class: "field" },
        h("label", { for: "setup-session", text: "Session id" }), sessionInput,
        h("span", { class: "field-help", id: "setup-session-help", text: "1–128 letters, digits or . _ : -" })),
      h("div", { class: "field" }, h("label", { for: "setup-token", text: "Client token" }), tokenInput),
      error,
      h("button", { type: "submit", class: "btn btn-primary", text: "Join session" }));

    var node = h("section", { class: "panel setup", "aria-labelledby": "setup-title" },
      h("h1", { class: "panel-title", id: "setup-title", text: "Open this page with a session link" }),
      h("p", { class: "panel-text", text: hint }),
      h("p", { class: "panel-text", text: "The link names the session and carries a client token after the # sign:" }),
      h("pre", { class: "code" }, h("code", { text: example })),
      h("p", { class: "panel-text" }, "The broker prints a ready-to-use link when it starts. To make one yourself, mint a token with ",
        h("code", { text: "qbroker token --session SESSION_ID --role client" }),
        ". The part after # is never sent in a web request, so it stays out of server logs; the page hands the token to the broker only inside its live connection."),
      h("details", { class: "setup-details" },
        h("summary", { text: "Or enter them here" }), form));
    setView("setup", null, node, "qbroker · link needed");
    setConn("failed", "No session");
  }

  function renderFatal(title, text, reason, noRetry) {
    var node = h("section", { class: "panel panel-center fatal", role: "alert", "aria-labelledby": "fatal-title" },
      h("div", { class: "fatal-icon", "aria-hidden": "true", text: "!" }),
      h("h1", { class: "panel-title", id: "fatal-title", text: title }),
      h("p", { class: "panel-text", text: text }),
      reason ? h("p", { class: "panel-text muted" }, "Broker said: ", h("q", { text: reason })) : null,
      noRetry ? null : h("button", { type: "button", class: "btn btn-secondary", text: "Try again", onclick: function () {
        S.attempt = 0; renderLoading(); connect();
      } }));
    setView("fatal", null, node, "qbroker · " + title);
  }

  function renderLoading() {
    var node = h("section", { class: "panel panel-center", "aria-busy": "true" },
      h("div", { class: "spinner", "aria-hidden": "true" }),
      h("p", { class: "panel-text", text: "Connecting to the broker…" }));
    setView("loading", null, node, "qbroker");
  }

  function renderIdle() {
    var last = S.lastClosed;
    var note = null;
    if (S.endedNote) {
      note = h("p", { class: "idle-note", "data-status": "ended", text: ENDED_UNSEEN + " " + ENDED_UNSEEN_WHY });
    } else if (last) {
      var text = last.status === "completed" ? "Your last answers were sent to the agent." :
        last.status === "cancelled" ? (last.reason === "aborted" ? "The agent withdrew its last questionnaire." : "You cancelled the last questionnaire.") :
          "The last questionnaire closed before it was finished.";
      note = h("p", { class: "idle-note", "data-status": last.status, text: text });
    }
    var node = h("section", { class: "panel panel-center idle", "aria-labelledby": "idle-title" },
      h("div", { class: "idle-art", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
      h("h1", { class: "panel-title", id: "idle-title", text: "Waiting for questions" }),
      h("p", { class: "panel-text", text: "When the agent asks you something it appears here straight away. Keep this page open." }),
      note);
    var active = document.activeElement;
    setView("idle", null, node, "qbroker · waiting for questions");
    if (active && active !== document.body && !document.contains(active)) $("main").focus({ preventScroll: true });
  }

  function progressNode(frame, current) {
    var items = (frame.progress || []).map(function (p) {
      var state = p.state;
      var icon = state === "answered" ? "✓" : "";
      var stateText = state === "answered" ? "answered" : state === "current" ? "current question" : "not answered yet";
      return h("li", { class: "step step-" + state, "aria-current": state === "current" ? "step" : null,
          title: p.label },
        h("span", { class: "step-icon", "aria-hidden": "true", text: icon }),
        h("span", { class: "step-label", text: p.label }),
        h("span", { class: "sr-only", text: " (" + stateText + ")" }));
    });
    var done = (frame.progress || []).filter(function (p) { return p.state === "answered"; }).length;
    var total = frame.total || items.length || 1;
    var bar = h("span", { class: "progress-fill" });
    bar.style.width = Math.round(100 * done / total) + "%";
    return h("nav", { class: "progress", "aria-label": "Progress" },
      h("div", { class: "progress-head" },
        h("span", { class: "progress-count", id: "progress-count",
          text: current ? "Question " + (frame.index + 1) + " of " + total : "Question " + (frame.index + 1) + " of " + total }),
        h("span", { class: "progress-done", text: done + " answered" })),
      h("div", { class: "progress-bar", "aria-hidden": "true" }, bar),
      h("ol", { class: "steps" }, items));
  }

  function latestResponse(frame) {
    var list = (frame.clarifications || []).filter(function (c) {
      return c.questionId === frame.question.id && typeof c.response === "string";
    });
    return list.length ? list[list.length - 1] : null;
  }

  function clarificationsNode(frame) {
    var list = (frame.clarifications || []).filter(function (c) {
      return c.questionId === frame.question.id && typeof c.response === "string";
    });
    if (!list.length) return null;
    function card(c, latest) {
      return h("div", { class: "clar" + (latest ? " clar-latest" : ""), "data-revision": c.revision },
        h("div", { class: "clar-row clar-ask" },
          h("span", { class: "clar-who", text: "You asked" }),
          h("p", { class: "clar-text", text: c.request })),
        h("div", { class: "clar-row clar-reply" },
          h("span", { class: "clar-who", text: "Agent" }),
          h("p", { class: "clar-text clar-response", text: c.response })));
    }
    var latest = list[list.length - 1];
    var earlier = list.slice(0, -1);
    return h("section", { class: "clarifications", "aria-label": "The agent's clarification" },
      earlier.length ? h("details", { class: "clar-earlier" },
        h("summary", { text: "Earlier clarifications (" + earlier.length + ")" }),
        earlier.map(function (c) { return card(c, false); })) : null,
      card(latest, true));
  }

  function optionButton(q, option, index) {
    var multi = q.type === "multi";
    return h("button", { type: "button", class: "option", "data-option-id": option.id,
        "aria-pressed": multi ? "false" : null,
        onclick: function () { if (multi) toggleMulti(option.id); else chooseSingle(option.id); } },
      h("span", { class: "option-mark", "aria-hidden": "true" }),
      h("span", { class: "option-body" },
        h("span", { class: "option-label", text: option.label }),
        option.description ? h("span", { class: "option-desc", text: option.description }) : null),
      !multi ? h("span", { class: "option-go", "aria-hidden": "true", text: "→" }) : null);
  }

  function textField(kind, opts) {
    // kind: "other" | "clarify"
    var inputId = kind + "-input";
    var counter = h("span", { class: "counter", id: kind + "-count", "aria-live": "off" });
    var error = h("span", { class: "field-error", id: kind + "-error", role: "alert" });
    var help = h("span", { class: "field-help", id: kind + "-help", text: opts.help });
    var input = h(opts.multiline ? "textarea" : "input", {
      id: inputId, class: "text-input", autocomplete: "off", rows: opts.multiline ? 3 : null,
      type: opts.multiline ? null : "text", placeholder: opts.placeholder,
      "aria-describedby": kind + "-help " + kind + "-count " + kind + "-error",
    });
    input.addEventListener("input", function () { opts.onInput(input.value); updateCounter(kind); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); opts.onEnter(); }
      else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); opts.onEscape(); }
    });
    return h("div", { class: "field field-" + kind, id: kind + "-panel", hidden: true },
      h("label", { for: inputId, class: "field-label", text: opts.label }),
      h("div", { class: "field-row" }, input, opts.button || null),
      h("div", { class: "field-meta" }, help, counter),
      error);
  }

  function updateCounter(kind) {
    var input = $(kind + "-input");
    var counter = $(kind + "-count");
    if (!input || !counter) return;
    var limit = kind === "other" ? OTHER_MAX : CLARIFY_MAX;
    var n = charCount(input.value.trim());
    counter.textContent = n + " / " + limit;
    counter.classList.toggle("over", n > limit);
    counter.classList.toggle("near", n <= limit && n > limit * 0.9);
    counter.setAttribute("aria-label", n + " of " + limit + " characters used");
    var err = $(kind + "-error");
    if (err) err.textContent = n > limit ? "That is " + plural(n - limit, "character", "characters") + " too long." : "";
  }

  function setFieldError(kind, text) {
    var err = $(kind + "-error");
    if (err) err.textContent = text;
    var input = $(kind + "-input");
    if (input) input.focus();
  }

  function renderQuestion(frame, resumed) {
    var q = frame.question;
    var multi = q.type === "multi";
    var L = S.local;
    var hintText = multi ? boundsSentence(bounds().min, bounds().max) +
      (q.allowOther ? " Other counts as one." : "") : "Choose one.";

    var options = q.options.map(function (o, i) { return optionButton(q, o, i); });
    if (q.allowOther) {
      options.push(h("button", { type: "button", class: "option option-other", id: "other-open",
          "aria-expanded": "false", "aria-controls": "other-panel", "aria-pressed": multi ? "false" : null,
          onclick: function () { toggleOther(); } },
        h("span", { class: "option-mark", "aria-hidden": "true" }),
        h("span", { class: "option-body" },
          h("span", { class: "option-label", text: "Other…" }),
          h("span", { class: "option-desc", text: "Type your own answer" }))));
    }
    var optionsGroup = h("div", { class: "options", role: "group", "aria-labelledby": "q-prompt",
      "aria-describedby": "q-hint", onkeydown: onOptionsKey }, options);

    var otherField = q.allowOther ? textField("other", {
      label: multi ? "Your own answer (counts as one selection)" : "Your own answer",
      placeholder: "Type your answer",
      help: multi ? "Enter continues · Esc removes it" : "Enter submits · Esc closes",
      multiline: false,
      button: multi ? null : h("button", { type: "button", class: "btn btn-primary", id: "other-submit",
        text: "Submit", onclick: submitOtherSingle }),
      onInput: function (value) {
        L.otherText = value;
        updateQuestion();
        // Typed text is saved too (debounced), so a reload or a clarification keeps it.
        if (S.draftTextTimer) window.clearTimeout(S.draftTextTimer);
        S.draftTextTimer = window.setTimeout(sendDraft, DRAFT_TEXT_DEBOUNCE_MS);
        updateDraftState();
      },
      onEnter: function () { if (multi) submitMulti(); else submitOtherSingle(); },
      onEscape: function () { closeOther(true); },
    }) : null;

    var continueRow = multi ? h("div", { class: "continue-row" },
      h("button", { type: "button", class: "btn btn-primary btn-continue", id: "continue",
        "aria-describedby": "continue-hint", onclick: submitMulti }),
      h("p", { class: "continue-hint", id: "continue-hint", "aria-live": "polite" }),
      h("span", { class: "draft-state", id: "draft-state", "data-state": "saved" })) : null;

    var clarifyField = textField("clarify", {
      label: "What would you like to ask the agent about this question?",
      placeholder: "e.g. What does the release window involve?",
      help: "Enter sends · Shift+Enter adds a line · Esc closes",
      multiline: true,
      button: null,
      onInput: function (value) { L.clarifyText = value; },
      onEnter: sendClarify,
      onEscape: function () { closeClarify(true); },
    });
    clarifyField.appendChild(h("div", { class: "field-actions" },
      h("button", { type: "button", class: "btn btn-secondary", text: "Close", onclick: function () { closeClarify(true); } }),
      h("button", { type: "button", class: "btn btn-primary", id: "clarify-send", text: "Send", onclick: sendClarify })));

    var actions = h("div", { class: "secondary-actions" },
      h("button", { type: "button", class: "btn btn-ghost", id: "clarify-open", "aria-expanded": "false",
        "aria-controls": "clarify-panel", text: "Ask to clarify…", onclick: function () { toggleClarify(); } }),
      h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "cancel-open",
        text: "Cancel questionnaire", onclick: function (e) { openCancelDialog(e.currentTarget); } }));

    var card = h("article", { class: "card question-card", "aria-labelledby": "q-label q-prompt",
        "data-question-id": q.id, "data-question-type": q.type },
      offlineBanner(),
      endedNoteNode(frame.questionnaireId),
      progressNode(frame, true),
      clarificationsNode(frame),
      h("header", { class: "q-head" },
        h("p", { class: "q-label", id: "q-label", text: q.label || q.id }),
        h("h1", { class: "q-prompt", id: "q-prompt", text: q.prompt }),
        h("p", { class: "q-hint", id: "q-hint", text: hintText })),
      optionsGroup,
      otherField,
      continueRow,
      actions,
      clarifyField);

    var title = "(" + (frame.index + 1) + "/" + frame.total + ") " + (q.label || q.id) + " · qbroker";
    setView("question", frame.questionnaireId + ":" + frame.step + ":" + q.id, card, title);
    updateQuestion();
    updateOfflineBanner();
    window.scrollTo(0, 0);
    focusFirst(multi ? ".options .option[aria-pressed='true'], .options .option" : ".options .option");
  }

  /** Bring the rendered question in line with S.local and S.frame without rebuilding it. */
  function updateQuestion() {
    if (S.view !== "question" || !S.frame || !S.local) return;
    var q = S.frame.question;
    var L = S.local;
    var multi = q.type === "multi";
    document.querySelectorAll(".options .option[data-option-id]").forEach(function (btn) {
      var on = L.selected.has(btn.getAttribute("data-option-id"));
      if (multi) btn.setAttribute("aria-pressed", on ? "true" : "false");
    });
    var otherBtn = $("other-open");
    var otherPanel = $("other-panel");
    if (otherBtn && otherPanel) {
      otherBtn.setAttribute("aria-expanded", L.otherOpen ? "true" : "false");
      // Pressed (a tick) exactly when it counts as a selection, as "Continue with N" counts it.
      if (multi) otherBtn.setAttribute("aria-pressed", otherSelected() ? "true" : "false");
      otherPanel.hidden = !L.otherOpen;
      var input = $("other-input");
      if (input.value !== L.otherText && document.activeElement !== input) input.value = L.otherText;
      updateCounter("other");
    }
    var clarifyPanel = $("clarify-panel");
    clarifyPanel.hidden = !L.clarifyOpen;
    $("clarify-open").setAttribute("aria-expanded", L.clarifyOpen ? "true" : "false");
    updateCounter("clarify");
    if (multi) {
      var n = selectionCount();
      var problem = continueProblem();
      var btn = $("continue");
      btn.textContent = "Continue with " + plural(n, "selection", "selections");
      btn.disabled = !!problem;
      var hint = $("continue-hint");
      hint.textContent = problem;
      hint.hidden = !problem;
      updateDraftState();
    }
    // The progress list and clarifications can change with a draft echo only in theory;
    // they are part of the step, which rebuilt the view when it changed.
  }

  function onOptionsKey(e) {
    var keys = ["ArrowDown", "ArrowUp", "ArrowLeft", "ArrowRight", "Home", "End"];
    if (keys.indexOf(e.key) < 0) return;
    var buttons = Array.prototype.slice.call(document.querySelectorAll(".options .option"));
    var i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    e.preventDefault();
    var next = i;
    if (e.key === "ArrowDown" || e.key === "ArrowRight") next = (i + 1) % buttons.length;
    else if (e.key === "ArrowUp" || e.key === "ArrowLeft") next = (i - 1 + buttons.length) % buttons.length;
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = buttons.length - 1;
    buttons[next].focus();
  }

  function toggleOther() {
    var L = S.local;
    if (L.otherOpen) { closeOther(false); return; }
    L.otherOpen = true;
    updateQuestion();
    $("other-input").focus();
    if (L.otherText.trim()) sendDraft();
  }

  function closeOther(refocus) {
    var L = S.local;
    var hadText = !!L.otherText.trim();
    L.otherOpen = false;
    var err = $("other-error");
    if (err) err.textContent = "";
    updateQuestion();
    if (hadText) sendDraft();
    if (refocus && $("other-open")) $("other-open").focus();
  }

  function toggleClarify() {
    var L = S.local;
    if (L.clarifyOpen) { closeClarify(false); return; }
    L.clarifyOpen = true;
    updateQuestion();
    $("clarify-input").focus();
  }

  function closeClarify(refocus) {
    S.local.clarifyOpen = false;
    var err = $("clarify-error");
    if (err) err.textContent = "";
    updateQuestion();
    if (refocus) $("clarify-open").focus();
  }

  function offlineBanner() {
    return h("div", { class: "offline-banner", id: "offline-banner", role: "status", hidden: true },
      h("strong", { text: "Connection lost." }),
      " Reconnecting by itself. Answers you already sent are saved by the broker; " +
      "nothing you do here is sent until the connection is back.");
  }

  /** Above a questionnaire shown right after a reconnect, when the one before ended unseen. */
  function endedNoteNode(shownId) {
    if (!S.endedNote || S.endedNote.shownId !== shownId) return null;
    var node = h("div", { class: "ended-note", role: "note" },
      h("p", { class: "ended-note-text" },
        h("strong", { text: ENDED_UNSEEN }), " " + ENDED_UNSEEN_WHY + " The questions below are another questionnaire."),
      h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss this note", text: "×",
        onclick: function () { S.endedNote = null; node.remove(); } }));
    return node;
  }

  function updateOfflineBanner() {
    var banner = $("offline-banner");
    if (banner) banner.hidden = S.conn === "connected" || S.conn === "connecting" && !S.everConnected;
  }

  function renderSuspended(frame) {
    var q = S.frame && S.frame.questionnaireId === frame.questionnaireId ? S.frame : null;
    var label = frame.label || null; // (a page opened during the wait has no question frame)
    if (!label && q && q.progress) {
      q.progress.forEach(function (p) { if (p.questionId === frame.questionId) label = p.label; });
    }
    var place = !q && typeof frame.index === "number" && frame.total > 1
      ? " (question " + (frame.index + 1) + " of " + frame.total + ")" : "";
    var card = h("article", { class: "card waiting-card", "aria-labelledby": "waiting-title" },
      offlineBanner(),
      endedNoteNode(frame.questionnaireId),
      q ? progressNode(q, true) : null,
      h("div", { class: "waiting" },
        h("div", { class: "waiting-spinner", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
        h("h1", { class: "waiting-title", id: "waiting-title", text: "Waiting for the agent…" }),
        h("p", { class: "panel-text", text: "You asked about " + (label ? "“" + label + "”" : "this question") + place + ":" }),
        h("blockquote", { class: "waiting-request", text: frame.request || "" }),
        h("p", { class: "panel-text muted",
          text: "The agent is preparing an answer. The same question comes back here with its reply, and your selections so far are kept." })),
      h("div", { class: "secondary-actions" },
        h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "cancel-open",
          text: "Cancel questionnaire", onclick: function (e) { openCancelDialog(e.currentTarget); } })));
    setView("suspended", frame.questionnaireId + ":" + frame.step, card, "Waiting for the agent · qbroker");
    updateOfflineBanner();
    window.scrollTo(0, 0);
    var active = document.activeElement;
    if (!active || active === document.body || !document.contains(active)) $("main").focus({ preventScroll: true });
  }

  // ------------------------------------------------------------------ toasts

  /** A message in the corner; `code` is shown (small) unless `hideCode`, and always kept in data-code. */
  function toast(kind, title, text, ttl, code, hideCode) {
    var box = $("toasts");
    while (box.children.length >= 4) box.removeChild(box.firstChild);
    var node = h("div", { class: "toast toast-" + kind, role: kind === "error" ? "alert" : "status",
        "data-code": code || null },
      h("div", { class: "toast-body" },
        h("strong", { class: "toast-title", text: title }),
        text ? h("span", { class: "toast-text", text: text }) : null,
        code && !hideCode ? h("span", { class: "toast-code", text: code }) : null),
      h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss message", text: "×",
        onclick: function () { node.remove(); } }));
    box.appendChild(node);
    window.setTimeout(function () { node.remove(); }, ttl || 8000);
  }

  // ------------------------------------------------------------------ start-up

  function start() {
    clearTimers();
    if (S.ws) { var old = S.ws; S.ws = null; try { old.close(1000, "switching session"); } catch (e) { /* ignore */ } }
    S.attempt = 0;
    S.everConnected = false;
    S.frame = S.suspended = S.local = null;
    $("cancel-dialog")._questionnaireId = null;
    closeCancelDialog(); // a new session: whatever it was about is not on screen any more
    var params = parseFragment();
    var query = new URLSearchParams(window.location.search);
    if (!params.session || !params.token) {
      var hint = query.get("token") || query.get("session")
        ? "The session and token must come after a # sign, not a ? — a query string ends up in server logs."
        : !params.session && !params.token ? "This link does not say which session to join."
          : !params.session ? "The link has a token but no session id." : "The link names a session but has no token.";
      renderSetup(params, hint);
      return;
    }
    if (!SESSION_RE.test(params.session)) {
      renderSetup(params, "“" + params.session + "” is not a valid session id (1–128 letters, digits or . _ : -).");
      return;
    }
    S.sid = params.session;
    S.token = params.token;
    var name = $("session-name");
    name.hidden = false;
    name.textContent = S.sid;
    name.title = "Session " + S.sid;
    renderLoading();
    connect();
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("conn-retry").addEventListener("click", retryNow);
    $("cancel-keep").addEventListener("click", closeCancelDialog);
    $("cancel-confirm").addEventListener("click", confirmCancel);
    $("cancel-dialog").addEventListener("close", function () {
      var opener = this._opener;
      this._opener = null;
      if (opener && document.contains(opener)) opener.focus();
    });
    $("cancel-dialog").addEventListener("click", function (e) {
      if (e.target === this) closeCancelDialog(); // a click on the backdrop
    });
    window.addEventListener("hashchange", start);
    window.addEventListener("online", retryNow);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) {
        if (S.titleFlag && S.titleBase) { document.title = S.titleBase; S.titleFlag = false; }
        retryNow();
      }
    });
    start();
  });
})();
