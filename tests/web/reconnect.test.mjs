// What a closed connection means and how soon the page retries (clients/web/reconnect.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  BACKOFF_MAX_MS,
  backoffDelay,
  closeVerdict,
  countdown,
  failedStatus,
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
  for (const [code, reason] of [[4401, "token expired"], [4401, "token revoked"], [4401, "invalid token"],
    [4401, "an agent token cannot be used by a client"], [4400, ""], [4403, ""]]) {
    assert.equal(closeVerdict(code, reason), "refused", code + " " + reason);
  }
  for (const code of [1000, 1001, 1006, 1008, 1011, 1012, 1013, 4000, 4408, null]) {
    assert.equal(closeVerdict(code, ""), "retry", String(code));
  }
});

test("the top bar's pill after a refusal says what the screen says", () => {
  assert.equal(failedStatus(4401, "token expired"), "Link expired");
  assert.equal(failedStatus(4401, "token revoked"), "Link withdrawn");
  assert.equal(failedStatus(4401, "an agent token cannot be used by a client"), "Wrong kind of link");
  assert.equal(failedStatus(4401, "invalid token"), "Link not accepted");
  assert.equal(failedStatus(4403, "token is for another session"), "Wrong session");
  assert.equal(failedStatus(4401, "token expired", true), "Signed out");
  assert.equal(failedStatus(1006, ""), "Disconnected");
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
