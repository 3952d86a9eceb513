// Signing in with the identity provider: the code flow with PKCE (clients/web/signin.mjs).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";

import {
  authorizationUrl, base64url, codeRequest, linkTarget, parseCallback, randomText, readTokens, refreshRequest,
  renewAt, signInProblem, targetFragment, tokenSubject,
} from "../../clients/web/signin.mjs";

const SETTINGS = { issuer: "https://sso.example.com", clientId: "qbroker-web", scope: "openid offline_access" };

test("base64url has no padding and the URL-safe alphabet", () => {
  assert.equal(base64url(new Uint8Array([251, 255, 191])), "-_-_");
  assert.equal(base64url(new Uint8Array([1])), "AQ");
  assert.equal(randomText((n) => new Uint8Array(n)).length, 43, "32 bytes");
});

test("the authorization request: a public client's code flow with PKCE, the code in the fragment", () => {
  const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"; // RFC 7636, appendix B
  const challenge = base64url(new Uint8Array(createHash("sha256").update(verifier).digest()));
  assert.equal(challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  const url = new URL(authorizationUrl("https://sso.example.com/auth?kc=1", SETTINGS, "https://q.example/", "st", challenge));
  assert.equal(url.origin + url.pathname, "https://sso.example.com/auth");
  assert.deepEqual(Object.fromEntries(url.searchParams), {
    kc: "1", response_type: "code", response_mode: "fragment", client_id: "qbroker-web",
    redirect_uri: "https://q.example/", scope: "openid offline_access", state: "st",
    code_challenge: challenge, code_challenge_method: "S256",
  });
  assert.ok(!url.searchParams.has("client_secret"));
});

test("the provider's answer in the fragment", () => {
  assert.deepEqual(parseCallback("#code=abc&state=s1"), { code: "abc", state: "s1" });
  assert.deepEqual(parseCallback("#error=access_denied&error_description=no&state=s1"),
    { error: "access_denied", description: "no", state: "s1" });
  assert.equal(parseCallback("#session=alice:build"), null, "a link, not an answer");
  assert.equal(parseCallback("#code=abc"), null, "no state: not ours");
});

test("the token requests", () => {
  assert.deepEqual(Object.fromEntries(new URLSearchParams(codeRequest(SETTINGS, "c", "v", "https://q.example/"))),
    { grant_type: "authorization_code", code: "c", code_verifier: "v", redirect_uri: "https://q.example/", client_id: "qbroker-web" });
  assert.deepEqual(Object.fromEntries(new URLSearchParams(refreshRequest(SETTINGS, "r"))),
    { grant_type: "refresh_token", refresh_token: "r", client_id: "qbroker-web" });
  assert.deepEqual(readTokens({ access_token: "a", refresh_token: "r2", expires_in: 600 }, "r1"),
    { accessToken: "a", refreshToken: "r2", expiresIn: 600 });
  assert.equal(readTokens({ access_token: "a" }, "r1").refreshToken, "r1", "a provider that does not rotate");
  assert.throws(() => readTokens({ error: "invalid_grant" }), /no access token/);
});

test("a token is renewed a minute before it runs out, or a fifth of its life for short ones", () => {
  assert.equal(renewAt(1000, 600), 1000 + 540000);
  assert.equal(renewAt(1000, 60), 1000 + 48000);
  assert.equal(renewAt(1000, 0), 1000);
});

test("a notification link names the session and the questionnaire, and comes back after the round trip", () => {
  const target = linkTarget("#session=alice%3Abuild&questionnaire=q-1");
  assert.deepEqual(target, { session: "alice:build", questionnaire: "q-1" });
  assert.deepEqual(linkTarget(targetFragment(target)), target);
  assert.equal(targetFragment(null), "");
  assert.match(signInProblem(target).text, /in session “alice:build”/);
  assert.equal(signInProblem(null).status, "Signed out");
});

test("who a token names, for the page's words only", () => {
  const part = Buffer.from(JSON.stringify({ sub: "alice", sid: "alice:*" })).toString("base64url");
  assert.equal(tokenSubject("h." + part + ".s"), "alice");
  assert.equal(tokenSubject("not a token"), "");
});
