/* What a pasted credential looks like: the broker's list of shapes (broker/core/secret_shapes.py),
 * rule for rule, so that the page stops before sending what the broker would refuse.
 * Pure: no DOM. docs/secrets-guard.md lists the rules.
 *
 * tests/unit/test_secret_shapes_parity.py holds this module and the Python one equal: the
 * same rules with the same pattern text, and the same verdict on every text of a shared
 * table and on thousands of generated ones. Patterns are compiled with the `u` flag (so
 * that they count code points, as Python does) and written without \s, \w, \b or the `i`
 * flag, whose meanings differ between the two engines beyond ASCII. */

/** The same as the Python `any_case`: each ASCII letter outside brackets as [Xx]. */
export function anyCase(words) {
  let out = "";
  let inClass = false;
  for (const ch of words) {
    if (ch === "[") inClass = true;
    else if (ch === "]") inClass = false;
    out += !inClass && /^[A-Za-z]$/.test(ch) ? "[" + ch.toUpperCase() + ch.toLowerCase() + "]" : ch;
  }
  return out;
}

export const SPACE = "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff";
export const PAIR_NAMES =
  "passw(?:or)?d|passphrase|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key|private[_-]?key" +
  "|(?<![A-Za-z])(?:pass|pwd)";
export const SENTENCE_NAMES = "passw(?:or)?d|passphrase|pwd";
export const LONG_WORD_MIN = 32;
export const MIN_ENTROPY = 4.0;
export const MIN_SWITCHES = 0.4;
export const MAX_WORDY = 0.55;

const NOT_BEFORE_TOKEN = "(?<![A-Za-z0-9_-])";
const NO_SECRET_VALUES = new Set(["null", "none", "nil", "true", "false", "undefined", "empty", "redacted", "hidden"]);
const URL_PLACEHOLDERS = new Set(["password", "passwd", "pass", "pwd", "secret"]);

function rule(code, sentence, pattern) {
  return Object.freeze({ code, sentence, pattern });
}

/** Each {code, sentence, pattern}, in the order they are tried. */
export const RULES = Object.freeze([
  rule(
    "private_key",
    "a private key (a PEM block)",
    "-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
  ),
  rule(
    "jwt",
    "a signed token (a JWT)",
    NOT_BEFORE_TOKEN + "eyJ[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]*",
  ),
  rule(
    "anthropic_api_key",
    "an Anthropic API key (sk-ant-…)",
    NOT_BEFORE_TOKEN + "sk-ant-[A-Za-z0-9_-]{20,}",
  ),
  rule(
    "openai_api_key",
    "an API key of the sk-… kind (OpenAI and others)",
    NOT_BEFORE_TOKEN + "sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}",
  ),
  rule(
    "stripe_key",
    "a Stripe secret key (sk_live_… or rk_…)",
    NOT_BEFORE_TOKEN + "[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
  ),
  rule(
    "github_token",
    "a GitHub token (ghp_…, gho_…, ghs_…, ghu_…, ghr_… or github_pat_…)",
    "(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
  ),
  rule(
    "gitlab_token",
    "a GitLab token (glpat-…)",
    NOT_BEFORE_TOKEN + "glpat-[A-Za-z0-9_-]{20,}",
  ),
  rule(
    "slack_token",
    "a Slack token (xoxb-…, xoxp-…)",
    NOT_BEFORE_TOKEN + "xox[bpoas]-(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{10,}",
  ),
  rule(
    "slack_webhook",
    "a Slack webhook address (its path is the secret)",
    "hooks\\.slack\\.com/services/[A-Za-z0-9_/-]{20,}",
  ),
  rule(
    "aws_access_key",
    "an AWS access key id (AKIA… or ASIA…)",
    "(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
  ),
  rule(
    "google_api_key",
    "a Google API key (AIza…)",
    NOT_BEFORE_TOKEN + "AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
  ),
  rule(
    "npm_token",
    "an npm token (npm_…)",
    NOT_BEFORE_TOKEN + "npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",
  ),
  rule(
    "huggingface_token",
    "a Hugging Face token (hf_…)",
    NOT_BEFORE_TOKEN + "hf_[A-Za-z]{34}(?![A-Za-z0-9])",
  ),
  rule(
    "authorization_header",
    "HTTP credentials (Bearer … or Basic …)",
    "(?<![A-Za-z0-9])(?:Bearer|Basic)[ \\t]+(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*",
  ),
  rule(
    "url_password",
    "an address with a password in it (scheme://user:password@host)",
    "[A-Za-z][A-Za-z0-9+.-]*://[^" + SPACE + "/?#@:]*:([^" + SPACE + "/?#@]+)@",
  ),
  rule(
    "password_sentence",
    'a password given in a sentence ("my password is …")',
    "(?:" +
      anyCase(SENTENCE_NAMES) +
      ")[ \\t]+" +
      anyCase("(?:is|was)") +
      "[ \\t]*:?[ \\t]+[\"']?([^" +
      SPACE +
      "\"']+)",
  ),
  rule(
    "secret_assignment",
    "a password, secret or token given as name=value or name: value",
    "(?:" +
      anyCase(PAIR_NAMES) +
      ")[\"']?[ \\t]*([:=])[ \\t]*[\"']?([^" +
      SPACE +
      "\"'&,;=][^" +
      SPACE +
      "\"'&,;]*)",
  ),
  rule(
    "random_word",
    "a long random-looking string, as keys and tokens are",
    "[A-Za-z0-9+/=_-]{" + LONG_WORD_MIN + ",}",
  ),
]);

export const NOT_RANDOM_PATTERN = [
  "[A-Za-z][A-Za-z0-9+.-]*://[^" + SPACE + "]*",
  "(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp[0-9]+|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\\.com)" +
    "[ \\t]+[A-Za-z0-9+/]+=*",
  "-----BEGIN [A-Z0-9 ]+-----[^-]*-----END [A-Z0-9 ]+-----",
].join("|");

// A global regex only for matchAll and replace, which never leave state behind.
const COMPILED = RULES.map((r) => [r, new RegExp(r.pattern, "u"), new RegExp(r.pattern, "gu")]);
const NOT_RANDOM = new RegExp(NOT_RANDOM_PATTERN, "gu");
const LONG_WORD = new RegExp(RULES[RULES.length - 1].pattern, "gu");
const WORD_RUN = /[A-Z]?[a-z]{3,}|[A-Z]{4,}/gu;
const PUNCT = /[!-/:-@[-`{-~]/u; // ASCII punctuation
const MASK = /^[*xX•.#_-]+$/u;
const TEMPLATE = /^(?:[$%<]|\{\{)/u;
const PATH = /^(?:\/|~\/|\.\/|\.\.\/)/u; // PWD=/home/alice, pass: ~/.secrets/db

/** The first rule (in RULES' order) that `text` matches, as {code, sentence, pattern}, or null. */
export function looksLikeSecret(text) {
  return find(text, true);
}

function find(text, decode) {
  for (const [r, once, every] of COMPILED) {
    if (r.code === "url_password") {
      for (const m of text.matchAll(every)) if (urlPassword(m[1])) return r;
    } else if (r.code === "password_sentence") {
      for (const m of text.matchAll(every)) if (sentenceValue(m[1])) return r;
    } else if (r.code === "secret_assignment") {
      for (const m of text.matchAll(every)) if (secretValue(m[1], m[2])) return r;
    } else if (r.code === "random_word") {
      const found = randomWord(text, decode);
      if (found) return found;
    } else if (once.test(text)) {
      return r;
    }
  }
  return null;
}

function secretValue(separator, value) {
  const chars = Array.from(value);
  if (chars.length < 4 || NO_SECRET_VALUES.has(value.toLowerCase())) return false;
  if (placeholder(value)) return false;
  if (separator === "=") return true;
  return /[0-9]/u.test(value) || PUNCT.test(value) || /[A-Z]/u.test(chars.slice(1).join(""));
}

/** A mask, a reference or a file path stands for a secret (the Python `_placeholder`). */
function placeholder(value) {
  return MASK.test(value) || TEMPLATE.test(value) || PATH.test(value);
}

/** The Python `_url_password`: any password in an address but a placeholder. */
function urlPassword(value) {
  const lowered = value.toLowerCase();
  return (
    Array.from(value).length >= 4 &&
    !NO_SECRET_VALUES.has(lowered) &&
    !URL_PLACEHOLDERS.has(lowered) &&
    !placeholder(value)
  );
}

/** The Python `_sentence_value`: after "password is", a password rather than more prose. */
function sentenceValue(value) {
  value = value.replace(/[.,!?;:)]+$/u, "");
  const chars = Array.from(value);
  if (chars.length < 4 || NO_SECRET_VALUES.has(value.toLowerCase()) || placeholder(value)) return false;
  if (/[0-9]/u.test(value) || PUNCT.test(value.replace(/-/gu, ""))) return true;
  return /[a-z]/u.test(value) && /[A-Z]/u.test(chars.slice(1).join(""));
}

function randomWord(text, decode) {
  if (text.length < LONG_WORD_MIN) return null;
  for (const m of text.replace(NOT_RANDOM, " ").matchAll(LONG_WORD)) {
    const word = m[0];
    if (!isRandomWord(word)) continue;
    const decoded = decode ? base64Text(word) : null;
    if (decoded === null) return RULES[RULES.length - 1];
    const inner = find(decoded, false);
    if (inner) return inner;
  }
  return null;
}

export function isRandomWord(word) {
  if (word.length < LONG_WORD_MIN || !(/[a-z]/u.test(word) && /[A-Z]/u.test(word) && /[0-9]/u.test(word))) {
    return false;
  }
  if (entropy(word) < MIN_ENTROPY || classSwitches(word) < MIN_SWITCHES || wordiness(word) >= MAX_WORDY) {
    return false;
  }
  return !word.includes("/") || word.split("/").every((part) => part.length < 8 || wordiness(part) < MAX_WORDY);
}

export function wordiness(word) {
  let inRuns = 0;
  for (const m of word.matchAll(WORD_RUN)) inRuns += m[0].length;
  return inRuns / word.length;
}

export function entropy(word) {
  const counts = new Map();
  for (const ch of word) counts.set(ch, (counts.get(ch) || 0) + 1);
  const n = word.length;
  let sum = 0;
  for (const c of counts.values()) sum += (c / n) * Math.log2(c / n);
  return -sum;
}

export function classSwitches(word) {
  const classes = [];
  for (const ch of word) {
    const c = charClass(ch);
    if (c) classes.push(c);
  }
  if (classes.length < 2) return 0;
  let switches = 0;
  for (let i = 1; i < classes.length; i += 1) if (classes[i] !== classes[i - 1]) switches += 1;
  return switches / (classes.length - 1);
}

function charClass(ch) {
  if (ch >= "a" && ch <= "z") return 1;
  if (ch >= "A" && ch <= "Z") return 2;
  return ch >= "0" && ch <= "9" ? 3 : 0;
}

function base64Text(word) {
  let body = word.replace(/=+$/u, "");
  if (body.includes("=") || body.length % 4 === 1) return null;
  body = body.replace(/-/gu, "+").replace(/_/gu, "/");
  let text;
  try {
    const binary = atob(body + "=".repeat((4 - (body.length % 4)) % 4));
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
  for (const ch of text) if (!readable(ch)) return null;
  return text;
}

function readable(ch) {
  const code = ch.codePointAt(0);
  return ch === "\t" || ch === "\n" || ch === "\r" || (code >= 0x20 && code !== 0x7f && !(code >= 0x80 && code < 0xa0));
}
