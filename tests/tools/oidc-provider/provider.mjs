// The identity provider of the sign-in tests: panva's oidc-provider (a certified OpenID
// Provider), configured as a team's provider would be for qbroker (tests/helpers/oidc.py
// starts it):
//
// - one public client (no secret: the page and the terminal client cannot keep one) with the
//   authorization code flow, PKCE required, refresh tokens, and the device authorization
//   grant (RFC 8628);
// - users whose access tokens are JWTs for the broker's audience, carrying the qbroker claims
//   the broker reads (qbroker_sid: the sessions a person covers, role: client);
// - the provider's own development login and consent pages, which the tests fill in.
//
// Settings come from the environment (JSON where structured), so that the tests own them:
//   OIDC_PROVIDER_MODULE  the installed oidc-provider's lib/index.js
//   OIDC_PORT, OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_REDIRECT_URIS (JSON list), OIDC_AUDIENCE,
//   OIDC_USERS            {"alice": {"sid": "alice:*", "role": "client"}, ...}
//   OIDC_ACCESS_TOKEN_TTL seconds an access token lives
// It prints "ready" once it listens.

import { generateKeyPairSync } from "node:crypto";
import { pathToFileURL } from "node:url";

const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER_MODULE).href);

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(name + " is not set");
  return value;
};
const users = JSON.parse(env("OIDC_USERS"));
const audience = env("OIDC_AUDIENCE");
const resource = "urn:qbroker"; // the broker, as a resource server of this provider
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });

const provider = new Provider(env("OIDC_ISSUER"), {
  clients: [{
    client_id: env("OIDC_CLIENT_ID"),
    token_endpoint_auth_method: "none",
    application_type: "web",
    redirect_uris: JSON.parse(env("OIDC_REDIRECT_URIS")),
    grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    response_types: ["code"],
  }],
  jwks: { keys: [{ ...privateKey.export({ format: "jwk" }), kid: "test-key-1", use: "sig", alg: "RS256" }] },
  async findAccount(ctx, id) {
    if (!Object.prototype.hasOwnProperty.call(users, id)) return undefined;
    return { accountId: id, async claims() { return { sub: id, name: id }; } };
  },
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: "openid offline_access",
        audience,
        accessTokenTTL: Number(env("OIDC_ACCESS_TOKEN_TTL")),
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  // A public client of this team gets refresh tokens (the page and the terminal client
  // stay signed in past one access token's life).
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed("refresh_token"),
  async extraTokenClaims(ctx, token) {
    if (token.kind !== "AccessToken" || !users[token.accountId]) return undefined;
    // qbroker_sid, the broker's default scope claim: an OIDC "sid" is the provider's login session.
    const { sid, role } = users[token.accountId];
    return { qbroker_sid: sid, role };
  },
  pkce: { required: () => true },
  clientBasedCORS: () => true,
  ttl: { Session: 3600, Grant: 3600, RefreshToken: 3600, DeviceCode: 600, Interaction: 600, AuthorizationCode: 60 },
});
provider.proxy = false;

provider.listen(Number(env("OIDC_PORT")), "127.0.0.1", () => {
  process.stdout.write("ready\n");
});
