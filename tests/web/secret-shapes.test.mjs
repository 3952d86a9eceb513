// The page's copy of the broker's credential shapes (clients/web/secret-shapes.mjs), on the
// table the Python tests use too (tests/helpers/secret_texts.json). That the two agree on
// every rule and on thousands of other texts is tests/unit/test_secret_shapes_parity.py's.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { anyCase, looksLikeSecret, RULES } from "../../clients/web/secret-shapes.mjs";

const TABLE = JSON.parse(readFileSync(new URL("../helpers/secret_texts.json", import.meta.url), "utf8")).texts
  .map((e) => ({ ...e, text: typeof e.text === "string" ? e.text : e.text.join("") }));

for (const entry of TABLE) {
  test(`${entry.rule || "passes"}: ${entry.why}`, () => {
    const found = looksLikeSecret(entry.text);
    assert.equal(found ? found.code : null, entry.rule);
  });
}

test("every rule has a text of the table that matches it", () => {
  assert.deepEqual(new Set(TABLE.filter((e) => e.rule).map((e) => e.rule)), new Set(RULES.map((r) => r.code)));
});

test("every pattern compiles with the u flag, and the rules cannot be changed", () => {
  for (const rule of RULES) assert.ok(new RegExp(rule.pattern, "u"));
  assert.ok(Object.isFrozen(RULES) && RULES.every((r) => Object.isFrozen(r)));
});

test("anyCase spells each letter both ways outside brackets", () => {
  assert.equal(anyCase("api[_-]?key"), "[Aa][Pp][Ii][_-]?[Kk][Ee][Yy]");
});

test("a match names the rule, never the text", () => {
  const found = looksLikeSecret("password=Tr0ub4dor-and-more");
  assert.deepEqual(Object.keys(found).sort(), ["code", "pattern", "sentence"]);
  assert.ok(!JSON.stringify(found).includes("Tr0ub4dor"));
});
