"""Review state travels (issue 36): ``graphmem export`` carries review's steps and ``graphmem
import`` replays them, so what waits for a person, what was rejected and what is only proposed
stay so in another project. The CLI as a subprocess on real files and index; the LLM that
proposes a supersession behind a loopback server in OpenAI's documented shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory
from test_consolidate import FakeOpenAI
from test_review import KEY, NOTES, held, repo, retry_reversal_judge

OLD = "`refund` calls are retried three times by the zebra gateway client"
NEW = "`refund` is never retried any more: the zebra gateway deduplicates"
BUMP = ("Bump requests to 2.31.0 in the zebra lock file", "Bump requests to 2.32.3 in the zebra lock file")
FILE = ("src/pay.py", "the zebra refund client")
Q = "zebra importer gateway requests refund lock file client"


def cli(*args: str, env: dict | None = None) -> dict:
    out = run_cli(*args, "--json", env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def texts(root: Path, *extra: str) -> set[str]:
    """The texts ``graphmem search`` returns for ``Q``."""
    return {h["text"] for h in cli("search", Q, "--project-dir", str(root), "--limit", "30", *extra)}


def waiting(root: Path) -> dict[str, set]:
    """What ``graphmem review`` lists, by text (ids differ between projects)."""
    r = cli("review", "--project-dir", str(root))
    return {"pending": {x["text"] for x in r["pending"]},
            "proposed": {(x["text"], x["proposes"], x["by_text"]) for x in r["proposed"]}}


def log_bytes(root: Path) -> bytes:
    return (root / ".graphmem" / "memory" / "validity.jsonl").read_bytes()


def memory_files(root: Path) -> dict[str, bytes]:
    mem = root / ".graphmem" / "memory"
    return {str(p.relative_to(mem)): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts}


def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A project in hold mode: three memories the hooks wrote (one accepted, one rejected, one
    pending), a supersession an LLM judged (proposed), and a held session's new value of a fact
    (pending, proposing the older one possibly superseded) with a file's purpose (pending)."""
    root = repo(tmp_path / "a")
    ids = held(root)
    where = ("--project-dir", str(root))
    cli("review", "accept", ids["a"], *where)
    cli("review", "reject", ids["b"], "--reason", "blanks are zero here", *where)

    server = FakeOpenAI(retry_reversal_judge)
    with monkeypatch.context() as env:
        for k, v in {"GRAPHMEM_LLM_PROVIDER": "openai", "OPENAI_API_KEY": KEY,
                     "OPENAI_BASE_URL": server.url, "GRAPHMEM_REVIEW": "hold"}.items():
            env.setenv(k, v)
        try:
            with Memory(None, root) as mem:
                mem.append_gotcha(OLD)
                mem.append_gotcha(NEW)
        finally:
            server.close()
    with Memory(None, root) as mem:
        mem.save_session_insights(2, {"discoveries": {"gotchas_encountered": [BUMP[0]]}})
        mem.save_session_insights(3, {"discoveries": {"gotchas_encountered": [BUMP[1]],
                                                      "files_understood": dict([FILE])}},
                                  hold=True)
    return root, ids


def export(root: Path, out: Path) -> Path:
    p = run_cli("export", "--output", str(out), "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    return out


def test_a_hold_projects_review_state_arrives_as_it_was(tmp_path, monkeypatch):
    a, ids = source(tmp_path, monkeypatch)
    want = waiting(a)
    assert want["pending"] == {NOTES["c"], BUMP[1], ": ".join(FILE)}
    assert want["proposed"] == {(OLD, "superseded", NEW), (BUMP[0], "possibly superseded", BUMP[1])}
    shown = texts(a)
    assert NOTES["a"] in shown and not {NOTES["b"], NOTES["c"], BUMP[1]} & shown
    out = export(a, tmp_path / "a.jsonl")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["version"] == 4
    steps = [x for x in lines if x["type"] == "validity" and "act" in x]
    assert {x["action"] for x in steps} == {"hold", "accept", "reject", "propose"}
    rejected = next(x for x in steps if x["action"] == "reject")
    assert rejected["who"] == "ana@example.invalid" and rejected["was"]["state"] == "pending"

    b = repo(tmp_path / "b")
    report = cli("import", str(out), "--project-dir", str(b))
    assert report["review"] == {"pending": 3, "proposed": 2, "rejected": 1, "kept_here": 0}
    assert waiting(b) == want  # the same memories wait, the same proposals with their reasons
    got = texts(b)
    assert NOTES["a"] in got and OLD in got and NEW in got and BUMP[0] in got
    assert not {NOTES["b"], NOTES["c"], BUMP[1], ": ".join(FILE)} & got  # stay hidden
    marked = {h["text"]: h["metadata"].get("validity", {}).get("state")
              for h in cli("search", Q, "--project-dir", str(b), "--include-history", "--limit", "30")}
    assert marked[NOTES["b"]] == "rejected" and marked[NOTES["c"]] == "pending"
    assert marked[OLD] == "proposed" and marked[NOTES["a"]] is None
    section = run_cli("agents-md", "--project-dir", str(b)).stdout
    assert "zebra importer drops rows" in section and "currency table" not in section
    assert "latin-1" not in section
    context = run_cli("context", "zebra importer CSV latin-1", "--project-dir", str(b)).stdout
    assert NOTES["c"] not in context and "left out" in context
    assert run_cli("reindex", "--project-dir", str(b)).returncode == 0
    assert texts(b) == got  # the log is the truth: a rebuilt index answers the same
    # deciding in the target works on the imported steps: accept the LLM's proposal
    prop = next(x for x in cli("review", "--project-dir", str(b))["proposed"] if x["text"] == OLD)
    cli("review", "accept", prop["id"], "--project-dir", str(b))
    assert OLD not in texts(b)
    # and reject the other: the memory it would have marked gets back the state it had before
    prop = next(x for x in cli("review", "--project-dir", str(b))["proposed"] if x["text"] == BUMP[0])
    cli("review", "reject", prop["id"], "--project-dir", str(b))
    assert cli("review", "--project-dir", str(b))["proposed"] == []
    marked = {h["text"]: h["metadata"].get("validity", {}).get("state")
              for h in cli("search", Q, "--project-dir", str(b), "--include-history", "--limit", "30")}
    assert BUMP[0] in texts(b) and marked[BUMP[0]] is None and marked[OLD] == "superseded"


def test_importing_the_same_export_twice_changes_no_byte(tmp_path, monkeypatch):
    a, _ = source(tmp_path, monkeypatch)
    out = export(a, tmp_path / "a.jsonl")
    b = repo(tmp_path / "b")
    first = cli("import", str(out), "--project-dir", str(b))
    assert first["added"]["validity"] > 0
    before, log = memory_files(b), log_bytes(b)
    again = cli("import", str(out), "--project-dir", str(b))
    assert again["added"] == {"gotcha": 0, "pattern": 0, "file": 0, "session": 0, "episode": 0,
                              "validity": 0}
    assert log_bytes(b) == log and memory_files(b) == before
    # and the target's own export, imported into a third project, gives the same state again
    c = repo(tmp_path / "c")
    cli("import", str(export(b, tmp_path / "b.jsonl")), "--project-dir", str(c))
    assert waiting(c) == waiting(a) and texts(c) == texts(a)


def test_a_step_made_here_is_kept_and_a_newer_step_there_is_taken(tmp_path, monkeypatch):
    a, ids = source(tmp_path, monkeypatch)
    b = repo(tmp_path / "b")
    cli("import", str(export(a, tmp_path / "1.jsonl")), "--project-dir", str(b))
    here = {x["text"]: x["id"] for x in cli("review", "--project-dir", str(b))["pending"]}
    cli("review", "reject", here[NOTES["c"]], "--reason", "not here", "--project-dir", str(b))
    # there: c accepted, and the held value update too
    cli("review", "accept", ids["c"], "--project-dir", str(a))
    bump = next(x["id"] for x in cli("review", "--project-dir", str(a))["pending"]
                if x["text"] == BUMP[1])
    cli("review", "accept", bump, "--project-dir", str(a))
    log = log_bytes(b)
    r = cli("import", str(export(a, tmp_path / "2.jsonl")), "--project-dir", str(b))
    kept = [s for s in r["skipped"] if s["why"].startswith("kept this project's own state")]
    assert len(kept) == 1 and here[NOTES["c"]] in kept[0]["why"] and "rejected" in kept[0]["why"]
    assert r["review"]["kept_here"] == 1
    assert log_bytes(b).startswith(log)  # appended only
    got = texts(b)
    assert NOTES["c"] not in got  # rejected here stays rejected
    assert BUMP[1] in got  # accepted there, undecided here: taken
    assert waiting(b) == waiting(a) == {"pending": {": ".join(FILE)},
                                        "proposed": waiting(a)["proposed"]}


def test_garbage_review_lines_are_reported_by_line_and_field_and_not_applied(tmp_path):
    a = repo(tmp_path / "a")
    ids = held(a)
    cli("review", "reject", ids["b"], "--project-dir", str(a))
    out = export(a, tmp_path / "a.jsonl")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    at = {x["item"]: n for n, x in enumerate(lines) if x["type"] == "validity" and
          x["action"] == "hold"}
    bad_action = at[ids["a"]]
    lines[bad_action]["action"] = "approve"
    no_item = dict(lines[at[ids["c"]]], act="20261206T000000-00000000")
    del no_item["item"]
    lines.append(no_item)
    reject = next(n for n, x in enumerate(lines) if x.get("action") == "reject")
    lines[reject]["was"] = "pending"  # a string where a line's event belongs
    lines[at[ids["c"]]]["note"] = "x" * 5000  # a field graphmem does not write: not copied
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    b = repo(tmp_path / "b")
    r = cli("import", str(out), "--project-dir", str(b))
    why = {s["where"].rsplit("/", 1)[-1]: s["why"] for s in r["skipped"]}
    assert "'action' must be one of hold, propose, accept, reject, undo, got 'approve'" in \
        why[f"{out.name} line {bad_action + 1}"]
    assert "'item' is missing" in why[f"{out.name} line {len(lines)}"]
    assert "'was' must be dict or null, got str" in why[f"{out.name} line {reject + 1}"]
    # b's hold line was fine, but its reject was not: none of its steps (nothing half-applied)
    hold_b = f"{out.name} line {at[ids['b']] + 1}"
    assert "none of this memory's steps" in why[hold_b]
    assert r["added"]["session"] == 1  # the memories themselves came, with their session
    with Memory(None, b) as mem:
        assert set(NOTES.values()) <= {i.text for i in mem.items()}
    log = [json.loads(x) for x in log_bytes(b).decode().splitlines()]
    assert len(log) == 1 and log[0]["action"] == "hold"  # only c, whose lines are all fine
    assert "note" not in log[0]
    assert {x["text"] for x in cli("review", "--project-dir", str(b))["pending"]} == {NOTES["c"]}
    p = run_cli("import", str(out), "--project-dir", str(b))  # the text report names them too
    assert p.returncode == 0 and f"{out.name} line {bad_action + 1}" in p.stdout


def test_undo_after_an_import_takes_back_the_last_imported_step(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_AUTHOR", "bo@example.invalid")
    a = repo(tmp_path / "a")
    ids = held(a)
    cli("review", "accept", ids["a"], "--project-dir", str(a))
    cli("review", "reject", ids["b"], "--project-dir", str(a))
    b = repo(tmp_path / "b")
    cli("import", str(export(a, tmp_path / "a.jsonl")), "--project-dir", str(b))
    assert waiting(b)["pending"] == {NOTES["c"]}
    step = cli("review", "undo", "--project-dir", str(b))  # the reject made there
    assert step["who"] == "bo@example.invalid" and [x["state"] for x in step["lines"]] == ["pending"]
    assert waiting(b)["pending"] == {NOTES["b"], NOTES["c"]}
    cli("review", "undo", "--project-dir", str(b))  # then the accept
    assert waiting(b)["pending"] == set(NOTES.values())
    nothing = run_cli("review", "undo", "--project-dir", str(b))
    assert nothing.returncode == 4 and "nothing to undo" in nothing.stderr
    # an undo made there travels too: the undone step is not undoable here again
    cli("review", "undo", "--project-dir", str(a))
    c = repo(tmp_path / "c")
    cli("import", str(export(a, tmp_path / "a2.jsonl")), "--project-dir", str(c))
    assert waiting(c)["pending"] == {NOTES["b"], NOTES["c"]}
    step = cli("review", "undo", "--project-dir", str(c))
    assert [x["state"] for x in step["lines"]] == ["pending"]  # the accept of a, not the reject
    assert waiting(c)["pending"] == set(NOTES.values())
