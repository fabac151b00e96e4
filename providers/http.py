"""Shared HTTP plumbing for the cloud providers: retries, time budget, concurrency, clear errors.

Every vendor module talks to its REST API through one ``VendorHTTP``. It retries 408/409/429,
5xx, timeouts and connection errors with exponential back-off plus jitter (a ``Retry-After``
from the server wins), never retries other 4xx, and stops within ``max_retry_seconds``. The last
failure becomes a ``ProviderError`` naming the provider, the status and what to do.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
import weakref
from typing import Any, Iterable, Sequence

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from ..errors import ProviderError

log = logging.getLogger("graphmem.providers")

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_HINTS = {
    400: "the request was refused; check the model name and the settings for this provider",
    401: "the API key was refused; check {key}",
    403: "the key has no access to this model or resource; check {key} and the model name",
    404: "not found; check the model or deployment name and the base URL",
    413: "the request is too large; send fewer or shorter texts",
    422: "the request was refused; check the model name and the settings for this provider",
    429: "rate limited; wait, lower providers.concurrency, or raise providers.max_retry_seconds",
}


class _Retryable(Exception):
    """A failure worth another try; ``retry_after`` is the server's wish in seconds."""

    def __init__(self, status: int | None, detail: str, retry_after: float | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, ``Retry-After`` (seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_detail(response: httpx.Response) -> str:
    """The vendor's own error message, whatever shape it comes in (OpenAI, Anthropic, Ollama...)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("type") or err
        if err is not None:
            return str(err)[:300]
    return json.dumps(body)[:300]


class VendorHTTP:
    """One vendor's HTTP endpoint with retries, a time budget and a concurrency limit."""

    def __init__(self, provider: str, base_url: str, headers: dict[str, str], settings: Any,
                 key_env: str | None = None, secret: str | None = None):
        ps = settings.providers
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.headers = headers  # may hold the key: never logged, never put in a message
        self.timeout = ps.timeout
        self.max_tries = max(1, ps.max_retries + 1)
        self.budget = ps.max_retry_seconds
        self.backoff = ps.retry_backoff
        self.concurrency = max(1, ps.concurrency)
        self.key_env = key_env or "the API key setting"
        self._secret = secret
        # httpx clients and semaphores belong to one event loop; keep one pair per loop.
        self._per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple]" = (
            weakref.WeakKeyDictionary())

    def _client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        pair = self._per_loop.get(loop)
        if pair is None:
            # Proxy variables apply to remote vendors (corporate networks need them), never to a
            # server on this machine (Ollama, a test server).
            host = httpx.URL(self.base_url).host
            client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers,
                                       timeout=httpx.Timeout(self.timeout),
                                       trust_env=host not in ("127.0.0.1", "localhost", "::1"))
            pair = (client, asyncio.Semaphore(self.concurrency))
            self._per_loop[loop] = pair
        return pair

    async def aclose(self) -> None:
        """Close the client that belongs to the running loop."""
        pair = self._per_loop.pop(asyncio.get_running_loop(), None)
        if pair:
            await pair[0].aclose()

    def _clean(self, text: str) -> str:
        # Vendors sometimes echo part of the key in a 401 message; never pass it on.
        if self._secret and len(self._secret) >= 8:
            text = text.replace(self._secret, "***")
        return text

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return exc.retry_after
        base = self.backoff * (2 ** (state.attempt_number - 1))
        return min(30.0, base + random.uniform(0, base))

    def _stop(self, state: RetryCallState) -> bool:
        if state.attempt_number >= self.max_tries:
            return True
        # Stop now rather than sleep past the budget: the total time stays bounded.
        assert state.seconds_since_start is not None  # tenacity stops after an outcome
        return state.seconds_since_start + (state.upcoming_sleep or 0.0) > self.budget

    async def post(self, path: str, body: dict[str, Any], params: dict[str, str] | None = None,
                   what: str = "request") -> Any:
        """POST JSON and return the decoded JSON answer, retrying what is worth retrying."""
        client, sem = self._client()
        started = time.monotonic()
        tries = 0
        retrying = AsyncRetrying(stop=self._stop, wait=self._wait, reraise=True,
                                 retry=retry_if_exception_type(_Retryable))
        try:
            async for attempt in retrying:
                with attempt:
                    tries += 1
                    async with sem:
                        return await self._once(client, path, body, params)
        except _Retryable as exc:
            took = time.monotonic() - started
            status = f"HTTP {exc.status}" if exc.status else "no answer"
            hint = _HINTS.get(exc.status or 0, "the service is failing or unreachable; check the "
                              "base URL and the service status, then try again")
            raise ProviderError(
                f"{self.provider}: {what} failed with {status} after {tries} "
                f"{'try' if tries == 1 else 'tries'} in {took:.1f} s ({self._clean(exc.detail)}); "
                f"{hint.format(key=self.key_env)}", provider=self.provider, status=exc.status) from None
        raise AssertionError("unreachable")  # pragma: no cover - tenacity always returns or raises

    async def _once(self, client: httpx.AsyncClient, path: str, body: dict[str, Any],
                    params: dict[str, str] | None) -> Any:
        try:
            response = await client.post(path, json=body, params=params)
        except httpx.TimeoutException:
            raise _Retryable(None, f"timed out after {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(None, f"cannot connect to {self.base_url}: {type(exc).__name__}") from None
        status = response.status_code
        if status in RETRY_STATUS or status >= 500:
            log.info("%s: HTTP %s, will retry", self.provider, status)
            raise _Retryable(status, error_detail(response), retry_after_seconds(response.headers))
        if status >= 400:
            hint = _HINTS.get(status, "the request was refused; check this provider's settings")
            if status in (401, 403) and self._secret is None:
                hint = "the server refused access (is a proxy in front of it?); check {key}"
            raise ProviderError(f"{self.provider}: HTTP {status} ({self._clean(error_detail(response))}); "
                                f"{hint.format(key=self.key_env)}", provider=self.provider, status=status)
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"{self.provider}: the answer was not JSON ({response.text[:120]!r}); "
                                "check the base URL points at the vendor's API",
                                provider=self.provider, status=status) from None


_shared: dict[str, VendorHTTP] = {}


def endpoint_problems(provider: str, base_url: str | None, url_env: str, api_key: Any = None,
                      key_env: str | None = None, url_hint: str = "") -> list[str]:
    """The checks every cloud vendor's ``validate`` starts with: a key (when ``key_env`` is given)
    and an http(s) base URL, each problem naming the variable that fixes it."""
    problems = []
    if key_env and (not api_key or not api_key.get_secret_value().strip()):
        problems.append(f"provider {provider} needs {key_env}")
    if not base_url:
        problems.append(f"provider {provider} needs {url_env}" + (f" ({url_hint})" if url_hint else ""))
    elif not base_url.startswith(("http://", "https://")):
        problems.append(f"{provider} base URL {base_url!r} must start with http:// or https:// "
                        f"({url_env})")
    return problems


def vendor_http(provider: str, base_url: str, headers: dict[str, str], settings: Any,
                key_env: str | None = None, secret: str | None = None) -> VendorHTTP:
    """One ``VendorHTTP`` per vendor endpoint and options, so an LLM and an embedder of the same
    vendor share one connection pool and one concurrency limit."""
    import hashlib

    ps = settings.providers
    raw = json.dumps([provider, base_url, sorted(headers.items()), ps.timeout, ps.max_retries,
                      ps.max_retry_seconds, ps.retry_backoff, ps.concurrency])
    key = hashlib.sha256(raw.encode()).hexdigest()  # the key is in headers: keep only a hash
    if key not in _shared:
        _shared[key] = VendorHTTP(provider, base_url, headers, settings, key_env, secret)
    return _shared[key]


class HTTPProvider:
    """Base of the cloud providers: ``aclose()`` releases the connections of the running loop."""

    http: VendorHTTP

    async def aclose(self) -> None:
        """Close this provider's connections for the running event loop."""
        await self.http.aclose()


def malformed(provider: str, what: str, data: Any) -> ProviderError:
    """The error for an answer that is JSON but not in the documented shape."""
    shown = json.dumps(data)[:200] if not isinstance(data, str) else data[:200]
    return ProviderError(f"{provider}: unexpected answer to {what} (expected the documented response "
                         f"shape, got {shown}); check the base URL and model", provider=provider)


def batches(texts: Sequence[str], max_items: int, max_chars: int) -> Iterable[tuple[int, list[str]]]:
    """Split texts into (offset, chunk) within a count and a rough size limit, keeping order."""
    chunk: list[str]
    start, chunk, size = 0, [], 0
    for i, text in enumerate(texts):
        if chunk and (len(chunk) >= max_items or size + len(text) > max_chars):
            yield start, chunk
            start, chunk, size = i, [], 0
        chunk.append(text)
        size += len(text)
    if chunk:
        yield start, chunk


def check_texts(texts: Sequence[str]) -> list[str]:
    """Texts as a list; vendors refuse empty strings, so an empty text is sent as one space."""
    from ..errors import ValidationError

    if isinstance(texts, str):
        raise ValidationError("expected a list of texts, got one string", field="texts")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValidationError(f"item {i} is {type(text).__name__}, not text", field="texts")
        out.append(text if text.strip() else " ")
    return out


def check_vectors(provider: str, vectors: list[Any], count: int, dimension: int) -> list[list[float]]:
    """Every vector present, numeric and of the declared dimension."""
    if len(vectors) != count:
        raise ProviderError(f"{provider}: asked for {count} embeddings, got {len(vectors)}",
                            provider=provider)
    for vec in vectors:
        if not isinstance(vec, list) or len(vec) != dimension:
            got = len(vec) if isinstance(vec, list) else type(vec).__name__
            raise ProviderError(f"{provider}: expected vectors of dimension {dimension}, got {got}; "
                                "set the embedding dimension setting to match the model",
                                provider=provider)
    return vectors
