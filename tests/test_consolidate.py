"""Batch consolidation into memory_summary.md: dedupe, caps, active sessions, citations, locking, LLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from graphmem import Memory, ValidationError

LINE = re.compile(r"^- .+ \(sessions: [^()]+\)$")


def summary(spec: Path) -> str:
    return (spec / "memory" / "memory_summary.md").read_text()


def bullets(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("- ")]


def age(spec: Path, seconds_ago: dict[int, float]) -> None:
    """Give insight files distinct write times (what 'most recent' is measured by)."""
    now = time.time()
    for num, ago in seconds_ago.items():
        p = spec / "memory" / "session_insights" / f"session_{num:03d}.json"
        os.utime(p, (now - ago, now - ago))


def test_dedupe_exact_and_near_with_citations(spec_dir: Path):
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {
            "discoveries": {"gotchas_encountered": [
                "Run the migrations before starting the API server",
                "The FalkorDB socket path must be shorter than 100 characters"]},
            "what_worked": ["Retrying the upload worked"],
            "what_failed": ["Retrying the upload failed"]})
        m.save_session_insights(2, {
            "discoveries": {"gotchas_encountered": [
                "  run the migrations   before starting the API server. ",  # exact after normalising
                "Always run migrations before you start the API server",     # near duplicate
                "Never cache embeddings between runs"]}})
        m.save_session_insights(3, {"discoveries": {"gotchas_encountered": [
            "Cache embeddings between runs"]}})  # the negation keeps these two apart
        age(spec_dir, {1: 300, 2: 200, 3: 100})
        r = m.consolidate()
    assert r["sessions_scanned"] == 3 and r["sessions_with_facts"] == 3
    assert r["duplicates_dropped"] == 1 and r["near_duplicates_dropped"] == 1
    assert r["candidate_facts"] == 7 and r["facts_written"] == 6
    text = summary(spec_dir)
    assert all(LINE.match(b) for b in bullets(text)), text
    migrations = [b for b in bullets(text) if "migrations" in b.lower()]
    assert len(migrations) == 1 and "session 1" in migrations[0] and "session 2" in migrations[0]
    # grouped, most useful first: pitfalls before failures before successes; most-cited first
    assert text.index("## Gotchas") < text.index("## What failed") < text.index("## What worked")
    gotchas = text.split("## Gotchas and pitfalls")[1].split("##")[0]
    assert bullets(gotchas)[0] == migrations[0]
    assert "Retrying the upload worked" in text and "Retrying the upload failed" in text
    assert "Never cache embeddings" in text and "- Cache embeddings between runs" in text


TOOLS = ("pytest docker alembic redis nginx celery kafka webpack babel eslint mypy poetry terraform "
         "ansible helm grafana sentry stripe boto3 numpy pandas flask django fastapi uvicorn gunicorn "
         "sqlite postgres mongodb elasticsearch rabbitmq graphql protobuf grpc jwt oauth cors csrf s3 "
         "lambda").split()
NEEDS = ("a warm cache|an explicit timeout|the UTC timezone|a pinned version|a retry budget|"
         "an absolute path|the staging secrets|a clean checkout|a lock file|the feature flag").split("|")
# 40 facts that no embedding calls near-duplicates (max cosine 0.89 with bge-small)
PITFALLS = [f"{t} needs {NEEDS[i % len(NEEDS)]} in this repo" for i, t in enumerate(TOOLS)]


def test_per_session_cap_active_sessions_and_session_limit(spec_dir: Path):
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {"discoveries": {"gotchas_encountered": PITFALLS}})
        m.save_session_insights(2, {"what_worked": ["Old session lesson"]})
        ended = m.start_session()
        m.set_session_summary(ended, "- Freeze the clock in scheduler tests\n- Keep CLI start-up under 400 ms")
        m.end_session(ended)
        live = m.start_session()
        m.set_session_summary(live, "Live session draft that must not appear")
        age(spec_dir, {1: 50, 2: 5000})
        r = m.consolidate()
        assert r["active_sessions_skipped"] == 1 and r["sessions_scanned"] == 4
        text = summary(spec_dir)
        assert len([b for b in bullets(text) if "in this repo" in b]) == 32
        assert "Live session draft" not in text
        assert f"- Keep CLI start-up under 400 ms (sessions: {ended})" in text
        assert "Old session lesson" in text
        r2 = m.consolidate(sessions=3)  # the oldest insight file falls outside the window
        assert r2["sessions_scanned"] == 3 and "Old session lesson" not in summary(spec_dir)


def test_project_scope_cli_and_garbage(spec_dir: Path):
    from conftest import run_cli

    other = spec_dir.parent / "002-other"
    other.mkdir()
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {"recommendations_for_next_session": ["Pin the FalkorDB version"]})
    with Memory(other) as m:
        m.save_session_insights(1, {"recommendations_for_next_session": ["Pin the FalkorDB version"]})
        m.save_session_insights(2, {"what_failed": ["Docker on CI"]})
        (other / "memory" / "session_insights" / "session_003.json").write_text("{torn")
        for bad, field in ((dict(sessions=0), "sessions"), (dict(concurrency="8"), "concurrency"),
                           (dict(project="yes"), "project"), (dict(sessions=True), "sessions")):
            with pytest.raises(ValidationError) as err:
                m.consolidate(**bad)
            assert err.value.field == field
    out = run_cli("consolidate", "--project", "--spec-dir", str(spec_dir), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    project = spec_dir.parent.parent.parent
    path = Path(report["path"])
    assert path == (project / ".graphmem" / "memory_summary.md").resolve() or \
        path.parent.name == ".graphmem"
    text = path.read_text()
    assert "- Pin the FalkorDB version (sessions: " in text
    pin = [b for b in bullets(text) if "Pin the FalkorDB" in b][0]
    assert "001-feature/session 1" in pin and "002-other/session 1" in pin
    assert "(sessions: 002-other/session 2)" in text
    assert report["sessions_scanned"] == 4 and report["sessions_with_facts"] == 3
    bad = run_cli("consolidate", "--spec-dir", str(spec_dir), "--sessions", "0")
    assert bad.returncode == 2 and "sessions" in bad.stderr


HOLDER = textwrap.dedent("""
    import sys, time, pathlib
    from graphmem.files.lock import folder_lock
    home, flag = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    with folder_lock(home, name="consolidate.lock"):
        print("held", flush=True)
        while not flag.exists():
            time.sleep(0.05)
""")


def test_consolidations_never_interleave(spec_dir: Path, isolated_env: Path, tmp_path: Path,
                                        monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")  # cheaper to load, thrice
    with Memory(spec_dir) as m:
        for n in range(1, 6):
            m.save_session_insights(n, {"what_worked": [f"Lesson {n}"]})
    flag = tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(isolated_env), str(flag)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waiting = [subprocess.Popen([sys.executable, "-m", "graphmem.cli", "consolidate", "--spec-dir",
                                 str(spec_dir), "--json", "--sessions", str(n)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for n in (2, 5)]
    time.sleep(3)  # long enough for both to start and reach the lock
    assert all(p.poll() is None for p in waiting)  # both wait behind the held lock
    assert not (spec_dir / "memory" / "memory_summary.md").exists()
    flag.touch()
    holder.wait(timeout=30)
    reports = []
    for p in waiting:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["facts_written"] for r in reports) == [2, 5]
    text = summary(spec_dir)  # whole: one of the two runs, never a mix
    assert len(bullets(text)) in (2, 5) and text.count("# Memory summary") == 1


class FakeOpenAI:
    """A loopback server answering /v1/chat/completions in OpenAI's documented shape (``answer``
    returns the reply's content, or ``(status, error body)`` to refuse the request)."""

    def __init__(self, answer):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                       "body": body})
                content, status = answer(body), 200
                if isinstance(content, tuple):  # (status, error body): a refused request
                    status, payload = content
                else:
                    payload = {"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": content}}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 10,
                                         "total_tokens": 20}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("good", [True, False])
def test_llm_merges_facts_or_falls_back(spec_dir: Path, monkeypatch, good: bool):
    def answer(body):
        facts = body["messages"][-1]["content"]
        numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", facts, re.M)]
        if not good:
            return json.dumps({"groups": [{"title": "Pitfalls", "facts": [
                {"text": "Made up", "sources": [99]}]}]})
        return json.dumps({"groups": [{"title": "Database pitfalls", "facts": [
            {"text": "Run migrations before the API starts", "sources": numbers[:2]}]},
            {"title": "Other", "facts": [{"text": "Everything else", "sources": numbers[2:]}]}]})

    server = FakeOpenAI(answer)
    monkeypatch.setenv("GRAPHMEM_LLM_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-consolidate-0000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    try:
        with Memory(spec_dir) as m:
            m.save_session_insights(1, {"discoveries": {"gotchas_encountered": [
                "Run the migrations first", "Start the API after migrating"]}})
            m.save_session_insights(2, {"what_worked": ["Small commits"]})
            r = m.consolidate()
    finally:
        server.close()
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test-consolidate-0000000000"
    assert req["body"]["response_format"]["type"] == "json_schema"
    assert "Run the migrations first" in req["body"]["messages"][-1]["content"]
    text = summary(spec_dir)
    assert all(LINE.match(b) for b in bullets(text)), text
    if good:
        assert r["mode"] == "llm" and r["facts_written"] == 2
        assert "## Database pitfalls" in text
        assert "- Run migrations before the API starts (sessions: session 1)" in text
    else:
        assert r["mode"] == "deterministic" and "LLM merge failed" in r["detail"]
        assert "Made up" not in text and r["facts_written"] == 3
