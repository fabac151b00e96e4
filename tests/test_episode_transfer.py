"""Episodes travel (issue 36): ``graphmem export`` carries each episode's ``session.json``,
``turns.jsonl`` and ``steps.jsonl`` whole and ``graphmem import`` recreates them, so a move
keeps every conversation turn and execution step, found by the same search and listed by
``graphmem sessions``; never over an episode of the target. The CLI as a subprocess on real
files and a real index."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from test_code_freshness import project
from test_session_transfer import older_export

TURNS = [("user", "Why does the wombat payroll export drop the overtime column?"),
         ("assistant", "The wombat CSV writer filters columns by the header whitelist; overtime "
                       "is missing from it. Add it to PAYROLL_COLUMNS.")]
STEP = ("pytest tests/test_wombat_payroll.py", "failed", {"failed": 2, "file": "payroll.py"})
SUMMARY = "Fixed the wombat payroll export: overtime was missing from PAYROLL_COLUMNS."
Q = "wombat payroll overtime column"


def cli(*args: str) -> dict | list:
    out = run_cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def memory_files(root: Path) -> dict[str, bytes]:
    mem = root / ".graphmem" / "memory"
    return {str(p.relative_to(mem)): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts}


def episode_files(root: Path, sid: str) -> dict[str, bytes]:
    folder = root / ".graphmem" / "memory" / "episodes" / sid
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def source(tmp: Path) -> tuple[Path, str, Path]:
    """A project with one ended, summarised episode (two turns, one step) and a gotcha ->
    (project, the episode's id, its export)."""
    root, _ = project(tmp / "a", {"src/payroll.py": "x = 1\n"})
    with Memory(None, root) as m:
        m.append_gotcha("The wombat payroll job must not run twice in one night.")
        sid = m.start_session(model="model-w", mode="build")
        m.record_turns(sid, [{"role": r, "content": c, "tokens": 30, "metadata": {"tool": "cli"}}
                             for r, c in TURNS])
        m.record_step(sid, *STEP)
        m.set_session_summary(sid, SUMMARY)
        m.end_session(sid)
    out = tmp / "a.jsonl"
    p = run_cli("export", "--output", str(out), "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    return root, sid, out


def found(root: Path, query: str = Q) -> dict[str, dict]:
    hits = cli("search", query, "--project-dir", str(root), "--limit", "20")
    assert isinstance(hits, list)
    return {h["text"]: h for h in hits}


def test_turns_and_steps_arrive_whole_and_search_finds_them(tmp_path):
    a, sid, out = source(tmp_path)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["version"] == 4
    [line] = [x for x in lines if x["type"] == "episode"]
    assert line["session"] == sid and len(line["turns"]) == 2 and len(line["steps"]) == 1
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    r = cli("import", str(out), "--project-dir", str(b))
    assert isinstance(r, dict)
    assert r["added"]["episode"] == 1 and r["took"]["episode"] == 1
    assert r["episodes"][0]["to"] == sid and r["episodes"][0]["turns"] == 2
    assert not [s for s in r["skipped"] if sid in s["where"] or "episode" in s["why"]], r["skipped"]
    # the files as the source holds them; session.json naming this machine's folders
    here, there = episode_files(b, sid), episode_files(a, sid)
    assert here["turns.jsonl"] == there["turns.jsonl"]
    assert here["steps.jsonl"] == there["steps.jsonl"]
    meta, was = json.loads(here["session.json"]), json.loads(there["session.json"])
    assert meta["project"] == meta["workspace"] == str(b) and was["project"] == str(a)
    assert {k: v for k, v in meta.items() if k not in ("project", "spec", "workspace")} == \
        {k: v for k, v in was.items() if k not in ("project", "spec", "workspace")}
    # the same search finds the same turn, step and summary
    turn, same = found(b)[TURNS[1][1]], found(a)[TURNS[1][1]]
    assert turn["kind"] == same["kind"] == "turn" and turn["session"] == same["session"] == sid
    mine = {k: v for k, v in turn["metadata"].items() if k != "freshness"}  # of the code here
    assert mine == {k: v for k, v in same["metadata"].items() if k != "freshness"}
    assert mine["tool"] == "cli" and mine["tokens"] == 30 and mine["role"] == "assistant"
    steps = found(b, "pytest wombat payroll failed")
    assert any(h["kind"] == "step" and h["session"] == sid for h in steps.values()), steps
    assert SUMMARY in found(b, "wombat payroll export fixed overtime")
    # and the readers of episodes read it as the source's
    listed = cli("sessions", "--project-dir", str(b))
    assert [(s["session_id"], s["turns"], s["total_tokens"], s["status"]) for s in listed] == \
        [(sid, 2, 60, "ended")]
    got = cli("session", sid, "--project-dir", str(b))
    assert isinstance(got, dict)
    assert [t["content"] for t in got["turns"]] == [c for _, c in TURNS]
    assert got["steps"][0]["payload"] == STEP[2] and got["session"]["summary"] == SUMMARY


def test_importing_twice_or_back_where_it_came_from_changes_no_byte(tmp_path):
    a, sid, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    with Memory(None, b) as m:  # an episode of the target's own
        own = m.start_session()
        m.record_turn(own, "user", "The target's own quokka question")
    mine = episode_files(b, own)
    cli("import", str(out), "--project-dir", str(b))
    assert episode_files(b, own) == mine
    before = memory_files(b)
    again = cli("import", str(out), "--project-dir", str(b))
    assert isinstance(again, dict)
    assert again["added"]["episode"] == 0 and [e["new"] for e in again["episodes"]] == [False]
    assert memory_files(b) == before  # not a byte changed
    hits = cli("search", Q, "--project-dir", str(b), "--limit", "20")
    assert [h["text"] for h in hits if h["kind"] == "turn"].count(TURNS[1][1]) == 1  # no copy
    back = tmp_path / "b.jsonl"
    assert run_cli("export", "--output", str(back), "--project-dir", str(b)).returncode == 0
    was = memory_files(a)
    r = cli("import", str(back), "--project-dir", str(a))
    assert isinstance(r, dict)
    assert r["added"]["episode"] == 1  # the target's own episode, and nothing else
    assert {k: v for k, v in memory_files(a).items() if own not in k} == was
    assert "The target's own quokka question" in found(a, "quokka question")


def test_an_id_here_holding_other_content_is_kept_as_it_is(tmp_path):
    _, sid, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    folder = b / ".graphmem" / "memory" / "episodes" / sid
    folder.mkdir(parents=True)
    (folder / "session.json").write_text(json.dumps({"session_id": sid, "started_at":
                                                     "2026-01-01T00:00:00+00:00"}))
    (folder / "turns.jsonl").write_text('{"index": 0, "id": "trn-1", "role": "user", '
                                        '"content": "not mine to change", "at": "2026-01-01"}\n')
    kept = episode_files(b, sid)
    r = cli("import", str(out), "--project-dir", str(b))
    assert isinstance(r, dict)
    assert r["added"]["episode"] == 0 and episode_files(b, sid) == kept
    assert any(sid in s["why"] and "holds other content" in s["why"] for s in r["skipped"])


def test_an_older_export_says_its_episodes_were_skipped_and_to_export_again(tmp_path):
    _, sid, out = source(tmp_path)
    path = older_export(out, 3, "episode")
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    r = cli("import", str(path), "--project-dir", str(b))
    assert isinstance(r, dict)
    assert r["added"]["episode"] == 0 and r["added"]["gotcha"] == 1
    [why] = [s for s in r["skipped"] if sid in s["where"]]  # one line for the episode
    assert "version 3 export does not carry" in why["why"] and "export it again" in why["why"]
    assert TURNS[1][1] not in found(b)


def test_a_secret_in_an_exported_turn_is_redacted_and_twice_is_still_nothing(tmp_path):
    _, sid, out = source(tmp_path)
    token = "ghp_" + "c" * 36
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    line = next(x for x in lines if x["type"] == "episode")
    line["turns"][0]["content"] += f" (pushed with {token})"
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))  # a hand-edited export
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    p = run_cli("import", str(out), "--project-dir", str(b))
    assert p.returncode == 0, p.stderr
    assert "Episodes written: 1" in p.stdout, p.stdout
    turns = episode_files(b, sid)["turns.jsonl"]
    assert token.encode() not in turns and b"pushed with" in turns
    before = memory_files(b)
    again = cli("import", str(out), "--project-dir", str(b))
    assert isinstance(again, dict)
    assert again["added"]["episode"] == 0 and memory_files(b) == before


def test_clear_removes_a_folder_an_import_died_writing(tmp_path):
    _, sid, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    cli("import", str(out), "--project-dir", str(b))
    episodes = b / ".graphmem" / "memory" / "episodes"
    died = episodes / f".importing-{sid}.k3j9x_2q"  # a power cut before its rename
    died.mkdir()
    (died / "turns.jsonl").write_text(json.dumps({"index": 0, "content": "half"}) + "\n")
    assert [s["session_id"] for s in cli("sessions", "--project-dir", str(b))] == [sid]
    p = run_cli("clear", "--project-dir", str(b), "--spec-dir", str(b / ".graphmem"), "--yes")
    assert p.returncode == 0, p.stderr
    assert not died.exists() and not (episodes / sid).exists()


def test_an_episode_over_the_size_limit_here_is_skipped_with_the_reason(tmp_path):
    _, sid, out = source(tmp_path)
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    p = run_cli("import", str(out), "--project-dir", str(b), "--json",
                env={"GRAPHMEM_MAX_ITEM_BYTES": "100"})
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["added"]["episode"] == 0 and r["added"]["gotcha"] == 1
    [why] = [s["why"] for s in r["skipped"] if sid in s["why"]]
    assert "turns[1].content" in why and "over the limit of 100" in why, why
    assert not (b / ".graphmem" / "memory" / "episodes" / sid).exists()


def test_an_export_past_a_rules_files_size_still_imports(tmp_path):
    a, _, _ = source(tmp_path)
    big = "the wombat ledger batch timed out and was retried; " * 12_000  # 0.6 MB a turn
    with Memory(None, a) as m:
        sid = m.start_session()
        m.record_turns(sid, [{"role": "assistant", "content": f"{n} {big}"} for n in range(2)])
    out = tmp_path / "big.jsonl"
    assert run_cli("export", "--output", str(out), "--project-dir", str(a)).returncode == 0
    assert out.stat().st_size > 2_000_000  # each turn twice: its item line, its episode line
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    r = cli("import", str(out), "--project-dir", str(b))
    assert isinstance(r, dict) and r["added"]["episode"] == 2
    assert episode_files(b, sid)["turns.jsonl"] == episode_files(a, sid)["turns.jsonl"]


def test_a_garbage_episode_line_is_refused_naming_line_and_field(tmp_path):
    _, sid, out = source(tmp_path)
    lines = out.read_text().splitlines()
    at = next(n for n, x in enumerate(lines) if json.loads(x)["type"] == "episode")
    rec = json.loads(lines[at])
    turn, step = rec["turns"][0], rec["steps"][0]
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    cases = [({"session": 7}, "'session' must be str, got int"),
             ({"session": "../../../etc"}, "'session' must be 1-128 letters"),
             ({"session": ".."}, "'session' must be 1-128 letters"),
             ({"source": ".graphmem/memory/episodes/ses-other"}, f"'source' must end in episodes/{sid}"),
             ({"meta": ["a list"]}, "'meta' must be dict, got list"),
             ({"meta": {**rec["meta"], "session_id": "ses-other"}}, "'meta.session_id' must be"),
             ({"meta": {**rec["meta"], "total_tokens": "many"}}, "'meta.total_tokens' must be int"),
             ({"turns": "two"}, "'turns' must be list, got str"),
             ({"turns": [7]}, "'turns[0]' must be an object, got int"),
             ({"turns": [{k: v for k, v in turn.items() if k != "content"}]},
              "'turns[0].content' is missing"),
             ({"turns": [{**turn, "index": True}]}, "'turns[0].index' must be int, got bool"),
             ({"turns": [{**turn, "tokens": -1}]}, "'turns[0].tokens' must not be negative"),
             ({"steps": [{**step, "name": 5}]}, "'steps[0].name' must be str, got int"),
             ({"turns": [{**turn, "content": "half \ud800 a character"}]},
              "'turns[0].content' text contains a lone surrogate"),
             ({"steps": [{**step, "payload": json.loads("[" * 150 + "]" * 150)}]},
              "nests deeper than 100"),
             ({k: v for k, v in rec.items() if k != "steps"}, "'steps' is missing"),
             ('{"type": "episode", "turns": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deep")]
    for change, why in cases:
        bad = list(lines)
        if isinstance(change, str):
            bad[at] = change
        elif "type" in change:  # a whole line
            bad[at] = json.dumps(change)
        else:
            bad[at] = json.dumps({**rec, **change})
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join(bad) + "\n")
        p = run_cli("import", str(path), "--project-dir", str(b))
        assert p.returncode != 0 and f"bad.jsonl line {at + 1}" in p.stderr, (why, p.stderr)
        assert why in p.stderr, (why, p.stderr)
        assert not (b / ".graphmem" / "memory").exists()  # nothing partial: not even the gotcha


MORE = [("user", "And the numbat timesheet export drops the night shift too?"),
        ("assistant", "Same whitelist: add NIGHT_SHIFT to PAYROLL_COLUMNS as well.")]
MORE_STEP = ("pytest tests/test_numbat_timesheet.py", "passed", {"passed": 5})


def grown(tmp: Path) -> tuple[Path, Path, str, Path, Path]:
    """A session exported while going on, imported into a second project, then grown at the
    source (two turns and a step more, summarised, ended) and exported again -> (source, target,
    its id, the first export, the second)."""
    root, _ = project(tmp / "a", {"src/payroll.py": "x = 1\n"})
    with Memory(None, root) as m:
        sid = m.start_session(model="model-w", mode="build")
        m.record_turns(sid, [{"role": r, "content": c, "tokens": 30} for r, c in TURNS])
        m.record_step(sid, *STEP)
    first, second = tmp / "first.jsonl", tmp / "second.jsonl"
    assert run_cli("export", "--output", str(first), "--project-dir", str(root)).returncode == 0
    b, _ = project(tmp / "b", {"README.md": "b\n"})
    r = cli("import", str(first), "--project-dir", str(b))
    assert isinstance(r, dict) and r["added"]["episode"] == 1
    with Memory(None, root) as m:
        m.record_turns(sid, [{"role": r, "content": c, "tokens": 20} for r, c in MORE])
        m.record_step(sid, *MORE_STEP)
        m.set_session_summary(sid, SUMMARY)
        m.end_session(sid)
    assert run_cli("export", "--output", str(second), "--project-dir", str(root)).returncode == 0
    return root, b, sid, first, second


def test_an_episode_that_grew_there_gets_its_new_turns_and_steps_appended(tmp_path):
    a, b, sid, first, second = grown(tmp_path)
    turns = b / ".graphmem" / "memory" / "episodes" / sid / "turns.jsonl"
    ino = turns.stat().st_ino
    assert MORE[1][1] not in found(b, "numbat night shift")
    p = run_cli("import", str(second), "--project-dir", str(b))
    assert p.returncode == 0, p.stderr
    assert "Episodes grown: 1 (2 new turns, 1 new steps)" in p.stdout, p.stdout
    here, there = episode_files(b, sid), episode_files(a, sid)
    assert here["turns.jsonl"] == there["turns.jsonl"] and here["steps.jsonl"] == there["steps.jsonl"]
    assert turns.stat().st_ino == ino  # appended, never rewritten
    meta = json.loads(here["session.json"])
    assert meta["project"] == str(b) and meta["status"] == "ended" and meta["summary"] == SUMMARY
    assert meta["total_tokens"] == 100
    # search finds a new turn, the summary; the old turn once
    hit = found(b, "numbat night shift")[MORE[1][1]]
    assert hit["kind"] == "turn" and hit["session"] == sid
    assert SUMMARY in found(b, "wombat payroll export fixed overtime")
    hits = cli("search", Q, "--project-dir", str(b), "--limit", "20")
    assert [h["text"] for h in hits if h["kind"] == "turn"].count(TURNS[1][1]) == 1
    assert any(h["kind"] == "step" and h["session"] == sid
               for h in found(b, "pytest numbat timesheet passed").values())
    got = cli("session", sid, "--project-dir", str(b))
    assert isinstance(got, dict)
    assert [t["content"] for t in got["turns"]] == [c for _, c in TURNS + MORE]
    assert [s["name"] for s in got["steps"]] == [STEP[0], MORE_STEP[0]]
    listed = cli("sessions", "--project-dir", str(b))
    assert [(s["session_id"], s["turns"], s["total_tokens"], s["status"]) for s in listed] == \
        [(sid, 4, 100, "ended")]
    before = memory_files(b)
    again = cli("import", str(second), "--project-dir", str(b))
    assert isinstance(again, dict) and memory_files(b) == before  # not a byte changed
    assert [(e["new"], e["grew"]) for e in again["episodes"]] == [(False, False)]
    old = cli("import", str(first), "--project-dir", str(b))  # the older export: it is behind
    assert isinstance(old, dict) and memory_files(b) == before
    assert any(sid in s["why"] and "gone on past this export's" in s["why"] for s in old["skipped"])


def test_a_diverged_copy_stays_skipped_while_a_grown_one_follows(tmp_path):
    a, b, sid, _, second = grown(tmp_path)
    with Memory(None, a) as m:  # a second session, imported, then changed here: diverged
        other = m.start_session()
        m.record_turn(other, "user", "The quokka roster question")
    mid = tmp_path / "mid.jsonl"
    assert run_cli("export", "--output", str(mid), "--project-dir", str(a)).returncode == 0
    r = cli("import", str(mid), "--project-dir", str(b))  # the new one written, the grown one grown
    assert isinstance(r, dict) and r["added"]["episode"] == 1
    assert [e["to"] for e in r["episodes"] if e["grew"]] == [sid]
    with Memory(None, b) as m:
        m.record_turn(other, "user", "A quokka turn of the target's own")
    with Memory(None, a) as m:
        m.record_turn(other, "assistant", "The quokka roster answer")
    assert run_cli("export", "--output", str(second), "--project-dir", str(a)).returncode == 0
    kept = episode_files(b, other)
    r = cli("import", str(second), "--project-dir", str(b))
    assert isinstance(r, dict)
    assert episode_files(b, other) == kept
    assert any(other in s["why"] and "holds other content" in s["why"] for s in r["skipped"])
    assert episode_files(b, sid)["turns.jsonl"] == episode_files(a, sid)["turns.jsonl"]
    # a record that differs, not one more: kept too
    folder = b / ".graphmem" / "memory" / "episodes" / sid
    lines = (folder / "turns.jsonl").read_text().splitlines()
    lines = lines[:2] + [lines[2].replace("numbat", "bilby")]  # and one record less
    (folder / "turns.jsonl").write_text("\n".join(lines) + "\n")
    kept = episode_files(b, sid)
    r = cli("import", str(second), "--project-dir", str(b))
    assert isinstance(r, dict) and episode_files(b, sid) == kept
    assert any(sid in s["why"] and "holds other content" in s["why"] for s in r["skipped"])
    # its records a start of the export's, but summarised here after the source did: kept too
    (folder / "turns.jsonl").write_text("\n".join(lines[:2]) + "\n")
    with Memory(None, b) as m:
        m.set_session_summary(sid, "A summary written on the target, later than the source's")
    kept = episode_files(b, sid)
    r = cli("import", str(second), "--project-dir", str(b))
    assert isinstance(r, dict) and episode_files(b, sid) == kept
    assert any(sid in s["why"] and "holds other content" in s["why"] for s in r["skipped"])


def test_a_tail_a_crash_left_half_appended_is_finished_by_the_next_import(tmp_path):
    a, b, sid, _, second = grown(tmp_path)
    folder = b / ".graphmem" / "memory" / "episodes" / sid
    there = episode_files(a, sid)
    new_lines = there["turns.jsonl"].splitlines(keepends=True)[2:]
    with open(folder / "turns.jsonl", "ab") as f:  # one new turn whole, the next torn
        f.write(new_lines[0] + new_lines[1][:25])
    meta = (folder / "session.json").read_bytes()
    p = run_cli("import", str(second), "--project-dir", str(b), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert [(e["grew"], e["new_turns"], e["new_steps"]) for e in r["episodes"]] == [(True, 1, 1)]
    here = episode_files(b, sid)
    assert here["turns.jsonl"] == there["turns.jsonl"] and here["steps.jsonl"] == there["steps.jsonl"]
    assert here["session.json"] != meta
    [aside] = [k for k in here if ".corrupt-torn-" in k]
    assert here[aside] == new_lines[1][:25]  # the torn bytes kept, not read as a turn
    got = cli("session", sid, "--project-dir", str(b))
    assert isinstance(got, dict) and [t["index"] for t in got["turns"]] == [0, 1, 2, 3]
    assert MORE[1][1] in found(b, "numbat night shift")


def test_a_garbage_tail_is_refused_naming_line_and_field_and_changes_nothing(tmp_path):
    _, b, sid, _, second = grown(tmp_path)
    lines = second.read_text().splitlines()
    at = next(n for n, x in enumerate(lines) if json.loads(x)["type"] == "episode")
    rec = json.loads(lines[at])
    rec["turns"][3] = {k: v for k, v in rec["turns"][3].items() if k != "role"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:at] + [json.dumps(rec)] + lines[at + 1:]) + "\n")
    before = memory_files(b)
    p = run_cli("import", str(bad), "--project-dir", str(b))
    assert p.returncode != 0 and f"bad.jsonl line {at + 1}" in p.stderr, p.stderr
    assert "'turns[3].role' is missing" in p.stderr and memory_files(b) == before
    r = cli("import", str(second), "--project-dir", str(b))
    assert isinstance(r, dict) and [e["new_turns"] for e in r["episodes"]] == [2]
