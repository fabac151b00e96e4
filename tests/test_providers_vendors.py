"""Cloud providers against a loopback HTTP server that checks the wire format each vendor documents.

Each vendor case builds real settings pointing at 127.0.0.1, makes the real provider through the
registry, and the server asserts method, path, query, auth headers, body fields and model or
deployment names, then answers in the vendor's documented response shape.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import BaseModel

from graphmem import providers
from graphmem.errors import ProviderError
from graphmem.settings import Settings

KEY = "sk-test-0123456789abcdef"


class Fact(BaseModel):
    """A fact about the project."""

    subject: str
    score: int
    tags: list[str] = []


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str -> raw text
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeVendor:
    """A loopback server: records every request and answers from a script, then a default."""

    def __init__(self, default: Callable[[dict], Reply]):
        self.default = default
        self.script: list[Reply] = []
        self.requests: list[dict] = []
        self.inflight = self.max_inflight = 0
        lock = threading.Lock()
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                url = urlsplit(self.path)
                req = {"method": "POST", "path": url.path, "query": parse_qs(url.query),
                       "headers": {k.lower(): v for k, v in self.headers.items()},
                       "body": json.loads(raw), "t": time.monotonic()}
                with lock:
                    vendor.requests.append(req)
                    reply = vendor.script.pop(0) if vendor.script else vendor.default(req)
                    vendor.inflight += 1
                    vendor.max_inflight = max(vendor.max_inflight, vendor.inflight)
                try:
                    time.sleep(reply.delay)
                finally:
                    # Counted as in flight until its answer starts: once the client has the
                    # answer it may send the next request before this thread runs on.
                    with lock:
                        vendor.inflight -= 1
                try:
                    data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data.encode())))
                    self.end_headers()
                    self.wfile.write(data.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- vendor wire formats --------------------------------------------------------------------
def _vec(dim: int, seed: int) -> list[float]:
    return [float(seed)] + [0.5] * (dim - 1)


def openai_reply(req: dict) -> Reply:
    body = req["body"]
    if req["path"].endswith("/embeddings"):
        n = len(body["input"])
        dim = body.get("dimensions", 1536)
        # Documented: data items carry an index; return them shuffled to prove we sort.
        data = [{"object": "embedding", "index": i, "embedding": _vec(dim, i)} for i in range(n)][::-1]
        return Reply(body={"object": "list", "data": data, "model": body.get("model", "dep"),
                           "usage": {"prompt_tokens": n, "total_tokens": n}})
    if "response_format" in body:
        content = json.dumps({"subject": "falkordb", "score": 3, "tags": None})
    else:
        content = "hello from the model"
    return Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                       "model": body.get("model", "dep"), "choices": [{
                           "index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": content, "refusal": None}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})


def anthropic_reply(req: dict) -> Reply:
    body = req["body"]
    if "tools" in body:
        block = {"type": "tool_use", "id": "toolu_01", "name": body["tools"][0]["name"],
                 "input": {"subject": "falkordb", "score": 3}}
        stop = "tool_use"
    else:
        block, stop = {"type": "text", "text": "hello from the model"}, "end_turn"
    return Reply(body={"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                       "content": [block], "stop_reason": stop, "stop_sequence": None,
                       "usage": {"input_tokens": 5, "output_tokens": 5}})


def voyage_reply(req: dict) -> Reply:
    n = len(req["body"]["input"])
    data = [{"object": "embedding", "embedding": _vec(1024, i), "index": i} for i in range(n)][::-1]
    return Reply(body={"object": "list", "data": data, "model": req["body"]["model"],
                       "usage": {"total_tokens": n}})


def ollama_reply(req: dict) -> Reply:
    body = req["body"]
    if req["path"] == "/api/embed":
        return Reply(body={"model": body["model"],
                           "embeddings": [_vec(768, i) for i in range(len(body["input"]))]})
    content = (json.dumps({"subject": "falkordb", "score": 3}) if "format" in body
               else "hello from the model")
    return Reply(body={"model": body["model"], "created_at": "2024-01-01T00:00:00Z",
                       "message": {"role": "assistant", "content": content},
                       "done": True, "done_reason": "stop"})


def check_openai(req: dict, kind: str) -> None:
    assert req["method"] == "POST"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    if kind == "embed":
        assert req["path"] == "/v1/embeddings"
        assert body["model"] == "text-embedding-3-small" and isinstance(body["input"], list)
        assert body["encoding_format"] == "float"
    else:
        assert req["path"] == "/v1/chat/completions"
        assert body["model"] == "gpt-4o-mini" and body["messages"][0]["role"] == "system"
        if kind == "json":
            fmt = body["response_format"]
            assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Fact"
            schema = fmt["json_schema"]["schema"]
            assert fmt["json_schema"]["strict"] is True and schema["additionalProperties"] is False
            assert sorted(schema["required"]) == ["score", "subject", "tags"]


def check_azure(req: dict, kind: str) -> None:
    assert req["method"] == "POST"
    assert req["headers"]["api-key"] == KEY and "authorization" not in req["headers"]
    assert req["query"] == {"api-version": ["2024-10-21"]}
    body = req["body"]
    assert "model" not in body  # the deployment in the path picks the model
    if kind == "embed":
        assert req["path"] == "/openai/deployments/emb-dep/embeddings"
        assert isinstance(body["input"], list)
    else:
        assert req["path"] == "/openai/deployments/chat-dep/chat/completions"
        if kind == "json":
            assert body["response_format"]["type"] == "json_schema"


def check_anthropic(req: dict, kind: str) -> None:
    assert req["method"] == "POST" and req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == KEY and req["headers"]["anthropic-version"] == "2023-06-01"
    body = req["body"]
    assert body["model"] == "claude-3-5-haiku-latest" and body["max_tokens"] > 0
    assert body["system"] == "You extract facts."  # system goes top-level, not in messages
    assert [m["role"] for m in body["messages"]][0] == "user"
    assert all(m["role"] in ("user", "assistant") for m in body["messages"])
    if kind == "json":
        tool = body["tools"][0]
        assert tool["name"] == "Fact" and tool["input_schema"]["type"] == "object"
        assert body["tool_choice"] == {"type": "tool", "name": "Fact"}


def check_voyage(req: dict, kind: str) -> None:
    assert req["method"] == "POST" and req["path"] == "/v1/embeddings"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "voyage-3" and body["input_type"] == "document"
    assert isinstance(body["input"], list)


def check_ollama(req: dict, kind: str) -> None:
    assert req["method"] == "POST"
    body = req["body"]
    if kind == "embed":
        assert req["path"] == "/api/embed" and body["model"] == "nomic-embed-text"
        assert isinstance(body["input"], list)
    else:
        assert req["path"] == "/api/chat" and body["model"] == "llama3.1" and body["stream"] is False
        if kind == "json":
            assert body["format"]["type"] == "object" and "subject" in body["format"]["properties"]


@dataclass
class Case:
    vendor: str
    role: str  # llm | embedder
    env: Callable[[str], dict]
    reply: Callable[[dict], Reply]
    check: Callable[[dict, str], None]
    dim: int = 0
    key_env: str | None = None


CASES = [
    Case("openai", "llm", lambda u: {"GRAPHITI_LLM_PROVIDER": "openai", "OPENAI_API_KEY": KEY,
                                     "OPENAI_BASE_URL": u + "/v1"}, openai_reply, check_openai,
         key_env="OPENAI_API_KEY"),
    Case("openai", "embedder", lambda u: {"GRAPHITI_EMBEDDER_PROVIDER": "openai", "OPENAI_API_KEY": KEY,
                                          "OPENAI_BASE_URL": u + "/v1"}, openai_reply, check_openai,
         dim=1536, key_env="OPENAI_API_KEY"),
    Case("azure_openai", "llm", lambda u: {
        "GRAPHITI_LLM_PROVIDER": "azure_openai", "AZURE_OPENAI_API_KEY": KEY,
        "AZURE_OPENAI_BASE_URL": u + "/openai/v1", "AZURE_OPENAI_LLM_DEPLOYMENT": "chat-dep"},
        openai_reply, check_azure, key_env="AZURE_OPENAI_API_KEY"),
    Case("azure_openai", "embedder", lambda u: {
        "GRAPHITI_EMBEDDER_PROVIDER": "azure_openai", "AZURE_OPENAI_API_KEY": KEY,
        "AZURE_OPENAI_BASE_URL": u, "AZURE_OPENAI_EMBEDDING_DEPLOYMENT": "emb-dep"},
        openai_reply, check_azure, dim=1536, key_env="AZURE_OPENAI_API_KEY"),
    Case("anthropic", "llm", lambda u: {"GRAPHITI_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": KEY,
                                        "ANTHROPIC_BASE_URL": u}, anthropic_reply, check_anthropic,
         key_env="ANTHROPIC_API_KEY"),
    Case("voyage", "embedder", lambda u: {"GRAPHITI_EMBEDDER_PROVIDER": "voyage", "VOYAGE_API_KEY": KEY,
                                          "VOYAGE_BASE_URL": u + "/v1"}, voyage_reply, check_voyage,
         dim=1024, key_env="VOYAGE_API_KEY"),
    Case("ollama", "llm", lambda u: {"GRAPHITI_LLM_PROVIDER": "ollama", "OLLAMA_BASE_URL": u,
                                     "OLLAMA_LLM_MODEL": "llama3.1"}, ollama_reply, check_ollama),
    Case("ollama", "embedder", lambda u: {
        "GRAPHITI_EMBEDDER_PROVIDER": "ollama", "OLLAMA_BASE_URL": u,
        "OLLAMA_EMBEDDING_MODEL": "nomic-embed-text", "OLLAMA_EMBEDDING_DIM": "768"},
        ollama_reply, check_ollama, dim=768),
]
IDS = [f"{c.vendor}-{c.role}" for c in CASES]
MESSAGES = [{"role": "system", "content": "You extract facts."},
            {"role": "user", "content": "FalkorDB stores the graph. Score it 3."}]


@pytest.fixture
def make(request):
    """Start a fake vendor for a case; return (server, provider) built through the registry."""
    servers = []

    def build(case: Case, **overrides):
        server = FakeVendor(case.reply)
        servers.append(server)
        opts = {"providers__retry_backoff": 0.01, "providers__timeout": 5.0}
        opts.update(overrides)
        settings = Settings.load(env=case.env(server.url), **opts)
        assert providers.validate(settings) == []
        get = providers.get_llm if case.role == "llm" else providers.get_embedder
        return server, get(settings)

    yield build
    for s in servers:
        s.close()
    providers.clear_cache()


async def _use(case: Case, provider: Any) -> Any:
    if case.role == "llm":
        return await provider.generate_json(MESSAGES, Fact)
    return await provider.embed(["alpha", "beta", ""])


def _assert_ok(case: Case, result: Any) -> None:
    if case.role == "llm":
        assert result == Fact(subject="falkordb", score=3, tags=[])
    else:
        assert len(result) == 3 and all(len(v) == case.dim for v in result)
        assert [v[0] for v in result] == [0.0, 1.0, 2.0]  # order follows the input


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_success_wire_format(case, make):
    server, provider = make(case)
    assert provider.name.startswith(case.vendor + "/")
    _assert_ok(case, asyncio.run(_use(case, provider)))
    assert len(server.requests) == 1
    case.check(server.requests[0], "json" if case.role == "llm" else "embed")
    if case.role == "llm":
        text = asyncio.run(provider.generate(MESSAGES, max_tokens=50))
        assert text == "hello from the model"
        case.check(server.requests[1], "text")
    else:
        assert provider.dimension == case.dim
        assert server.requests[0]["body"]["input"][2] == " "  # vendors refuse empty strings


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_429_then_success_honours_retry_after(case, make):
    server, provider = make(case)
    server.script = [Reply(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "1"})]
    _assert_ok(case, asyncio.run(_use(case, provider)))
    first, second = server.requests
    assert second["t"] - first["t"] >= 0.9  # backoff alone would be ~0.01 s here
    assert second["body"] == first["body"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_500_then_success(case, make):
    server, provider = make(case)
    server.script = [Reply(500, {"error": {"message": "internal"}}),
                     Reply(503, "<html>overloaded</html>")]
    _assert_ok(case, asyncio.run(_use(case, provider)))
    assert len(server.requests) == 3


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_401_is_not_retried_and_says_what_to_do(case, make, caplog):
    server, provider = make(case)
    server.script = [Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})]
    with pytest.raises(ProviderError) as err:
        asyncio.run(_use(case, provider))
    msg = str(err.value)
    assert len(server.requests) == 1
    assert err.value.status == 401 and err.value.provider == case.vendor
    assert case.vendor in msg and "401" in msg
    if case.key_env:  # ollama has no key: its server echoing a string is not a leak of ours
        assert case.key_env in msg
        assert KEY not in msg and KEY not in caplog.text


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_malformed_body_is_a_clear_error(case, make):
    server, provider = make(case)
    server.script = [Reply(200, {"unexpected": True})] * 2
    with pytest.raises(ProviderError, match="unexpected answer"):
        asyncio.run(_use(case, provider))
    server.script = [Reply(200, "this is not json")] * 2
    with pytest.raises(ProviderError, match="not JSON"):
        asyncio.run(_use(case, provider))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_timeout_is_retried_then_reported(case, make):
    server, provider = make(case, providers__timeout=0.3, providers__max_retries=1)
    server.script = [Reply(200, {}, delay=1.5), Reply(200, {}, delay=1.5)]
    with pytest.raises(ProviderError, match="timed out") as err:
        asyncio.run(_use(case, provider))
    assert len(server.requests) == 2 and "2 tries" in str(err.value)


# ---- behaviour shared by every vendor, checked once ------------------------------------------
def test_400_is_not_retried(make):
    server, llm = make(CASES[0])
    server.script = [Reply(400, {"error": {"message": "Unsupported parameter: temperature"}})]
    with pytest.raises(ProviderError, match="Unsupported parameter") as err:
        asyncio.run(llm.generate(MESSAGES))
    assert err.value.status == 400 and len(server.requests) == 1


def test_retry_budget_bounds_total_time(make):
    server, llm = make(CASES[0], providers__max_retry_seconds=1.0)
    server.script = [Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "30"})] * 5
    with pytest.raises(ProviderError, match="rate limited") as err:
        asyncio.run(llm.generate(MESSAGES))
    # Waiting 30 s would blow the 1 s budget, so it stops after the first answer.
    assert len(server.requests) == 1 and err.value.status == 429


def test_retry_after_ms_is_honoured(make):
    server, llm = make(CASES[0])
    server.script = [Reply(429, {"error": {"message": "x"}}, {"retry-after-ms": "400"})]
    asyncio.run(llm.generate(MESSAGES))
    assert server.requests[1]["t"] - server.requests[0]["t"] >= 0.35


def test_connection_refused_is_a_provider_error():
    settings = Settings.load(env={"OLLAMA_BASE_URL": "http://127.0.0.1:9", "OLLAMA_LLM_MODEL": "m",
                                  "GRAPHITI_LLM_PROVIDER": "ollama"},
                             providers__retry_backoff=0.01, providers__max_retries=1)
    with pytest.raises(ProviderError, match="cannot connect") as err:
        asyncio.run(providers.get_llm(settings).generate(MESSAGES))
    assert "ollama" in str(err.value) and "base URL" in str(err.value)
    providers.clear_cache()


def test_openai_batches_and_limits_concurrency(make):
    # Small vectors keep the fake server's JSON cheap; the batching logic is the same.
    server, emb = make(CASES[1], providers__concurrency=2, providers__openai__embedding_dim=4)
    texts = [f"text {i}" for i in range(2048 * 3 + 5)]
    server.default = lambda req: Reply(body=openai_reply(req).body, delay=0.2)
    vectors = asyncio.run(emb.embed(texts))
    sizes = sorted(len(r["body"]["input"]) for r in server.requests)
    assert sizes == [5, 2048, 2048, 2048]
    assert server.max_inflight == 2
    # Each batch's vectors land at its texts' positions (seed = index inside the batch).
    assert [v[0] for v in vectors[2046:2050]] == [2046.0, 2047.0, 0.0, 1.0]


def test_openai_dimensions_sent_only_when_chosen(make):
    server, emb = make(CASES[1], providers__openai__embedding_dim=256)
    assert emb.dimension == 256
    asyncio.run(emb.embed(["x"]))
    assert server.requests[0]["body"]["dimensions"] == 256


def test_wrong_dimension_from_vendor_is_caught(make):
    server, emb = make(CASES[7])  # ollama, declared 768
    server.script = [Reply(body={"model": "m", "embeddings": [[0.1, 0.2]]})]
    with pytest.raises(ProviderError, match="dimension 768"):
        asyncio.run(emb.embed(["x"]))


def test_voyage_query_uses_query_input_type(make):
    server, emb = make(CASES[5])
    vec = asyncio.run(emb.embed_query("where is the graph?"))
    assert len(vec) == 1024 and server.requests[0]["body"]["input_type"] == "query"


def test_json_repair_round_trip(make):
    server, llm = make(CASES[0])
    bad = openai_reply({"path": "/v1/chat/completions", "body": {"model": "m"}}).body
    bad["choices"][0]["message"]["content"] = '{"subject": "falkordb"}'  # score missing
    server.script = [Reply(body=bad)]
    assert asyncio.run(llm.generate_json(MESSAGES, Fact)).score == 3
    repair = server.requests[1]["body"]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"subject": "falkordb"}'}
    assert "score" in repair[-1]["content"] and repair[-1]["role"] == "user"


def test_json_in_prose_and_fences_is_accepted(make):
    server, llm = make(CASES[6])  # ollama
    reply = ollama_reply({"path": "/api/chat", "body": {"model": "llama3.1"}}).body
    reply["message"]["content"] = 'Sure!\n```json\n{"subject": "falkordb", "score": 3}\n```'
    server.script = [Reply(body=reply)]
    assert asyncio.run(llm.generate_json(MESSAGES, Fact)) == Fact(subject="falkordb", score=3)


def test_json_that_never_validates_is_a_provider_error(make):
    server, llm = make(CASES[4])  # anthropic
    reply = anthropic_reply({"body": {"model": "claude-3-5-haiku-latest", "tools": [{"name": "Fact"}]}}).body
    reply["content"][0]["input"] = {"subject": 5}
    server.script = [Reply(body=reply), Reply(body=reply)]
    with pytest.raises(ProviderError, match="does not match Fact"):
        asyncio.run(llm.generate_json(MESSAGES, Fact))
    assert len(server.requests) == 2


def test_strict_schema_refused_falls_back_to_plain_schema(make):
    server, llm = make(CASES[0])
    server.script = [Reply(400, {"error": {"message": "Invalid schema for response_format"}})]
    assert asyncio.run(llm.generate_json(MESSAGES, Fact)).subject == "falkordb"
    second = server.requests[1]["body"]["response_format"]["json_schema"]
    assert second["strict"] is False and "additionalProperties" not in second["schema"]


def test_garbage_messages_are_refused(make):
    from graphmem.errors import ValidationError

    server, llm = make(CASES[0])
    for bad in ([], [{"role": "wizard", "content": "x"}], [{"role": "user", "content": 3}], "hi"):
        with pytest.raises(ValidationError, match="messages"):
            asyncio.run(llm.generate(bad))
    server2, emb = make(CASES[1])
    for bad in ("one string", ["ok", None]):
        with pytest.raises(ValidationError, match="texts"):
            asyncio.run(emb.embed(bad))
    assert server.requests == [] and server2.requests == []


def test_persistent_5xx_ends_in_a_provider_error_naming_status_and_tries(make, caplog):
    import logging

    caplog.set_level(logging.DEBUG)  # even debug logs of httpx/httpcore must not show the key
    server, emb = make(CASES[5], providers__max_retries=2)  # voyage
    server.script = [Reply(502, {"detail": "bad gateway"})] * 3
    with pytest.raises(ProviderError) as err:
        asyncio.run(emb.embed(["x"]))
    msg = str(err.value)
    assert err.value.status == 502 and "voyage" in msg and "3 tries" in msg and "bad gateway" in msg
    assert len(server.requests) == 3
    assert KEY not in caplog.text and KEY not in msg


def test_retry_after_header_forms():
    import email.utils

    import httpx

    from graphmem.providers.http import retry_after_seconds

    assert retry_after_seconds(httpx.Headers({"retry-after": "7"})) == 7.0
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    date = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 15 <= retry_after_seconds(httpx.Headers({"retry-after": date})) <= 21
    assert retry_after_seconds(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_seconds(httpx.Headers({})) is None


def test_anthropic_turns_are_merged_and_start_with_user():
    from graphmem.providers.anthropic import split_messages

    system, turns = split_messages([
        {"role": "system", "content": "a"}, {"role": "assistant", "content": "b"},
        {"role": "assistant", "content": "c"}, {"role": "system", "content": "d"},
        {"role": "user", "content": "e"}, {"role": "user", "content": "f"}])
    assert system == "a\n\nd"
    assert turns == [{"role": "user", "content": "Continue."}, {"role": "assistant", "content": "b\n\nc"},
                     {"role": "user", "content": "e\n\nf"}]
