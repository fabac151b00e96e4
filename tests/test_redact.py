"""Secrets never reach disk in the clear."""

from __future__ import annotations

import pytest

from graphmem import Memory
from graphmem.redact import redact_text

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
}


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
