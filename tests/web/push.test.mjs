// Web push on the page (clients/web/push.mjs) and in the service worker (clients/web/sw-logic.js,
// a classic script: run here in a node:vm context, as the worker's importScripts would).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import vm from "node:vm";

import {
  buttonState, keyBytes, mayRepost, pushSupport, subscribeOutcome, subscriptionBody, tokenHolder,
} from "../../clients/web/push.mjs";

const worker = (() => {
  const context = { URL, JSON, encodeURIComponent };
  context.self = context;
  vm.runInNewContext(readFileSync(new URL("../../clients/web/sw-logic.js", import.meta.url), "utf8"), context);
  return context.qbrokerPush;
})();
const SCOPE = "https://qbroker.example.test/";
const KEY = "BGZh3tENYwmjI4Ozjnoc1X0bmCXJynzw1Ewz5eLhydhYA3yvP7KEEXfwNHZR0IQCGY8w7RkCb5jfNK0Qkl-V9eE";

test("the broker's key becomes the 65 bytes of applicationServerKey", () => {
  const bytes = keyBytes(KEY);
  assert.equal(bytes.length, 65);
  assert.equal(bytes[0], 4);
  assert.equal(bytes[64], Buffer.from(KEY, "base64url")[64]);
  assert.throws(() => keyBytes("not+base64/url"), /not base64url/);
  assert.throws(() => keyBytes("AAAA"), /not a P-256 public key/);
});

test("push needs a secure page and the browser's APIs", () => {
  const all = { serviceWorker: true, pushManager: true, notification: true, secure: true };
  assert.deepEqual(pushSupport(all), { ok: true, why: null });
  assert.match(pushSupport({ ...all, secure: false }).why, /HTTPS/);
  assert.match(pushSupport({ ...all, pushManager: false }).why, /cannot show notifications/);
});

test("the button: subscribe, stop, blocked, busy", () => {
  assert.deepEqual(buttonState({ permission: "default", subscribed: false, busy: false }).action, "subscribe");
  assert.equal(buttonState({ permission: "default", subscribed: false, busy: false }).label, "Notify me on this device");
  assert.equal(buttonState({ permission: "granted", subscribed: true, busy: false }).action, "unsubscribe");
  const blocked = buttonState({ permission: "denied", subscribed: false, busy: false });
  assert.equal(blocked.disabled, true);
  assert.match(blocked.title, /site settings/);
  assert.equal(buttonState({ permission: "granted", subscribed: false, busy: true }).disabled, true);
});

test("the posted body is the subscription's JSON and nothing else", () => {
  const json = { endpoint: "https://fcm.googleapis.com/x", expirationTime: null, keys: { p256dh: "B", auth: "A" }, extra: 1 };
  assert.deepEqual(subscriptionBody(json), { endpoint: json.endpoint, expirationTime: null, keys: { p256dh: "B", auth: "A" } });
  assert.throws(() => subscriptionBody({ endpoint: "x" }), /no usable subscription/);
});

test("what the page says after the broker answered", () => {
  assert.equal(subscribeOutcome(201, { scope: "s", expiresAt: 1 }).ok, true);
  assert.match(subscribeOutcome(401, null).text, /token was refused/);
  assert.match(subscribeOutcome(404, null).text, /sends no notifications/);
  const refused = subscribeOutcome(400, { error: { code: "invalid_arguments", message: "push: keys.auth must be ..." } });
  assert.equal(refused.text, "The broker refused: keys.auth must be ...");
});

test("a push becomes one notification per session, its click the session's page", () => {
  const payload = {
    title: "release-bot has 1 question for you",
    body: "Deploy target\nWhere should v2.3 go?",
    link: "https://qbroker.example.test/#session=team-a%3Abuild",
    session: "team-a:build",
    questionnaire: "q-1",
  };
  const { title, options } = worker.notificationFor(JSON.stringify(payload), SCOPE);
  assert.equal(title, payload.title);
  assert.equal(options.body, payload.body);
  assert.equal(options.tag, "qbroker-session-team-a:build");
  assert.equal(options.data.url, payload.link);
  assert.equal(options.data.session, "team-a:build");
});

test("a push that is not the broker's still shows a notification (browsers require one)", () => {
  const { title, options } = worker.notificationFor("not json", SCOPE);
  assert.equal(title, "An agent is waiting for your answer");
  assert.equal(options.data.url, SCOPE);
});

test("a click never leaves the worker's scope", () => {
  const target = (data, scope = SCOPE) => worker.clickTarget(data, scope);
  assert.equal(target({ link: "https://evil.example/#session=x", session: "x" }), `${SCOPE}#session=x`);
  assert.equal(target({ link: "https://qbroker.example.test/other/#session=x", session: "x" }, "https://qbroker.example.test/team/"),
    "https://qbroker.example.test/team/#session=x");
  assert.equal(target({ session: "a b" }), `${SCOPE}#session=a%20b`);
  assert.equal(target({}), SCOPE);
  assert.equal(target({ link: `${SCOPE}#session=s&token=one.session.token`, session: "s" }), `${SCOPE}#session=s&token=one.session.token`);
});

test("a click focuses the tab on that session, else takes a tab of the page there, else opens one", () => {
  const target = `${SCOPE}#session=s`;
  // (the worker's objects come from another realm: compared as plain copies)
  const pick = (...args) => { const found = worker.pickWindow(...args); return found && { ...found }; };
  assert.deepEqual(pick([{ url: `${SCOPE}#session=other` }, { url: target }], target, SCOPE),
    { index: 1, navigate: false });
  assert.deepEqual(pick([{ url: "https://elsewhere.example/" }, { url: `${SCOPE}#token=t` }], target, SCOPE),
    { index: 1, navigate: true });
  assert.equal(pick([{ url: "https://elsewhere.example/" }], target, SCOPE), null);
  assert.equal(pick([], target, SCOPE), null);
});

test("a subscription is posted again at load only with a token of the holder it was made for", () => {
  const jwt = (claims) => "h." + Buffer.from(JSON.stringify(claims)).toString("base64url") + ".s";
  const made = tokenHolder(jwt({ sid: "alice:build", role: "client", sub: "alice", exp: 1, iat: 0, jti: "a" }));
  const later = jwt({ sid: "alice:build", role: "client", sub: "alice", exp: 9, iat: 5, jti: "b" });
  assert.equal(mayRepost(made, later), true, "a later link for the same person and session");
  assert.equal(mayRepost(made, jwt({ sid: "mallory:x", role: "client", sub: "alice", exp: 9 })), false);
  assert.equal(mayRepost(made, jwt({ sid: "alice:build", role: "client", sub: "mallory", exp: 9 })), false);
  assert.equal(mayRepost(made, jwt({ sid: "alice:build", role: "client", exp: 9 })), false, "no holder named");
  assert.equal(mayRepost("", later), false, "made for nobody known: not posted again");
  assert.equal(mayRepost(made, "not a token"), false);
  assert.equal(tokenHolder(jwt({ sid: "zoë:李", sub: "Zoë" })), '[["sid","zoë:李"],["sub","Zoë"]]');
});
