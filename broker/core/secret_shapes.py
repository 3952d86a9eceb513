"""What a pasted credential looks like: the one list of shapes the broker and its clients check.

An Other text or a clarification text goes straight into a model's context, so a person who
pastes a password or an API key there hands it to the agent. ``looks_like_secret(text)``
says which shape a text has, if any, as a ``SecretRule`` (a short ``code`` and a
``sentence`` for people); it never returns or repeats the text. The broker refuses a
client frame whose text has one of these shapes unless the person confirmed it
(docs/protocol.md, ``looks_like_secret``); the browser page and the terminal client stop
before sending and ask. docs/secrets-guard.md lists the rules and why each is shaped so.

The browser page runs the same rules in JavaScript (clients/web/secret-shapes.mjs).
``tests/unit/test_secret_shapes_parity.py`` holds the two equal: the same rules, the same
pattern text, the same verdict on every text of a shared table and of thousands generated.
So every pattern here is written in the dialect both engines read alike (Python's ``re``
without flags; ECMAScript with the ``u`` flag): no ``\\s``, ``\\w``, ``\\b`` or case-insensitive
flag, whose meanings differ between the two beyond ASCII; explicit character classes instead.

Pure: no I/O, no clock; cheap enough to run on every text a client sends (a few regular
expression scans over at most a few kilobytes, and the entropy of the rare long word).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Final

import msgspec


class SecretRule(msgspec.Struct, frozen=True):
    """One shape of credential: its ``code`` (on the wire) and a ``sentence`` that completes
    "This looks like ...". ``pattern`` finds candidates; ``check`` (when set) decides about each."""

    code: str
    sentence: str
    pattern: str


def any_case(words: str) -> str:
    """``words`` (letters, ``|``, ``(?:``, ``)``, ``?`` and ``[_-]``) with each ASCII letter
    outside brackets written as ``[Xx]``: case-insensitive without a flag (both engines'
    ignore-case flags also fold a few non-ASCII letters, and not the same ones)."""
    out: list[str] = []
    in_class = False
    for ch in words:
        if ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        if not in_class and ch.isascii() and ch.isalpha():
            out.append(f"[{ch.upper()}{ch.lower()}]")
        else:
            out.append(ch)
    return "".join(out)


# Whitespace as both engines can say it alike (their \s differ: U+001C-U+001F, U+0085, U+FEFF).
SPACE: Final = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
# The names of a secret in a name=value or name: value pair (at the end of a longer name too:
# DB_PASSWORD, aws_secret_access_key, client_secret, csrf_token). The short ones, pass and
# pwd, only as a word or after a non-letter (DB_PASS, pwd), never inside one (bypass, compass).
PAIR_NAMES: Final = (
    "passw(?:or)?d|passphrase|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key|private[_-]?key"
    "|(?<![A-Za-z])(?:pass|pwd)"
)
# The names of a password in a sentence: "my password is …", "the passphrase was: …".
SENTENCE_NAMES: Final = "passw(?:or)?d|passphrase|pwd"
# A long word of the base64, base64url and hex alphabets (the entropy rule's candidates).
LONG_WORD_MIN: Final = 32
# Calibrated (docs/secrets-guard.md): together the tests below let through none of 14,000
# long identifiers of Python's standard library nor of 100,000 file path words of a Debian
# system, and catch 95% of random base62/base64 words of 32 characters, 96% of 40, 97% of 64.
MIN_ENTROPY: Final = 4.0  # bits per character (Shannon), over the word's own characters
MIN_SWITCHES: Final = 0.4  # of neighbouring letters and digits, the share of a different class
MAX_WORDY: Final = 0.55  # the share of the word in word-like runs of letters (Word, word, WORD)

_NOT_BEFORE_TOKEN: Final = "(?<![A-Za-z0-9_-])"
_NO_SECRET_VALUES: Final = frozenset(
    {"null", "none", "nil", "true", "false", "undefined", "empty", "redacted", "hidden"}
)
# What stands for a password in an example address (postgres://user:password@host).
_URL_PLACEHOLDERS: Final = frozenset({"password", "passwd", "pass", "pwd", "secret"})


def _rule(code: str, sentence: str, pattern: str) -> SecretRule:
    return SecretRule(code, sentence, pattern)


RULES: Final[tuple[SecretRule, ...]] = (
    _rule(
        "private_key",
        "a private key (a PEM block)",
        "-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    _rule(
        "jwt",
        "a signed token (a JWT)",
        _NOT_BEFORE_TOKEN + "eyJ[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]*",
    ),
    _rule(
        "anthropic_api_key",
        "an Anthropic API key (sk-ant-…)",
        _NOT_BEFORE_TOKEN + "sk-ant-[A-Za-z0-9_-]{20,}",
    ),
    _rule(
        "openai_api_key",
        "an API key of the sk-… kind (OpenAI and others)",
        _NOT_BEFORE_TOKEN + "sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}",
    ),
    _rule(
        "stripe_key",
        "a Stripe secret key (sk_live_… or rk_…)",
        _NOT_BEFORE_TOKEN + "[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    _rule(
        "github_token",
        "a GitHub token (ghp_…, gho_…, ghs_…, ghu_…, ghr_… or github_pat_…)",
        "(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    ),
    _rule(
        "gitlab_token",
        "a GitLab token (glpat-…)",
        _NOT_BEFORE_TOKEN + "glpat-[A-Za-z0-9_-]{20,}",
    ),
    _rule(
        "slack_token",
        "a Slack token (xoxb-…, xoxp-…)",
        _NOT_BEFORE_TOKEN + "xox[bpoas]-(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{10,}",
    ),
    _rule(
        "slack_webhook",
        "a Slack webhook address (its path is the secret)",
        "hooks\\.slack\\.com/services/[A-Za-z0-9_/-]{20,}",
    ),
    _rule(
        "aws_access_key",
        "an AWS access key id (AKIA… or ASIA…)",
        "(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    _rule(
        "google_api_key",
        "a Google API key (AIza…)",
        _NOT_BEFORE_TOKEN + "AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
    ),
    _rule(
        "npm_token",
        "an npm token (npm_…)",
        _NOT_BEFORE_TOKEN + "npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
    ),
    _rule(
        "huggingface_token",
        "a Hugging Face token (hf_…)",
        _NOT_BEFORE_TOKEN + "hf_[A-Za-z]{34}(?![A-Za-z0-9])",
    ),
    _rule(
        "authorization_header",
        "HTTP credentials (Bearer … or Basic …)",
        "(?<![A-Za-z0-9])(?:Bearer|Basic)[ \\t]+(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*",
    ),
    _rule(
        "url_password",
        "an address with a password in it (scheme://user:password@host)",
        "[A-Za-z][A-Za-z0-9+.-]*://[^" + SPACE + "/?#@:]*:([^" + SPACE + "/?#@]+)@",
    ),
    _rule(
        "password_sentence",
        'a password given in a sentence ("my password is …")',
        "(?:"
        + any_case(SENTENCE_NAMES)
        + ")[ \\t]+"
        + any_case("(?:is|was)")
        + "[ \\t]*:?[ \\t]+[\"']?([^"
        + SPACE
        + "\"']+)",
    ),
    _rule(
        "secret_assignment",
        "a password, secret or token given as name=value or name: value",
        "(?:"
        + any_case(PAIR_NAMES)
        + ")[\"']?[ \\t]*([:=])[ \\t]*[\"']?([^"
        + SPACE
        + "\"'&,;=][^"
        + SPACE
        + "\"'&,;]*)",
    ),
    _rule(
        "random_word",
        "a long random-looking string, as keys and tokens are",
        "[A-Za-z0-9+/=_-]{" + str(LONG_WORD_MIN) + ",}",
    ),
)

# What the entropy rule skips: a URL (its path and query may hold long opaque ids: tracking
# parameters, signed links), an SSH public key, a PEM block (a certificate; a private key's
# block is its own rule, checked first). The named shapes (a token= pair, a key's prefix)
# still apply to all of them.
NOT_RANDOM_PATTERN: Final = "|".join(
    (
        "[A-Za-z][A-Za-z0-9+.-]*://[^" + SPACE + "]*",
        "(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp[0-9]+|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\\.com)"
        + "[ \\t]+[A-Za-z0-9+/]+=*",
        "-----BEGIN [A-Z0-9 ]+-----[^-]*-----END [A-Z0-9 ]+-----",
    )
)

_COMPILED: Final = tuple((rule, re.compile(rule.pattern)) for rule in RULES)
_NOT_RANDOM: Final = re.compile(NOT_RANDOM_PATTERN)
_LONG_WORD: Final = re.compile(RULES[-1].pattern)
_LOWER: Final = re.compile("[a-z]")
_UPPER: Final = re.compile("[A-Z]")
_DIGIT: Final = re.compile("[0-9]")
_PUNCT: Final = re.compile("[!-/:-@\\[-`{-~]")  # ASCII punctuation
_WORD_RUN: Final = re.compile("[A-Z]?[a-z]{3,}|[A-Z]{4,}")
_MASK: Final = re.compile("^[*xX•.#_-]+$")
_TEMPLATE: Final = re.compile("^(?:[$%<]|\\{\\{)")
_PATH: Final = re.compile("^(?:/|~/|\\./|\\.\\./)")  # PWD=/home/alice, pass: ~/.secrets/db


def looks_like_secret(text: str) -> SecretRule | None:
    """The first rule (in ``RULES``' order) that ``text`` matches, or None."""
    return _find(text, decode=True)


# Text each rule cannot match without (any one of them): a substring test is far cheaper than
# a regular expression that may start at every position, and most texts hold none of these.
# Only a shortcut: the verdict is the patterns' (the parity test would catch a wrong needle).
_NEEDLES: Final[dict[str, tuple[str, ...]]] = {
    "private_key": ("-----BEGIN ",),
    "jwt": ("eyJ",),
    "anthropic_api_key": ("sk-ant-",),
    "openai_api_key": ("sk-",),
    "stripe_key": ("k_live_", "k_test_"),
    "github_token": ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_token": ("xox",),
    "slack_webhook": ("hooks.slack.com/services/",),
    "aws_access_key": ("AKIA", "ASIA"),
    "google_api_key": ("AIza",),
    "npm_token": ("npm_",),
    "huggingface_token": ("hf_",),
    "authorization_header": ("Bearer", "Basic"),
}
_SENTENCE_NEEDLES: Final = ("pass", "pwd")  # in the lower-cased text, with "is" or "was"
_PAIR_SEPARATORS: Final = ("=", ":")
_PAIR_NEEDLES: Final = ("pass", "pwd", "secret", "token", "key")  # in the lower-cased text
# Only these change anything when the entropy rule blanks out what it skips.
_NOT_RANDOM_NEEDLES: Final = ("://", "ssh-", "ecdsa-", "-----BEGIN ")


def _find(text: str, *, decode: bool) -> SecretRule | None:
    for rule, regex in _COMPILED:
        code = rule.code
        needles = _NEEDLES.get(code)
        if needles is not None:
            if any(needle in text for needle in needles) and regex.search(text) is not None:
                return rule
        elif code == "url_password":
            if "://" in text and "@" in text and any(_url_password(m.group(1)) for m in regex.finditer(text)):
                return rule
        elif code == "password_sentence":
            lowered = text.lower()
            if not ("is" in lowered or "was" in lowered) or not any(n in lowered for n in _SENTENCE_NEEDLES):
                continue
            if any(_sentence_value(m.group(1)) for m in regex.finditer(text)):
                return rule
        elif code == "secret_assignment":
            if not any(sep in text for sep in _PAIR_SEPARATORS):
                continue
            lowered = text.lower()
            if not any(needle in lowered for needle in _PAIR_NEEDLES):
                continue
            if any(_secret_value(m.group(1), m.group(2)) for m in regex.finditer(text)):
                return rule
        else:  # random_word
            found = _random_word(text, decode)
            if found is not None:
                return found
    return None


def _secret_value(separator: str, value: str) -> bool:
    """Is ``value`` (after ``password=`` or ``password:``) a secret rather than prose or a
    placeholder? ``password: please`` is prose; ``password=hunter2`` and ``token: Xy9…`` are not."""
    if len(value) < 4 or value.lower() in _NO_SECRET_VALUES:
        return False
    if _placeholder(value):
        return False
    if separator == "=":
        return True
    return bool(_DIGIT.search(value) or _PUNCT.search(value) or _UPPER.search(value[1:]))


def _placeholder(value: str) -> bool:
    """A mask, a reference or a file path stands for a secret: "****", "$DB_PASSWORD",
    "<yours>", "{{ vault }}", "/run/secrets/db" (and PWD=/home/alice is no password)."""
    return bool(_MASK.match(value) or _TEMPLATE.match(value) or _PATH.match(value))


def _url_password(value: str) -> bool:
    """Is ``value`` (between ``user:`` and ``@`` in an address) a password? Any is, but for
    a placeholder: ``postgres://user:password@host`` and ``redis://:****@host`` are examples."""
    lowered = value.lower()
    return (
        len(value) >= 4
        and lowered not in _NO_SECRET_VALUES
        and lowered not in _URL_PLACEHOLDERS
        and not _placeholder(value)
    )


def _sentence_value(value: str) -> bool:
    """Is ``value`` (after "password is") a password rather than the sentence going on?
    Prose follows too ("is required", "is wrong.", "is case-sensitive", "is NOT working"), so
    without its closing punctuation it must have a digit, a symbol other than ``-``, or
    both cases after its first letter: "hunter2", "p@ss", "tr0ub4dor", "mySecret"."""
    value = value.rstrip(".,!?;:)")
    if len(value) < 4 or value.lower() in _NO_SECRET_VALUES or _placeholder(value):
        return False
    if _DIGIT.search(value) or _PUNCT.search(value.replace("-", "")):
        return True
    return bool(_LOWER.search(value) and _UPPER.search(value[1:]))


def _random_word(text: str, decode: bool) -> SecretRule | None:
    # Blanking out what is skipped only ever shortens words: no long word before, none after.
    if len(text) < LONG_WORD_MIN or _LONG_WORD.search(text) is None:
        return None
    if any(needle in text for needle in _NOT_RANDOM_NEEDLES):
        text = _NOT_RANDOM.sub(" ", text)
    for match in _LONG_WORD.finditer(text):
        word = match.group(0)
        if not is_random_word(word):
            continue
        decoded = _base64_text(word) if decode else None
        if decoded is None:
            return RULES[-1]
        # Base64 of readable text (a pasted blob, an encoded message) is judged by what it says.
        inner = _find(decoded, decode=False)
        if inner is not None:
            return inner
    return None


def is_random_word(word: str) -> bool:
    """A word of the long-word alphabet that looks drawn at random: all three of lower case,
    upper case and digits; high Shannon entropy; letters and digits switching class often
    (CamelCase words do not); little of it in word-like runs of letters; and, split at its
    slashes, no part of 8 characters or more that reads like a word (a path's folders)."""
    if len(word) < LONG_WORD_MIN or not (_LOWER.search(word) and _UPPER.search(word) and _DIGIT.search(word)):
        return False
    if entropy(word) < MIN_ENTROPY or class_switches(word) < MIN_SWITCHES or wordiness(word) >= MAX_WORDY:
        return False
    return "/" not in word or all(len(part) < 8 or wordiness(part) < MAX_WORDY for part in word.split("/"))


def wordiness(word: str) -> float:
    """The share of ``word`` in word-like runs of letters: ``Word``, ``word``, ``WORD``."""
    return sum(len(run) for run in _WORD_RUN.findall(word)) / len(word)


def entropy(word: str) -> float:
    """Shannon entropy of ``word``'s characters, in bits per character."""
    counts: dict[str, int] = {}
    for ch in word:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(word)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def class_switches(word: str) -> float:
    """Of neighbouring letters and digits (other characters skipped), the share whose class
    (lower, upper, digit) differs."""
    classes = [_class(ch) for ch in word if _class(ch)]
    if len(classes) < 2:
        return 0.0
    return sum(1 for a, b in zip(classes, classes[1:], strict=False) if a != b) / (len(classes) - 1)


def _class(ch: str) -> int:
    if "a" <= ch <= "z":
        return 1
    if "A" <= ch <= "Z":
        return 2
    return 3 if "0" <= ch <= "9" else 0


def _base64_text(word: str) -> str | None:
    """``word`` decoded as base64 or base64url, when that gives readable UTF-8 text."""
    body = word.rstrip("=")
    if "=" in body or len(body) % 4 == 1:
        return None
    body = body.replace("-", "+").replace("_", "/")
    try:
        text = base64.b64decode(body + "=" * (-len(body) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return text if all(_readable(ch) for ch in text) else None


def _readable(ch: str) -> bool:
    code = ord(ch)
    return ch in "\t\n\r" or (code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0)
