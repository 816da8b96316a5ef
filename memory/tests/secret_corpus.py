"""The secret scanner's corpus, shared by its unit tests and every writer's route tests.

`CREDENTIALS` are lines that must be refused, each with the rule that must name it;
`PROSE` are lines that must pass. No credential-shaped literal sits in the repository: each
value is built from its published prefix and characters drawn, from a fixed seed, out of
the alphabet its issuer uses, so every run sees the same fakes. They are well-formed, not
live: none was ever issued.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_rng = random.Random(20_240_612)

ALNUM = string.ascii_letters + string.digits
BASE64URL = ALNUM + "-_"
BASE64 = ALNUM + "+/"
UPPER_BASE32 = string.ascii_uppercase + "234567"


def fake(length: int, alphabet: str = ALNUM) -> str:
    """`length` characters of `alphabet`, holding a lower-case letter, an upper-case letter
    and a digit whenever the alphabet has them (as a random token of 20 or more almost
    always does), so that a case fails only for the reason its rule names."""
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(length))
        wanted = [
            chars
            for chars in (string.ascii_lowercase, string.ascii_uppercase, string.digits)
            if any(char in alphabet for char in chars)
        ]
        if all(any(char in chars for char in value) for chars in wanted):
            return value


def digits(length: int) -> str:
    return "".join(_rng.choice(string.digits) for _ in range(length))


def _b64url_json(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def fake_jwt(alg: str = "HS256") -> str:
    header = _b64url_json({"alg": alg, "typ": "JWT"})
    payload = _b64url_json({"sub": digits(8), "iat": 1_700_000_000})
    return f"{header}.{payload}.{fake(43 if alg.startswith('HS') else 342, BASE64URL)}"


@dataclass(frozen=True)
class Credential:
    rule: str
    line: str


_service_account_line = (
    '{"type": "service_account", "project_id": "demo-project", "private_key_id": "'
    + fake(40, string.hexdigits.lower())
    + '", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
    + fake(64, BASE64)
    + '\\n-----END PRIVATE KEY-----\\n"}'
)

CREDENTIALS: list[Credential] = [
    # Anthropic
    Credential("anthropic_api_key", f"ANTHROPIC_API_KEY=sk-ant-api03-{fake(93, BASE64URL)}AA"),
    Credential("anthropic_api_key", f'export ANTHROPIC_API_KEY="sk-ant-admin01-{fake(93)}AA"'),
    Credential("anthropic_api_key", f"- the key is `sk-ant-api03-{fake(93, BASE64URL)}AA`"),
    # OpenAI: project, service account and the legacy shape
    Credential("openai_api_key", f"OPENAI_API_KEY=sk-proj-{fake(156, BASE64URL)}"),
    Credential("openai_api_key", f"key: sk-svcacct-{fake(74, BASE64URL)}"),
    Credential("openai_api_key", f"sk-{fake(20)}T3BlbkFJ{fake(20)}"),
    Credential("openai_api_key", f'{{"api_key": "sk-{fake(48)}"}}'),
    # GitHub: every classic prefix, a fine-grained token, a token inside a clone URL
    Credential("github_token", f"GITHUB_TOKEN=ghp_{fake(36)}"),
    Credential("github_token", f"oauth: gho_{fake(36)}"),
    Credential("github_token", f"user-to-server token ghu_{fake(36)}"),
    Credential("github_token", f"installation token: ghs_{fake(36)}"),
    Credential("github_token", f"refresh_token=ghr_{fake(76)}"),
    Credential("github_token", f"github_pat_{fake(22)}_{fake(59)}"),
    Credential(
        "github_token", f"git clone https://x-access-token:ghs_{fake(36)}@github.com/acme/app.git"
    ),
    # GitLab
    Credential("gitlab_token", f"GITLAB_TOKEN=glpat-{fake(20, BASE64URL)}"),
    Credential("gitlab_token", f"deploy token: gldt-{fake(20, BASE64URL)}"),
    Credential("gitlab_token", f"runner: glrt-{fake(20, BASE64URL)}"),
    # Slack: bot, user and app-level tokens, and an incoming webhook
    Credential("slack_token", f"SLACK_BOT_TOKEN=xoxb-{digits(12)}-{digits(13)}-{fake(24)}"),
    Credential(
        "slack_token",
        f"xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{fake(32, string.hexdigits.lower())}",
    ),
    Credential("slack_token", f"legacy: xoxa-2-{digits(12)}-{fake(40)}"),
    Credential(
        "slack_webhook",
        f"post to https://hooks.slack.com/services/T{fake(10, UPPER_BASE32)}/"
        f"B{fake(10, UPPER_BASE32)}/{fake(24)}",
    ),
    # AWS: long-term and temporary key ids, secret access keys near their keyword
    Credential("aws_access_key_id", f"aws_access_key_id = AKIA{fake(16, UPPER_BASE32)}"),
    Credential("aws_access_key_id", f"AWS_ACCESS_KEY_ID=ASIA{fake(16, UPPER_BASE32)}"),
    Credential("aws_access_key_id", f"| prod | AKIA{fake(16, UPPER_BASE32)} | rotated |"),
    Credential("aws_secret_access_key", f"aws_secret_access_key = {fake(40, BASE64)}"),
    Credential("aws_secret_access_key", f'AWS_SECRET_ACCESS_KEY: "{fake(40, BASE64)}"'),
    Credential("aws_secret_access_key", f'"SecretAccessKey": "{fake(40, BASE64)}",'),
    # Stripe live keys
    Credential("stripe_live_key", f"STRIPE_SECRET_KEY=sk_live_{fake(99)}"),
    Credential("stripe_live_key", f"restricted: rk_live_{fake(24)}"),
    # Google
    Credential("google_api_key", f"GOOGLE_API_KEY=AIza{fake(35, BASE64URL)}"),
    Credential(
        "google_api_key",
        f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key=AIza{fake(35)}",
    ),
    # A GCP service-account key, as one line of JSON
    Credential("gcp_service_account", _service_account_line),
    # PEM and OpenSSH private keys
    Credential("private_key", "-----BEGIN RSA PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN EC PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN DSA PRIVATE KEY-----"),
    Credential("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    # JWTs
    Credential("jwt", f"Authorization: Bearer {fake_jwt()}"),
    Credential("jwt", f"Set-Cookie: session={fake_jwt('RS256')}; HttpOnly"),
    # npm
    Credential("npm_token", f"//registry.npmjs.org/:_authToken=npm_{fake(36)}"),
    Credential("npm_token", f"NPM_TOKEN=npm_{fake(36)}"),
    # PyPI: the upload token and the test index's
    Credential("pypi_token", f"password = pypi-AgEIcHlwaS5vcmc{fake(120, BASE64URL)}"),
    Credential("pypi_token", f"TWINE_PASSWORD=pypi-AgENdGVzdC5weXBpLm9yZw{fake(120, BASE64URL)}"),
    # Wrapped in terminal colours, as pasted from a shell
    Credential("github_token", f"\x1b[1;32mtoken:\x1b[0m \x1b[33mghp_{fake(36)}\x1b[0m"),
    Credential("openai_api_key", f"\x1b]8;;https://x\x07sk-proj-{fake(74, BASE64URL)}\x1b]8;;\x07"),
    # This service's own bearer secrets: a personal access token, a turn's delivery credential
    Credential(
        "workspace_memory_token", f"curl -H 'Authorization: Bearer iap_{fake(43, BASE64URL)}'"
    ),
    Credential("workspace_memory_token", f"MEMORY_REMOTE_TOKEN=iap_{fake(43, BASE64URL)}"),
    Credential("workspace_memory_token", f"the runtime's credential is dlv_{fake(43, BASE64URL)}"),
]

# A service-account key file as written to disk: the line is the "private_key" member's.
SERVICE_ACCOUNT_FILE = "\n".join(
    [
        "{",
        '  "type": "service_account",',
        '  "project_id": "demo-project",',
        f'  "private_key_id": "{fake(40, string.hexdigits.lower())}",',
        '  "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE...\\n-----END PRIVATE KEY-----\\n",',
        '  "client_email": "robot@demo-project.iam.gserviceaccount.com"',
        "}",
    ]
)
SERVICE_ACCOUNT_FILE_LINE = 5

_sha = fake(40, "0123456789abcdef")

PROSE: list[str] = [
    # The prefixes, named in prose
    "prefixes to watch for: sk-, ghp_, glpat-",
    "ghp_ is the prefix of a classic GitHub token",
    "send `Authorization: Bearer iap_...` with your personal access token",
    "iap_your-personal-access-token-goes-here-now",
    "Stripe keys start with sk_live_ or rk_live_ and test keys with sk_test_",
    "AIza is how a Google API key begins",
    "eyJ is how base64 of a JSON object begins",
    "Slack tokens look like xoxb-..., xoxp-... and xoxa-...",
    "npm_ and pypi- prefixes mark registry tokens",
    "Use AKIA... ids for long-term keys and ASIA... for temporary ones",
    # Words that hold a prefix
    "ASIA is the region",
    "EMEA_ASIA_PACIFIC_REGION",
    "ASIAPACIFIC sales grew",
    "task-runner",
    "risk-register",
    "sk-modal",
    "sk-learn is scikit-learn's old name",
    "the desk_live_view and the task_live_stream",
    # Kebab, snake and placeholder spellings after a real prefix
    "glpat-personal-access-token-goes-here",
    "xoxb-is-the-bot-token-prefix-for-slack",
    "ghp_your_token_here",
    f"ghp_{'x' * 36}",
    f"sk-ant-api03-{'X' * 93}AA",
    f"AKIA{'X' * 16}",
    "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "__MEMORY_SECRET_GH_TOKEN__",
    "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "OPENAI_API_KEY=${OPENAI_API_KEY}",
    "password: <redacted>",
    "SECRET_KEY = env('SECRET_KEY')",
    # Identifiers and hashes
    "request id 3f1c2a7e-9b4d-4e8a-a1f2-6c0d5e7b8a90",
    f"commit {_sha} rotated the secret",
    f"aws deploy of {_sha}",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "arn:aws:iam::123456789012:role/S3ReadOnlyAccess",
    "aws s3 cp s3://acme-backups/2024/06/dump.sql.gz .",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk0mY2Yh1q9pR7Gd3nFv0oZ user@laptop",
    "-----BEGIN CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----",
    "eyJhbGciOiJIUzI1NiJ9 is a header on its own, not a token",
    # Ordinary text, markup and data
    "dGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==",
    "See https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html",
    "color: #ff00aa; background: rgb(12, 34, 56);",
    "| key | owner | rotated |\n| --- | --- | --- |\n| deploy | ops | 2024-06-01 |",
    "MyServiceClientFactoryProviderImplementation",
    "x = np.linspace(0, 1, 100)",
    "Le café coûte 3 € — 🎉 déjà vu",
    "# Deploy notes\n\nRun `make deploy` after the tests pass.",
    "The secret to good coffee is fresh beans.",
]
