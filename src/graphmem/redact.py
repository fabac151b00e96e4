"""Replace high-confidence secrets with ``[REDACTED:<kind>]`` before anything reaches disk.

Every pattern names the secret part with the group ``s`` when there is context worth keeping
(``DB_PASSWORD=[REDACTED:env_secret]``, ``postgres://admin:[REDACTED:url_password]@db``);
without it the whole match goes. The generic kinds (``env_secret``, ``query_secret``) run after
the vendor-specific ones, so a known key keeps its own name, and they leave values that read as
code (``token = self.token``, ``api_key: SecretStr``, ``PASSWORD=${DB_PASSWORD}``) alone.
In a mapping (metadata, payloads, insight extras), a value whose key names a secret
(``{"password": ...}``) is a secret as a whole.

The vendor formats follow each vendor's documented token shape. Maintained pattern sets were
weighed first (issue 35): detect-secrets covers 6 of the 28 formats issue 35 lists, and its
plugins import its scanner's settings and ``requests``; gitleaks' rules are Go (RE2) regexes in a
Go repository, not a package. Neither fits a redaction run on every write, so the table is ours.
"""

from __future__ import annotations

import re
TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any, Iterable

# The body of a PEM/PGP block cut short (no END line): whole lines of base64 or "Name: value"
# headers, or long base64 runs on the header's own line (a key pasted without its newlines).
_NL = r"(?:\r?\n|(?:\\r)?\\n)"  # a newline, or its JSON escape (a payload's text is JSON)
_ARMOR_BODY = (rf"(?:{_NL}[ \t]*(?:[A-Za-z0-9+/=]+[ \t]*(?={_NL}|$)|[A-Za-z0-9+/=]{{8,}}"
               rf"|[A-Za-z][\w\-]*:[^\r\n\\]*|[ \t]*(?={_NL}))|[ \t]+[A-Za-z0-9+/=]{{8,}})*")
_KEY_HEAD = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?"
_KEY_TAIL = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

# Names whose value is a secret in ``NAME=value`` / ``name: "value"`` lines (.env, YAML, JSON, flags).
_SECRET_WORD = (r"(?:password|passwd|passphrase|secret|secret_?key|token|api_?key|api-key|"
                r"access_?key|private_?key|credentials?)")
_QUERY_NAME = (r"(?:password|passwd|pwd|pass|passphrase|token|access_token|refresh_token|id_token|"
               r"api_?key|api-key|key|secret|client_secret|auth|sig|signature|"
               r"x-amz-signature|x-amz-credential|x-amz-security-token)")

# Ordered: the more specific patterns first, so an Anthropic key is not reported as an OpenAI one.
# (kind, regex source), compiled on first use (``_rx``): compiling all of them costs a process
# ~8 ms, most of a hook's own work, and the trigger gate below lets few of them run on a text.
_PATTERNS: list[tuple[str, str]] = [
    ("private_key", (  # up to its END line, unless another block begins first
        rf"{_KEY_HEAD}-----(?:(?:(?!-----BEGIN )[\s\S])*?{_KEY_TAIL}|{_ARMOR_BODY})")),
    ("private_key", rf"{_KEY_HEAD}-{{0,4}}(?!-){_ARMOR_BODY}"),  # a cut header
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"),
    ("aws_secret_key", (
        r"(?i)(?:aws_?secret(?:_?access)?(?:_?key)?|secret_?access_?key)"
        r"[\"']?\s*[=:]?\s*[\"']?(?P<s>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])")),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})"),
    ("slack_token", r"\b(?:(?:xoxe\.)?xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9+/=]{20,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{30,}\b"),
    # Vendors' documented token formats (issue 35): prefixes that only these tokens carry.
    ("gitlab_token", (r"\b(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas"
                                r"|glffct)-[A-Za-z0-9_\-]{20,}|GR1348941[A-Za-z0-9_\-]{20,})")),
    ("grafana_token", r"\b(?:glsa_[A-Za-z0-9]{20,}(?:_[A-Fa-f0-9]{1,8})?|glc_[A-Za-z0-9+/]{32,}={0,2})"),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
    ("vault_token", r"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}"),
    ("twilio_key", r"\bSK[0-9a-fA-F]{32}\b"),
    ("databricks_token", r"\bdapi[a-f0-9]{32}(?:-\d+)?\b"),
    ("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("atlassian_token", r"\bATATT3[A-Za-z0-9_\-=]{50,}"),
    ("newrelic_key", r"\b(?:NR(?:AK|II|AA|JS)-[A-Za-z0-9]{20,}|[a-f0-9]{36}NRAL)\b"),
    ("okta_token", r"\bSSWS[ \t]+(?P<s>[A-Za-z0-9_\-]{20,})"),
    ("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    ("postman_key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("doppler_token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b"),
    ("mailchimp_key", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
    ("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),
    ("age_secret_key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b"),
    ("putty_private_key", (  # the private lines of a .ppk file and their MAC
        rf"Private-Lines:[ \t]*\d+(?:(?:{_NL}|[ \t])+[A-Za-z0-9+/=]{{8,}})+"
        rf"(?:(?:{_NL}|[ \t])+Private-MAC:[ \t]*[0-9a-fA-F]+)?")),
    ("azure_storage_key", (
        r"\b(?:AccountKey|SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{20,}={0,2})")),
    ("npm_auth", r"(?<![A-Za-z0-9])_auth[ \t]*=[ \t]*(?P<s>[^\s'\"]{6,})"),
    # Credentials in the shapes of config files and command lines (values that read as
    # placeholders, ``<password>``, ``${PASS}``, stay).
    ("docker_auth", (
        r"\\?\"(?:auth|identitytoken|registrytoken)\\?\"[ \t]*:[ \t]*\\?\"(?P<s>[A-Za-z0-9+/]{8,}={0,2})")),
    ("basic_auth", (
        r"(?i)authorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<s>[A-Za-z0-9+/]{8,}={0,2})")),
    ("curl_password", (
        r"\bcurl\b[^\n]*?[ \t](?:-u|--user)(?:[ \t]+|=)?[\"']?[^\s:'\"]*:(?P<s>(?!\$)[^\s'\"]+)")),
    ("netrc_password", (  # machine h login u password p (one line, or one per line)
        r"\b(?:machine|login)(?:\s|\\[nrt])+[^\s\\]+(?:\s|\\[nrt])+password(?:\s|\\[nrt])+"
        r"(?P<s>[^\s\\]+)")),
    ("mysql_password", (  # -pSECRET (joined: ``-p`` alone asks for it)
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb)\b[^\n|;&]*?[ \t]-p"
        r"(?P<s>[^\s'\"\-][^\s'\"]*)")),
    ("bearer_token", r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9_\-\.=~+/]{16,})"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
    ("url_password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:(?P<s>[^\s@/]+)@"),
    ("query_secret", rf"(?i)[?&;]{_QUERY_NAME}=(?P<s>[^&#\s\"'<>$\{{}}\[\]]{{6,}})"),
    ("env_secret", (  # NAME=value, name: value, NAME = "value", "name": "value"
        rf"(?i){_SECRET_WORD}[\"']?[ \t]*[=:][ \t]*(?:(?P<q>[\"'`])(?P<s>[^\"'`\s]{{6,}})(?P=q)"
        r"|(?P<b>[^\s\"'`;,()\[\]{}<>$#]{6,})(?=[\s\"'`;,)\]}#]|$))")),
]

# Text each pattern cannot match without (lower-case: looked up in the lower-cased text). Twenty
# regex scans cost far more than these substring checks, and a pattern only runs when its text is
# there. tests/test_sessions_write.py checks the gate against the plain patterns.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----BEGIN ",), "anthropic_key": ("sk-ant-",), "openai_key": ("sk-",),
    "aws_access_key": ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    "aws_secret_key": ("secret",), "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                                                         "github_pat_"),
    "slack_token": ("xox", "xapp-"), "slack_webhook": ("https://hooks.slack.com/services/",),
    "stripe_key": ("_live_", "_test_"), "stripe_webhook_secret": ("whsec_",),
    "google_api_key": ("AIza",), "google_oauth_secret": ("GOCSPX-",),
    "huggingface_token": ("hf_",), "npm_token": ("npm_",), "bearer_token": ("bearer",),
    # one trigger for a family of prefixes: fewer substring scans of every text, and a family's
    # pattern runs only where its text is (``gl`` for GitLab and Grafana, ``shp`` for Shopify)
    "gitlab_token": ("gl", "GR1348941"), "grafana_token": ("gl",), "pypi_token": ("pypi-AgE",),
    "sendgrid_key": ("SG.",), "vault_token": ("hv",), "twilio_key": ("SK",),
    "databricks_token": ("dapi",), "shopify_token": ("shp",), "atlassian_token": ("ATATT3",),
    "newrelic_key": ("NR",), "okta_token": ("SSWS",), "digitalocean_token": ("_v1_",),
    "postman_key": ("PMAK-",), "doppler_token": ("dp.",), "mailchimp_key": ("-us",),
    "telegram_bot_token": (":AA",), "age_secret_key": ("AGE-SECRET-KEY-1",),
    "putty_private_key": ("Private-Lines:",), "azure_storage_key": ("Key=",),
    "npm_auth": ("_auth",), "docker_auth": ('"auth', "ytoken"), "basic_auth": ("basic",),
    "curl_password": ("curl",), "netrc_password": ("machine", "login"),
    "mysql_password": ("mysql", "mariadb"),
    "jwt": ("eyJ",), "url_password": ("://",),
    "query_secret": ("pass", "pwd", "token", "key", "secret", "auth", "sig"),
    "env_secret": ("pass", "secret", "token", "key", "credential"),
}
_CASELESS = {"aws_secret_key", "bearer_token", "query_secret", "env_secret", "basic_auth"}
# Kinds whose value may be a placeholder or a variable rather than a secret (see ``substitute``).
_GENERIC = {"env_secret", "query_secret", "curl_password", "netrc_password", "mysql_password",
            "npm_auth"}
# trigger -> the kinds it lets run, split by whether it is looked up in the text or lower-cased.
_BY_TRIGGER: dict[bool, dict[str, set[str]]] = {True: {}, False: {}}
for _kind, _ts in _TRIGGERS.items():
    for _t in _ts:
        _BY_TRIGGER[_kind in _CASELESS].setdefault(_t, set()).add(_kind)
_CASED_TRIGGERS = tuple(_BY_TRIGGER[False].items())
_CASELESS_TRIGGERS = tuple(_BY_TRIGGER[True].items())
# Values of a secret-named field that are placeholders, not secrets; unquoted, also code.
_PLACEHOLDER = re.compile(r"(.)\1*|%\(?\w*\)?s|\{\{.*\}\}|<[^>]*>|\$\{.*\}")  # ******, %(x)s
_CODE_VALUE = re.compile(
    r"[A-Za-z_]+"  # an identifier without digits: a variable, a type (SecretStr), None, true
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # attribute access: self.token, settings.API_KEY
_LETTERS = re.compile(r"[A-Za-z]{6,}")
_ENV_NAME = re.compile(r"[A-Z0-9_]+=")  # the name's secret word and "=", nothing between
_NAME_ONLY = re.compile(rf"(?i)[\w.\-]*{_SECRET_WORD}")  # a mapping key naming a secret


_COMPILED: dict[str, re.Pattern[str]] = {}


def _rx(source: str) -> re.Pattern[str]:
    """``source`` compiled, once per process."""
    pattern = _COMPILED.get(source)
    if pattern is None:
        pattern = _COMPILED[source] = re.compile(source)
    return pattern


def patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every (kind, compiled pattern), in the order they run."""
    return [(kind, _rx(source)) for kind, source in _PATTERNS]


def _env_password(text: str, name_at: int, value_at: int, value: str) -> bool:
    """Whether a letters-only value is an environment file's password, not code: ``NAME=value``
    with an upper-case name written right against ``=`` (``DB_PASSWORD=CorrectHorseBattery``,
    where code would read ``password = horse``)."""
    return bool(_LETTERS.fullmatch(value) and _ENV_NAME.fullmatch(text, name_at, value_at)
                and (name_at == 0 or not text[name_at - 1].islower()))


def _kinds_present(text: str, low: str) -> set[str]:
    """The kinds whose trigger text occurs: each trigger is looked for once per text."""
    kinds: set[str] = set()
    for t, ks in _CASED_TRIGGERS:  # a plain loop: cheaper than any() over a generator
        if t in text:
            kinds |= ks
    for t, ks in _CASELESS_TRIGGERS:
        if t in low:
            kinds |= ks
    return kinds


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    low = text.lower()
    kinds = _kinds_present(text, low)
    if not kinds:
        return text
    # A replacement only removes text (its tag ends in "]", which no pattern continues across),
    # so a kind absent from the original cannot match after an earlier kind was replaced.
    for kind, source in _PATTERNS:
        if kind not in kinds:
            continue
        new = substitute(kind, _rx(source), text, low if kind in _CASELESS else None)
        if new is not text:
            text, low = new, new.lower()
    return text


def substitute(kind: str, pattern: re.Pattern, text: str, low: str | None = None) -> str:
    """``text`` with one kind's matches replaced, keeping the parts around the secret.

    ``low`` is ``text.lower()``: a caseless pattern then runs case-sensitively on it, without
    its ``(?i)`` (several times faster), and the spans it finds are replaced in ``text``.
    """
    tag = f"[REDACTED:{kind}]"
    fast = (_rx(pattern.pattern.removeprefix("(?i)")) if kind in _CASELESS and low is not None
            and len(low) == len(text) else None)
    generic = kind in _GENERIC
    group = "s" if "s" in pattern.groupindex else 0
    out, last = [], 0
    for m in (fast.finditer(low) if fast is not None and low is not None else pattern.finditer(text)):
        start, end = m.span(group)
        bare = start < 0  # env_secret's unquoted value (group ``b``): code is not a secret
        if bare:
            start, end = m.span("b")
        secret = text[start:end]
        if generic and (secret.startswith("[REDACTED:") or _PLACEHOLDER.fullmatch(secret)
                        or bare and _CODE_VALUE.fullmatch(secret)
                        and not _env_password(text, m.start(), start, secret)):
            continue
        out += [text[last:start], tag]
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact(value: Any) -> Any:
    """Redact every string inside ``value`` (dict keys included), keeping its shape."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact(k): _named(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    return value


def _named(key: Any, value: Any) -> Any:
    """A mapping's value, which is a secret as a whole when its key names one (``"password"``)."""
    if (isinstance(value, str) and isinstance(key, str) and len(value) >= 6
            and _NAME_ONLY.fullmatch(key) and not _PLACEHOLDER.fullmatch(value)
            and not value.startswith("[REDACTED:")):
        return "[REDACTED:env_secret]"
    return redact(value)


def redact_items(items: Iterable[Any]) -> list[Any]:
    """``MemoryItem``s with text and metadata redacted: what the index and the graph may hold,
    even when the files came from elsewhere (an agent writing the reference layout itself)."""
    out = []
    for it in items:
        text, meta = redact_text(it.text), redact(it.metadata) if it.metadata else it.metadata
        out.append(it if text is it.text and meta == it.metadata
                   else it.model_copy(update={"text": text, "metadata": meta}))
    return out
