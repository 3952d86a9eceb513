// What a closed connection means and how soon the page retries (clients/web/reconnect.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BACKOFF_MAX_MS,
  backoffDelay,
  closeVerdict,
  countdown,
  failedStatus,
  fatalScreen,
  lostStatus,
} from "../../clients/web/reconnect.mjs";

test("backoff doubles from 0.5 s up to 30 s, with half of it random", () => {
  const low = (attempt) => backoffDelay(attempt, 1006, () => 0);
  const high = (attempt) => backoffDelay(attempt, 1006, () => 1);
  assert.deepEqual([0, 1, 2, 3].map(low), [250, 500, 1000, 2000]);
  assert.deepEqual([0, 1, 2, 3].map(high), [500, 1000, 2000, 4000]);
  assert.equal(high(20), BACKOFF_MAX_MS);
  assert.equal(low(20), BACKOFF_MAX_MS / 2);
});

test("after a 1008 close the wait is at least 5 s", () => {
  assert.equal(backoffDelay(0, 1008, () => 0), 5000);
  assert.equal(backoffDelay(10, 1008, () => 1), BACKOFF_MAX_MS);
});

test("which closes are retried", () => {
  assert.equal(closeVerdict(4401, "token expired"), "expired");
  assert.equal(closeVerdict(4401, "Token Expired"), "expired");
  assert.equal(closeVerdict(4401, "bad token"), "fatal");
  assert.equal(closeVerdict(4400, ""), "fatal");
  assert.equal(closeVerdict(4403, ""), "fatal");
  for (const code of [1000, 1001, 1006, 1008, 1011, 1012, 1013, 4000, 4408, null]) {
    assert.equal(closeVerdict(code, ""), "retry", String(code));
  }
  assert.equal(failedStatus("expired"), "Link expired");
  assert.equal(failedStatus("fatal"), "Disconnected");
});

test("the screens for closes a retry cannot fix", () => {
  assert.equal(fatalScreen(1006, "", true), null);
  const rejected = fatalScreen(4401, "invalid token", false);
  assert.equal(rejected.title, "This link's token was not accepted");
  assert.equal(rejected.reason, "invalid token");
  assert.equal(rejected.noRetry, false);
  assert.match(rejected.text, /qbroker token --session SESSION --role client/);
  assert.equal(fatalScreen(4400, "", false).title, "The broker refused this page's handshake");

  const open = fatalScreen(4401, "token expired", true);
  assert.equal(open.noRetry, true);
  assert.match(open.text, /^The questionnaire you were answering is still open/);
  assert.match(open.text, /to carry on where you left off\.$/);
  const idle = fatalScreen(4401, "token expired", false);
  assert.equal(idle.text, "Ask for a new link (whoever sent you this one can make it), then open it, here or in a new tab.");
});

test("what the top bar says while waiting to reconnect", () => {
  assert.equal(lostStatus(1012, "", true), "Broker restarting");
  assert.equal(lostStatus(1001, "", true), "Broker going away");
  assert.equal(lostStatus(1013, "try later", true), "Broker busy (try later)");
  assert.equal(lostStatus(1008, "too slow", true), "Closed by the broker (too slow)");
  assert.equal(lostStatus(1006, "ignored", true), "Connection lost");
  assert.equal(lostStatus(1012, "", false), "You are offline");
  assert.equal(countdown(10_000, 6_001), "· retrying in 4 s");
  assert.equal(countdown(10_000, 10_000), "· retrying now");
  assert.equal(countdown(10_000, 12_000), "· retrying now");
});
