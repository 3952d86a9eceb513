// What the page says when the broker turns its token away (clients/web/refusals.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { refusalKind, refusalScreen } from "../../clients/web/refusals.mjs";

// The broker's own reasons (broker/core/status.py, broker/auth.py, broker/tokens.py).
const REASONS = {
  expired: "token expired",
  revoked: "token revoked",
  wrong_role: "an agent token cannot be used by a client",
  invalid: "invalid token: signed by a key the identity provider does not publish",
};

test("a 4401's reason tells expired, revoked, wrong-role and unreadable tokens apart", () => {
  for (const [kind, reason] of Object.entries(REASONS)) assert.equal(refusalKind(4401, reason), kind);
  assert.equal(refusalKind(4401, ""), "invalid");
  assert.equal(refusalKind(4403, "token is for another session"), "wrong_session");
  assert.equal(refusalKind(4400, "the first frame must be a hello"), "protocol");
  for (const code of [1000, 1006, 1008, 1012, 4408]) assert.equal(refusalKind(code, "token expired"), null);
});

test("each refusal has its own sentence, and none offers a retry that cannot work", () => {
  const screens = Object.values(REASONS).map((reason) => refusalScreen(4401, reason));
  screens.push(refusalScreen(4403, "token is for another session"));
  assert.equal(new Set(screens.map((s) => s.title)).size, screens.length);
  assert.equal(new Set(screens.map((s) => s.text)).size, screens.length);
  assert.equal(new Set(screens.map((s) => s.status)).size, screens.length);
  for (const screen of screens) {
    assert.equal(screen.action, null, screen.title);
    assert.doesNotMatch(screen.text, /qbroker token|--role|code 44/, "no developer's instructions");
  }
  assert.equal(refusalScreen(4401, "token revoked").title, "This link has been withdrawn");
  assert.equal(refusalScreen(4401, "token revoked").reason, "token revoked");
  assert.equal(refusalScreen(4400, "").action, "retry", "a reload may bring a page that matches the broker");
  assert.equal(refusalScreen(1006, ""), null);
});

test("an expired link with a questionnaire on screen says it is still open", () => {
  assert.match(refusalScreen(4401, "token expired", { open: true }).text, /^The questionnaire you were answering is still open/);
  assert.doesNotMatch(refusalScreen(4401, "token expired").text, /still open/);
});

test("a remembered token that is refused can be forgotten", () => {
  const screen = refusalScreen(4401, "token revoked", { remembered: true });
  assert.equal(screen.forget, true);
  assert.match(screen.text, /forget it below/);
  assert.equal(refusalScreen(4401, "token revoked").forget, false);
});

test("a signed-in person is offered to sign in again, never a dead retry", () => {
  for (const reason of [REASONS.expired, REASONS.revoked, REASONS.invalid]) {
    const screen = refusalScreen(4401, reason, { signedIn: true });
    assert.equal(screen.action, "signIn", reason);
    assert.doesNotMatch(screen.text, /link/i);
  }
  assert.equal(refusalScreen(4401, REASONS.expired, { signedIn: true }).status, "Signed out");
  assert.equal(refusalScreen(4401, REASONS.wrong_role, { signedIn: true }).action, null, "signing in again changes no role");
});
