"""Replace high-confidence secrets with ``[REDACTED:<kind>]`` before anything reaches disk."""

from __future__ import annotations

import re
from typing import Any

# Ordered: the more specific patterns first, so an Anthropic key is not reported as an OpenAI one.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b")),
    ("aws_secret_key", re.compile(
        r"(?i)(aws_secret_access_key|aws_secret_key)(\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("bearer_token", re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9_\-\.=~+/]{16,}")),
    ("url_password", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(@)")),
]

# Patterns whose leading groups are context to keep, not secret.
_KEEP_PREFIX = {"aws_secret_key", "bearer_token", "url_password"}

# Text each pattern cannot match without (lower-case: looked up in the lower-cased text). Twelve
# regex scans cost ~100 us per turn; these substring checks ~3 us, and a pattern only runs when
# its text is there. tests/test_sessions_write.py checks the gate against the plain patterns.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----BEGIN ",), "anthropic_key": ("sk-ant-",), "openai_key": ("sk-",),
    "aws_access_key": ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    "aws_secret_key": ("aws_secret_",), "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                                                         "github_pat_"),
    "slack_token": ("xox",), "slack_webhook": ("https://hooks.slack.com/services/",),
    "stripe_key": ("_live_", "_test_"), "google_api_key": ("AIza",), "bearer_token": ("bearer",),
    "url_password": ("://",)}
_CASELESS = {"aws_secret_key", "bearer_token"}
_ANY_CASED = tuple(t for k, ts in _TRIGGERS.items() if k not in _CASELESS for t in ts)
_ANY_CASELESS = tuple(t for k in sorted(_CASELESS) for t in _TRIGGERS[k])


def _may_hold_secret(text: str) -> bool:
    for t in _ANY_CASED:  # a plain loop: cheaper than any() over a generator on every turn
        if t in text:
            return True
    low = text.lower()
    for t in _ANY_CASELESS:
        if t in low:
            return True
    return False


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    if not _may_hold_secret(text):
        return text
    low = None
    for kind, pattern in _PATTERNS:
        if kind in _CASELESS:
            low = text.lower() if low is None else low
            if not any(t in low for t in _TRIGGERS[kind]):
                continue
        elif not any(t in text for t in _TRIGGERS[kind]):
            continue
        text = substitute(kind, pattern, text)
    return text


def substitute(kind: str, pattern: re.Pattern, text: str) -> str:
    """``text`` with one kind's matches replaced, keeping the parts around the secret."""
    if kind == "url_password":
        return pattern.sub(lambda m: f"{m.group(1)}[REDACTED:{kind}]{m.group(2)}", text)
    if kind == "aws_secret_key":
        return pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED:{kind}]", text)
    if kind in _KEEP_PREFIX:
        return pattern.sub(lambda m: f"{m.group(1)}[REDACTED:{kind}]", text)
    return pattern.sub(f"[REDACTED:{kind}]", text)


def redact(value: Any) -> Any:
    """Redact every string inside ``value`` (dict keys included), keeping its shape."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact(k): redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    return value
