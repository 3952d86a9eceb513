/* The inbox: every questionnaire open in the sessions the page's token covers, kept in step
 * with the broker's inbox socket (`inbox`, `inbox_item`, `inbox_removed` frames), in the
 * order the person works through them, and what the page says about them. Pure: no DOM, no
 * socket, no clock (`now` comes in, in milliseconds).
 *
 * Theory of operation
 *   The broker is the source of truth: an `inbox` frame (on every connect and reconnect)
 *   replaces the whole list, `inbox_item` adds or replaces one item, `inbox_removed` drops
 *   one. What is new is what starts waiting for the person (a new item, or one the agent
 *   has just answered a clarification of): `receive` names those `arrived`, so that the page
 *   can announce them and, in a background tab, raise a notification. The first list after
 *   the page opens is what was already there, never news; a list after a reconnect is
 *   compared with what the page knew.
 *
 *   The person answers one item at a time in place (`open(key)`); when it ends (`ended`),
 *   the page goes back to the list and offers the next one waiting (`offered()`), which is
 *   recomputed from the live list, so that an offer answered elsewhere meanwhile is never
 *   shown.
 */

import { plural } from "./text.mjs";

export const WAITING = "in_progress"; // waiting for the person
export const WITH_AGENT = "needs_clarification"; // the person asked; waiting for the agent

/** The key of a questionnaire in the inbox (session ids never contain a space). */
export function itemKey(sessionId, questionnaireId) {
  return String(sessionId) + " " + String(questionnaireId);
}

const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([+-])(\d{2}):?(\d{2}))$/;

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
 * days_from_civil), so that an ISO time is read without the clock's Date. */
function daysFromCivil(y, m, d) {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** Milliseconds since the epoch from what the broker sends: Unix seconds (or milliseconds)
 * as a number, or an ISO 8601 UTC/offset time; null when there is nothing usable. */
export function timeMs(value) {
  if (typeof value === "number" && Number.isFinite(value)) return value < 1e11 ? value * 1000 : value;
  const m = typeof value === "string" ? ISO.exec(value) : null;
  if (!m) return null;
  const n = (i) => Number(m[i]);
  let ms = ((daysFromCivil(n(1), n(2), n(3)) * 24 + n(4)) * 60 + n(5)) * 60000 + n(6) * 1000;
  if (m[7]) ms += Math.round(Number("0" + m[7]) * 1000);
  if (m[9]) ms -= (m[9] === "-" ? -1 : 1) * (n(10) * 60 + n(11)) * 60000;
  return ms;
}

/** Waiting for the person first, then oldest first; ties broken by session and id, so the
 * order never flickers between two renders of the same list. */
export function compareItems(a, b) {
  const rank = (item) => (item.status === WAITING ? 0 : 1);
  if (rank(a) !== rank(b)) return rank(a) - rank(b);
  const ta = timeMs(a.createdAt);
  const tb = timeMs(b.createdAt);
  if (ta !== tb) return (ta === null ? Infinity : ta) - (tb === null ? Infinity : tb);
  if (a.sessionId !== b.sessionId) return a.sessionId < b.sessionId ? -1 : 1;
  return a.questionnaireId < b.questionnaireId ? -1 : a.questionnaireId > b.questionnaireId ? 1 : 0;
}

function usable(item) {
  return !!item && typeof item === "object" && typeof item.sessionId === "string" &&
    typeof item.questionnaireId === "string";
}

export class InboxState {
  constructor() {
    this.items = new Map(); // key -> item, as the broker last sent it
    this.loaded = false; // an `inbox` frame came: the list is known
    this.answering = null; // the key of the item being answered in place, or null
    this.endedInfo = null; // {key, status} of the one answered last, for the offer
  }

  // ---------------------------------------------------------------- frames

  /** A frame from the inbox socket: {changed, arrived: [item], removed: [item], unknown}. */
  receive(frame) {
    const out = { changed: false, arrived: [], removed: [], unknown: null };
    switch (frame.type) {
      case "inbox": this.onList(frame, out); break;
      case "inbox_item": this.onItem(frame.item, out); break;
      case "inbox_removed": this.onRemoved(frame, out); break;
      case "welcome": case "pong": case "error": break; // the connection's, not the list's
      default: out.unknown = String(frame.type);
    }
    return out;
  }

  onList(frame, out) {
    const before = this.items;
    const first = !this.loaded;
    this.items = new Map();
    (Array.isArray(frame.items) ? frame.items : []).filter(usable).forEach((item) => {
      this.items.set(itemKey(item.sessionId, item.questionnaireId), item);
    });
    this.loaded = true;
    out.changed = true;
    if (first) return; // what was already there when the page opened is not news
    this.items.forEach((item, key) => {
      if (startsWaiting(before.get(key), item)) out.arrived.push(item);
    });
    before.forEach((item, key) => { if (!this.items.has(key)) out.removed.push(item); });
  }

  onItem(item, out) {
    if (!usable(item)) return;
    const key = itemKey(item.sessionId, item.questionnaireId);
    const before = this.items.get(key);
    this.items.set(key, item);
    out.changed = true;
    if (startsWaiting(before, item)) out.arrived.push(item);
  }

  onRemoved(frame, out) {
    const key = itemKey(frame.sessionId, frame.questionnaireId);
    const item = this.items.get(key);
    if (!item) return;
    this.items.delete(key);
    out.changed = true;
    out.removed.push(item);
  }

  // ---------------------------------------------------------------- reading

  get(key) {
    return this.items.get(key) || null;
  }

  /** Every item, in order. */
  list() {
    return Array.from(this.items.values()).sort(compareItems);
  }

  /** How many wait for the person (the title's count). */
  waitingCount() {
    let n = 0;
    this.items.forEach((item) => { if (item.status === WAITING) n += 1; });
    return n;
  }

  /** How many wait for the agent's reply to the person's question. */
  withAgentCount() {
    return this.items.size - this.waitingCount();
  }

  /** The first item waiting for the person, other than `exceptKey`, or null. */
  nextWaiting(exceptKey = null) {
    return this.list().find((item) => item.status === WAITING &&
      itemKey(item.sessionId, item.questionnaireId) !== exceptKey) || null;
  }

  /** The line under the inbox's heading. */
  summary() {
    if (!this.loaded) return "Loading…";
    const waiting = this.waitingCount();
    const withAgent = this.withAgentCount();
    if (!waiting && !withAgent) return "Nothing is waiting for you.";
    const parts = [];
    if (waiting) parts.push(plural(waiting, "questionnaire waits", "questionnaires wait") + " for you");
    if (withAgent) parts.push(plural(withAgent, "waits", "wait") + " for the agent's reply");
    return parts.join(" · ") + ".";
  }

  // ---------------------------------------------------------------- answering in place

  /** The person chose `key` to answer. */
  open(key) {
    this.answering = key;
    this.endedInfo = null;
  }

  /** Back to the list without finishing (the questionnaire stays open). */
  back() {
    const key = this.answering;
    this.answering = null;
    return key;
  }

  /** The questionnaire being answered ended (`status`: completed, cancelled, unavailable;
   * null when the session simply had nothing open any more). Back to the list, with the next
   * one offered. */
  ended(status) {
    this.endedInfo = { key: this.answering, status: status || null };
    this.answering = null;
  }

  /** The item offered after one ended (the first waiting one), or null; and null when no
   * questionnaire ended since the list was last chosen from. */
  offered() {
    if (!this.endedInfo) return null;
    return this.nextWaiting(this.endedInfo.key);
  }

  /** What the offer says: {title, next} (next: the item, or null when nothing else waits). */
  offer() {
    if (!this.endedInfo) return null;
    return { title: endedTitle(this.endedInfo.status), next: this.offered() };
  }

  /** The person moved on from the offer (chose something, or dismissed it). */
  dropOffer() {
    this.endedInfo = null;
  }
}

function startsWaiting(before, item) {
  return item.status === WAITING && (!before || before.status !== WAITING);
}

function endedTitle(status) {
  if (status === "completed") return "Answers sent.";
  if (status === "cancelled") return "Questionnaire cancelled.";
  if (status) return "That questionnaire closed.";
  return "That questionnaire is no longer open.";
}

// -------------------------------------------------------------------- what the page says

/** "just now", "5 min ago", "3 h ago", "2 days ago" (empty when the time is unknown). */
export function ago(thenMs, nowMs) {
  if (thenMs === null || thenMs === undefined) return "";
  const seconds = Math.max(0, Math.round((nowMs - thenMs) / 1000));
  if (seconds < 60) return "just now";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes + " min ago";
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return hours + " h ago";
  return Math.floor(hours / 24) + " days ago";
}

/** How many screens have the session open, from the item's `clients` (a count or a list). */
export function screens(clients) {
  if (typeof clients === "number" && clients >= 0) return Math.floor(clients);
  if (Array.isArray(clients)) return clients.length;
  return 0;
}

/** One item as the list shows it. */
export function describeItem(item, now) {
  const label = item.label || "Question";
  const total = typeof item.total === "number" ? item.total : null;
  const index = typeof item.index === "number" ? item.index : null;
  let place = "";
  if (total !== null && total > 1 && index !== null) place = "Question " + (index + 1) + " of " + total;
  else if (total === 1) place = "1 question";
  const open = screens(item.clients);
  const meta = [
    place,
    item.askedBy ? "asked by " + item.askedBy : "",
    ago(timeMs(item.createdAt), now),
    open ? "open on " + plural(open, "screen", "screens") : "",
  ].filter(Boolean);
  return {
    key: itemKey(item.sessionId, item.questionnaireId),
    label,
    prompt: item.prompt || "",
    session: item.sessionId,
    waiting: item.status === WAITING,
    status: item.status === WAITING ? "Waiting for you" : "Waiting for the agent",
    meta: meta.join(" · "),
  };
}

/** The sentence a screen reader hears for the name of an item's button. */
export function itemName(item) {
  const d = describeItem(item, 0);
  return d.label + ", session " + d.session + (d.waiting ? "" : ", waiting for the agent");
}

/** What is announced when `arrived` start waiting (null for none). */
export function arrivalAnnouncement(arrived, waitingCount) {
  if (!arrived.length) return null;
  const what = arrived.length === 1
    ? "New questionnaire waiting: " + itemName(arrived[0]) + "."
    : plural(arrived.length, "new questionnaire", "new questionnaires") + " waiting.";
  return what + " " + plural(waitingCount, "waits", "wait") + " for you in all.";
}

/** What is announced when the list comes back after one ended. */
export function offerAnnouncement(offer) {
  if (!offer) return null;
  return offer.title + " " + (offer.next
    ? "Next waiting: " + itemName(offer.next) + "."
    : "Nothing else is waiting for you.");
}

/** The tab's title: the count of what waits in front of the page's own title, without the
 * question's own "(2/5) " progress, which would read as a second count. */
export function inboxTitle(count, pageTitle = "qbroker") {
  const base = String(pageTitle).replace(/^\(\d+\/\d+\) /, "");
  return count > 0 ? "(" + count + ") " + base : base;
}

/** The notification for what arrived while the tab was hidden ({title, body, tag, key}),
 * or null. Only the agent's own question text: never anything the person typed. */
export function arrivalNotification(arrived, waitingCount) {
  if (!arrived.length) return null;
  if (arrived.length === 1) {
    const item = arrived[0];
    const prompt = String(item.prompt || "");
    return {
      title: (item.label || "A question") + " · qbroker",
      body: (prompt.length > 140 ? prompt.slice(0, 139) + "…" : prompt) +
        (prompt ? "\n" : "") + "Session " + item.sessionId,
      tag: "qbroker-inbox",
      key: itemKey(item.sessionId, item.questionnaireId),
    };
  }
  return {
    title: plural(arrived.length, "new question", "new questions") + " · qbroker",
    body: plural(waitingCount, "questionnaire waits", "questionnaires wait") + " for you.",
    tag: "qbroker-inbox",
    key: null,
  };
}

/** The notification control: {state, text, button} for the browser's permission
 * ("default" | "granted" | "denied"; "unsupported" when there is no Notification API). */
export function notificationControl(permission) {
  switch (permission) {
    case "granted":
      return { state: "on", button: null,
        text: "Notifications are on: new questions show up while this tab is in the background." };
    case "denied":
      return { state: "blocked", button: null,
        text: "Notifications are blocked for this page. Allow them in the browser's site settings to get them." };
    case "default":
      return { state: "ask", button: "Notify me of new questions",
        text: "Get a notification when a question arrives while this tab is in the background." };
    default:
      return { state: "unsupported", button: null, text: "This browser cannot show notifications." };
  }
}
