"""broker/core/secret_shapes.py: which texts look like a pasted credential, and which do not.

The table (tests/helpers/secret_texts.json) is shared with the page's JavaScript rules
(tests/web/secret-shapes.test.mjs, tests/unit/test_secret_shapes_parity.py).
"""

from __future__ import annotations

import ast
import random
import string
from pathlib import Path

import pytest

from broker.core import secret_shapes
from broker.core.secret_shapes import RULES, any_case, is_random_word, looks_like_secret
from tests.helpers.processes import REPO_ROOT
from tests.helpers.secret_texts import SecretText, secret_texts

TEXTS = secret_texts()


@pytest.mark.parametrize("case", TEXTS, ids=[f"{t.rule or 'passes'}: {t.why}" for t in TEXTS])
def test_each_text_of_the_table_matches_its_rule_or_none(case: SecretText) -> None:
    found = looks_like_secret(case.text)
    assert (found.code if found else None) == case.rule


def test_every_rule_has_a_text_that_matches_it() -> None:
    assert {t.rule for t in TEXTS if t.rule} == {rule.code for rule in RULES}


def test_the_table_has_many_texts_that_must_pass() -> None:
    assert sum(1 for t in TEXTS if t.rule is None) >= 60


def test_what_a_match_says_never_repeats_the_text() -> None:
    for case in TEXTS:
        found = looks_like_secret(case.text)
        if found is None:
            continue
        said = f"{found.code} {found.sentence} {found!r}"
        for word in case.text.split():
            if len(word) >= 12 and word not in found.pattern:
                assert word not in said, (case.why, found.code)


def test_rule_codes_are_unique_identifiers_and_sentences_complete_this_looks_like() -> None:
    codes = [rule.code for rule in RULES]
    assert len(set(codes)) == len(codes)
    for rule in RULES:
        assert rule.code.isidentifier() and rule.code == rule.code.lower(), rule.code
        assert rule.sentence[0].islower() or rule.sentence.startswith("HTTP"), rule.sentence
        assert not rule.sentence.endswith("."), rule.sentence


def test_the_named_shapes_are_tried_before_the_entropy_rule() -> None:
    assert RULES[-1].code == "random_word"
    # A GitHub token is also a long random-looking word: it is reported by its name.
    token = "ghp_" + "x9Kd2LmQ7vRt4WbZ8cYe1NfHs3JaPu6GiOk5"
    found = looks_like_secret(f"use {token} please")
    assert found is not None and found.code == "github_token"


def test_any_case_spells_each_letter_both_ways_outside_brackets() -> None:
    assert any_case("api[_-]?key") == "[Aa][Pp][Ii][_-]?[Kk][Ee][Yy]"
    assert any_case("passw(?:or)?d|token") == "[Pp][Aa][Ss][Ss][Ww](?:[Oo][Rr])?[Dd]|[Tt][Oo][Kk][Ee][Nn]"


@pytest.mark.parametrize("name", ["password", "PASSWORD", "Password", "pAsSwOrD", "db_password", "DB-PASSWD"])
def test_a_secret_name_is_recognised_in_any_case(name: str) -> None:
    found = looks_like_secret(f"{name}=Tr0ub4dor")
    assert found is not None and found.code == "secret_assignment"


@pytest.mark.parametrize(
    "text",
    [
        "apı_key=Tr0ub4dor",  # a dotless i: neither engine's own ignore-case flag treats it alike
        "paſſword=Tr0ub4dor",  # a long s
        "tokens=Tr0ub4dor",
        "token_count=12345",
    ],
)
def test_only_ascii_spellings_of_the_names_count(text: str) -> None:
    assert looks_like_secret(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password: please", None),  # a colon and a plain word: prose
        ("password: Please", None),  # capitalised, still a word
        ("password: pLease", "secret_assignment"),  # an upper-case letter inside
        ("password: please1", "secret_assignment"),
        ("password: ple@se", "secret_assignment"),
        ("password=please", "secret_assignment"),  # an equals sign is never prose
        ("password=abc", None),  # too short to be worth a stop
        ("password=${DB_PASSWORD}", None),
        ("password=%DB_PASSWORD%", None),
        ("password={{ vault_password }}", None),
        ("password=<password>", None),
        ("password=xxxxxxxx", None),
        ("password=•••••••", None),
        ("password=NULL", None),
        ("password==hunter22", None),  # a comparison, not an assignment
    ],
)
def test_a_pairs_value_decides(text: str, expected: str | None) -> None:
    found = looks_like_secret(text)
    assert (found.code if found else None) == expected


def test_random_words_are_caught_at_the_calibrated_rates() -> None:
    """docs/secrets-guard.md: 95% of random base62/base64 words of 32 characters, 96% of 40."""
    rng = random.Random(20260527)
    alphabets = (
        string.ascii_letters + string.digits,
        string.ascii_letters + string.digits + "+/",
        string.ascii_letters + string.digits + "-_",
    )
    for length, floor in ((32, 0.94), (40, 0.95), (64, 0.96)):
        words = ["".join(rng.choice(alphabet) for _ in range(length)) for alphabet in alphabets for _ in range(700)]
        caught = sum(1 for word in words if is_random_word(word)) / len(words)
        assert caught >= floor, (length, caught)


def _repository_words() -> tuple[set[str], set[str]]:
    """This repository's own long identifiers (from the syntax trees) and path words."""
    names: set[str] = set()
    paths: set[str] = set()
    for path in sorted(REPO_ROOT.rglob("*.py")):
        if ".git" in path.parts or "node_modules" in path.parts:
            continue
        paths.add(str(path.relative_to(REPO_ROOT.parent)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for attr in ("name", "id", "attr", "arg"):
                value = getattr(node, attr, None)
                if isinstance(value, str) and len(value) >= 20:
                    names.add(value)
    return names, paths


def test_this_repositorys_own_identifiers_and_paths_pass() -> None:
    names, paths = _repository_words()
    assert len(names) > 100 and len(paths) > 100
    flagged = [text for text in sorted(names | paths) if looks_like_secret(text) is not None]
    assert flagged == []


def test_a_long_text_is_checked_in_full() -> None:
    key = "sk-" + "Zk3" * 16
    found = looks_like_secret("lorem ipsum dolor " * 3000 + key)
    assert found is not None and found.code == "openai_api_key"


def test_the_module_says_where_its_javascript_twin_lives() -> None:
    twin = Path(secret_shapes.__file__).parents[2] / "clients" / "web" / "secret-shapes.mjs"
    assert twin.exists()
    assert "clients/web/secret-shapes.mjs" in (secret_shapes.__doc__ or "")
