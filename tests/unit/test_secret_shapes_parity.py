"""The broker's credential shapes (broker/core/secret_shapes.py) and the page's copy
(clients/web/secret-shapes.mjs) cannot drift: the same rules with the same pattern text,
the same settings, and the same verdict on the shared table and on thousands of texts
generated from it, with the characters where Python's and JavaScript's regular expressions
are known to differ mixed in.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from typing import Any

import pytest

from broker.core import secret_shapes
from tests.helpers.processes import REPO_ROOT, need
from tests.helpers.secret_texts import secret_texts

MODULE = REPO_ROOT / "clients" / "web" / "secret-shapes.mjs"
# Reads a JSON list of texts on stdin; writes the module's settings and each text's verdict.
NODE_SCRIPT = """
import * as shapes from %s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const verdicts = JSON.parse(input).map((text) => {
  const found = shapes.looksLikeSecret(text);
  return found ? found.code : null;
});
process.stdout.write(JSON.stringify({
  rules: shapes.RULES.map((r) => [r.code, r.sentence, r.pattern]),
  notRandom: shapes.NOT_RANDOM_PATTERN,
  space: shapes.SPACE,
  pairNames: shapes.PAIR_NAMES,
  numbers: [shapes.LONG_WORD_MIN, shapes.MIN_ENTROPY, shapes.MIN_SWITCHES, shapes.MAX_WORDY],
  verdicts,
}));
"""

# Where the two engines (or their Unicode tables) could part ways: Python's and JavaScript's
# \\s differ on these, case-insensitive matching folds some of them, and the rest are
# outside the basic plane, combining, or not ASCII digits and letters.
# fmt: off
TRICKY = [
    "\x1c", "\x1f", "\x85", "\xa0", "\ufeff", "\u2028", "\u3000", "\t", "\n", "\r\n", "\v", "\f",
    "ſ", "K", "İ", "ı", "ß", "ǅ", "é", "e\u0301", "٣", "５", "Ａ", "😀", "👩‍👩‍👧", "𝒜", "中", "€", "•", "~", "`", "\\",
]
NAMES = ["password", "PASSWD", "Passphrase", "secret", "secret_key", "token", "API-KEY", "api_key", "access-key",
         "private_key", "db_password", "paſſword", "tokens", "max_tokens", "apı_key", "pwd", "DB_PASS", "bypass",
         "my password is ", "the Passphrase was: ", "pwd\tis ", "https://u:", "redis://:"]
VALUES = ["hunter2", "Tr0ub4dor&3", "please", "Please", "pLease", "${X}", "<mine>", "****", "null", "abc", "ab c",
          "é1234", "😀😀😀😀", "１２３４", "/home/alice", "~/x", "wrong.", "case-sensitive", "NOT", "mySecret",
          "password@db", "p@ss@host"]
ALPHABETS = ["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", "0123456789abcdef"]
# fmt: on


def _generated_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    table = [t.text for t in secret_texts()]

    def word() -> str:
        alphabet = rng.choice(ALPHABETS)
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(24, 72))) + "=" * rng.randint(0, 2)

    def pair() -> str:
        sep = rng.choice(["=", ":", ": ", " = ", '": "', "=="])
        return rng.choice(NAMES) + sep + rng.choice(VALUES + [word()])

    def piece() -> str:
        kind = rng.randrange(7)
        if kind == 0:
            text = rng.choice(table)
            start = rng.randrange(len(text) + 1)
            return text[start : start + rng.randint(1, 80)]
        if kind == 1:
            return rng.choice(TRICKY)
        if kind == 2:
            return word()
        if kind == 3:
            return pair()
        if kind == 4:
            return rng.choice(["https://example.com/p?q=", "ssh-rsa ", "-----BEGIN ", "Bearer ", "eyJ", "sk-", "AKIA"])
        if kind == 5:
            return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 12)))
        return " "

    return ["".join(piece() for _ in range(rng.randint(1, 8))) for _ in range(count)]


def _run_node(texts: list[str]) -> dict[str, Any]:
    node = shutil.which("node")
    need(node is not None, "node is not installed (the page's copy of the rules runs under Node)")
    assert node is not None
    script = NODE_SCRIPT % json.dumps(MODULE.as_uri())
    result = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=120,
        encoding="utf-8",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out: dict[str, Any] = json.loads(result.stdout)
    return out


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [t.text for t in secret_texts()] + _generated_texts(4000, seed=27)


@pytest.fixture(scope="module")
def javascript(texts: list[str]) -> dict[str, Any]:
    return _run_node(texts)


def test_both_have_the_same_rules_in_the_same_order(javascript: dict[str, Any]) -> None:
    assert javascript["rules"] == [[r.code, r.sentence, r.pattern] for r in secret_shapes.RULES]


def test_both_have_the_same_settings(javascript: dict[str, Any]) -> None:
    assert javascript["notRandom"] == secret_shapes.NOT_RANDOM_PATTERN
    assert javascript["space"] == secret_shapes.SPACE
    assert javascript["pairNames"] == secret_shapes.PAIR_NAMES
    assert javascript["numbers"] == [
        secret_shapes.LONG_WORD_MIN,
        secret_shapes.MIN_ENTROPY,
        secret_shapes.MIN_SWITCHES,
        secret_shapes.MAX_WORDY,
    ]


def test_both_give_the_same_verdict_on_every_text(texts: list[str], javascript: dict[str, Any]) -> None:
    python = [(found.code if (found := secret_shapes.looks_like_secret(text)) else None) for text in texts]
    differ = [(text, p, j) for text, p, j in zip(texts, python, javascript["verdicts"], strict=True) if p != j]
    assert differ == []
    # The generated texts reach every rule, and most pass: the comparison covers both sides.
    assert {code for code in python if code} == {r.code for r in secret_shapes.RULES}
    assert python.count(None) > len(python) // 4
