/* The inbox's screen: the questionnaires waiting across sessions, the offer of the next one
 * after one ended, and the two settings (notifications, remembering the token), drawn from
 * the inbox's state (inbox.mjs).
 *
 * The list is updated in place, item by item (keyed by session and questionnaire), never
 * rebuilt: a keyboard user's focus, and a screen reader's place, stay on the item they were
 * on while others arrive or go.
 */

import { $, h } from "./dom.mjs";
import { describeItem, itemName } from "./inbox.mjs";
import { refusalPanel } from "./refusal-view.mjs";

/** `actions`: choose(key), answerNext(), askNotifications(), remember(), forget(), tryAgain(), signIn(), signOut(). */
export function createInboxView(actions) {
  const ids = new Map(); // item key -> a DOM id of its own
  let idSeq = 0;

  function idFor(key) {
    if (!ids.has(key)) {
      idSeq += 1;
      ids.set(key, "inbox-item-" + idSeq);
    }
    return ids.get(key);
  }

  function itemNode(key) {
    const id = idFor(key);
    const button = h("button", { type: "button", class: "inbox-item", id, "data-key": key,
        "aria-describedby": id + "-prompt " + id + "-meta",
        onclick: () => actions.choose(key) },
      h("span", { class: "inbox-item-top" },
        h("span", { class: "inbox-label", id: id + "-label" }),
        h("span", { class: "inbox-status", id: id + "-status" })),
      h("span", { class: "inbox-prompt", id: id + "-prompt" }),
      h("span", { class: "inbox-meta" },
        h("span", { class: "inbox-session", id: id + "-session" }),
        h("span", { class: "inbox-meta-rest", id: id + "-meta" })),
      h("span", { class: "inbox-go", "aria-hidden": "true", text: "→" }));
    return h("li", { class: "inbox-entry", "data-key": key }, button);
  }

  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  function updateItem(li, item, now) {
    const d = describeItem(item, now);
    const id = idFor(d.key);
    const button = li.firstChild;
    button.setAttribute("data-status", item.status);
    button.setAttribute("aria-label", itemName(item)); // its name; the prompt and the rest describe it
    setText($(id + "-label"), d.label);
    setText($(id + "-status"), d.status);
    setText($(id + "-prompt"), d.prompt);
    setText($(id + "-session"), d.session);
    setText($(id + "-meta"), d.meta ? " · " + d.meta : "");
  }

  /** Arrow keys, Home and End move between the items (Tab does too). */
  function onListKey(e) {
    if (["ArrowDown", "ArrowUp", "Home", "End"].indexOf(e.key) < 0) return;
    const buttons = Array.from(document.querySelectorAll(".inbox-list .inbox-item"));
    const i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    e.preventDefault();
    let next = i;
    if (e.key === "ArrowDown") next = Math.min(buttons.length - 1, i + 1);
    else if (e.key === "ArrowUp") next = Math.max(0, i - 1);
    else if (e.key === "Home") next = 0;
    else next = buttons.length - 1;
    buttons[next].focus();
  }

  function build() {
    return h("section", { class: "panel inbox", "aria-labelledby": "inbox-title" },
      h("div", { class: "inbox-head" },
        h("h1", { class: "panel-title", id: "inbox-title", tabindex: "-1", text: "Inbox" }),
        h("p", { class: "inbox-summary", id: "inbox-summary" })),
      h("div", { class: "inbox-offer", id: "inbox-offer", hidden: true },
        h("p", { class: "inbox-offer-title", id: "inbox-offer-title" }),
        h("p", { class: "inbox-offer-text", id: "inbox-offer-text" }),
        h("button", { type: "button", class: "btn btn-primary", id: "inbox-offer-open", text: "Answer next",
          onclick: () => actions.answerNext() })),
      h("ul", { class: "inbox-list", id: "inbox-list", "aria-labelledby": "inbox-title", onkeydown: onListKey }),
      h("div", { class: "inbox-empty", id: "inbox-empty", hidden: true },
        h("div", { class: "idle-art", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
        h("p", { class: "panel-text", text: "New questions appear here as soon as an agent asks. Keep this page open." })),
      h("div", { class: "inbox-settings" },
        h("div", { class: "inbox-setting", id: "notify-setting" },
          h("p", { class: "inbox-setting-text", id: "notify-text" }),
          h("button", { type: "button", class: "btn btn-secondary", id: "notify-ask",
            onclick: () => actions.askNotifications() })),
        h("div", { class: "inbox-setting", id: "account-setting", hidden: true },
          h("p", { class: "inbox-setting-text", id: "account-text" }),
          h("button", { type: "button", class: "btn btn-secondary", id: "sign-out", text: "Sign out",
            onclick: () => actions.signOut() })),
        h("div", { class: "inbox-setting", id: "remember-setting" },
          h("p", { class: "inbox-setting-text", id: "remember-text" }),
          h("button", { type: "button", class: "btn btn-secondary", id: "remember-token",
            text: "Remember my token in this browser", onclick: () => actions.remember() }),
          h("button", { type: "button", class: "btn btn-ghost btn-ghost-danger", id: "forget-token",
            text: "Forget my token", onclick: () => actions.forget() }))));
  }

  function updateList(inbox, now) {
    const list = $("inbox-list");
    const items = inbox.list();
    const active = document.activeElement;
    const activeKey = active && active.classList && active.classList.contains("inbox-item")
      ? active.getAttribute("data-key") : null;
    const activeIndex = activeKey ? Array.from(list.children).findIndex((li) => li.getAttribute("data-key") === activeKey) : -1;
    const existing = new Map(Array.from(list.children).map((li) => [li.getAttribute("data-key"), li]));
    const keys = new Set();
    items.forEach((item, i) => {
      const key = describeItem(item, now).key;
      keys.add(key);
      let li = existing.get(key);
      if (!li) li = itemNode(key);
      if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
      updateItem(li, item, now);
    });
    existing.forEach((li, key) => { if (!keys.has(key)) li.remove(); });
    // Moving or removing the focused item takes the focus away: give it back, to the same
    // item, or to the one now in its place.
    if (activeKey && document.activeElement !== active) {
      const again = keys.has(activeKey) ? $(idFor(activeKey)) : null;
      const buttons = list.querySelectorAll(".inbox-item");
      const fallback = buttons[Math.min(Math.max(activeIndex, 0), buttons.length - 1)];
      const target = again || fallback || $("inbox-title");
      if (target) target.focus({ preventScroll: true });
    }
    $("inbox-empty").hidden = !inbox.loaded || items.length > 0;
  }

  function updateOffer(inbox) {
    const offer = inbox.offer();
    $("inbox-offer").hidden = !offer;
    if (!offer) return;
    setText($("inbox-offer-title"), offer.title);
    setText($("inbox-offer-text"), offer.next ? "Next waiting: " + itemName(offer.next) + "." : "Nothing else is waiting for you.");
    $("inbox-offer-open").hidden = !offer.next;
  }

  function updateSettings(settings) {
    const notify = settings.notify;
    setText($("notify-text"), notify.text);
    const ask = $("notify-ask");
    ask.hidden = !notify.button;
    if (notify.button) setText(ask, notify.button);
    ask.disabled = !!settings.asking;
    $("notify-setting").setAttribute("data-state", notify.state);
    setText($("remember-text"), settings.remembered
      ? "This browser remembers your token, so this page opens your inbox without a link."
      : "Without the link, this page cannot find your inbox again. Keep the token in this browser only if nobody else uses it.");
    $("remember-token").hidden = settings.remembered || !settings.storage;
    $("forget-token").hidden = !settings.remembered;
    // Signed in, there is no token to remember: the sign-in is the way back.
    $("remember-setting").hidden = !!settings.signedIn;
    $("account-setting").hidden = !settings.signedIn;
    if (settings.signedIn) setText($("account-text"), settings.who ? "Signed in as " + settings.who + "." : "Signed in.");
  }

  return {
    /** Draw the inbox (building it when it is not on screen). `settings`: {notify (the
     * notification control), asking, remembered, storage}; `fatal`: a close that is not
     * retried (refusals.mjs's refusalScreen) or null. Returns true when it was built. */
    render(inbox, now, settings, fatal) {
      const main = $("main");
      if (fatal) {
        if (main.getAttribute("data-view") !== "inbox-fatal") {
          main.setAttribute("data-view", "inbox-fatal");
          main.replaceChildren(refusalPanel(fatal, actions));
          return true;
        }
        return false;
      }
      let built = false;
      if (main.getAttribute("data-view") !== "inbox" || !$("inbox-list")) {
        main.setAttribute("data-view", "inbox");
        main.replaceChildren(build());
        built = true;
      }
      setText($("inbox-summary"), inbox.summary());
      updateOffer(inbox);
      updateList(inbox, now);
      updateSettings(settings);
      return built;
    },

    /** Focus the offer's button, else the item `key`, else the first item, else the heading. */
    focus(key) {
      const offer = $("inbox-offer-open");
      const item = key ? document.querySelector(".inbox-item[data-key='" + CSS.escape(key) + "']") : null;
      const target = (offer && !offer.hidden && !$("inbox-offer").hidden ? offer : null) || item ||
        document.querySelector(".inbox-list .inbox-item") || $("inbox-title");
      if (target) target.focus({ preventScroll: false });
    },

    /** The bar over a questionnaire answered from the inbox: back, and how many others wait. */
    showBar(shown, othersWaiting) {
      const bar = $("inbox-bar");
      bar.hidden = !shown;
      if (!shown) return;
      setText($("inbox-bar-count"), othersWaiting > 0
        ? othersWaiting + (othersWaiting === 1 ? " other waits" : " others wait") + " for you" : "Nothing else waits for you");
    },
  };
}
