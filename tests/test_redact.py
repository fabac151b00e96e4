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

# The 28 formats of issue 35 finding 6: kind, sample, the part that must never be stored. Samples
# follow each vendor's documented shape; none is a real credential.
_HEX32 = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
_PPK = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n"
        "AAAAC3NzaC1lZDI1NTE5AAAAIG5vdGFyZWFs\nPrivate-Lines: 1\n"
        "AAAAIHByaXZhdGVrZXlieXRlc2hlcmVmb3J0aGV0ZXN0\n"
        "Private-MAC: 0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9")
FORMATS_35 = [
    ("gitlab_token", "glpat-" + "xK9mP2qL7vR4tY8wZ1aB", "xK9mP2qL7vR4tY8wZ1aB"),
    ("gitlab_token", "glrt-" + "t3_AbCdEfGhIjKlMnOpQrStUv", "t3_AbCdEfGhIjKlMnOpQrStUv"),
    ("url_password", "GRAPHMEM_FALKORDB_URL=redis://:F4lk0rPassw0rd@graph.internal:6379",
     "F4lk0rPassw0rd"),
    ("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
     "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4"
     "YWJj==;EndpointSuffix=core.windows.net", "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy"),
    ("npm_auth", "_auth=dXNlcjpzM2NyM3RwYXNzd29yZA==", "dXNlcjpzM2NyM3RwYXNzd29yZA=="),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmcCJDk4ZTBmNzQwLWE0ZDMtNGU1Zi1hYmNkLTEyMzQ1Njc4OTBhYgACKlsz",
     "LWE0ZDMtNGU1Zi1hYmNkLTEyMzQ1Njc4OTBhYgACKlsz"),
    ("sendgrid_key", "SG." + "aBcDeFgHiJkLmNoPqRsTuV" + "." + "wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012",
     "wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012"),
    ("vault_token", "VAULT_ADDR=https://vault:8200 vault login hvs." + "CAESIJ5s2xR0kKq3eZ9aB1cD2eF3g",
     "CAESIJ5s2xR0kKq3eZ9aB1cD2eF3g"),
    ("slack_token", "xoxe.xoxp-1-" + "Mi0yLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkw", "Mi0yLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkw"),
    ("slack_token", "refresh with xoxe-1-" + "My0xLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkw",
     "My0xLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkw"),
    ("twilio_key", "TWILIO_API_KEY_SID SK" + _HEX32, "SK" + _HEX32),
    ("databricks_token", "databricks configure --token dapi" + _HEX32[::-1], "dapi" + _HEX32[::-1]),
    ("shopify_token", "X-Shopify-Access-Token: shpat_" + _HEX32, "shpat_" + _HEX32),
    ("atlassian_token", "jira token ATATT3xFfGF0" + "T5vQk2Lm8Nw4Rz7Yp1Xc6Bj9Hd3Gf0Ks5Aa2Ee8Ii4Oo7Uu1" + "=AB12CD34",
     "T5vQk2Lm8Nw4Rz7Yp1Xc6Bj9Hd3Gf0Ks5Aa2Ee8Ii4Oo7Uu1"),
    ("grafana_token", "glsa_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345" + "_" + "0a1b2c3d",
     "AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    ("newrelic_key", "NEW_RELIC_API_KEY NRAK-" + "A1B2C3D4E5F6G7H8I9J0K1L2M3N", "A1B2C3D4E5F6G7H8I9J0K1L2M3N"),
    ("okta_token", "Authorization: SSWS 00QCjAl4MlV-WPXM6RzWgQ2vcsqk3W0b5Bm8oLz5yZ",
     "00QCjAl4MlV-WPXM6RzWgQ2vcsqk3W0b5Bm8oLz5yZ"),
    ("age_secret_key", "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" + "QPZRY9X8GF2TVDW0S3JN54KHCE",
     "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE"),
    ("putty_private_key", _PPK, "AAAAIHByaXZhdGVrZXlieXRlc2hlcmVmb3J0aGV0ZXN0"),
    ("basic_auth", "Authorization: Basic dXNlcjpTM2NyZXRQYXNzd29yZA==", "dXNlcjpTM2NyZXRQYXNzd29yZA=="),
    ("curl_password", "curl -u deploy:Tr1ckyPassw0rd https://api.example.com/v1", "Tr1ckyPassw0rd"),
    ("netrc_password", "machine api.example.com login deploy password N3trcS3cret", "N3trcS3cret"),
    ("docker_auth", '~/.docker/config.json: {"auths": {"registry.example.com": {"auth": "ZGVwbG95OkQwY2tlclBhc3M="}}}',
     "ZGVwbG95OkQwY2tlclBhc3M="),
    ("mysql_password", "mysql -u root -pMyS3cretPw -h db.internal shop", "MyS3cretPw"),
    ("env_secret", "DB_PASSWORD=CorrectHorseBatteryStaple", "CorrectHorseBatteryStaple"),
    ("digitalocean_token", "dop_v1_" + _HEX32 + _HEX32[::-1], _HEX32 + _HEX32[::-1]),
    ("postman_key", "PMAK-" + _HEX32[:24] + "-" + _HEX32 + "ab", _HEX32 + "ab"),
    ("doppler_token", "DOPPLER_TOKEN dp.pt." + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfG",
     "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfG"),
    ("mailchimp_key", "mailchimp " + _HEX32 + "-us14", _HEX32 + "-us14"),
    ("telegram_bot_token", "bot 123456789:AA" + "HdqTcvCH1vGWJxfSeofSAs0K5PALDsaw7",
     "HdqTcvCH1vGWJxfSeofSAs0K5PALDsaw7"),
]

# Shapes of those formats that keep their text: placeholders, prose, code.
ORDINARY_35 = [
    "curl -u user:<password> https://api.example.com",
    "curl -u $USER:$TOKEN https://api.example.com",
    "mysql -u root -p shop < dump.sql",
    "mysql -h db -P3306 -u app -p",
    "Use basic authentication for the admin panel",
    "password = horse_battery_staple",
    "DB_PASSWORD=${DB_PASSWORD}",
    "the auth header is built in auth.py",
    "machine learning login flow: the password field is validated client side",
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


@pytest.mark.parametrize("kind,text,secret", FORMATS_35,
                         ids=[f"{v[0]}-{i}" for i, v in enumerate(FORMATS_35)])
def test_the_formats_of_issue_35_are_redacted(kind, text, secret):
    out = redact_text(f"see {text} now")
    assert secret not in out and f"[REDACTED:{kind}]" in out, out
    assert out.startswith("see ") and out.endswith(" now")
    one_line = redact_text(" ".join(text.split("\n")))  # as a one-line field holds it
    assert secret not in one_line, one_line


@pytest.mark.parametrize("line", ORDINARY + ORDINARY_35)
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
