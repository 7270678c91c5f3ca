"""Find secrets in text and replace them: the rules, without the record types.

``redaction_records(text, key)`` returns the text with each secret replaced by
``[REDACTED:<kind>]`` and one record per secret (the JSON form of
:class:`~scopelens.core.contracts.Redaction`): its kind, its half-open code-point range in the
*original* text, its line, and an HMAC of the secret under the store's redaction key (so a
suspected leak can be matched by whoever holds the key, and a weak password cannot be found by
trying a dictionary against the store). ``core/redact.py`` gives the same as contracts.

This module imports no pydantic, so a process that prepares files for the index (``spawn``ed
afresh) does not load it: about 17 MiB per worker.

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
  if cut off, as far as lines of 16+ base64 characters run) [private-key-block]
* The password of ``scheme://user:PASSWORD@host`` (only the password) [url-password]
* ``Authorization: Bearer <token>`` (16+ chars; the token only) [bearer-token]
* ``.env``-style assignments (``SECRET_KEY=…``, ``DB_PASSWORD: "…"``, ``api_key = '…'``)
  [env-assignment]. The *name* contains secret, password/passwd/passphrase/pwd, token,
  api/access/private/auth/signing/encryption/master key or credential, does not say public
  or publishable, and does not end in a metadata word (``_url``, ``_file``, ``_hash``,
  ``_length``, ``Name``…). The *value* is a literal of 8+ characters whose Shannon entropy
  is at least ``ENTROPY_THRESHOLD`` = 3.0 bits per character, and is not a placeholder
  (``changeme``, ``<…>``, ``${…}``, ``your-…``), a URL or path, or word-shaped (letter and
  digit runs joined by ``_ . -``: ``DEFAULT_SECRET_1``, ``self._authkey``, ``userPassword``).

Overlapping matches: the longest wins, then the earliest, then the more specific format (the
order of ``_DETECTORS``). Anything that overlaps an existing ``[REDACTED:…]`` is left alone,
and detection repeats on the redacted text until nothing new is found, so redacting twice
changes nothing. Text outside the recorded ranges is never changed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import string
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from scopelens.core.redaction_prefilter import LiteralFinder, LiteralGroup, literal_finder
from scopelens.core.vocab import RedactionKind as K

ENTROPY_THRESHOLD = 3.0
"""Bits per character an assigned value needs to count as a secret.

A random 16-character base62 key scores about 3.8 and a 32-character one about 4.5; words
and identifiers mostly score below 3 (``changeme`` 2.75), and a value of n characters can
score at most log2(n), so an 8-character value passes only if no character repeats.
"""


def placeholder(kind: K) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind.value}]"


def replacement(kind: K, secret: str) -> str:
    """What replaces ``secret``: its placeholder, plus the secret's line breaks.

    Keeping the line count means every line after a redacted PEM block keeps its number, so
    chunk line ranges and trim ranges still point at the right lines of the file.
    """
    return placeholder(kind) + "\n" * secret.count("\n")


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0 for the empty string)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


@dataclass(frozen=True)
class RedactionKey:
    """The secret that keys the hashes of redaction records (never stored in the store).

    A plain SHA-256 of a weak password can be reversed by trying a dictionary; an HMAC under a
    key kept outside the store cannot, while whoever holds the key can still check whether a
    suspected leak was the redacted value.
    """

    secret: bytes = field(repr=False)

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"scopelens redaction key id\0" + self.secret).hexdigest()[:16]

    def digest(self, value: str) -> str:
        return hmac.new(self.secret, value.encode("utf-8"), hashlib.sha256).hexdigest()


def redaction_spans(text: str) -> tuple[str, list[tuple[int, int, K]]]:
    """``text`` with every secret replaced, and the ``(start, end, kind)`` of each in ``text``,
    sorted by start."""
    spans = _detect(text)
    redacted = _apply(text, spans)
    while spans:
        # Replacing a secret can free a neighbour that lost to it (see the tests); catch it
        # now so that a second pass never finds anything. Each round covers more of the
        # original (found ranges avoid placeholders), so this ends.
        found = _detect(redacted)
        if not found:
            break
        spans = sorted(spans + _to_original(found, spans, text))
        redacted = _apply(text, spans)
    return redacted, spans


def redaction_records(text: str, key: RedactionKey | None = None) -> tuple[str, list[dict[str, Any]]]:
    """``text`` with every secret replaced, and one record per secret: the fields of a
    ``Redaction`` as its JSON dump has them (so the index stores the same bytes either way).

    With ``key``, each record keeps an HMAC of its secret; without, no hash at all (callers
    that keep the records, such as the indexer, always pass the store's key).
    """
    redacted, spans = redaction_spans(text)
    return redacted, [
        {
            "kind": kind.value,
            "start": start,
            "end": end,
            "original_hash": key.digest(text[start:end]) if key else "",
            "placeholder": replacement(kind, text[start:end]),
            "hash_kind": "hmac-sha256" if key else "none",
            "key_id": key.key_id if key else None,
            "line": text.count("\n", 0, start) + 1,
        }
        for start, end, kind in spans
    ]


# --------------------------------------------------------------------------- value rules

_PLACEHOLDER_VALUE = re.compile(
    r"""(?ix)
    ^(?: [$<{\[] | %[(sdr] | %\w+%$ | \*\* | \*$ | \#\{ | \.\.\. )  # ${VAR} <key> {{v}} %(v)s %APPDATA% *** #{v}
    | \$\{ | \{\{ | >$ | \}$
    # A word of its own, not letters inside a random value ("qfxpwvfaket3…" holds "fake").
    | (?<![a-z0-9]) (?: change[_\-]?me | example | placeholder | dummy | fake | sample | redacted
                       | your[_\-] | xxxx )
    | ^(?: pass(?:word|wd)? | pwd | secret | token | none | null | nil | undefined
         | test | todo | tbd )$
    """
)
_URL_OR_PATH = re.compile(r"://|^(?:[a-z0-9_.~\-]*/)+[a-z0-9_.~\-]*$")
_WORD_SHAPED = re.compile(r"_*(?:[A-Za-z]+|\d+)(?:[_.\-]+(?:[A-Za-z]+|\d+))*_*")
_PATH_START = ("/", "./", "../", "~/")
_LONG_PATH_PART = 16
"""A part of a rooted path this long that is not word-shaped is base64 (``/24gxX0v+Vz…``)."""


def _is_url_or_path(value: str) -> bool:
    if _URL_OR_PATH.search(value):
        return True
    if not value.startswith(_PATH_START) or "+" in value or value.endswith("="):
        return False
    return all(len(part) < _LONG_PATH_PART or "." in part or _WORD_SHAPED.fullmatch(part)
               for part in value.split("/"))
_SECRET_NAME = re.compile(
    r"secret|passw(?:or)?d|passphrase|pwd|token|credential|auth(?:orization)?(?![a-z])"
    r"|(?:api|access|private|auth|signing|encryption|master)[_.\-]?key"
)
"""Words that make a name secret-bearing; matched against lowercased text."""
_METADATA_NAME = re.compile(
    r"(?:[_.\-]|(?<=[a-z0-9])(?=[A-Z]))(?i:hash|sha\d*|digest|checksum|ids?|url|uri|endpoint"
    r"|path|file|dir|name|type|len|length|size|min|max|count|ttl|timeout|expiry|expires"
    r"|header|prefix|field|env|var|regex|pattern|format|policy)$"
)
_PUBLIC_NAME = re.compile(r"(?i)public|publishable")
"""``publicKeyToken``, ``NEXT_PUBLIC_API_KEY``: published on purpose, not secrets."""
_AWS_SECRET_NAME = re.compile(r"aws.*secret|secret[_.\-]?access[_.\-]?key")
_AWS_SECRET_VALUE = re.compile(r"[A-Za-z0-9/+]{40}")


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER_VALUE.search(value) is not None


def _looks_generated(name: str, value: str) -> bool:
    """Whether an assigned value is a real secret by the env-assignment rule (module doc)."""
    return (
        _METADATA_NAME.search(name) is None
        and _PUBLIC_NAME.search(name) is None
        # Word-shaped values (userPassword, DEFAULT_SECRET_1) are references, not secrets.
        and _WORD_SHAPED.fullmatch(value) is None
        and not _is_placeholder(value)
        and not _is_url_or_path(value)
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
    literals: tuple[str, ...]
    """Every match holds one of these (lowercase when ``lowered``): text without any of them
    is not searched (``redaction_prefilter``)."""
    regex: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None
    lowered: bool = False
    """Match the lowercased text: case-insensitive, yet with a fast literal prefix."""

    @property
    def literal_group(self) -> LiteralGroup:
        return LiteralGroup(self.literals, caseless=self.lowered)

    def find(self, text: str, lowered: str, starts: list[int] | None = None) -> Iterator[_Span]:
        """The secrets of this format. ``starts``: where its literals occur (``None``: not looked
        for); the regex runs unless they were looked for and none occurs."""
        if starts is not None and not starts:
            return
        for match in self.regex.finditer(lowered if self.lowered else text):
            if self.accept is None or self.accept(match):
                yield match.start("s"), match.end("s"), self.kind


_MAX_NAME = 128
"""Longer runs of name characters are blobs, not names; the bound keeps blobs linear."""
_NAME_RUN = re.compile(rf"[\w.\-]{{0,{_MAX_NAME}}}")
_ASSIGNMENT = re.compile(
    r"""(?P<name>[A-Za-z_][\w.\-]{0,127})(?:\\?["'])?[ \t]*(?::=|=>|=|:)(?![=:])[ \t]*"""
    r"""(?P<q>\\?["'])?(?P<s>(?(q)[^\s"']{8,512}|[^\s"'`,;&(){}\[\]<>=]{8,512}={0,2}))"""
    r"(?(q)(?P=q)|(?=[\s,;&'\"`]|\Z))"
)
"""``name = value``, ``name: "value"``, ``"name": 'value'``…; a bare value must end the word
(``=`` only as base64 padding, so ``a=b=c`` chains fail fast), or meet a quote
(``echo '--db-password=…'``). Quotes may be escaped
(``\\"token\\": \\"…\\"``: JSON inside a JSON string, as tool input is often logged)."""


class _Assignments:
    """AWS secret keys and high-entropy values assigned to secret-bearing names.

    Matching every assignment in a file is slow, so this finds the secret words first (plain
    ``str.find``, several times faster than one regex alternation) and reads the assignment
    around each, looking at each run of name characters once.
    """

    words = ("secret", "passw", "passphrase", "pwd", "token", "credential", "key", "auth")
    literal_group = LiteralGroup(words, caseless=True, every=True)

    def find(self, text: str, lowered: str, starts: list[int] | None = None) -> Iterator[_Span]:
        """The secrets assigned in ``text``; ``starts``, where the words occur in ``lowered``
        (ascending), if known."""
        if starts is None:
            starts = sorted({at for word in self.words for at in _occurrences(lowered, word)})
        examined = 0  # hits before this offset lie in runs already looked at
        for at in starts:
            if at < examined:
                continue
            start = _name_start(text, at, floor=max(examined, at - _MAX_NAME))
            run = _NAME_RUN.match(text, at)
            examined = run.end() if run else at
            if start < 0 or examined - start >= _MAX_NAME:
                continue
            while start < at and text[start] in "-.":
                start += 1  # a flag's dashes (`--db-password=…`) are not part of its name
            if not _SECRET_NAME.search(lowered, start, examined):
                continue
            match = _ASSIGNMENT.match(text, start)
            if match is None or match.end("name") != examined:
                continue
            value = match["s"]
            if _AWS_SECRET_NAME.search(lowered, start, examined) and (
                _AWS_SECRET_VALUE.fullmatch(value)
            ):
                yield match.start("s"), match.end("s"), K.AWS_SECRET_KEY
            elif _looks_generated(match["name"], value):
                yield match.start("s"), match.end("s"), K.ENV_ASSIGNMENT


def _occurrences(haystack: str, needle: str) -> Iterator[int]:
    at = haystack.find(needle)
    while at >= 0:
        yield at
        at = haystack.find(needle, at + len(needle))


def _name_start(text: str, at: int, *, floor: int) -> int:
    """Where the run of name characters around ``at`` begins; -1 if it begins before ``floor``."""
    start = at
    while start > floor and _is_name_char(text[start - 1]):
        start -= 1
    return -1 if start == floor and start and _is_name_char(text[start - 1]) else start


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char in "_.-"  # what [\w.\-] matches


_AUTHORIZATION = r"""authorization\\?["']?\s*[:=]\s*\\?["']?"""
"""An ``Authorization`` header or field up to its scheme (lowercased; quotes may be escaped)."""
_E = r"(?![A-Za-z0-9_])"  # a token ends here
_E_DASH = r"(?![A-Za-z0-9_\-])"  # ... for tokens whose alphabet has "-"
_B64 = r"[A-Za-z0-9+/=]"
_GAP = r"[\s\\]"  # between lines of a key: newlines, or "\n" escapes inside JSON


def _token(kind: K, prefixes: tuple[str, ...], rest: str, end: str = _E) -> _Pattern:
    """A token that starts with one of ``prefixes`` (all as long) at a word start.

    The start check is a look-behind placed *after* the prefix, so that the regex still
    begins with a literal and ``re`` can skip ahead to it (about 30 times faster).
    """
    [width] = {len(prefix) for prefix in prefixes}
    prefix = "|".join(map(re.escape, prefixes))
    return _Pattern(
        kind, prefixes, re.compile(rf"(?P<s>(?:{prefix})(?<![A-Za-z0-9_].{{{width}}})(?:{rest})){end}")
    )


_DETECTORS: tuple[_Pattern | _Assignments, ...] = (
    _Pattern(
        K.GCP_SERVICE_ACCOUNT_KEY,
        ('"private_key"',),
        re.compile(r'"private_key"\s*:\s*"(?P<s>-----BEGIN [^"]{20,})"'),
    ),
    _Pattern(
        K.PRIVATE_KEY_BLOCK,
        ("-----BEGIN ",),
        re.compile(
            r"(?P<s>-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?P<blk>(?: BLOCK)?)-----"
            # Body: base64 and "Proc-Type: 4,ENCRYPTED" headers, never "-----", so that a
            # header without an END costs one scan to the next dashes, not to the end of text.
            r"(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*?-----END (?P=label)PRIVATE KEY(?P=blk)-----)"
        ),
    ),
    _Pattern(  # cut off before its END line: redact as far as runs of 16+ base64 go
        K.PRIVATE_KEY_BLOCK,
        ("-----BEGIN ",),
        re.compile(
            r"(?P<s>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            rf"{_GAP}*{_B64}{{40,}}(?:{_GAP}+{_B64}{{16,}})*)"
        ),
    ),
    _Pattern(
        K.AZURE_STORAGE_KEY,
        ("accountkey", "sharedaccesskey"),
        re.compile(
            r"key(?:(?<=accountkey)|(?<=sharedaccesskey))\s*=\s*"
            r"(?P<s>[a-z0-9+/]{30,}={0,2})(?![a-z0-9+/=])"
        ),
        lowered=True,
    ),
    _Pattern(
        K.SLACK_WEBHOOK,
        ("hooks.slack.com/",),
        re.compile(
            r"hooks\.slack\.com/(?P<s>(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{16,})"
            r"(?![A-Za-z0-9_/\-])"
        ),
    ),
    _token(K.AWS_ACCESS_KEY, ("AKIA", "ASIA", "ABIA", "ACCA"), "[A-Z0-9]{16}"),
    _token(K.GCP_API_KEY, ("AIza",), r"[0-9A-Za-z_\-]{35}", _E_DASH),
    _token(K.GITHUB_TOKEN, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), "[A-Za-z0-9]{36,251}"),
    _token(K.GITHUB_TOKEN, ("github_pat_",), "[A-Za-z0-9_]{40,255}"),
    _token(K.GITLAB_TOKEN, ("glpat-",), r"[A-Za-z0-9_\-]{20,}", _E_DASH),
    _token(K.SLACK_TOKEN, ("xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"), r"[A-Za-z0-9\-]{10,}", _E_DASH),
    _token(K.STRIPE_KEY, ("sk_live_",), "[A-Za-z0-9]{20,247}"),
    _token(K.STRIPE_KEY, ("rk_live_",), "[A-Za-z0-9]{20,247}"),
    _token(K.ANTHROPIC_KEY, ("sk-ant-",), r"[a-z]+\d*-[A-Za-z0-9_\-]{32,}", _E_DASH),
    _token(
        K.OPENAI_KEY,
        ("sk-",),
        r"(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{32,}|[A-Za-z0-9]{32,}",
        _E_DASH,
    ),
    _token(K.TWILIO_KEY, ("SK",), "[0-9a-f]{32}"),
    _token(K.TWILIO_KEY, ("AC",), "[0-9a-f]{32}"),
    _token(K.SENDGRID_KEY, ("SG.",), r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", _E_DASH),
    _token(K.NPM_TOKEN, ("npm_",), "[A-Za-z0-9]{36}"),
    _token(K.PYPI_TOKEN, ("pypi-AgE",), r"[A-Za-z0-9_\-]{50,}", _E_DASH),
    _token(
        K.JWT, ("eyJ",), r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", _E_DASH
    ),
    _Pattern(
        K.URL_PASSWORD,
        ("://",),
        re.compile(r"""://(?<=[A-Za-z0-9]://)[^\s:/@'"<>]*:(?P<s>[^\s/'"<>]+)@(?=[\w\[])"""),
        _not_placeholder,
    ),
    _Pattern(
        K.BEARER_TOKEN,
        ("authorization",),
        re.compile(
            _AUTHORIZATION + r"bearer[ \t]+"
            r"(?P<s>[a-z0-9\-._~+/]{16,}=*)(?![a-z0-9\-._~+/=])"
        ),
        _not_placeholder,
        lowered=True,
    ),
    _Pattern(  # the other schemes: Basic base64(user:password), GitHub's "token", Digest…
        K.AUTHORIZATION_CREDENTIALS,
        ("authorization",),
        re.compile(
            _AUTHORIZATION + r"(?:basic|token|digest|negotiate|apikey)[ \t]+"
            r"(?P<s>[a-z0-9\-._~+/]{12,}=*)(?![a-z0-9\-._~+/=])"
        ),
        _not_placeholder,
        lowered=True,
    ),
    _Assignments(),
)
"""Most specific first: on an exact tie of range, the earlier detector names the kind."""

_EXISTING_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@cache
def _literal_finder() -> LiteralFinder | None:
    """The literals of every detector, found in one pass (made once per process, when first
    needed: it takes a few milliseconds)."""
    return literal_finder([detector.literal_group for detector in _DETECTORS])


def _detect(text: str) -> list[_Span]:
    """Non-overlapping secret ranges of ``text``, sorted; existing placeholders are kept out."""
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ" lowers to two code points; offsets must line up
        lowered = text.translate(_ASCII_LOWER)
    finder = _literal_finder()
    found = finder.find(text) if finder is not None else None
    candidates = [
        (start, end, rank, kind)
        for rank, detector in enumerate(_DETECTORS)
        for start, end, kind in detector.find(text, lowered, found[rank] if found is not None else None)
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
        parts += [text[at:start], replacement(kind, text[start:end])]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _to_original(found: list[_Span], spans: list[_Span], text: str) -> list[_Span]:
    """Map ranges of the redacted text (outside placeholders) back to the original text."""
    redacted_ends: list[int] = []
    shifts: list[int] = []  # original minus redacted offset after each placeholder
    shift = 0
    for start, end, kind in spans:
        width = len(replacement(kind, text[start:end]))
        redacted_ends.append(start - shift + width)
        shift += (end - start) - width
        shifts.append(shift)
    mapped: list[_Span] = []
    for start, end, kind in found:
        i = bisect_left(redacted_ends, start + 1)  # placeholders ending at or before start
        offset = shifts[i - 1] if i else 0
        mapped.append((start + offset, end + offset, kind))
    return mapped
