// Counting and phrasing (clients/web/text.mjs).

import assert from "node:assert/strict";
import { test } from "node:test";

import { boundsSentence, charCount, plural, sentence } from "../../clients/web/text.mjs";

test("characters are counted as the broker counts them: code points", () => {
  assert.equal(charCount("abc"), 3);
  assert.equal(charCount("😀é"), 2);
  assert.equal(charCount(""), 0);
});

test("a sentence gets one full stop", () => {
  assert.equal(sentence(" Yes "), "Yes.");
  assert.equal(sentence("Yes."), "Yes.");
  assert.equal(sentence("Really?"), "Really?");
  assert.equal(sentence('He said "go."'), 'He said "go."');
  assert.equal(sentence("（はい。）"), "（はい。）.");
  assert.equal(sentence("はい。"), "はい。");
});

test("plurals and bounds", () => {
  assert.equal(plural(1, "option", "options"), "1 option");
  assert.equal(plural(0, "option", "options"), "0 options");
  assert.equal(boundsSentence(2, 3), "Choose 2 to 3.");
  assert.equal(boundsSentence(2, 2), "Choose exactly 2.");
  assert.equal(boundsSentence(0, null), "Choose any that apply.");
});
