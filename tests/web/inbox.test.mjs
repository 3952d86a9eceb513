// The inbox's list (clients/web/inbox.mjs): inbox frames in, order, counts and offers out.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  ago, arrivalAnnouncement, arrivalNotification, compareItems, describeItem, inboxTitle,
  InboxState, itemKey, notificationControl, offerAnnouncement, timeMs, WAITING, WITH_AGENT,
} from "../../clients/web/inbox.mjs";

const T0 = 1_700_000_000; // Unix seconds, as the broker stores times

function item(sessionId, questionnaireId, fields = {}) {
  return {
    sessionId, questionnaireId, status: WAITING, label: "Target", prompt: "Which environment?",
    index: 0, total: 2, createdAt: T0, updatedAt: T0, askedBy: null, clients: 0, ...fields,
  };
}

const A = item("alice:build", "q-a", { createdAt: T0 + 10, label: "Target" });
const B = item("alice:review", "q-b", { createdAt: T0 + 5, label: "Reviewer" });
const C = item("alice:docs", "q-c", { createdAt: T0 + 1, status: WITH_AGENT, label: "Tone" });

function loaded(...items) {
  const inbox = new InboxState();
  inbox.receive({ type: "inbox", items });
  return inbox;
}

const keys = (items) => items.map((i) => i.questionnaireId);

describe("the list", () => {
  test("the first list is what was there, not news; waiting for the person first, oldest first", () => {
    const inbox = new InboxState();
    assert.equal(inbox.summary(), "Loading…");
    const out = inbox.receive({ type: "inbox", items: [A, C, B] });
    assert.equal(out.changed, true);
    assert.deepEqual(out.arrived, []);
    assert.deepEqual(keys(inbox.list()), ["q-b", "q-a", "q-c"]);
    assert.equal(inbox.waitingCount(), 2);
    assert.equal(inbox.withAgentCount(), 1);
    assert.equal(inbox.summary(), "2 questionnaires wait for you · 1 waits for the agent's reply.");
  });

  test("an added item is news, a changed one is not, unless it starts waiting for the person again", () => {
    const inbox = loaded(A, C);
    let out = inbox.receive({ type: "inbox_item", item: B });
    assert.deepEqual(keys(out.arrived), ["q-b"]);
    assert.deepEqual(keys(inbox.list()), ["q-b", "q-a", "q-c"]);

    out = inbox.receive({ type: "inbox_item", item: { ...A, index: 1, label: "Codename" } });
    assert.deepEqual(out.arrived, [], "the person answered a question elsewhere: not news");
    assert.equal(inbox.get(itemKey("alice:build", "q-a")).label, "Codename");

    out = inbox.receive({ type: "inbox_item", item: { ...A, status: WITH_AGENT } });
    assert.deepEqual(out.arrived, []);
    assert.equal(inbox.waitingCount(), 1);
    out = inbox.receive({ type: "inbox_item", item: { ...C, status: WAITING } });
    assert.deepEqual(keys(out.arrived), ["q-c"], "the agent replied: it waits for the person again");
  });

  test("a removed item goes; a removal of something unknown changes nothing", () => {
    const inbox = loaded(A, B);
    let out = inbox.receive({ type: "inbox_removed", sessionId: "alice:build", questionnaireId: "q-a", status: "completed" });
    assert.deepEqual(keys(out.removed), ["q-a"]);
    assert.deepEqual(keys(inbox.list()), ["q-b"]);
    out = inbox.receive({ type: "inbox_removed", sessionId: "alice:build", questionnaireId: "q-a", status: "completed" });
    assert.equal(out.changed, false);
    assert.deepEqual(out.removed, []);
  });

  test("the list after a reconnect replaces the old one; what is new in it is news", () => {
    const inbox = loaded(A, C);
    const out = inbox.receive({ type: "inbox", items: [{ ...C, status: WAITING }, B] });
    assert.deepEqual(keys(out.arrived).sort(), ["q-b", "q-c"]);
    assert.deepEqual(keys(out.removed), ["q-a"]);
    assert.deepEqual(keys(inbox.list()), ["q-c", "q-b"]);
  });

  test("items without ids are ignored, other frame types are reported", () => {
    const inbox = loaded(A, { sessionId: "x" }, null);
    assert.deepEqual(keys(inbox.list()), ["q-a"]);
    assert.equal(inbox.receive({ type: "inbox_item", item: { label: "x" } }).changed, false);
    assert.equal(inbox.receive({ type: "surprise" }).unknown, "surprise");
    assert.equal(inbox.receive({ type: "pong" }).unknown, null);
  });

  test("ties are broken by session and id, times in any of the broker's forms", () => {
    const same = [item("s2", "q1"), item("s1", "q2"), item("s1", "q1")];
    assert.deepEqual(same.sort(compareItems).map((i) => i.sessionId + "/" + i.questionnaireId), ["s1/q1", "s1/q2", "s2/q1"]);
    assert.equal(timeMs(T0), T0 * 1000);
    assert.equal(timeMs(T0 * 1000), T0 * 1000);
    assert.equal(timeMs("2023-11-14T22:13:20Z"), T0 * 1000);
    assert.equal(timeMs("yesterday"), null);
    assert.equal(timeMs(null), null);
    const iso = item("s", "iso", { createdAt: "2023-11-14T22:13:21Z" });
    const num = item("s", "num", { createdAt: T0 + 2 });
    const none = item("s", "none", { createdAt: null });
    assert.deepEqual(keys([none, num, iso].sort(compareItems)), ["iso", "num", "none"]);
  });

  test("nothing waiting", () => {
    const inbox = loaded();
    assert.equal(inbox.summary(), "Nothing is waiting for you.");
    assert.equal(inbox.nextWaiting(), null);
    assert.equal(loaded(C).summary(), "1 waits for the agent's reply.");
    assert.equal(loaded(A).summary(), "1 questionnaire waits for you.");
  });
});

describe("answering in place, and the next one offered", () => {
  test("when the one answered ends, the first other waiting one is offered", () => {
    const inbox = loaded(A, B, C);
    const key = itemKey(B.sessionId, B.questionnaireId);
    inbox.open(key);
    assert.equal(inbox.answering, key);
    assert.equal(inbox.offer(), null);
    inbox.ended("completed");
    assert.equal(inbox.answering, null);
    // The broker's inbox_removed may not have come yet: B is never offered again.
    assert.deepEqual(inbox.offer(), { title: "Answers sent.", next: A });
    assert.equal(offerAnnouncement(inbox.offer()),
      "Answers sent. Next waiting: Target, session alice:build.");
  });

  test("the offer follows the list: one answered elsewhere meanwhile is never offered", () => {
    const inbox = loaded(A, B);
    inbox.open(itemKey(B.sessionId, B.questionnaireId));
    inbox.ended("cancelled");
    inbox.receive({ type: "inbox_removed", sessionId: A.sessionId, questionnaireId: A.questionnaireId, status: "completed" });
    assert.deepEqual(inbox.offer(), { title: "Questionnaire cancelled.", next: null });
    assert.equal(offerAnnouncement(inbox.offer()), "Questionnaire cancelled. Nothing else is waiting for you.");
    const D = item("bob:x", "q-d");
    inbox.receive({ type: "inbox_item", item: D });
    assert.equal(inbox.offer().next, D);
    inbox.dropOffer();
    assert.equal(inbox.offer(), null);
  });

  test("one waiting for the agent is never offered; back without finishing offers nothing", () => {
    const inbox = loaded(C);
    inbox.open("x y");
    inbox.ended(null);
    assert.deepEqual(inbox.offer(), { title: "That questionnaire is no longer open.", next: null });
    inbox.open(itemKey(C.sessionId, C.questionnaireId));
    assert.equal(inbox.back(), itemKey(C.sessionId, C.questionnaireId));
    assert.equal(inbox.offer(), null);
    inbox.open("x y");
    inbox.ended("unavailable");
    assert.equal(inbox.offer().title, "That questionnaire closed.");
  });
});

describe("what the page says", () => {
  test("the title counts what waits for the person, without the question's own progress", () => {
    assert.equal(inboxTitle(3), "(3) qbroker");
    assert.equal(inboxTitle(0), "qbroker");
    assert.equal(inboxTitle(2, "(1/2) Target · qbroker"), "(2) Target · qbroker");
    assert.equal(inboxTitle(0, "(1/2) Target · qbroker"), "Target · qbroker");
    assert.equal(inboxTitle(1, "Waiting for the agent · qbroker"), "(1) Waiting for the agent · qbroker");
  });

  test("an item's line", () => {
    const now = (T0 + 10 + 180) * 1000;
    assert.deepEqual(describeItem({ ...A, askedBy: "build-bot", clients: 1 }, now), {
      key: "alice:build q-a", label: "Target", prompt: "Which environment?", session: "alice:build", waiting: true,
      status: "Waiting for you", meta: "Question 1 of 2 · asked by build-bot · 3 min ago · open on 1 screen",
    });
    const d = describeItem({ ...C, label: "", total: 1, clients: [{ kind: "web" }, { kind: "tui" }] }, now);
    assert.equal(d.label, "Question");
    assert.equal(d.status, "Waiting for the agent");
    assert.equal(d.meta, "1 question · 3 min ago · open on 2 screens");
  });

  test("ages", () => {
    const now = 10_000_000_000;
    assert.equal(ago(now - 5_000, now), "just now");
    assert.equal(ago(now + 5_000, now), "just now", "a clock a little ahead is not the future");
    assert.equal(ago(now - 61_000, now), "1 min ago");
    assert.equal(ago(now - 3 * 3600_000, now), "3 h ago");
    assert.equal(ago(now - 3 * 86400_000, now), "3 days ago");
    assert.equal(ago(null, now), "");
  });

  test("announcements and notifications of what arrived carry the agent's text only", () => {
    assert.equal(arrivalAnnouncement([], 2), null);
    assert.equal(arrivalAnnouncement([A], 3), "New questionnaire waiting: Target, session alice:build. 3 wait for you in all.");
    assert.equal(arrivalAnnouncement([A, B], 2), "2 new questionnaires waiting. 2 wait for you in all.");
    assert.equal(arrivalNotification([], 1), null);
    assert.deepEqual(arrivalNotification([A], 1), {
      title: "Target · qbroker", body: "Which environment?\nSession alice:build", tag: "qbroker-inbox",
      key: "alice:build q-a",
    });
    const long = arrivalNotification([{ ...A, prompt: "x".repeat(500) }], 1);
    assert.equal(long.body.split("\n")[0].length, 140);
    assert.deepEqual(arrivalNotification([A, B], 4), {
      title: "2 new questions · qbroker", body: "4 questionnaires wait for you.", tag: "qbroker-inbox", key: null,
    });
  });

  test("the notification control follows the browser's permission", () => {
    assert.equal(notificationControl("default").state, "ask");
    assert.equal(notificationControl("default").button, "Notify me of new questions");
    assert.equal(notificationControl("granted").state, "on");
    assert.equal(notificationControl("granted").button, null);
    assert.equal(notificationControl("denied").state, "blocked");
    assert.equal(notificationControl(undefined).state, "unsupported");
  });
});

test("ISO times are read as the broker means them, without the clock", () => {
  for (const text of ["2024-02-29T23:59:59.250Z", "1999-12-31T00:00:00Z", "2023-11-14T23:13:20+01:00",
    "2023-11-14T20:43:20-01:30", "1970-01-01T00:00:00Z", "2100-03-01T12:00:00Z"]) {
    assert.equal(timeMs(text), Date.parse(text), text);
  }
  assert.equal(timeMs("2023-11-14"), null);
});
