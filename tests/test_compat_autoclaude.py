"""graphmem.compat against today's Auto-Claude: its memory package name for name, what its agent
tools write, sessions kept as the agent wrote them, and its GraphitiMemory on graphmem."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from graphmem import Memory, ValidationError, compat
from graphmem.compat import graphiti

from autoclaude_api import CONFIG_FUNCTIONS, MODULES, extract
from conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "autoclaude_memory_api.json"
# Read at import: the autouse ``isolated_env`` fixture removes GRAPHMEM_* before a test runs.
AUTOCLAUDE_DIR = os.environ.get("GRAPHMEM_AUTOCLAUDE_DIR")
NOT_MIRRORED = {"test_graphiti_connection", "test_provider_configuration"}  # pytest would collect them


# ---- the interface, name for name ------------------------------------------------------------
def _api() -> dict:
    """Auto-Claude's interface: from a checkout when GRAPHMEM_AUTOCLAUDE_DIR names one, else the
    list read from its main branch (tests/fixtures)."""
    if AUTOCLAUDE_DIR:
        return extract(Path(AUTOCLAUDE_DIR))
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["modules"]


def _check_function(ours, theirs: dict, where: str, namespace: dict) -> list[str]:
    bad = []
    if inspect.iscoroutinefunction(ours) != theirs["async"]:
        bad.append(f"{where}: async is {not theirs['async']}, theirs {theirs['async']}")
    params = list(inspect.signature(ours).parameters.values())
    kinds = {"positional": (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            inspect.Parameter.POSITIONAL_ONLY),
             "keyword_only": (inspect.Parameter.KEYWORD_ONLY,),
             "var_positional": (inspect.Parameter.VAR_POSITIONAL,),
             "var_keyword": (inspect.Parameter.VAR_KEYWORD,)}
    if [p.name for p in params] != [p[0] for p in theirs["params"]]:
        return bad + [f"{where}: parameters {[p.name for p in params]}, theirs "
                      f"{[p[0] for p in theirs['params']]}"]
    for p, (name, kind, default) in zip(params, theirs["params"]):
        if p.kind not in kinds[kind]:
            bad.append(f"{where}: {name} is {p.kind}, theirs {kind}")
        if default is None:
            if p.default is not inspect.Parameter.empty:
                bad.append(f"{where}: {name} has a default, theirs none")
        elif p.default is inspect.Parameter.empty or p.default != eval(default, namespace):
            bad.append(f"{where}: {name} defaults to {p.default!r}, theirs {default}")
    return bad


def test_compat_has_every_name_and_signature_of_autoclaude_memory():
    api, bad = _api(), []
    for path, target in MODULES.items():
        mod = importlib.import_module(target)
        namespace = vars(mod)
        theirs = api[path]
        for name, fn in theirs["functions"].items():
            if name in NOT_MIRRORED:
                continue
            if not callable(getattr(mod, name, None)):
                bad.append(f"{target}.{name} missing ({path})")
            else:
                bad += _check_function(getattr(mod, name), fn, f"{target}.{name}", namespace)
        names = theirs["constants"] + (theirs["imports"] if path.startswith("memory/") else [])
        bad += [f"{target}.{name} missing ({path})" for name in names if not hasattr(mod, name)]
        for cls, members in theirs["classes"].items():
            ours = getattr(mod, cls, None)
            if ours is None:
                bad.append(f"{target}.{cls} missing")
                continue
            for name, info in members.items():
                if not hasattr(ours, name):
                    bad.append(f"{target}.{cls}.{name} missing")
                elif "params" in info:
                    bad += _check_function(getattr(ours, name), info, f"{cls}.{name}", namespace)
                elif info.get("property") and not isinstance(inspect.getattr_static(ours, name),
                                                              property):
                    bad.append(f"{target}.{cls}.{name} is not a property")
    for name in CONFIG_FUNCTIONS:
        fn = getattr(graphiti, name, None)
        theirs = api["integrations/graphiti/config.py"]["functions"][name]
        bad += [f"graphiti.{name} missing"] if fn is None else \
            _check_function(fn, theirs, f"graphiti.{name}", vars(graphiti))
    assert bad == []


def test_the_signature_check_can_fail():
    """The comparison itself catches a renamed parameter, a lost default and sync for async."""
    theirs = {"async": True, "params": [["spec_dir", "positional", None],
                                        ["project_dir", "positional", "None"]]}

    def renamed(spec, project_dir=None):
        """A stand-in."""

    async def no_default(spec_dir, project_dir):
        """A stand-in."""

    assert len(_check_function(renamed, theirs, "x", {})) == 2  # sync, and a renamed parameter
    assert _check_function(no_default, theirs, "x", {}) == ["x: project_dir defaults to "
                                                            "<class 'inspect._empty'>, theirs None"]


SWITCH = """
import graphmem.compat; graphmem.compat.install()
import sys
from pathlib import Path
from memory import save_session_insights, load_all_insights, get_memory_summary
from memory.graphiti_helpers import get_graphiti_memory, run_async, is_graphiti_memory_enabled
import memory.main, memory.paths, memory.sessions, memory.codebase_map, memory.patterns
spec = Path(sys.argv[1])
save_session_insights(spec, 1, {"what_worked": ["the switch works"]})
assert load_all_insights(spec)[0]["what_worked"] == ["the switch works"]
assert run_async(get_graphiti_memory(spec)) is None  # graph off
assert memory.sessions.save_session_insights is save_session_insights
print(get_memory_summary(spec)["total_sessions"], memory.__name__)
"""


def test_install_switches_import_memory_in_one_line(spec_dir):
    """The README's line: after it, Auto-Claude's imports of ``memory`` get graphmem.compat."""
    out = subprocess.run([sys.executable, "-c", SWITCH, str(spec_dir)], capture_output=True,
                         text=True, env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "graphmem.compat"]


def test_main_cli_actions(spec_dir):
    compat.save_session_insights(spec_dir, 1, {"subtasks_completed": ["a", "b"]})
    compat.update_codebase_map(spec_dir, {"src/a.py": "entry point"})
    compat.append_gotcha(spec_dir, "close the pool")

    def main(action: str, stdin: str = "") -> str:
        out = subprocess.run([sys.executable, "-m", "graphmem.compat.main", "--spec-dir",
                              str(spec_dir), "--action", action], input=stdin, text=True,
                             capture_output=True, env=dict(os.environ), timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert "Total sessions: 1" in main("summary") and "Session 1: 2 subtasks completed" in main("summary")
    assert json.loads(main("list-map")) == {"src/a.py": "entry point"}
    assert json.loads(main("list-insights"))[0]["subtasks_completed"] == ["a", "b"]
    assert "  - close the pool" in main("list-gotchas")
    assert "Cancelled." in main("clear", "no\n")
    assert "Memory cleared." in main("clear", "yes\n")
    assert compat.load_all_insights(spec_dir) == []
    bad = subprocess.run([sys.executable, "-m", "graphmem.compat.main", "--spec-dir",
                          str(spec_dir / "nope")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "Spec directory not found" in bad.stdout


# ---- sessions kept as the agent wrote them -----------------------------------------------------
REFUSED_BEFORE = [
    {"subtasks_completed": ["qa-1"], "discoveries": {
        "file_insights": [{"file": "src/billing/ledger.py", "purpose": "posts ledger entries"}],
        "gotchas_discovered": []}},
    {"subtasks_completed": ["qa-2"], "discoveries": {
        "file_insights": {"src/billing/refunds.py": {"purpose": "reverses charged invoices"}}}},
]


@pytest.mark.parametrize("insights", REFUSED_BEFORE, ids=["file-not-file_path", "object-not-list"])
def test_agent_sessions_the_original_stores_are_stored_as_written(spec_dir, insights, caplog):
    with caplog.at_level(logging.WARNING, logger="graphmem"):
        compat.save_session_insights(spec_dir, 1, insights)
        compat.save_session_insights(spec_dir, 2, insights)  # the same problem: one warning
    saved = json.loads((spec_dir / "memory/session_insights/session_001.json").read_text())
    assert saved["discoveries"] == insights["discoveries"] and saved["session_number"] == 1
    assert compat.load_all_insights(spec_dir)[0]["discoveries"]["file_insights"] == \
        insights["discoveries"]["file_insights"]
    kept = [r for r in caplog.records if "kept as written" in r.getMessage()]
    assert len(kept) == 1 and "file_insights" in kept[0].getMessage()
    with Memory(spec_dir) as m:
        hits = m.search("ledger refunds reverses posts entries", limit=5)
        assert any(h.kind == "file" and ("ledger" in h.text or "refunds" in h.text) for h in hits)
        assert len(m.files.kept_as_written()) == 2
    out = run_cli("doctor", "--spec-dir", str(spec_dir))
    assert "kept as written" in out.stdout and "session_001.json" in out.stdout


@pytest.mark.parametrize("insights", REFUSED_BEFORE, ids=["file-not-file_path", "object-not-list"])
def test_explicit_api_calls_keep_their_clear_errors(spec_dir, insights):
    with Memory(spec_dir) as m, pytest.raises(ValidationError, match="file_insights"):
        m.save_session_insights(1, insights)
    assert not (spec_dir / "memory/session_insights/session_001.json").exists()


def test_as_written_stores_what_json_dump_stores_and_refuses_what_it_refuses(spec_dir):
    compat.save_session_insights(spec_dir, 1, {"what_worked": "one string, not a list",
                                               "extra": {1: ("a", "b")}})
    saved = compat.load_all_insights(spec_dir)[0]
    assert saved["what_worked"] == "one string, not a list"
    assert saved["extra"] == {"1": ["a", "b"]}  # as the original's json.dump writes it
    with pytest.raises(ValidationError, match="insights"):
        compat.save_session_insights(spec_dir, 2, {"what_worked": {"a set"}.__class__([1])})
    with pytest.raises(ValidationError):
        compat.save_session_insights(spec_dir, 3, ["not", "a", "mapping"])
    assert [s["session_number"] for s in compat.load_all_insights(spec_dir)] == [1]


# ---- what the agent tools write ------------------------------------------------------------------
def _record_gotcha(spec_dir: Path, gotcha: str, context: str = "") -> None:
    """Append to gotchas.md the way Auto-Claude's record_gotcha tool does."""
    path = spec_dir / "memory" / "gotchas.md"
    path.parent.mkdir(exist_ok=True)
    entry = f"\n## [{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')}]\n{gotcha}"
    if context:
        entry += f"\n\n_Context: {context}_"
    entry += "\n"
    with open(path, "a", encoding="utf-8") as f:
        if path.stat().st_size == 0:
            f.write("# Gotchas & Pitfalls\n\nThings to watch out for in this codebase.\n")
        f.write(entry)


def _record_discovery(spec_dir: Path, file_path: str, description: str, category: str) -> None:
    """Update codebase_map.json the way Auto-Claude's record_discovery tool does."""
    path = spec_dir / "memory" / "codebase_map.json"
    path.parent.mkdir(exist_ok=True)
    cmap = json.loads(path.read_text()) if path.exists() else {"discovered_files": {},
                                                              "last_updated": None}
    now = datetime.now(timezone.utc).isoformat()
    cmap["discovered_files"][file_path] = {"description": description, "category": category,
                                           "discovered_at": now}
    cmap["last_updated"] = now
    path.write_text(json.dumps(cmap, indent=2))


def test_record_gotcha_blocks_are_read_searched_and_listed(spec_dir):
    _record_gotcha(spec_dir, "Webhook retries arrive out of order", "stripe events in billing")
    _record_gotcha(spec_dir, "The tax table is cached\nfor a whole day")
    compat.append_gotcha(spec_dir, "close the pool in workers")
    assert compat.load_gotchas(spec_dir) == [
        "close the pool in workers",
        "Webhook retries arrive out of order (Context: stripe events in billing)",
        "The tax table is cached for a whole day"]
    assert compat.get_memory_summary(spec_dir)["total_gotchas"] == 3
    with Memory(spec_dir) as m:
        m.reindex()
        hits = m.search("webhook retries out of order", kinds=["gotcha"], limit=3)
        assert hits and hits[0].text.startswith("Webhook retries arrive out of order")
        assert "Webhook retries" in m.context("handle stripe webhook retries")


def test_discovered_files_map_is_indexed_without_its_metadata(spec_dir):
    _record_discovery(spec_dir, "src/billing/stripe.py", "Stripe webhook handler", "api")
    _record_discovery(spec_dir, "src/util.py", "small helpers", "general")
    assert compat.load_codebase_map(spec_dir) == {"src/billing/stripe.py": "[api] Stripe webhook handler",
                                                  "src/util.py": "small helpers"}
    compat.update_codebase_map(spec_dir, {"src/a.py": "entry point"})  # the reference's writer too
    data = json.loads((spec_dir / "memory/codebase_map.json").read_text())
    assert "src/billing/stripe.py" in data["discovered_files"] and data["_metadata"]["total_files"] == 3
    with Memory(spec_dir) as m:
        m.reindex()
        files = {i.metadata["path"] for i in m.items() if i.kind == "file"}
        assert files == {"src/billing/stripe.py", "src/util.py", "src/a.py"}
        assert m.search("stripe webhook", kinds=["file"], limit=1)[0].metadata["path"] == \
            "src/billing/stripe.py"
    out = run_cli("map", "--spec-dir", str(spec_dir))
    assert out.returncode == 0 and "Stripe webhook handler" in out.stdout
    assert "last_updated" not in out.stdout and "{" not in out.stdout


# ---- GraphitiMemory on graphmem ------------------------------------------------------------------
def test_graphiti_memory_saves_files_first_and_answers_from_graphmem(spec_dir):
    project = spec_dir.parent.parent
    mem = graphiti.GraphitiMemory(spec_dir, project, graphiti.GroupIdMode.PROJECT)

    async def flow():
        assert await mem.initialize() and mem.is_initialized
        assert await mem.save_session_insights(1, {"recommendations_for_next_session":
                                                   ["pin the tax table version"]})
        assert await mem.save_codebase_discoveries({"src/tax.py": "tax table loader"})
        assert await mem.save_pattern("Money is Decimal end to end")
        _record_gotcha(spec_dir, "Rates change at midnight UTC", "tax")
        before = (spec_dir / "memory/gotchas.md").read_text()
        assert await mem.save_gotcha("Rates change at midnight UTC (Context: tax)")
        assert (spec_dir / "memory/gotchas.md").read_text() == before  # already there: kept once
        assert await mem.save_task_outcome("qa-7", False, "tax rounding still off by a cent")
        assert await mem.save_structured_insights({
            "session_num": 2, "subtask_id": "qa-7", "success": False,
            "file_insights": [{"file": "src/round.py", "purpose": "rounding helpers"}]})
        ctx = await mem.get_relevant_context("tax table", num_results=5)
        pats, gots = await mem.get_patterns_and_gotchas("midnight rates decimal money",
                                                        num_results=3, min_score=0.0)
        outcomes = await mem.get_similar_task_outcomes("tax rounding", limit=3)
        history = await mem.get_session_history(limit=5)
        await mem.close()
        return ctx, pats, gots, outcomes, history

    ctx, pats, gots, outcomes, history = asyncio.run(flow())
    assert ctx and set(ctx[0]) == {"content", "score", "type"}
    assert any("tax table" in c["content"] for c in ctx)
    assert pats[0]["pattern"] == "Money is Decimal end to end"
    assert set(pats[0]) == {"pattern", "applies_to", "example", "score"}
    assert gots[0]["gotcha"] == "Rates change at midnight UTC (Context: tax)"
    assert outcomes[0] == {"task_id": "qa-7", "success": False,
                           "outcome": "tax rounding still off by a cent",
                           "score": outcomes[0]["score"]}
    assert [h["session_number"] for h in history] == [2, 1]
    assert history[0]["type"] == "session_insight" and history[0]["spec_id"] == spec_dir.name
    saved = compat.load_all_insights(spec_dir)
    assert saved[1]["discoveries"]["file_insights"][0]["file"] == "src/round.py"  # as written
    assert compat.load_codebase_map(spec_dir)["src/tax.py"] == "tax table loader"
    summary = mem.get_status_summary()
    assert set(summary) == {"enabled", "initialized", "database", "db_path", "group_id",
                            "group_id_mode", "llm_provider", "embedder_provider",
                            "episode_count", "last_session", "errors"}
    assert summary["group_id"].startswith(f"project_{project.name}_") and summary["last_session"] == 1


def test_graphiti_helpers_and_config_report_graphmem_state(spec_dir, monkeypatch):
    assert compat.is_graphiti_memory_enabled() is False
    assert asyncio.run(compat.graphiti_helpers.get_graphiti_memory(spec_dir)) is None
    status = graphiti.get_graphiti_status()
    assert status["enabled"] is False and status["available"] is False and status["reason"]
    assert graphiti.validate_graphiti_config()[0] is False
    monkeypatch.setenv("GRAPHITI_ENABLED", "true")
    assert compat.is_graphiti_memory_enabled() and graphiti.is_graphiti_enabled()
    assert graphiti.get_graphiti_status()["enabled"] is True
    assert graphiti.validate_graphiti_config() == (True, [])


def test_run_async_inside_a_running_loop_runs_the_coroutine():
    """The original drops it there (returns None); graphmem runs it on its own loop."""
    async def seven() -> int:
        return 7

    async def caller() -> int:
        return compat.graphiti_helpers.run_async(seven())

    assert compat.graphiti_helpers.run_async(seven()) == 7
    assert asyncio.run(caller()) == 7


def test_new_write_paths_refuse_garbage_and_write_nothing(spec_dir):
    with Memory(spec_dir) as m:
        with pytest.raises(ValidationError, match="kind"):
            m.take_note("fact", "text")
        with pytest.raises(ValidationError, match="gotcha"):
            m.take_note("gotcha", 5)
        with pytest.raises(ValidationError, match="gotcha"):
            m.take_note("gotcha", "two\nlines")
    assert not (spec_dir / "memory" / "gotchas.md").exists()
    mem = graphiti.GraphitiMemory(spec_dir, spec_dir.parent.parent)

    async def garbage() -> list:
        return [await mem.save_gotcha(None), await mem.save_codebase_discoveries({"/abs.py": "x"}),
                await mem.save_session_insights(0, {}), await mem.save_task_outcome("t", True, {1})]

    assert asyncio.run(garbage()) == [False, False, False, False]  # as the original: False, logged
    assert mem.get_status_summary()["errors"] == 4
    assert not (spec_dir / "memory" / "gotchas.md").exists()
    assert not (spec_dir / "memory" / "codebase_map.json").exists()
    assert compat.load_all_insights(spec_dir) == []


def _record_attempt(spec_dir: Path, subtask: str, session: int, success: bool, approach: str,
                    error: str | None = None) -> None:
    """Update attempt_history.json the way Auto-Claude's recovery manager does."""
    path = spec_dir / "memory" / "attempt_history.json"
    path.parent.mkdir(exist_ok=True)
    history = json.loads(path.read_text()) if path.exists() else {
        "subtasks": {}, "stuck_subtasks": [],
        "metadata": {"created_at": datetime.now().isoformat(), "last_updated": None}}
    entry = history["subtasks"].setdefault(subtask, {"attempts": [], "status": "pending"})
    entry["attempts"].append({"session": session, "timestamp": datetime.now().isoformat(),
                              "approach": approach, "success": success, "error": error})
    entry["status"] = "completed" if success else "failed"
    history["metadata"]["last_updated"] = datetime.now().isoformat()
    path.write_text(json.dumps(history, indent=2))


def test_attempt_history_becomes_searchable_lessons_with_counts(spec_dir):
    for session in range(1, 6):
        _record_attempt(spec_dir, "qa-fix-3", session, False, "Patch the  rounding in invoice totals",
                        f"AssertionError: expected 10.00 got 9.99 (attempt {session})")
    _record_attempt(spec_dir, "qa-fix-3", 6, True, "Use Decimal quantize for invoice totals")
    with Memory(spec_dir) as m:
        m.reindex()
        lessons = sorted(i.text for i in m.items() if i.metadata.get("field") == "attempt_history")
        assert lessons == [
            "Subtask qa-fix-3: tried Patch the rounding in invoice totals (5 times) - failed: "
            "AssertionError: expected 10.00 got 9.99 (attempt 5)",
            "Subtask qa-fix-3: tried Use Decimal quantize for invoice totals - succeeded"]
        hits = m.search("invoice totals rounding decimal", limit=5)
        assert any("quantize" in h.text for h in hits)
    assert compat.load_all_insights(spec_dir) == []  # not a session: the session API is unchanged


# ---- differential: the same calls through Auto-Claude's package and through graphmem.compat ----
FILLED = {"files_understood", "patterns_found", "gotchas_encountered"}  # README: filled from newer shapes


def _without_filled(gm: dict, real: dict) -> dict:
    """graphmem's session with the reference keys it fills in (documented) taken out again."""
    disc = gm.get("discoveries")
    if isinstance(disc, dict) and isinstance(real.get("discoveries"), dict):
        extra = set(disc) - set(real["discoveries"])
        assert extra <= FILLED, extra
        gm = {**gm, "discoveries": {k: v for k, v in disc.items() if k not in extra}}
    return gm


def test_compat_returns_what_autoclaude_memory_returns(tmp_path):
    backend = AUTOCLAUDE_DIR
    if not backend or not (Path(backend) / "memory" / "sessions.py").is_file():
        pytest.skip("set GRAPHMEM_AUTOCLAUDE_DIR to a checkout's apps/backend to compare with "
                    "Auto-Claude's own memory package")
    script = Path(__file__).parent / "autoclaude_scenario.py"
    outs = []
    for name, which in (("real", backend), ("graphmem", "graphmem")):
        spec = tmp_path / name / "specs" / "001"
        spec.mkdir(parents=True)
        run = subprocess.run([sys.executable, str(script), str(spec), which], capture_output=True,
                             text=True, env=dict(os.environ), timeout=300)
        assert run.returncode == 0, run.stderr
        outs.append(json.loads(run.stdout))
    real, gm = outs
    assert [_without_filled(g, r) for g, r in zip(gm["insights"], real["insights"])] == real["insights"]
    recent = [_without_filled(g, r) for g, r in zip(gm["summary"].pop("recent_insights"),
                                                   real["summary"].pop("recent_insights"))]
    assert recent == real["summary"].pop("recent_insights", recent)
    # the map also counts the file purposes of newer-shape sessions (documented)
    assert {k: gm["map"][k] for k in real["map"]} == real["map"]
    assert set(gm["map"]) - set(real["map"]) == {"src/billing/ledger.py", "src/refunds.py"}
    assert gm["summary"].pop("total_files_mapped") == real["summary"].pop("total_files_mapped") + 2
    for key in ("enabled", "memory_dir", "insights_dir", "save_1", "map_1", "map_file", "gotchas",
                "patterns", "gotchas_file", "summary", "after_clear"):
        assert gm[key] == real[key], key


def test_graph_on_graphiti_path_writes_files_and_graph(spec_dir, graph_on):
    """Auto-Claude's primary path (memory_manager: get_graphiti_memory, then
    save_structured_insights) on graphmem with its graph on: the session file is written as the
    agent gave it, and the graph holds what the files hold."""
    async def flow():
        mem = await compat.graphiti_helpers.get_graphiti_memory(spec_dir)
        assert mem is not None and mem.is_enabled
        try:
            return await mem.save_structured_insights({
                "session_num": 3, "subtask_id": "qa-2", "success": False,
                "file_insights": {"src/refunds.py": {"purpose": "reverses charged invoices"}},
                "gotchas_discovered": [{"gotcha": "Refunds post on the next business day"}]})
        finally:
            await mem.close()

    assert asyncio.run(flow()) is True
    saved = compat.load_all_insights(spec_dir)
    assert saved[0]["session_number"] == 3
    assert saved[0]["discoveries"]["file_insights"] == {"src/refunds.py": {
        "purpose": "reverses charged invoices"}}
    with Memory(spec_dir) as m:
        drift = m.drift()
        assert drift["graph"] == "on" and drift["missing"] == [], drift
        assert any("next business day" in h.text for h in m.search("refunds business day", limit=5))
