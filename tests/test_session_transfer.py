"""Sessions travel (issue 36): ``graphmem export`` carries the session files themselves and
``graphmem import`` recreates them in the target's own layout, so what each session did, what
worked, what failed and what it learned about the code arrives, with its review state; never over
a session of the target. The CLI as a subprocess on real files and a real index."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from test_code_freshness import project

SESSIONS = {
    1: {"subtasks_completed": ["subtask-1-parse"],
        "discoveries": {"files_understood": {"src/ledger.py": "the quokka ledger writer"},
                        "patterns_found": [], "gotchas_encountered": []},
        "what_worked": ["Streaming the quokka CSV rows kept memory flat"],
        "what_failed": ["Pandas read_csv choked on the quokka export's BOM"]},
    2: {"subtasks_completed": ["subtask-2-totals"],
        "discoveries": {"files_understood": {"src/totals.py": "sums the quokka ledger per day"},
                        "patterns_found": [], "gotchas_encountered": []},
        "what_worked": ["Decimal arithmetic made the quokka totals match the bank"],
        "what_failed": ["Float sums drifted by a cent on the quokka month-end report"],
        "recommendations_for_next_session": ["Check the quokka timezone before summing"]},
    3: {"subtasks_completed": ["subtask-3-report"],
        "discoveries": {"files_understood": {"src/report.py": "renders the quokka PDF report"},
                        "patterns_found": [], "gotchas_encountered": []},
        "what_worked": ["Rendering the quokka report with weasyprint"],
        "what_failed": ["reportlab could not embed the quokka font"]},
}
Q = "quokka ledger totals report CSV"


def cli(*args: str) -> dict:
    out = run_cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def session_files(spec: Path) -> dict[str, bytes]:
    folder = spec / "memory" / "session_insights"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("session_*.json"))} \
        if folder.is_dir() else {}


def memory_files(root: Path) -> dict[str, bytes]:
    mem = root / ".graphmem" / "memory"
    return {str(p.relative_to(mem)): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts}


def hits(root: Path, query: str = Q, *extra: str) -> dict[str, dict]:
    return {h["text"]: h for h in cli("search", query, "--project-dir", str(root), "--limit", "40",
                                      *extra)}


def source(tmp: Path) -> tuple[Path, Path]:
    """A project with three sessions and a gotcha; one session learning retired, a fourth
    session held for review -> (project, its export)."""
    root, _ = project(tmp / "a", {"src/ledger.py": "x = 1\n"})
    with Memory(None, root) as m:
        m.append_gotcha("The quokka bank API rate-limits at 10 requests a second.")
        for n, insights in SESSIONS.items():
            m.save_session_insights(n, insights)
        gone = next(i.id for i in m.items() if i.text == SESSIONS[3]["what_failed"][0])
        m.retire(gone, "reportlab embeds it since 4.1")
        m.save_session_insights(4, {"what_worked": ["Caching the quokka FX rates per day"]},
                                hold=True)
    out = tmp / "a.jsonl"
    p = run_cli("export", "--output", str(out), "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    return root, out


def test_sessions_arrive_searchable_with_their_number_and_review_state(tmp_path):
    a, out = source(tmp_path)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["version"] == 4
    assert [x["session"] for x in lines if x["type"] == "session"] == [1, 2, 3, 4]
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    r = cli("import", str(out), "--project-dir", str(b))
    assert r["added"]["session"] == 4 and r["took"]["session"] == 4 and r["added"]["gotcha"] == 1
    assert not [s for s in r["skipped"] if "session" in s["why"]], r["skipped"]
    # the target's readers read them as their own: the same names (the source's writer tag)
    assert set(session_files(b / ".graphmem")) == set(session_files(a / ".graphmem"))
    got = hits(b)
    worked = got[SESSIONS[2]["what_worked"][0]]
    assert worked["session"] == "2" and worked["kind"] == "insight"
    assert worked["metadata"]["field"] == "what_worked"
    assert got["src/totals.py: sums the quokka ledger per day"]["kind"] == "file"
    assert got[SESSIONS[1]["what_failed"][0]]["session"] == "1"
    assert "subtask-3-report" in got
    # the retired learning stays retired, the held session stays held
    assert SESSIONS[3]["what_failed"][0] not in got
    assert "Caching the quokka FX rates per day" not in got
    history = hits(b, Q, "--include-history")
    assert history[SESSIONS[3]["what_failed"][0]]["metadata"]["validity"]["state"] == "retired"
    pending = cli("review", "--project-dir", str(b))["pending"]
    assert [x["text"] for x in pending] == ["Caching the quokka FX rates per day"]
    context = run_cli("context", "quokka totals decimal arithmetic", "--project-dir", str(b))
    assert context.returncode == 0, context.stderr
    assert SESSIONS[2]["what_worked"][0] in context.stdout and "session 2" in context.stdout


def test_importing_twice_or_back_where_it_came_from_adds_nothing(tmp_path):
    a, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    cli("import", str(out), "--project-dir", str(b))
    before = memory_files(b)
    again = cli("import", str(out), "--project-dir", str(b))
    assert again["added"] == {"gotcha": 0, "pattern": 0, "file": 0, "session": 0, "episode": 0,
                              "validity": 0}
    assert {s["new"] for s in again["sessions"]} == {False}
    assert memory_files(b) == before  # not a byte changed
    back = tmp_path / "b.jsonl"
    assert run_cli("export", "--output", str(back), "--project-dir", str(b)).returncode == 0
    was = memory_files(a)
    r = cli("import", str(back), "--project-dir", str(a))
    assert r["added"] == {"gotcha": 0, "pattern": 0, "file": 0, "session": 0, "episode": 0,
                          "validity": 0}
    assert memory_files(a) == was


def test_a_target_with_sessions_of_its_own_keeps_them_and_gets_the_others(tmp_path):
    _, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    own = {n: {"what_worked": [f"Own wombat lesson number {w}"]}
           for n, w in ((1, "one"), (2, "two"), (3, "three"))}
    with Memory(None, b) as m:
        for n, insights in own.items():
            m.save_session_insights(n, insights)
    mine = session_files(b / ".graphmem")
    assert len(mine) == 3
    r = cli("import", str(out), "--project-dir", str(b))
    assert r["added"]["session"] == 4
    now = session_files(b / ".graphmem")
    assert len(now) == 7 and {k: now[k] for k in mine} == mine  # nothing overwritten
    texts = set(hits(b, "wombat lesson quokka decimal arithmetic"))
    assert {"Own wombat lesson number two", SESSIONS[2]["what_worked"][0]} <= texts
    # a spec folder numbers its sessions alone: the imported ones take the next free numbers
    spec = tmp_path / "b" / "proj" / "specs" / "001-x"
    spec.mkdir(parents=True)
    with Memory(spec, b) as m:
        m.save_session_insights(1, own[1])
        m.save_session_insights(2, own[2])
    r = cli("import", str(out), "--project-dir", str(b), "--spec-dir", str(spec))
    assert [s["to"] for s in r["sessions"]] == [f"session_00{n}.json" for n in (3, 4, 5, 6)]
    files = session_files(spec)
    assert sorted(files) == [f"session_00{n}.json" for n in range(1, 7)]
    assert json.loads(files["session_004.json"])["session_number"] == 4
    assert json.loads(files["session_004.json"])["what_worked"] == SESSIONS[2]["what_worked"]
    found = {h["text"]: h for h in cli("search", "quokka decimal totals bank", "--project-dir",
                                       str(b), "--spec-dir", str(spec), "--limit", "20")}
    assert found[SESSIONS[2]["what_worked"][0]]["session"] == "4"
    again = cli("import", str(out), "--project-dir", str(b), "--spec-dir", str(spec))
    assert again["added"]["session"] == 0 and session_files(spec) == files


def test_a_garbage_session_line_is_refused_naming_line_and_field(tmp_path):
    _, out = source(tmp_path)
    lines = out.read_text().splitlines()
    at = next(n for n, x in enumerate(lines) if json.loads(x)["type"] == "session")
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    cases = [({"session": "two"}, "'session' must be an integer, got str"),
             ({"session": 0}, "'session' must be 1 to 999999, got 0"),
             ({"data": ["a list"]}, "'data' must be dict, got list"),
             ({"source": 7}, "'source' must be str, got int"),
             ({"source": "memory/notes.json"}, "'source' must end in session_001.json"),
             ({"data": {"session_number": True}}, "'data.session_number' must be an integer"),
             ({"data": {"what_worked": ["\ud800 half a character"]}}, "'data.what_worked[0]'"),
             ({"data": {"deep": json.loads("[" * 150 + "]" * 150)}}, "nests deeper than 100"),
             ('{"type": "session", "data": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deep")]
    for change, why in cases:
        bad = list(lines)
        bad[at] = change if isinstance(change, str) else json.dumps({**json.loads(lines[at]),
                                                                     **change})
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join(bad) + "\n")
        p = run_cli("import", str(path), "--project-dir", str(b))
        assert p.returncode != 0 and f"bad.jsonl line {at + 1}" in p.stderr, p.stderr
        assert why in p.stderr, p.stderr
        assert not (b / ".graphmem" / "memory").exists()  # nothing partial: not even the gotcha


def older_export(out: Path, version: int, dropped: str) -> Path:
    """``out`` as an export of an older ``version`` writes it: no lines of type ``dropped``."""
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    old = [dict(lines[0], version=version)] + [x for x in lines[1:] if x["type"] != dropped]
    path = out.with_name(f"v{version}.jsonl")
    path.write_text("".join(json.dumps(x) + "\n" for x in old))
    return path


def test_an_older_export_says_why_its_session_items_stay_out(tmp_path):
    _, out = source(tmp_path)
    path = older_export(out, 2, "session")
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    r = cli("import", str(path), "--project-dir", str(b))
    assert r["added"]["session"] == 0 and r["added"]["gotcha"] == 1
    assert any("version 2 export does not carry" in s["why"] for s in r["skipped"])


def test_a_secret_in_an_exported_session_is_redacted_and_twice_is_still_nothing(tmp_path):
    _, out = source(tmp_path)
    token = "ghp_" + "b" * 36
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    first = next(x for x in lines if x["type"] == "session")
    first["data"]["what_worked"].append(f"Pushing the quokka fix with token {token}")
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))  # a hand-edited export
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    p = run_cli("import", str(out), "--project-dir", str(b))
    assert p.returncode == 0, p.stderr
    assert "Sessions written: 4" in p.stdout and "-> session_001-" in p.stdout
    written = session_files(b / ".graphmem")
    assert written and not any(token.encode() in v for v in written.values())
    assert any(b"Pushing the quokka fix with token" in v for v in written.values())
    before = memory_files(b)
    again = cli("import", str(out), "--project-dir", str(b))
    assert again["added"]["session"] == 0 and memory_files(b) == before


def test_a_name_here_that_cannot_be_read_is_never_written_over(tmp_path):
    _, out = source(tmp_path)
    first = next(json.loads(x) for x in out.read_text().splitlines() if '"type": "session"' in x)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    folder = b / ".graphmem" / "memory" / "session_insights"
    folder.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"what_worked": ["not mine to change"]}')
    link = folder / first["source"].rsplit("/", 1)[-1]
    link.symlink_to(elsewhere)
    r = cli("import", str(out), "--project-dir", str(b))
    assert r["added"]["session"] == 3
    assert link.is_symlink() and elsewhere.read_text() == '{"what_worked": ["not mine to change"]}'
    assert any("holds other content" in s["why"] for s in r["skipped"])
