// The link's token out of the address bar, kept for the tab (clients/web/address-bar.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { forgetLink, takeLink } from "../../clients/web/address-bar.mjs";

/** A tab: its address (hash, path, query), its history and its sessionStorage. */
function tab(hash, search = "") {
  const items = new Map();
  const tabState = {
    location: { hash, pathname: "/team/", search },
    replaced: [],
    storage: {
      getItem: (key) => (items.has(key) ? items.get(key) : null),
      setItem: (key, value) => items.set(key, String(value)),
      removeItem: (key) => items.delete(key),
    },
  };
  tabState.history = {
    state: null,
    replaceState(state, title, url) {
      tabState.replaced.push(url);
      const at = url.indexOf("#");
      tabState.location.hash = at < 0 ? "" : url.slice(at);
    },
  };
  return tabState;
}

test("the token is read, then leaves the address bar; the session stays", () => {
  const t = tab("#session=team%3Abuild&token=abc.def.ghi", "?x=1");
  assert.deepEqual(takeLink(t.location, t.history, t.storage, false), { session: "team:build", token: "abc.def.ghi" });
  assert.deepEqual(t.replaced, ["/team/?x=1#session=team%3Abuild"]);
  assert.doesNotMatch(t.location.hash, /token/);
});

test("a token alone (the inbox) leaves no fragment at all", () => {
  const t = tab("#token=abc");
  assert.deepEqual(takeLink(t.location, t.history, t.storage, false), { session: "", token: "abc" });
  assert.deepEqual(t.replaced, ["/team/"]);
});

test("a reload of the tab opens the same session with the token it read", () => {
  const t = tab("#session=demo&token=abc");
  takeLink(t.location, t.history, t.storage, false);
  assert.deepEqual(takeLink(t.location, t.history, t.storage, true), { session: "demo", token: "abc" });
  assert.equal(t.replaced.length, 1, "nothing more to remove");
});

test("a visit that is no reload uses no kept token, and forgets it", () => {
  const t = tab("#session=demo&token=abc");
  takeLink(t.location, t.history, t.storage, false);
  assert.deepEqual(takeLink(t.location, t.history, t.storage, false), { session: "demo", token: "" });
  assert.deepEqual(takeLink(t.location, t.history, t.storage, true), { session: "demo", token: "" });
});

test("the kept token is for its own session only, and forgotten on request", () => {
  const t = tab("#session=demo&token=abc");
  takeLink(t.location, t.history, t.storage, false);
  t.location.hash = "#session=other";
  assert.deepEqual(takeLink(t.location, t.history, t.storage, true), { session: "other", token: "" });
  t.location.hash = "#session=demo&token=abc";
  takeLink(t.location, t.history, t.storage, false);
  forgetLink(t.storage);
  assert.deepEqual(takeLink(t.location, t.history, t.storage, true), { session: "demo", token: "" });
});

test("a link without a token changes nothing", () => {
  const t = tab("#session=demo");
  assert.deepEqual(takeLink(t.location, t.history, t.storage, false), { session: "demo", token: "" });
  assert.deepEqual(t.replaced, []);
});
