"""Secrets never reach disk in the clear."""

from __future__ import annotations

import pytest

from graphmem import Memory
from graphmem.redact import redact, redact_text

SECRETS = {
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic_key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github_token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "slack_token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
    "stripe_key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "google_api_key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "bearer_token": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
    "url_password": "postgres://admin:hunter2secret@db.internal:5432/app",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
           "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "env_secret": "DB_PASSWORD=Hunt3rTw0Secret",
    "query_secret": "https://api.example.com/v1/items?user=bob&password=s3cr3tPassw0rd&page=2",
    "stripe_webhook_secret": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "google_oauth_secret": "GOCSPX-" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4N",
    "huggingface_token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "npm_token": "npm_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210",
}

# The part of each sample that must never be stored (the secret, without its context).
CORES = {kind: sample for kind, sample in SECRETS.items()}
CORES.update({
    "aws_secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "private_key": "MIIEpAIBAAKCAQEA",
    "bearer_token": "eyJzdWIiOiIxIn0", "url_password": "hunter2secret",
    "jwt": "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "env_secret": "Hunt3rTw0Secret",
    "query_secret": "s3cr3tPassw0rd"})

# More shapes of the kinds above (issue 14 finding 5): kind, text, the secret part.
VARIANTS = [
    ("aws_secret_key", "AWS_SECRET_ACCESS_KEY wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_key", '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("slack_token", "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef", "abcdef0123456789abcdef"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAA"
                    "AAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDx", "QyNTUxOQAAACDx"),  # cut short
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF8xKaEBCAC7nK3"
                    "vQ2ZzT0aS6f7bW9X1yX2Jk4lM5nO6pQ7rS8tU9vW0xY1z\n=Ab12\n-----END PGP PRIVATE KEY "
                    "BLOCK-----", "lQOYBF8xKaEBCAC7nK3"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF8xKaEBCAC7nK3vQ2ZzT0aS6f7bW9X1y",
     "lQOYBF8xKaEBCAC7nK3"),
    ("private_key", "-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEAx1y2z3w4v5u6t7s8r9q0p",
     "MIIEpAIBAAKCAQEA"),
    ("env_secret", "export SECRET='xK9#mP2qL7vR'", "xK9#mP2qL7vR"),
    ("env_secret", "TOKEN=ab12cd34ef56", "ab12cd34ef56"),
    ("env_secret", "  password: Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("env_secret", '{"api_key": "a1b2c3d4e5f6g7"}', "a1b2c3d4e5f6g7"),
    ("env_secret", "mysql --password=Pa55word! -h db", "Pa55word!"),
    ("env_secret", "spring.datasource.password=J4vaPr0ps", "J4vaPr0ps"),
    ("query_secret", "GET /hook?token=tk_9f8e7d6c5b4a&x=1", "tk_9f8e7d6c5b4a"),
    ("query_secret", "https://x.blob.core.windows.net/c/f?sv=2021&sig=AbC%2Bd3FgH1jK", "AbC%2Bd3FgH1jK"),
]

# Ordinary code and prose that mention secrets without holding one: left exactly as they are.
ORDINARY = [
    "token = tokenizer.encode(text)",
    "def login(user, password: str) -> Token:",
    "api_key: SecretStr = Field(default=None)",
    "PASSWORD_MIN_LENGTH = 12",
    "max_tokens=4096",
    "SECRET_KEY = os.environ['SECRET_KEY']",
    "API_TOKEN = settings.API_TOKEN",
    "client(token=self.token, timeout=5)",
    "DB_PASSWORD=${DB_PASSWORD}",
    "The staging database password rotation broke the deploy",
    "url = f'{base}?page={page}&key={key}'",
    "if secret is None: raise ValueError('missing secret')",
    "headers = {'Authorization': f'Bearer {token}'}",
    "token: Optional[str] = None",
    "for tok in tokens: counts[tok] += 1",
    "password_hash = bcrypt.hashpw(password, salt)",
    "Set GITHUB_TOKEN in the CI secrets, never in the repo",
    "the JWT payload starts with eyJ, so grep for it",
    "hf_hub_download(repo_id, filename) and npm_config_cache both need a writable folder",
    "-----BEGIN CERTIFICATE----- blocks are public; only the private key is secret",
    "SELECT * FROM users WHERE password = ?",
]


@pytest.mark.parametrize("kind", list(SECRETS))
def test_each_secret_kind_is_redacted(kind):
    out = redact_text(f"before {SECRETS[kind]} after")
    assert f"[REDACTED:{kind}]" in out
    assert out.startswith("before ") and out.endswith(" after")


def test_secret_parts_are_gone_and_context_kept():
    assert "hunter2secret" not in redact_text(SECRETS["url_password"])
    assert redact_text(SECRETS["url_password"]).startswith("postgres://admin:")
    assert redact_text(SECRETS["bearer_token"]).startswith("Authorization: Bearer [REDACTED")


def test_ordinary_text_is_untouched():
    text = "Use sk-learn style pipelines; skip tokens shorter than 8; see https://example.com/a:b"
    assert redact_text(text) == text


@pytest.mark.parametrize("kind,text,secret", VARIANTS, ids=[f"{v[0]}-{i}" for i, v in enumerate(VARIANTS)])
def test_every_shape_of_a_kind_is_redacted(kind, text, secret):
    out = redact_text(f"see {text}")
    assert secret not in out and f"[REDACTED:{kind}]" in out, out
    assert out.startswith("see ")


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_code_lines_stay_unchanged(line):
    assert redact_text(line) == line


def test_a_mapping_value_is_secret_when_its_key_names_one():
    out = redact({"password": "hunter22", "api_key": "a1b2c3d4e5", "max_tokens": "4096",
                  "note": "keep", "token": "${TOKEN}"})
    assert out == {"password": "[REDACTED:env_secret]", "api_key": "[REDACTED:env_secret]",
                   "max_tokens": "4096", "note": "keep", "token": "${TOKEN}"}


def test_secrets_never_reach_disk(spec_dir):
    m = Memory(spec_dir)
    m.append_gotcha(f"the key {SECRETS['openai_key']} leaked")
    m.save_session_insights(1, {"what_failed": [SECRETS["url_password"]],
                                "discoveries": {"files_understood": {"cfg.py": SECRETS["github_token"]}}})
    m.update_codebase_map({"env.py": f"reads {SECRETS['aws_access_key']}"})
    blob = b"".join(p.read_bytes() for p in (spec_dir / "memory").rglob("*") if p.is_file())
    for secret in ("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hunter2secret", "AKIAIOSFODNN7EXAMPLE",
                   SECRETS["github_token"]):
        assert secret.encode() not in blob
    assert b"[REDACTED:openai_key]" in blob


def test_redaction_can_be_turned_off(spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_REDACT", "false")
    m = Memory(spec_dir)
    m.append_gotcha(f"key {SECRETS['openai_key']}")
    assert SECRETS["openai_key"] in m.load_gotchas()[0]
