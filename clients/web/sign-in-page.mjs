/* Signing in, in the browser: the broker's sign-in settings, the round trip to the identity
 * provider, the tokens, and renewing them (the rules are signin.mjs's).
 *
 * The access token lives in this module's memory only: it is the page's client token, and
 * nothing else can read it. The refresh token is kept in sessionStorage, so that reloading
 * the tab does not sign the person out; it goes with the tab, and with "Sign out". The PKCE
 * verifier and state wait there during the round trip to the provider.
 */

import {
  authorizationUrl, base64url, codeRequest, readTokens, randomText, refreshRequest, renewAt,
} from "./signin.mjs";

const ROUND_TRIP = "qbroker.signin"; // {verifier, state, target} while at the provider
const REFRESH = "qbroker.refresh";

function session() {
  try {
    return window.sessionStorage;
  } catch (e) {
    return null; // storage turned off: a reload signs the person out, nothing worse
  }
}

function keep(key, value) {
  const store = session();
  if (!store) return;
  if (value) store.setItem(key, value);
  else store.removeItem(key);
}

function kept(key) {
  const store = session();
  return (store && store.getItem(key)) || "";
}

/** The broker's sign-in settings ({issuer, clientId, scope}), or null when people do not
 * sign in on this broker (or it cannot say). */
export async function loadSignInSettings() {
  try {
    const response = await fetch(new URL("v1/signin", window.location.href), { cache: "no-store" });
    if (!response.ok) return null;
    const body = await response.json();
    return body && body.issuer && body.clientId ? body : null;
  } catch (e) {
    return null;
  }
}

function redirectUri() {
  return window.location.origin + window.location.pathname;
}

/** The person's sign-in with the provider `settings` names. `onLost()`: the sign-in ended
 * without the person asking (a refresh refused): the page shows "Sign in" again. */
export function createSignIn(settings, onLost) {
  let discovery = null;
  let access = "";
  let timer = null;

  async function endpoints() {
    if (!discovery) {
      const url = settings.issuer.replace(/\/$/, "") + "/.well-known/openid-configuration";
      const response = await fetch(url, { cache: "no-store" });
      if (!response.ok) throw new Error("the identity provider's discovery document answered " + response.status);
      discovery = await response.json();
    }
    return discovery;
  }

  async function tokenCall(body) {
    const { token_endpoint: endpoint } = await endpoints();
    const response = await fetch(endpoint, {
      method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body,
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.error_description || answer.error || "the identity provider refused");
    return answer;
  }

  function hold(tokens) {
    access = tokens.accessToken;
    keep(REFRESH, tokens.refreshToken);
    if (timer) window.clearTimeout(timer);
    timer = window.setTimeout(() => {
      renew().then((ok) => { if (!ok && onLost) onLost(); });
    }, Math.max(0, renewAt(Date.now(), tokens.expiresIn) - Date.now()));
  }

  function drop() {
    access = "";
    keep(REFRESH, "");
    if (timer) window.clearTimeout(timer);
    timer = null;
  }

  let renewing = null; // the renewal under way: the inbox's socket and the session's share it

  /** A new access token from the refresh token; false (and signed out) when refused. */
  function renew() {
    if (!renewing) renewing = renewOnce().finally(() => { renewing = null; });
    return renewing;
  }

  async function renewOnce() {
    const refresh = kept(REFRESH);
    if (!refresh) {
      drop();
      return false;
    }
    try {
      hold(readTokens(await tokenCall(refreshRequest(settings, refresh)), refresh));
      return true;
    } catch (e) {
      drop();
      return false;
    }
  }

  return {
    settings,
    signedIn: () => access !== "",
    token: () => access,

    /** To the provider; back at this page with the code, then at `target`. */
    async begin(target) {
      const verifier = randomText((n) => window.crypto.getRandomValues(new Uint8Array(n)));
      const state = randomText((n) => window.crypto.getRandomValues(new Uint8Array(n)));
      const digest = await window.crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
      keep(ROUND_TRIP, JSON.stringify({ verifier, state, target: target || null }));
      const { authorization_endpoint: endpoint } = await endpoints();
      window.location.assign(authorizationUrl(endpoint, settings, redirectUri(), state, base64url(new Uint8Array(digest))));
    },

    /** Back from the provider (signin.mjs's parseCallback): the tokens for the code; the
     * target the person was going to. Throws with what went wrong. */
    async complete(callback) {
      let trip = null;
      try { trip = JSON.parse(kept(ROUND_TRIP) || "null"); } catch (e) { trip = null; }
      keep(ROUND_TRIP, "");
      if (!trip || trip.state !== callback.state) throw new Error("this sign-in was not started here");
      if (callback.error) throw new Error(callback.description || callback.error);
      hold(readTokens(await tokenCall(codeRequest(settings, callback.code, trip.verifier, redirectUri()))));
      return trip.target;
    },

    /** At load: signed in still (this tab's refresh token works)? */
    resume: () => (kept(REFRESH) ? renew() : Promise.resolve(false)),
    renew,

    /** Sign out: the provider forgets the refresh token (where it can be told), the page
     * forgets both. */
    async signOut() {
      const refresh = kept(REFRESH);
      drop();
      try {
        const { revocation_endpoint: endpoint } = await endpoints();
        if (endpoint && refresh) {
          await fetch(endpoint, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ token: refresh, token_type_hint: "refresh_token",
              client_id: settings.clientId }).toString() });
        }
      } catch (e) { /* signed out here either way */ }
    },
  };
}
