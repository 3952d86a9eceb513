/* The link's token leaves the address bar as soon as the page has read it: a token in the
 * URL ends up in the history, in synced history on other devices, and in screenshots. The
 * page keeps it for this tab only (sessionStorage: not shared with other tabs, gone when the
 * tab closes), and uses it again only when the tab is reloaded, so a reload still opens what
 * the link opened while any other visit without a token keeps nothing (the page remembers
 * a token only when asked: token-memory.mjs). The session id stays in the address bar: it
 * names what is open, and is no credential.
 *
 * `takeLink(location, history, storage, reloaded)` is given the page's `window.location`,
 * `window.history`, `window.sessionStorage` and whether this load is a reload (tests give
 * stand-ins). */

import { parseFragment } from "./link.mjs";

const KEY = "qbroker.link";

function kept(storage) {
  try {
    const value = JSON.parse(storage.getItem(KEY) || "null");
    return value && typeof value.token === "string" ? value : null;
  } catch (e) {
    return null; // storage refused, or not ours
  }
}

/** {session, token} of the link (as parseFragment gives it): read from the fragment, which
 * is then left without its token; or, on a reload when the fragment carries none, the token
 * this tab read for the same session. */
export function takeLink(location, history, storage, reloaded) {
  const params = parseFragment(location.hash);
  if (params.token) {
    try {
      storage.setItem(KEY, JSON.stringify(params));
    } catch (e) { /* (storage refused: a reload will ask for the token again) */ }
    const rest = params.session ? "#session=" + encodeURIComponent(params.session) : "";
    history.replaceState(history.state, "", location.pathname + location.search + rest);
    return params;
  }
  const earlier = kept(storage);
  if (reloaded && earlier && earlier.session === params.session) return { session: params.session, token: earlier.token };
  forgetLink(storage);
  return params;
}

/** "Forget my token": this tab forgets the link's token too. */
export function forgetLink(storage) {
  try {
    storage.removeItem(KEY);
  } catch (e) { /* nothing was kept */ }
}
