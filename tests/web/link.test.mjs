// The session link and the websocket URL (clients/web/link.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  formProblem, fragmentFor, inboxWebsocketUrl, linkProblem, NO_LINK, parseFragment, route, websocketUrl,
} from "../../clients/web/link.mjs";

test("the fragment names the session and the token", () => {
  assert.deepEqual(parseFragment("#session=demo&token=abc.def"), { session: "demo", token: "abc.def" });
  assert.deepEqual(parseFragment("#session=%20demo%20"), { session: "demo", token: "" });
  assert.deepEqual(parseFragment(""), { session: "", token: "" });
  const round = parseFragment("#" + fragmentFor("a:b.c", "t&k=1"));
  assert.deepEqual(round, { session: "a:b.c", token: "t&k=1" });
  assert.deepEqual(parseFragment("#" + fragmentFor("", "t&k=1")), { session: "", token: "t&k=1" });
});

test("what is wrong with a link, in a person's words", () => {
  const problem = (hash, search = "", stored = "") => linkProblem(parseFragment(hash), search, stored);
  assert.equal(problem("#session=demo&token=t"), null);
  assert.equal(problem("#token=t"), null, "a token alone opens the inbox");
  assert.equal(problem(""), NO_LINK);
  assert.equal(problem("", "", "remembered"), null, "the remembered token opens the inbox");
  const incomplete = problem("#session=demo");
  assert.equal(incomplete.kind, "no_token");
  assert.equal(incomplete.title, "This link is incomplete");
  assert.equal(incomplete.status, "Link incomplete");
  assert.match(incomplete.text, /names the session “demo” but not the key that opens it/);
  assert.equal(problem("#session=demo", "", "remembered"), null);
  assert.equal(problem("", "?session=demo&token=t").kind, "query");
  assert.match(problem("", "?token=t").text, /after a “\?” where this page expects a “#”/);
  const bad = problem("#session=no%20spaces&token=t");
  assert.equal(bad.kind, "bad_session");
  assert.match(bad.text, /^“no spaces” is not a session this page can open/);
  assert.equal(problem("#session=" + "s".repeat(129) + "&token=t").kind, "bad_session");
  // Nothing a person cannot act on: no commands, no token formats.
  for (const p of [NO_LINK, incomplete, bad, problem("", "?token=t")]) {
    assert.doesNotMatch(p.text, /qbroker token|--role|#session=|CLIENT_TOKEN/);
    assert.match(p.text, /message|link/);
  }
});

test("what the page opens", () => {
  const open = (hash, stored = "", search = "") => route(parseFragment(hash), search, stored);
  const pattern = "pattern.token.t";

  assert.deepEqual(open("#session=demo&token=t"),
    { mode: "session", session: "demo", token: "t", remembered: false, problem: null });
  assert.deepEqual(open("#token=" + pattern),
    { mode: "inbox", session: "", token: pattern, remembered: false, problem: null });
  // Nothing in the link: the token this browser remembers, if any.
  assert.deepEqual(open("", pattern),
    { mode: "inbox", session: "", token: pattern, remembered: true, problem: null });
  assert.deepEqual(open("#session=alice:review", pattern),
    { mode: "session", session: "alice:review", token: pattern, remembered: true, problem: null });
  // The link's own token wins over the remembered one.
  assert.equal(open("#token=other", pattern).token, "other");
  assert.equal(open("#token=other", pattern).remembered, false);
  const none = open("");
  assert.equal(none.mode, "setup");
  assert.equal(none.problem, NO_LINK);
});

test("the setup form's values", () => {
  assert.equal(formProblem("demo", "t"), null);
  assert.equal(formProblem("", "t"), null, "no session opens the inbox");
  assert.deepEqual(formProblem("no spaces", "t"), { field: "session", text: "A session id is 1–128 letters, digits or . _ : -" });
  assert.deepEqual(formProblem("demo", ""), { field: "token", text: "Paste the client token too." });
});

test("the websockets are found relative to the page, with the page's security", () => {
  assert.equal(websocketUrl("demo", "http://127.0.0.1:8700/#session=demo&token=t"),
    "ws://127.0.0.1:8700/v1/sessions/demo/ws");
  assert.equal(websocketUrl("a:b", "https://host.example/qbroker/?x=1#session=a:b"),
    "wss://host.example/qbroker/v1/sessions/a%3Ab/ws");
  assert.equal(inboxWebsocketUrl("http://127.0.0.1:8700/#token=t"), "ws://127.0.0.1:8700/v1/inbox/ws");
  assert.equal(inboxWebsocketUrl("https://host.example/qbroker/?x=1#token=t"), "wss://host.example/qbroker/v1/inbox/ws");
});
