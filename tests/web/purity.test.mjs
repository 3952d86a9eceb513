// The page's pure modules stay pure: no DOM, no WebSocket, no timers, no clock, no randomness
// of their own, and they import only each other. What they need comes in as arguments, which
// is what lets these tests run them without a browser.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

const PURE = [
  "state.mjs", "answer.mjs", "messages.mjs", "reconnect.mjs", "link.mjs", "text.mjs", "secret-shapes.mjs", "secret-guard.mjs",
  "inbox.mjs", "push.mjs", "who.mjs", "refusals.mjs", "signin.mjs", "out.mjs",
];
const WEB = new URL("../../clients/web/", import.meta.url);
const FORBIDDEN = [
  "document", "window", "navigator", "location", "WebSocket", "localStorage", "sessionStorage", "fetch",
  "XMLHttpRequest", "setTimeout", "setInterval", "requestAnimationFrame", "Date", "performance", "console",
];

/** The source without comments and string literals, so that words in them do not count. */
function code(name) {
  return readFileSync(new URL(name, WEB), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\/\/.*$/gm, "")
    .replace(/"(?:[^"\\\n]|\\.)*"/g, '""')
    .replace(/'(?:[^'\\\n]|\\.)*'/g, "''");
}

for (const name of PURE) {
  test(`${name} touches no browser, timer or clock`, () => {
    const source = code(name);
    for (const word of FORBIDDEN) {
      assert.doesNotMatch(source, new RegExp(`(?<![.\\w])${word}\\b`), `${name} uses ${word}`);
    }
    // Math.random is allowed only as a default that a caller (or a test) replaces.
    assert.doesNotMatch(source.replace("random = Math.random", ""), /Math\.random/, `${name} draws random numbers`);
  });

  test(`${name} imports only pure modules`, () => {
    const source = readFileSync(new URL(name, WEB), "utf8");
    const imports = [...source.matchAll(/\bimport\s*(?:[\w{},*\s]+from\s*)?\(?\s*["']([^"']+)["']/g)].map((m) => m[1]);
    if (name === "state.mjs") assert.ok(imports.length > 0, "the pattern finds state.mjs's imports");
    for (const spec of imports) assert.ok(PURE.includes(spec.replace(/^\.\//, "")), `${name} imports ${spec}`);
  });
}
