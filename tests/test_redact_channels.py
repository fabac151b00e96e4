"""No secret reaches a store, whichever way it comes in (issue 14 finding 5).

One sample of every kind goes through every channel (the Python API, the CLI as a subprocess,
the MCP server through its client) into every field that channel has, and every store is then
searched byte for byte for the raw secret: the files under the spec, every file under
GRAPHMEM_HOME (index.sqlite3 and its -wal, the search cache, the embedded FalkorDB's data) and
the consolidated summary.

The CLI has no write commands: what reaches the stores through it is what an agent wrote into the
files itself (the reference layout, session files), read by ``graphmem reindex``, ``graphmem
sessions --rebuild`` and ``graphmem consolidate``, and the text of ``graphmem search``.
MCP has no step tool and no turn metadata or role text (roles are an enum), so those fields are
covered through the API and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_mcp import _data, _session
from test_redact import CORES, SECRETS

from conftest import run_cli

from graphmem import Memory
from graphmem.errors import ValidationError
from graphmem.serve.mcp_server import build_server

# kind -> (sample, the part that must never be stored). Multi-line kinds also get a one-line
# spelling for the one-line fields (bullets, role, model).
SAMPLES: dict[str, tuple[str, str]] = {k: (SECRETS[k], CORES[k]) for k in SECRETS}
SAMPLES.update({
    "private_key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx1y2z3w4v5u6t7s8r9\n"
                    "-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEAx1y2z3w4v5u6t7s8r9"),
    "private_key_cut": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUA\n"
                        "QyNTUxOQAAACDx", "QyNTUxOQAAACDx"),
    "pgp_private_key": ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF8xKaEB"
                        "CAC7nK3vQ2ZzT0aS6f7bW9\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----",
                        "CAC7nK3vQ2ZzT0aS6f7bW9"),
    "aws_secret_key_bare": ("AWS_SECRET_ACCESS_KEY vJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ",
                            "vJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ"),
    "slack_app_token": ("xapp-1-A0123456789-1234567890123-fedcba9876543210fedcba",
                        "fedcba9876543210fedcba"),
    "env_token": ("TOKEN=ab12cd34ef56gh", "ab12cd34ef56gh"),
    "env_secret_quoted": ("export SECRET='xK9#mP2qL7vR'", "xK9#mP2qL7vR"),
})


def one_line(sample: str) -> str:
    return " ".join(sample.split("\n"))


def stores(spec_dir: Path, home: Path) -> bytes:
    """Every byte graphmem keeps: the project's files (spec memory, summaries) and the home."""
    project = spec_dir.parent.parent
    files = [p for root in (project, home) if root.exists() for p in root.rglob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


def leaks(blob: bytes, kinds=SAMPLES) -> list[str]:
    """The kinds whose raw secret is somewhere in ``blob`` (JSON-escaped spellings too)."""
    found = []
    for kind in kinds:
        core = SAMPLES[kind][1]
        spellings = {core, json.dumps(core)[1:-1], json.dumps(core, ensure_ascii=False)[1:-1]}
        if any(s.encode() in blob for s in spellings):
            found.append(kind)
    return found


def test_the_samples_would_be_found_if_stored(spec_dir: Path, isolated_env: Path, monkeypatch):
    """The probe itself: with redaction off, every sample is found in the stores."""
    monkeypatch.setenv("GRAPHMEM_REDACT", "false")
    with Memory(spec_dir) as m:
        for kind, (sample, _) in SAMPLES.items():
            m.append_gotcha(f"{kind}: {one_line(sample)}")
    assert leaks(stores(spec_dir, isolated_env)) == list(SAMPLES)


def test_api_every_kind_in_every_field(spec_dir: Path, isolated_env: Path):
    refused = []
    with Memory(spec_dir) as m:
        sid = m.start_session(model="claude", mode="test")
        for n, (kind, (sample, _)) in enumerate(SAMPLES.items(), 1):
            line = one_line(sample)
            m.append_gotcha(f"gotcha {kind}: {line}")
            m.append_pattern(f"pattern {kind}: {line}")
            m.save_session_insights(n, {
                "what_failed": [f"failed {kind}: {sample}"],
                "discoveries": {"files_understood": {f"src/{kind}.py": f"reads {sample}"},
                                "patterns_found": [sample], "gotchas_encountered": [sample]},
                f"extra_{kind}": {"note": sample, "nested": [sample]}})
            m.update_codebase_map({f"cfg/{kind}.env": f"holds {sample}"})
            m.record_turn(sid, "user", f"content {kind}: {sample}", model=line,
                          metadata={"note": sample, "list": [sample], sample[:40]: 1})
            try:
                m.record_turn(sid, line, "role field")
            except ValidationError as exc:  # a role is one line of at most 64 characters
                assert exc.field == "role" and len(line) > 64, exc
                refused.append(kind)
            m.record_step(sid, f"step {kind}", "failed", {"stderr": sample, "argv": [line]})
        m.set_session_summary(sid, "summary: " + " ".join(s for s, _ in SAMPLES.values()))
        m.end_session(sid)
        assert m.search(SAMPLES["openai_key"][0])  # a secret pasted as a query is redacted too
        m.consolidate()
        turns = m.get_session_history(sid)
    assert leaks(stores(spec_dir, isolated_env)) == []
    assert (spec_dir / "memory" / "memory_summary.md").exists()
    short = [k for k, (s, _) in SAMPLES.items() if len(one_line(s)) <= 64]
    assert [t["role"] for t in turns if t["content"] == "role field"] == \
        [t["role"] for t in turns if t["content"] == "role field" and "[REDACTED:" in t["role"]]
    assert len([t for t in turns if t["content"] == "role field"]) == len(short)
    assert set(refused) == set(SAMPLES) - set(short)


def test_cli_reads_files_an_agent_wrote_and_stores_no_secret(spec_dir: Path, isolated_env: Path):
    """The reference layout and session files written raw by someone else, then the CLI."""
    mem = spec_dir / "memory"
    (mem / "session_insights").mkdir(parents=True)
    lines = [f"- {k}: {one_line(s)}" for k, (s, _) in SAMPLES.items()]
    (mem / "gotchas.md").write_text("# Gotchas and Pitfalls\n\n" + "\n".join(lines) + "\n")
    (mem / "patterns.md").write_text("# Code Patterns\n\n" + "\n".join(lines) + "\n")
    (mem / "codebase_map.json").write_text(json.dumps(
        {f"cfg/{k}.env": f"holds {s}" for k, (s, _) in SAMPLES.items()}))
    for n, (k, (s, _)) in enumerate(SAMPLES.items(), 1):
        (mem / "session_insights" / f"session_{n:03d}.json").write_text(json.dumps({
            "session_number": n, "what_failed": [f"failed {k}: {s}"],
            "discoveries": {"gotchas_encountered": [s], "patterns_found": [s],
                            "files_understood": {f"src/{k}.py": s}}}))
    # a session file as an older graphmem (or a hand edit) left it, with raw secrets in every field
    with Memory(spec_dir) as m:
        sid = m.start_session()
    folder = mem / "episodes" / sid
    samples = [s for s, _ in SAMPLES.values()]
    (folder / "turns.jsonl").write_text("".join(json.dumps(
        {"index": i, "id": f"trn-{i:016x}", "at": "2026-01-01T00:00:00+00:00", "role": one_line(s)[:64],
         "content": s, "model": one_line(s), "tokens": 1, "metadata": {"note": s}}) + "\n"
        for i, s in enumerate(samples)))
    (folder / "steps.jsonl").write_text("".join(json.dumps(
        {"index": i, "id": f"stp-{i:016x}", "at": "2026-01-01T00:00:00+00:00", "name": "run", "status": "failed",
         "payload": {"stderr": s}}) + "\n" for i, s in enumerate(samples)))
    meta = json.loads((folder / "session.json").read_text())
    meta.update(ended_at="2026-01-01T01:00:00+00:00", status="ended", summary=" ".join(samples))
    (folder / "session.json").write_text(json.dumps(meta))
    before = {p: p.read_bytes() for p in mem.rglob("*") if p.is_file()}
    project = spec_dir.parent.parent
    done = run_cli("doctor", "--fix", "--spec-dir", str(spec_dir))  # repairs from the files too
    assert "Traceback" not in done.stderr, done.stderr
    home = b"".join(p.read_bytes() for p in isolated_env.rglob("*") if p.is_file())
    assert b"[REDACTED:jwt]" in home and leaks(home) == []
    for args in (["reindex", "--project-dir", str(project)],
                 ["sessions", "--spec-dir", str(spec_dir), "--rebuild"],
                 ["search", SAMPLES["jwt"][0], "--project-dir", str(project)],
                 ["consolidate", "--spec-dir", str(spec_dir)]):
        done = run_cli(*args)
        assert done.returncode == 0, (args, done.stderr)
    # the agent's files are its own and stay as written; nothing graphmem derived holds a secret
    assert {p: p.read_bytes() for p in before} == before
    derived = stores(spec_dir, isolated_env) + (mem / "memory_summary.md").read_bytes()
    derived_only = derived
    for content in before.values():
        derived_only = derived_only.replace(content, b"")
    assert leaks(derived_only) == []
    assert b"[REDACTED:jwt]" in (mem / "memory_summary.md").read_bytes()


def test_mcp_every_kind_in_every_field(spec_dir: Path, isolated_env: Path):
    async def steps(c):
        sid = None
        for n, (kind, (sample, _)) in enumerate(SAMPLES.items(), 1):
            line = one_line(sample)
            _data(await c.call_tool("add_gotcha", {"text": f"gotcha {kind}: {line}"}))
            _data(await c.call_tool("add_pattern", {"text": f"pattern {kind}: {line}"}))
            _data(await c.call_tool("save_session_insights", {"session_num": n, "insights": {
                "what_worked": [sample], "discoveries": {"files_understood": {f"a/{kind}.py": sample},
                                                        "gotchas_encountered": [sample]},
                f"extra_{kind}": [sample]}}))
            _data(await c.call_tool("update_codebase_map", {"discoveries": {f"b/{kind}.py": sample}}))
            args = {"role": "user", "content": sample, "model": line}
            sid = _data(await c.call_tool("record_turn", {**args, **({"session_id": sid} if sid else {})})
                        )["session_id"]
            _data(await c.call_tool("search_memory", {"query": line}))
            await c.call_tool("get_context", {"task": line})
        _data(await c.call_tool("end_session", {"session_id": sid}))
    _session(build_server(spec_dir), steps)
    assert leaks(stores(spec_dir, isolated_env)) == []


def test_graph_holds_no_secret(graph_on, spec_dir: Path, isolated_env: Path):
    """The embedded FalkorDB's data (its append-only file) after every field, and a reindex."""
    from graphmem import Settings
    from graphmem.graph import server

    every = " ".join(one_line(s) for s, _ in SAMPLES.values())
    with Memory(spec_dir) as m:
        assert m.append_gotcha(f"gotcha {every}").graph == "written"
        m.append_pattern(f"pattern {every}")
        m.save_session_insights(1, {"what_failed": [every], "extra": {"x": every},
                                    "discoveries": {"files_understood": {"a.py": every}}})
        m.update_codebase_map({"b.py": every})
        sid = m.start_session(model=every[:200])
        m.record_turn(sid, "user", every, model=every[:200], metadata={"n": every})
        m.record_step(sid, "run", "failed", {"stderr": every})
        m.search(every[:500])
        m.reindex()
    st = server.EmbeddedServer(Settings.load())
    data = st.data_dir
    assert st.stop()
    blob = b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())
    assert b"REDACTED" in blob  # the graph's data was read, and it holds the redacted text
    assert leaks(blob) == []
    assert leaks(stores(spec_dir, isolated_env)) == []
