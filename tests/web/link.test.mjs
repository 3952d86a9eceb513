// The session link and the websocket URL (clients/web/link.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { formProblem, fragmentFor, linkProblem, parseFragment, websocketUrl } from "../../clients/web/link.mjs";

test("the fragment names the session and the token", () => {
  assert.deepEqual(parseFragment("#session=demo&token=abc.def"), { session: "demo", token: "abc.def" });
  assert.deepEqual(parseFragment("#session=%20demo%20"), { session: "demo", token: "" });
  assert.deepEqual(parseFragment(""), { session: "", token: "" });
  const round = parseFragment("#" + fragmentFor("a:b.c", "t&k=1"));
  assert.deepEqual(round, { session: "a:b.c", token: "t&k=1" });
});

test("what is wrong with a link", () => {
  const problem = (hash, search = "") => linkProblem(parseFragment(hash), search);
  assert.equal(problem("#session=demo&token=t"), null);
  assert.equal(problem(""), "This link does not say which session to join.");
  assert.equal(problem("#token=t"), "The link has a token but no session id.");
  assert.equal(problem("#session=demo"), "The link names a session but has no token.");
  assert.match(problem("", "?session=demo&token=t"), /must come after a # sign, not a \?/);
  assert.equal(problem("#session=no%20spaces&token=t"),
    "“no spaces” is not a valid session id (1–128 letters, digits or . _ : -).");
  assert.match(problem("#session=" + "s".repeat(129) + "&token=t"), /not a valid session id/);
});

test("the setup form's values", () => {
  assert.equal(formProblem("demo", "t"), null);
  assert.deepEqual(formProblem("", "t"), { field: "session", text: "A session id is 1–128 letters, digits or . _ : -" });
  assert.deepEqual(formProblem("demo", ""), { field: "token", text: "Paste the client token too." });
});

test("the websocket is found relative to the page, with the page's security", () => {
  assert.equal(websocketUrl("demo", "http://127.0.0.1:8700/#session=demo&token=t"),
    "ws://127.0.0.1:8700/v1/sessions/demo/ws");
  assert.equal(websocketUrl("a:b", "https://host.example/qbroker/?x=1#session=a:b"),
    "wss://host.example/qbroker/v1/sessions/a%3Ab/ws");
});
