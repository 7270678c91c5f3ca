"""Secrets are replaced at ingest with recorded ranges and hashes; common non-secrets survive.

Fake secrets are built at run time (prefix + seeded random characters), so no string that a
secret scanner would flag is stored in the repository.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopelens.core.redact import (
    ENTROPY_THRESHOLD,
    Redacted,
    RedactionKey,
    placeholder,
    redact,
    redact_values,
    secrets_in,
    shannon_entropy,
)
from scopelens.core.vocab import RedactionKind as K

KEY = RedactionKey(b"test redaction key, 32 bytes....")

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def fake(n: int, alphabet: str = ALNUM, *, seed: str = "") -> str:
    """``n`` characters that look random and are the same on every run."""
    rng = random.Random(f"{seed}:{n}:{alphabet}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def pem(label: str, *, newline: str = "\n") -> str:
    lines = [fake(64, B64, seed=f"{label}{i}") for i in range(4)]
    return newline.join(
        [
            f"-----BEGIN {label}-----",
            *lines,
            fake(20, B64, seed=label) + "==",
            f"-----END {label}-----",
        ]
    )


JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ"
    + "." + fake(43, URLSAFE, seed="jwt")
)
AWS_SECRET = fake(40, B64, seed="aws")
GCP_PEM = pem("PRIVATE KEY", newline="\\n") + "\\n"

# (id, text, kind, the secret inside the text)
CASES: list[tuple[str, str, K, str]] = [
    (
        "aws-access-key",
        "aws_access_key_id = {s}\nregion = eu-west-1",
        K.AWS_ACCESS_KEY,
        "AKIA" + fake(16, UPPER_DIGITS),
    ),
    (
        "aws-session-key",
        'export AWS_ACCESS_KEY_ID="{s}"',
        K.AWS_ACCESS_KEY,
        "ASIA" + fake(16, UPPER_DIGITS),
    ),
    ("aws-secret-key", "aws_secret_access_key = {s}\n", K.AWS_SECRET_KEY, AWS_SECRET),
    ("aws-secret-json", '{{"SecretAccessKey": "{s}"}}', K.AWS_SECRET_KEY, AWS_SECRET),
    (
        "gcp-api-key",
        "const url = `https://maps.example/api?key={s}`",
        K.GCP_API_KEY,
        "AIza" + fake(35, URLSAFE),
    ),
    (
        "gcp-service-account",
        '{{"type": "service_account", "private_key_id": "' + fake(40, HEX) + '",\n'
        ' "private_key": "{s}", "client_email": "bot@proj.iam.gserviceaccount.com"}}',
        K.GCP_SERVICE_ACCOUNT_KEY,
        GCP_PEM,
    ),
    (
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};"
        "EndpointSuffix=core.windows.net",
        K.AZURE_STORAGE_KEY,
        fake(86, B64) + "==",
    ),
    (
        "github-pat-classic",
        "git remote set-url origin https://x:{s}@github.com/o/r",
        K.GITHUB_TOKEN,
        "ghp_" + fake(36),
    ),
    ("github-oauth", "GITHUB_TOKEN={s}", K.GITHUB_TOKEN, "gho_" + fake(36)),
    ("github-app", "token: {s}", K.GITHUB_TOKEN, "ghs_" + fake(36)),
    ("github-user-to-server", "auth {s} ok", K.GITHUB_TOKEN, "ghu_" + fake(36)),
    ("github-refresh", "refresh={s}", K.GITHUB_TOKEN, "ghr_" + fake(36)),
    (
        "github-fine-grained",
        "use {s} here",
        K.GITHUB_TOKEN,
        "github_pat_" + fake(22, seed="a") + "_" + fake(59, seed="b"),
    ),
    ("gitlab", "CI_TOKEN: {s}", K.GITLAB_TOKEN, "glpat-" + fake(20, URLSAFE)),
    (
        "slack-bot",
        "client = WebClient(token='{s}')",
        K.SLACK_TOKEN,
        "xoxb-" + fake(12, string.digits) + "-" + fake(13, string.digits) + "-" + fake(24),
    ),
    (
        "slack-user",
        "xoxp header {s}",
        K.SLACK_TOKEN,
        "xoxp-" + fake(11, string.digits) + "-" + fake(32),
    ),
    (
        "slack-webhook",
        'curl -X POST https://hooks.slack.com/{s} -d "{{}}"',
        K.SLACK_WEBHOOK,
        "services/T" + fake(8, UPPER_DIGITS) + "/B" + fake(8, UPPER_DIGITS) + "/" + fake(24),
    ),
    ("stripe-secret", "stripe.api_key = '{s}'", K.STRIPE_KEY, "sk_live_" + fake(24)),
    ("stripe-restricted", "key {s}", K.STRIPE_KEY, "rk_live_" + fake(24)),
    (
        "openai-project",
        'client = OpenAI(api_key="{s}")',
        K.OPENAI_KEY,
        "sk-proj-" + fake(48, URLSAFE),
    ),
    ("openai-legacy", "OPENAI_API_KEY={s}", K.OPENAI_KEY, "sk-" + fake(48)),
    (
        "anthropic",
        "ANTHROPIC_API_KEY={s}",
        K.ANTHROPIC_KEY,
        "sk-ant-api03-" + fake(93, URLSAFE) + "AA",
    ),
    ("twilio-api-key", "sid = {s}", K.TWILIO_KEY, "SK" + fake(32, HEX)),
    ("twilio-account", "account {s}", K.TWILIO_KEY, "AC" + fake(32, HEX)),
    (
        "sendgrid",
        "sg = SendGridAPIClient('{s}')",
        K.SENDGRID_KEY,
        "SG." + fake(22, URLSAFE) + "." + fake(43, URLSAFE),
    ),
    ("npm", "//registry.npmjs.org/:_authToken={s}", K.NPM_TOKEN, "npm_" + fake(36)),
    ("pypi", "password = {s}", K.PYPI_TOKEN, "pypi-AgEIcHlwaS5vcmc" + fake(70, URLSAFE)),
    ("jwt", "session={s}; Path=/", K.JWT, JWT),
    ("pem-rsa", "key:\n{s}\nend", K.PRIVATE_KEY_BLOCK, pem("RSA PRIVATE KEY")),
    ("pem-openssh", "{s}\n", K.PRIVATE_KEY_BLOCK, pem("OPENSSH PRIVATE KEY")),
    ("pem-encrypted", "x {s} y", K.PRIVATE_KEY_BLOCK, pem("ENCRYPTED PRIVATE KEY")),
    ("pgp", "{s}", K.PRIVATE_KEY_BLOCK, pem("PGP PRIVATE KEY BLOCK")),
    (
        "pem-cut-off",
        "log: {s}\n[truncated] Next step",
        K.PRIVATE_KEY_BLOCK,
        "-----BEGIN EC PRIVATE KEY-----\n" + fake(64, B64) + "\n" + fake(30, B64),
    ),
    (
        "url-password",
        "DATABASE_URL=postgres://app:{s}@db.internal:5432/app",
        K.URL_PASSWORD,
        fake(16),
    ),
    (
        "url-password-symbols",
        "redis://:{s}@cache:6379/0",
        K.URL_PASSWORD,
        fake(10) + "!%2F" + fake(4),
    ),
    ("env-secret-key", "SECRET_KEY={s}\nDEBUG=false", K.ENV_ASSIGNMENT, fake(32, seed="e1")),
    (
        "env-yaml-password",
        'db:\n  DB_PASSWORD: "{s}"\n',
        K.ENV_ASSIGNMENT,
        fake(14, ALNUM + "!#%", seed="e2"),
    ),
    ("env-python-api-key", "api_key = '{s}'", K.ENV_ASSIGNMENT, fake(24, seed="e3")),
    (
        "env-json-client-secret",
        '{{"client_secret": "{s}"}}',
        K.ENV_ASSIGNMENT,
        fake(40, URLSAFE, seed="e4"),
    ),
    ("env-dotted", "spring.datasource.password={s}", K.ENV_ASSIGNMENT, fake(20, seed="e5")),
    (
        "bearer",
        "curl -H 'Authorization: Bearer {s}' https://api",
        K.BEARER_TOKEN,
        fake(40, URLSAFE + "."),
    ),
    ("bearer-json", '{{"authorization": "bearer {s}"}}', K.BEARER_TOKEN, fake(32)),
    # Found by the planted-secrets corpus (bench/planted_secrets.py): schemes other than Bearer,
    # names with a flag's dashes or "auth" alone, values that start like a path or a mask, and
    # random values that happen to hold a placeholder word ("…fake…").
    ("basic", "Authorization: Basic {s}", K.AUTHORIZATION_CREDENTIALS, "ZGVwbG95OjdKZWFERlVDZDZaQUZEQ2hmZnBn"),
    ("proxy-basic", "Proxy-Authorization: basic {s}", K.AUTHORIZATION_CREDENTIALS, fake(28, seed="b2")),
    ("github-token-scheme", "Authorization: token {s}", K.AUTHORIZATION_CREDENTIALS, "79a11fd4f24bd1ece13f4014a3b6cf31"),
    ("flag-assignment", "mysqldump --db-password={s} shop", K.ENV_ASSIGNMENT, fake(24, seed="f1")),
    ("quoted-flag", "echo '--smtpPassword={s}' && true", K.ENV_ASSIGNMENT, "Y^!3q5PIuDwjWx8wANXtuguzoiLS7w^k4"),
    ("auth-alone", "auth: {s}", K.ENV_ASSIGNMENT, fake(30, seed="a1")),
    ("oauth-json", '{{"oauth": "{s}"}}', K.ENV_ASSIGNMENT, fake(26, seed="a2")),
    ("rooted-base64", "API_KEY = '{s}'", K.ENV_ASSIGNMENT, "/24gxX0vZ+VzKeBulCu/R/ZZhcQetS9OZf"),
    ("starts-with-star", "{{'secret': '{s}'}}", K.ENV_ASSIGNMENT, "*hT0z2iIjGwmthA2fgl^8%VmOfqe4qY5d"),
    ("holds-fake", "Authorization: Bearer {s}", K.BEARER_TOKEN, "QFxPwvFAkEt3rh7CxWqB7B6PArvFjIP5TGm"),
    ("escaped-json", '{{"command": "echo \'{{\\"auth\\": {{\\"token\\": \\"{s}\\"}}}}\'"}}', K.ENV_ASSIGNMENT,
     "M8VM1vSe244NiDQDWdRtx_imweDwb33wLY4Neu9"),
    ("escaped-json-bearer", '"{{\\"Authorization\\": \\"Bearer {s}\\"}}"', K.BEARER_TOKEN, fake(30, seed="j2")),
]


def _only(result: Redacted) -> tuple[K, int, int]:
    assert len(result.redactions) == 1, result.redactions
    r = result.redactions[0]
    return r.kind, r.start, r.end


@pytest.mark.parametrize(
    ("text", "kind", "secret"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_format_is_redacted_exactly(text: str, kind: K, secret: str) -> None:
    original = text.format(s=secret)
    result = redact(original, KEY)
    assert _only(result) == (kind, original.index(secret), original.index(secret) + len(secret))
    kept_breaks = "\n" * secret.count("\n")  # multi-line secrets keep their line count
    assert result.text == text.format(s=placeholder(kind) + kept_breaks)
    assert result.redactions[0].original_hash == KEY.digest(secret)
    assert result.redactions[0].placeholder == f"[REDACTED:{kind.value}]" + kept_breaks


def test_every_kind_is_covered_by_a_case() -> None:
    assert {c[2] for c in CASES} == set(K)


FALSE_POSITIVES = [
    'sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  README.md",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nMerge: 1a2b3c4 9fceb02",
    "fixed in abc1234def and 0123456789ab",
    'id = "550e8400-e29b-41d4-a716-446655440000"',
    "request_id: 123e4567-e89b-12d3-a456-426614174000",
    'data = "SGVsbG8gd29ybGQ="',
    'PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ'
    'RU5ErkJggg=="',
    '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXGOq8BA=="',
    "password = get_password()",
    'token = request.headers["x"]',
    'key = "value"',
    "PASSWORD_MIN_LENGTH = 8",
    "API_KEY=changeme",
    "API_KEY=<your-key-here>",
    'api_key: "<your-key-here>"',
    "SECRET=${SECRET}",
    'secret = os.environ["SECRET_KEY"]',
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "DATABASE_URL=postgres://user:password@localhost:5432/app",
    "DATABASE_URL=postgres://app:${DB_PASSWORD}@db/app",
    'headers = {"Authorization": f"Bearer {token}"}',
    "Authorization: Bearer <token>",
    "def check_password(password: str) -> bool:",
    "access_token: AccessTokenResponse = fetch()",
    "self._authkey = self._manager._authkey",
    "SECRET_KEY = DEFAULT_SECRET_KEY_2",
    'TOKEN_URL = "https://oauth2.googleapis.com/token"',
    'SECRET_KEY_FILE = "/run/secrets/django_key"',
    'token_type = "access_token"',
    "secretName: tls-cert-2024",
    "if line.startswith('-----BEGIN RSA PRIVATE KEY-----'):",
    "ssh git@github.com:owner/repo.git and https://example.com:8080/a@b",
    "scikit-learn uses sk-learn-compatible-estimators-everywhere-in-docs",
    'version = "1.2.3-beta.4"',
    'MAX_TOKENS = 4096  # "tokens" per request',
    "パスワードは環境変数から読み込む (password from env)",
    '<assemblyIdentity name="Microsoft.VC90.CRT" publicKeyToken="1fc8b3b9a1e18e3b"/>',
    "NEXT_PUBLIC_API_KEY=pk9Xc2LmQ7vB4nR8tZ1w",
    "Authorization: Basic <credentials>",
    'author = "jdoe@example.com"',
    "authority: https://login.example.com/tenant",
    'auth_header = "X-Auth-Token"',
    "--password=$DB_PASSWORD",
    'SECRET = "%(secret)s"',
    "PASSWORD = ********",
    "SSL_KEY_FILE=/etc/ssl/private/server-key.pem",
    "token_path = /var/run/secrets/kubernetes.io/serviceaccount/token",
    'password = "fake-password-1234"',
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_non_secrets_survive_untouched(text: str) -> None:
    result = redact(text)
    assert result.redactions == ()
    assert result.text == text


DOCUMENT = "\n".join(
    [
        "# settings",
        f"AWS_ACCESS_KEY_ID = 'AKIA{fake(16, UPPER_DIGITS, seed='doc')}'",
        f"aws_secret_access_key = {AWS_SECRET}",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        f"GITHUB_TOKEN=ghp_{fake(36, seed='doc')}  # 権限ルール",
        f"url = 'https://svc:{fake(12, seed='doc')}@db:5432'",
        pem("RSA PRIVATE KEY"),
        f"Authorization: Bearer {JWT}",
        "done",
    ]
)


def test_ranges_point_at_the_secrets_of_the_original() -> None:
    result = redact(DOCUMENT, KEY)
    assert [r.kind for r in result.redactions] == [
        K.AWS_ACCESS_KEY,
        K.AWS_SECRET_KEY,
        K.GITHUB_TOKEN,
        K.URL_PASSWORD,
        K.PRIVATE_KEY_BLOCK,
        K.JWT,
    ]
    for r in result.redactions:
        assert KEY.digest(DOCUMENT[r.start : r.end]) == r.original_hash
        assert DOCUMENT[r.start : r.end] not in result.text
    assert _rebuild(DOCUMENT, result) == result.text
    assert "9fceb02d0ae598e95dc970b74767f19372d61af8" in result.text
    assert "権限ルール" in result.text


def test_ranges_count_code_points_not_bytes() -> None:
    secret = "ghp_" + fake(36)
    original = f"権限 ルール 🔑 {secret}"
    (r,) = redact(original).redactions
    assert (r.start, r.end) == (9, 9 + len(secret))
    assert original[r.start : r.end] == secret


def test_redacting_twice_changes_nothing() -> None:
    once = redact(DOCUMENT)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.redactions == ()


def test_existing_placeholders_are_left_alone() -> None:
    text = 'token = "[REDACTED:github-token]"\nDB_PASSWORD="[REDACTED:env-assignment]x9Qz"'
    assert redact(text) == Redacted(text=text, redactions=())


def test_a_specific_format_names_a_secret_that_a_generic_rule_also_matches() -> None:
    key = "sk-proj-" + fake(48, URLSAFE)
    assert _only(redact(f"OPENAI_API_KEY={key}"))[0] == K.OPENAI_KEY
    assert _only(redact(f"Authorization: Bearer {JWT}"))[0] == K.JWT
    assert _only(redact(f'"private_key": "{GCP_PEM}"'))[0] == K.GCP_SERVICE_ACCOUNT_KEY


def test_the_longest_overlapping_match_wins() -> None:
    key = "AKIA" + fake(16, UPPER_DIGITS)
    value = fake(12, seed="long") + "-" + key
    original = f"SECRET_TOKEN={value}"
    kind, start, end = _only(redact(original))
    assert (kind, original[start:end]) == (K.ENV_ASSIGNMENT, value)


def test_adjacent_secrets_are_redacted_separately() -> None:
    first, second = "ghp_" + fake(36, seed="1"), "ghp_" + fake(36, seed="2")
    result = redact(f"{first},{second}", KEY)
    assert result.text == "[REDACTED:github-token],[REDACTED:github-token]"
    assert [r.original_hash for r in result.redactions] == [KEY.digest(first), KEY.digest(second)]


def test_a_secret_freed_by_a_longer_overlapping_neighbour_is_redacted_too() -> None:
    # First pass: the GitLab match runs on into "-----BEGIN" and loses to the longer key
    # block; once the block is replaced, the token stands alone and must not survive.
    token, block = "glpat-" + fake(20), pem("RSA PRIVATE KEY")
    original = token + block
    result = redact(original)
    found = [(r.kind, original[r.start : r.end]) for r in result.redactions]
    assert found == [(K.GITLAB_TOKEN, token), (K.PRIVATE_KEY_BLOCK, block)]
    assert redact(result.text).redactions == ()


def test_a_token_glued_to_more_token_characters_is_not_a_match() -> None:
    text = "AKIA" + fake(20, UPPER_DIGITS)  # 24 characters: not an access key id
    assert redact(text).redactions == ()


def test_the_entropy_rule_decides_assigned_values() -> None:
    low, high = "aaaabbbbccccdddd1", fake(20, seed="entropy")
    assert shannon_entropy(low) < ENTROPY_THRESHOLD <= shannon_entropy(high)
    assert redact(f"SECRET_KEY={low}").redactions == ()
    assert _only(redact(f"SECRET_KEY={high}"))[0] == K.ENV_ASSIGNMENT
    assert redact(f"LOG_LEVEL={high}").redactions == ()  # the name must carry a secret word


def test_shannon_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    assert shannon_entropy("abcdefgh") == pytest.approx(3.0)


def _rebuild(original: str, result: Redacted) -> str:
    """The original with each recorded range replaced by its placeholder."""
    parts, at = [], 0
    for r in result.redactions:
        assert at <= r.start < r.end <= len(original)
        parts += [original[at : r.start], r.placeholder]
        at = r.end
    return "".join([*parts, original[at:]])


_PIECES = st.sampled_from(
    [c[3] for c in CASES]
    + [
        " ", "\n", "=", ": ", '"', "'", "/", "@", "-", ".", "_", ",", "AKIA", "ghp_", "sk-",
        "SECRET_KEY=", "password: ", "Authorization: Bearer ", "https://u:", "@host",
        "AccountKey=", "[REDACTED:jwt]", "eyJ", "-----END RSA PRIVATE KEY-----", "権限",
    ]
)
_TEXTS = st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=12).map("".join)


@given(_TEXTS)
def test_redaction_only_touches_its_ranges_and_is_idempotent(text: str) -> None:
    result = redact(text, KEY)
    assert _rebuild(text, result) == result.text
    for r in result.redactions:
        assert r.original_hash == KEY.digest(text[r.start : r.end])
        assert r.line == text.count("\n", 0, r.start) + 1
    again = redact(result.text)
    assert again.text == result.text
    assert again.redactions == ()


def test_redaction_keeps_every_line_in_place():
    body = "MIIEow" + "IBAAKCAQEAx" * 4
    text = "a = 1\n-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n" + body + "\n-----END RSA PRIVATE KEY-----\nb = 2\n"
    result = redact(text)
    assert result.text.count("\n") == text.count("\n")
    assert result.text.splitlines()[-1] == "b = 2"
    assert result.text.splitlines().index("b = 2") == text.splitlines().index("b = 2")
    assert redact(result.text).text == result.text


def test_structured_values_are_redacted_at_any_depth() -> None:
    secret = "ghp_" + fake(36, seed="args")
    value = {"cmd": "deploy", "env": {"GITHUB_TOKEN": secret}, "argv": ["--token", secret, 3], "dry": False}
    result = redact_values(value)
    assert secret not in repr(result)
    assert result["env"]["GITHUB_TOKEN"].startswith("[REDACTED:")
    assert result["argv"][2] == 3 and result["dry"] is False and result["cmd"] == "deploy"


def test_records_hash_under_a_key_never_plainly() -> None:
    """A weak password's record cannot be matched by hashing a dictionary without the key."""
    import hashlib

    weak = 'DB_PASSWORD = "Summer2024!xq"\n'
    keyed = redact("line one\n" + weak, KEY).redactions
    assert [(r.kind, r.line, r.hash_kind, r.key_id) for r in keyed] == [
        (K.ENV_ASSIGNMENT, 2, "hmac-sha256", KEY.key_id)]
    assert keyed[0].original_hash != hashlib.sha256(b"Summer2024!xq").hexdigest()
    assert keyed[0].original_hash == KEY.digest("Summer2024!xq")
    other = RedactionKey(b"another key of thirty-two bytes!")
    assert redact(weak, other).redactions[0].original_hash != keyed[0].original_hash
    unkeyed = redact(weak).redactions[0]
    assert (unkeyed.original_hash, unkeyed.hash_kind, unkeyed.key_id) == ("", "none", None)


@pytest.mark.parametrize(
    ("text", "kind", "secret"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_secrets_in_finds_each_format_among_many_strings_at_its_field(text: str, kind: K, secret: str) -> None:
    # A snapshot's thousands of short strings are scanned joined first, then one by one.
    document = {
        "ranked": [{"path": f"src/m{n}.py", "reason": f"final score 0.{n} below cutoff"} for n in range(200)],
        "selected": [{"visible_text": "def f():\n    return 1\n"}, {"visible_text": text.format(s=secret)}],
    }
    assert secrets_in(document) == [("selected[1].visible_text", kind)]
    assert secrets_in({"ranked": document["ranked"]}) == []
    assert secrets_in(text.format(s=secret)) == [("text", kind)]


def test_secrets_in_ignores_a_match_only_joining_would_make() -> None:
    # Strings are joined by blank lines, which no secret format spans.
    assert secrets_in(["-----BEGIN", "RSA PRIVATE KEY-----", "AKIA", "Z7QX3VN5LP2KD8RT"]) == []
