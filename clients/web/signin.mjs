/* Signing in with the team's OpenID Connect provider: the authorization code flow with PKCE
 * (RFC 7636) for a public client, written as pure functions (the browser's side, with its
 * redirects, storage and timers, is sign-in-page.mjs). No DOM, no fetch, no clock: random
 * bytes, hashes and times come in as arguments.
 *
 *   Sign in -> the provider's authorization endpoint (code_challenge = BASE64URL(SHA-256(verifier)),
 *   response_mode=fragment, so that the code never reaches a server log)
 *   <- back to the page with #code=…&state=…
 *   -> POST the token endpoint (code + verifier) -> {access_token, refresh_token, expires_in}
 *   -> the access token is the page's client token, kept in memory; the refresh token renews
 *      it before it runs out.
 */

/** base64url without padding, of bytes (a Uint8Array). */
export function base64url(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 1) text += String.fromCharCode(bytes[i]);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A PKCE verifier or a state: 32 random bytes (`random(n)` gives them) as base64url. */
export function randomText(random) {
  return base64url(random(32));
}

/** The authorization request's URL. `settings`: the broker's GET /v1/signin answer;
 * `endpoint`: the provider's authorization_endpoint; `redirectUri`: this page. */
export function authorizationUrl(endpoint, settings, redirectUri, state, challenge) {
  const url = new URL(endpoint);
  const params = {
    response_type: "code",
    response_mode: "fragment",
    client_id: settings.clientId,
    redirect_uri: redirectUri,
    scope: settings.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  };
  Object.entries(params).forEach(([key, value]) => url.searchParams.set(key, value));
  return url.toString();
}

/** The provider's answer in the page's fragment: {code, state} or {error, description,
 * state}, or null when the fragment is not one. */
export function parseCallback(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  const state = params.get("state");
  if (!state) return null;
  if (params.get("code")) return { code: params.get("code"), state };
  if (params.get("error")) {
    return { error: params.get("error"), description: params.get("error_description") || "", state };
  }
  return null;
}

/** The token endpoint's form for the code, or for a refresh. */
export function codeRequest(settings, code, verifier, redirectUri) {
  return new URLSearchParams({ grant_type: "authorization_code", code, code_verifier: verifier,
    redirect_uri: redirectUri, client_id: settings.clientId }).toString();
}

export function refreshRequest(settings, refreshToken) {
  return new URLSearchParams({ grant_type: "refresh_token", refresh_token: refreshToken,
    client_id: settings.clientId }).toString();
}

const EARLY_MS = 60000; // renew a minute before the end…
const EARLY_SHARE = 0.2; // …or a fifth of the lifetime before it, for short-lived tokens

/** When (ms since the epoch) to renew a token that lives `expiresIn` seconds from `now`. */
export function renewAt(now, expiresIn) {
  const life = Math.max(0, Number(expiresIn) || 0) * 1000;
  return now + Math.max(0, life - Math.min(EARLY_MS, life * EARLY_SHARE));
}

/** The token endpoint's answer, checked: {accessToken, refreshToken, expiresIn}; throws
 * when it carries no access token. */
export function readTokens(body, previousRefresh = "") {
  if (!body || typeof body.access_token !== "string" || !body.access_token) {
    throw new Error("the identity provider's answer has no access token");
  }
  return {
    accessToken: body.access_token,
    // A provider that does not rotate refresh tokens leaves the old one in force.
    refreshToken: typeof body.refresh_token === "string" && body.refresh_token ? body.refresh_token : previousRefresh,
    expiresIn: typeof body.expires_in === "number" ? body.expires_in : 300,
  };
}

/** What a notification link names when people sign in: {session, questionnaire}. */
export function linkTarget(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  return { session: (params.get("session") || "").trim(), questionnaire: (params.get("questionnaire") || "").trim() };
}

/** The fragment that names a target again after the round trip to the provider. */
export function targetFragment(target) {
  if (!target || !target.session) return "";
  const parts = ["session=" + encodeURIComponent(target.session)];
  if (target.questionnaire) parts.push("questionnaire=" + encodeURIComponent(target.questionnaire));
  return "#" + parts.join("&");
}

/** What the page says before the person has signed in (link.mjs's shape for the setup
 * screen): a link names a session, or nothing. */
export function signInProblem(target) {
  return {
    kind: "sign_in",
    title: "Sign in to answer",
    status: "Signed out",
    text: target && target.session
      ? "Sign in with your work account to see the question waiting for you in session “" + target.session + "”."
      : "Sign in with your work account to see the questions waiting for you.",
  };
}

export const SIGNED_OUT = {
  kind: "signed_out", title: "You have signed out", status: "Signed out",
  text: "Nothing of your sign-in is kept in this tab. Sign in again to answer more questions.",
};

export const SIGN_IN_ENDED = {
  kind: "sign_in_ended", title: "You have been signed out", status: "Signed out",
  text: "Your sign-in ran out. Sign in again to carry on; answers you already sent are saved.",
};

/** Who a token names (its `sub`), for "Signed in as …" only: the broker checks the token,
 * the page merely reads it. "" when it cannot be read. */
export function tokenSubject(token) {
  try {
    const part = String(token).split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
    return typeof claims.sub === "string" ? claims.sub : "";
  } catch (e) {
    return "";
  }
}
