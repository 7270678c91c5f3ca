"""Replace secrets in text at ingest, recording what was replaced and where.

``redact(text)`` returns the text with each secret replaced by ``[REDACTED:<kind>]`` and one
:class:`~core.contracts.Redaction` per secret: its kind, its half-open code-point range in the
*original* text and the SHA-256 of the secret (so a leak can be matched without storing it).

Formats recognised (``RedactionKind`` in brackets):

* AWS access key ids ``AKIA``/``ASIA``/``ABIA``/``ACCA`` + 16 [aws-access-key]; AWS secret keys
  (40 base64 chars) assigned to an ``aws_secret…``/``secret_access_key`` name [aws-secret-key]
* GCP API keys ``AIza…`` [gcp-api-key]; the ``"private_key"`` field of a service-account
  JSON file [gcp-service-account-key]
* Azure ``AccountKey=`` / ``SharedAccessKey=`` in connection strings [azure-storage-key]
* GitHub ``ghp_ gho_ ghs_ ghu_ ghr_ github_pat_`` [github-token]; GitLab ``glpat-``
  [gitlab-token]
* Slack ``xox[baprs]-`` tokens [slack-token] and the path of ``hooks.slack.com`` webhooks
  [slack-webhook]
* Stripe ``sk_live_``/``rk_live_`` [stripe-key]; OpenAI ``sk-…``, ``sk-proj-…`` [openai-key];
  Anthropic ``sk-ant-…`` [anthropic-key]; Twilio ``SK``/``AC`` + 32 hex [twilio-key]; SendGrid
  ``SG.x.y`` [sendgrid-key]; npm ``npm_`` [npm-token]; PyPI ``pypi-AgE…`` [pypi-token]
* JWTs ``eyJ….eyJ….sig`` [jwt]; PEM/OpenSSH/PGP private key blocks, whole, BEGIN to END (or,
  if cut off, as far as the base64 runs) [private-key-block]
* The password of ``scheme://user:PASSWORD@host`` (only the password) [url-password]
* ``Authorization: Bearer <token>`` (16+ chars; the token only) [bearer-token]
* ``.env``-style assignments (``SECRET_KEY=…``, ``DB_PASSWORD: "…"``, ``api_key = '…'``)
  [env-assignment]: the *name* contains secret, password/passwd/passphrase/pwd, token,
  api/access/private/auth/signing/encryption/master key or credential, and does not end in a
  metadata word (``_url``, ``_file``, ``_hash``, ``_length``, ``Name``…); the *value* is a
  literal of 8+ characters whose Shannon entropy is at least ``ENTROPY_THRESHOLD`` = 3.0 bits
  per character, and is not a placeholder (``changeme``, ``<…>``, ``${…}``, ``your-…``), a
  URL or path, or word-shaped (letter and digit runs joined by ``_ . -``: ``DEFAULT_SECRET_1``,
  ``self._authkey``, ``userPassword``).

Overlapping matches: the longest wins, then the earliest, then the more specific format (the
order of ``_DETECTORS``). Anything that overlaps an existing ``[REDACTED:…]`` is left alone,
and detection repeats on the redacted text until nothing new is found, so redacting twice
changes nothing. Text outside the recorded ranges is never changed.
"""

from __future__ import annotations

import math
import re
import string
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from core.contracts import Redaction
from core.hashing import text_hash
from core.vocab import RedactionKind as K

ENTROPY_THRESHOLD = 3.0
"""Bits per character an assigned value needs to count as a secret.

A random 16-character base62 key scores about 3.8 and a 32-character one about 4.5; words
and identifiers mostly score below 3 (``changeme`` 2.75), and a value of n characters can
score at most log2(n), so an 8-character value passes only if no character repeats.
"""


@dataclass(frozen=True)
class Redacted:
    """Redacted text and the redactions made, sorted by start."""

    text: str
    redactions: tuple[Redaction, ...]


def placeholder(kind: K) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind.value}]"


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0 for the empty string)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def redact(text: str) -> Redacted:
    """Replace every secret in ``text``; ranges in the result refer to ``text``."""
    spans = _detect(text)
    redacted = _apply(text, spans)
    while spans:
        # Replacing a secret can expose a neighbour (a new word boundary); catch it now so
        # that a second pass never finds anything.
        found = _detect(redacted)
        if not found:
            break
        spans = sorted(spans + _to_original(found, spans))
        redacted = _apply(text, spans)
    return Redacted(
        text=redacted,
        redactions=tuple(
            Redaction(
                kind=kind,
                start=start,
                end=end,
                original_hash=text_hash(text[start:end]),
                placeholder=placeholder(kind),
            )
            for start, end, kind in spans
        ),
    )


# --------------------------------------------------------------------------- value rules

_PLACEHOLDER_VALUE = re.compile(
    r"""(?ix)
    ^(?: [$<{%\[*#] | \.\.\. )                        # ${VAR} <key> {{v}} %(v)s *** #...
    | \$\{ | \{\{ | >$ | \}$
    | change[_\-]?me | example | placeholder | dummy | fake | sample | redacted
    | your[_\-] | xxxx
    | ^(?: pass(?:word|wd)? | pwd | secret | token | none | null | nil | undefined
         | test | todo | tbd )$
    """
)
_URL_OR_PATH = re.compile(r"://|^(?:\.{0,2}/|~/)|^(?:[a-z0-9_.~\-]*/)+[a-z0-9_.~\-]*$")
_WORD_SHAPED = re.compile(r"_*(?:[A-Za-z]+|\d+)(?:[_.\-]+(?:[A-Za-z]+|\d+))*_*")
_SECRET_NAME = re.compile(
    r"secret|passw(?:or)?d|passphrase|pwd|token|credential"
    r"|(?:api|access|private|auth|signing|encryption|master)[_.\-]?key"
)
"""Words that make a name secret-bearing; matched against lowercased text."""
_METADATA_NAME = re.compile(
    r"(?:[_.\-]|(?<=[a-z0-9])(?=[A-Z]))(?i:hash|sha\d*|digest|checksum|ids?|url|uri|endpoint"
    r"|path|file|dir|name|type|len|length|size|min|max|count|ttl|timeout|expiry|expires"
    r"|header|prefix|field|env|var|regex|pattern|format|policy)$"
)
_AWS_SECRET_NAME = re.compile(r"aws.*secret|secret[_.\-]?access[_.\-]?key")
_AWS_SECRET_VALUE = re.compile(r"[A-Za-z0-9/+]{40}")


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER_VALUE.search(value) is not None


def _looks_generated(name: str, value: str) -> bool:
    """Whether an assigned value is a real secret by the env-assignment rule (module doc)."""
    return (
        _METADATA_NAME.search(name) is None
        # Word-shaped values (userPassword, DEFAULT_SECRET_1) are references, not secrets.
        and _WORD_SHAPED.fullmatch(value) is None
        and not _is_placeholder(value)
        and _URL_OR_PATH.search(value) is None
        and shannon_entropy(value) >= ENTROPY_THRESHOLD
    )


def _not_placeholder(match: re.Match[str]) -> bool:
    return not _is_placeholder(match["s"])


# --------------------------------------------------------------------------- detectors

_Span = tuple[int, int, K]


@dataclass(frozen=True)
class _Pattern:
    """A secret format found by one regex; group ``s`` is the secret."""

    kind: K
    regex: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None
    lowered: bool = False
    """Match the lowercased text: case-insensitive, yet with a fast literal prefix."""

    def find(self, text: str, lowered: str) -> Iterator[_Span]:
        for match in self.regex.finditer(lowered if self.lowered else text):
            if self.accept is None or self.accept(match):
                yield match.start("s"), match.end("s"), self.kind


_ASSIGNMENT = re.compile(
    r"""(?P<name>[A-Za-z_][\w.\-]*)["']?[ \t]*(?::=|=>|=|:)(?![=:])[ \t]*"""
    r"""(?P<q>["'])?(?P<s>(?(q)[^\s"']{8,512}|[^\s"'`,;&(){}\[\]<>]{8,512}))"""
    r"(?(q)(?P=q)|(?=[\s,;&]|\Z))"
)
"""``name = value``, ``name: "value"``, ``"name": 'value'``…; a bare value must end the word."""


class _Assignments:
    """AWS secret keys and high-entropy values assigned to secret-bearing names.

    Matching every assignment in a file is slow, so this finds the secret words first (plain
    ``str.find``, several times faster than one regex alternation) and reads the assignment
    around each.
    """

    words = ("secret", "passw", "passphrase", "pwd", "token", "credential", "key")

    def find(self, text: str, lowered: str) -> Iterator[_Span]:
        starts: set[int] = set()
        for word in self.words:
            at = lowered.find(word)
            while at >= 0:
                starts.add(_name_start(text, at))
                at = lowered.find(word, at + len(word))
        done = 0
        for start in sorted(starts):
            match = _ASSIGNMENT.match(text, start) if start >= done else None
            if match is None or not _SECRET_NAME.search(lowered, start, match.end("name")):
                continue
            done = match.end()
            value = match["s"]
            if _AWS_SECRET_NAME.search(lowered, start, match.end("name")) and (
                _AWS_SECRET_VALUE.fullmatch(value)
            ):
                yield match.start("s"), match.end("s"), K.AWS_SECRET_KEY
            elif _looks_generated(match["name"], value):
                yield match.start("s"), match.end("s"), K.ENV_ASSIGNMENT


def _name_start(text: str, at: int) -> int:
    """Where the name around ``at`` begins (names may be dotted or dashed: ``db.password``)."""
    while at and (text[at - 1].isalnum() or text[at - 1] in "_.-"):
        at -= 1
    return at


_E = r"(?![A-Za-z0-9_])"  # a token ends here
_E_DASH = r"(?![A-Za-z0-9_\-])"  # ... for tokens whose alphabet has "-"
_B64_BODY = r"[A-Za-z0-9+/=\s\\]"  # PEM body, also inside JSON ("\n" escapes)


def _token(kind: K, prefix: str, width: int, rest: str, end: str = _E) -> _Pattern:
    """A token that starts with ``prefix`` (``width`` chars) at a word start.

    The start check is a look-behind placed *after* the prefix, so that the regex still
    begins with a literal and ``re`` can skip ahead to it (about 30 times faster).
    """
    return _Pattern(
        kind, re.compile(rf"(?P<s>(?:{prefix})(?<![A-Za-z0-9_].{{{width}}})(?:{rest})){end}")
    )


_DETECTORS: tuple[_Pattern | _Assignments, ...] = (
    _Pattern(
        K.GCP_SERVICE_ACCOUNT_KEY,
        re.compile(r'"private_key"\s*:\s*"(?P<s>-----BEGIN [^"]{20,})"'),
    ),
    _Pattern(
        K.PRIVATE_KEY_BLOCK,
        re.compile(
            r"(?P<s>-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?P<blk>(?: BLOCK)?)-----"
            r"[A-Za-z0-9+/=\s\\:,.\-]*?-----END (?P=label)PRIVATE KEY(?P=blk)-----)"
        ),
    ),
    _Pattern(  # cut off before its END line: redact as far as the base64 runs
        K.PRIVATE_KEY_BLOCK,
        re.compile(
            rf"(?P<s>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----{_B64_BODY}{{40,}})"
        ),
    ),
    _Pattern(
        K.AZURE_STORAGE_KEY,
        re.compile(
            r"key(?:(?<=accountkey)|(?<=sharedaccesskey))\s*=\s*"
            r"(?P<s>[a-z0-9+/]{30,}={0,2})(?![a-z0-9+/=])"
        ),
        lowered=True,
    ),
    _Pattern(
        K.SLACK_WEBHOOK,
        re.compile(
            r"hooks\.slack\.com/(?P<s>(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{16,})"
            r"(?![A-Za-z0-9_/\-])"
        ),
    ),
    _token(K.AWS_ACCESS_KEY, "AKIA|ASIA|ABIA|ACCA", 4, "[A-Z0-9]{16}"),
    _token(K.GCP_API_KEY, "AIza", 4, r"[0-9A-Za-z_\-]{35}", _E_DASH),
    _token(K.GITHUB_TOKEN, "gh[pousr]_", 4, "[A-Za-z0-9]{36,251}"),
    _token(K.GITHUB_TOKEN, "github_pat_", 11, "[A-Za-z0-9_]{40,255}"),
    _token(K.GITLAB_TOKEN, "glpat-", 6, r"[A-Za-z0-9_\-]{20,}", _E_DASH),
    _token(K.SLACK_TOKEN, "xox[baprs]-", 5, r"[A-Za-z0-9\-]{10,}", _E_DASH),
    _token(K.STRIPE_KEY, "sk_live_", 8, "[A-Za-z0-9]{20,247}"),
    _token(K.STRIPE_KEY, "rk_live_", 8, "[A-Za-z0-9]{20,247}"),
    _token(K.ANTHROPIC_KEY, "sk-ant-", 7, r"[a-z]+\d*-[A-Za-z0-9_\-]{32,}", _E_DASH),
    _token(
        K.OPENAI_KEY,
        "sk-",
        3,
        r"(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{32,}|[A-Za-z0-9]{32,}",
        _E_DASH,
    ),
    _token(K.TWILIO_KEY, "SK", 2, "[0-9a-f]{32}"),
    _token(K.TWILIO_KEY, "AC", 2, "[0-9a-f]{32}"),
    _token(K.SENDGRID_KEY, r"SG\.", 3, r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", _E_DASH),
    _token(K.NPM_TOKEN, "npm_", 4, "[A-Za-z0-9]{36}"),
    _token(K.PYPI_TOKEN, "pypi-AgE", 8, r"[A-Za-z0-9_\-]{50,}", _E_DASH),
    _token(
        K.JWT, "eyJ", 3, r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", _E_DASH
    ),
    _Pattern(
        K.URL_PASSWORD,
        re.compile(r"""://(?<=[A-Za-z0-9]://)[^\s:/@'"<>]*:(?P<s>[^\s/'"<>]+)@(?=[\w\[])"""),
        _not_placeholder,
    ),
    _Pattern(
        K.BEARER_TOKEN,
        re.compile(
            r"""authorization["']?\s*[:=]\s*["']?bearer[ \t]+"""
            r"(?P<s>[a-z0-9\-._~+/]{16,}=*)(?![a-z0-9\-._~+/=])"
        ),
        _not_placeholder,
        lowered=True,
    ),
    _Assignments(),
)
"""Most specific first: on an exact tie of range, the earlier detector names the kind."""

_EXISTING_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _detect(text: str) -> list[_Span]:
    """Non-overlapping secret ranges of ``text``, sorted; existing placeholders are kept out."""
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ" lowers to two code points; offsets must line up
        lowered = text.translate(_ASCII_LOWER)
    candidates = [
        (start, end, rank, kind)
        for rank, detector in enumerate(_DETECTORS)
        for start, end, kind in detector.find(text, lowered)
        if end > start
    ]
    if not candidates:
        return []
    candidates.sort(key=lambda c: (c[0] - c[1], c[0], c[2]))  # longest, earliest, specific
    starts: list[int] = []
    ends: list[int] = []
    for match in _EXISTING_PLACEHOLDER.finditer(text):
        starts.append(match.start())
        ends.append(match.end())
    chosen: list[_Span] = []
    for start, end, _, kind in candidates:
        i = bisect_right(starts, start)
        if (i and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            continue  # overlaps something already taken
        starts.insert(i, start)
        ends.insert(i, end)
        chosen.append((start, end, kind))
    return sorted(chosen)


def _apply(text: str, spans: list[_Span]) -> str:
    parts: list[str] = []
    at = 0
    for start, end, kind in spans:
        parts += [text[at:start], placeholder(kind)]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _to_original(found: list[_Span], spans: list[_Span]) -> list[_Span]:
    """Map ranges of the redacted text (outside placeholders) back to the original text."""
    redacted_ends: list[int] = []
    shifts: list[int] = []  # original minus redacted offset after each placeholder
    shift = 0
    for start, end, kind in spans:
        redacted_ends.append(start - shift + len(placeholder(kind)))
        shift += (end - start) - len(placeholder(kind))
        shifts.append(shift)
    mapped: list[_Span] = []
    for start, end, kind in found:
        i = bisect_left(redacted_ends, start + 1)  # placeholders ending at or before start
        offset = shifts[i - 1] if i else 0
        mapped.append((start + offset, end + offset, kind))
    return mapped
