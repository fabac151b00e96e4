"""Session insights in today's Auto-Claude shape, mixed shapes, unknown fields, and retry loops.

Fixtures are written for these tests (``fixtures/autoclaude_spec``: today's shape, one session
mixing in the reference's keys and fields nobody planned for; ``fixtures/reference_spec``: the
reference's shape) and a generated 3,347-session QA loop (``bench/_autoclaude_spec.py``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.errors import ValidationError

from conftest import run_cli
from reference_impl import load_reference, reference_file, skip_reason

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _autoclaude_spec import LOOP_SUBTASK, write_spec

FIXTURES = Path(__file__).parent / "fixtures"
TODAY = FIXTURES / "autoclaude_spec"
REFERENCE = FIXTURES / "reference_spec"


def copy_spec(src: Path, tmp_path: Path, name: str = "001") -> Path:
    dst = tmp_path / "proj" / "specs" / name
    shutil.copytree(src, dst)
    return dst


def file_bytes(spec: Path) -> dict[str, bytes]:
    return {str(p.relative_to(spec)): p.read_bytes() for p in sorted(spec.rglob("*")) if p.is_file()}


def test_summary_counts_files_patterns_and_gotchas_of_todays_shape(tmp_path):
    spec = copy_spec(TODAY, tmp_path)
    before = file_bytes(spec)
    with Memory(spec) as m:
        s = m.summary()
        files = m.load_codebase_map()
        gotchas = m.load_gotchas()
        patterns = m.load_patterns()
    # session 1: two file_insights; session 2 (mixed): one file_insights + one files_understood
    assert (s["total_sessions"], s["total_files_mapped"], s["total_patterns"], s["total_gotchas"]) \
        == (2, 4, 2, 3)
    assert files["services/tiles/render_queue.go"] == \
        "Schedules map tile rendering jobs across GPU workers with backpressure"
    assert files["services/tiles/styles.go"] == "Loads Mapbox-style JSON and watches it for edits"
    hot = next(g for g in gotchas if g.startswith("Style sheets are hot-reloaded"))
    assert "Risk: half the tiles of a zoom level render with a stale palette" in hot
    assert "Mitigation: include the style hash in the cache key" in hot
    assert "Tile coordinates are always (z, x, y) in that order" in patterns
    assert file_bytes(spec) == before  # read, never rewritten: the agent's files are its own


def test_search_finds_a_gotcha_by_its_risk_and_a_file_by_its_purpose(tmp_path):
    spec = copy_spec(TODAY, tmp_path)
    with Memory(spec) as m:
        m.reindex()
        risk = m.search("tiles rendered with an outdated colour palette", limit=3)
        purpose = m.search("which file builds cache keys from the zoom level", kinds=["file"], limit=3)
        unknown = m.search("flicker between zoom levels while panning", limit=3)
        blocker = m.search("sparse texture fix from the driver team", limit=3)
        outcome = m.search("staging buffer overrun on zoom 14", kinds=["insight"], limit=5)
    assert risk[0].kind == "gotcha" and risk[0].text.startswith("Style sheets are hot-reloaded")
    assert purpose[0].metadata["path"] == "services/tiles/cache_keys.go"
    assert "TileKey" in purpose[0].text  # key exports are searchable beside the purpose
    # fields graphmem does not know are still indexed as insight text
    assert unknown[0].kind == "insight" and "Flicker between zoom levels" in unknown[0].text
    assert unknown[0].metadata["field"] == "qa_signoff"
    assert blocker[0].metadata["field"] == "blockers"
    assert any(h.metadata["field"] == "discoveries.approach_outcome" for h in outcome)


def test_reference_folder_keeps_the_reference_counts_and_mixed_folder_adds_todays(tmp_path):
    ref_spec = copy_spec(REFERENCE, tmp_path, "ref")
    with Memory(ref_spec) as m:
        s = m.summary()
        assert (s["total_files_mapped"], s["total_patterns"], s["total_gotchas"]) == (2, 2, 2)
        assert m.load_all_insights()[0]["discoveries"]["files_understood"] == \
            {"src/api/auth.py": "JWT authentication handler"}
    # the same folder plus one session in today's shape
    shutil.copy(TODAY / "memory" / "session_insights" / "session_001.json",
                ref_spec / "memory" / "session_insights" / "session_003.json")
    with Memory(ref_spec) as m:
        s = m.summary()
        assert (s["total_sessions"], s["total_files_mapped"], s["total_patterns"],
                s["total_gotchas"]) == (3, 4, 3, 3)
        insights = m.load_all_insights()
        m.reindex()
        old = m.search("close DB connections in workers", kinds=["gotcha"], limit=1)
        new = m.search("render jobs cancelled through their context", kinds=["pattern"], limit=1)
    assert old[0].text.startswith("Must close DB connections") or "closed" in old[0].text
    assert new[0].text.startswith("Workers receive a context with a deadline")
    # readers that know only the reference's keys find today's discoveries under them
    disc = insights[2]["discoveries"]
    assert disc["files_understood"]["services/tiles/cache_keys.go"].startswith("Builds cache keys")
    assert any(g.startswith("Style sheets are hot-reloaded") for g in disc["gotchas_encountered"])
    assert disc["file_insights"][0]["file_path"] == "services/tiles/render_queue.go"  # kept


def test_reference_module_reads_what_graphmem_writes_in_todays_shape(tmp_path):
    if reference_file() is None:
        pytest.skip(skip_reason())
    ref = load_reference(tmp_path / "refmod")
    spec = tmp_path / "proj" / "specs" / "001"
    spec.mkdir(parents=True)
    today = json.loads((TODAY / "memory" / "session_insights" / "session_001.json").read_text())
    for key in ("session_number", "timestamp"):
        today.pop(key)
    with Memory(spec) as m:
        m.save_session_insights(1, today)
        m.append_gotcha("Tiles below zoom 3 are pre-rendered")
        assert m.summary()["total_gotchas"] == 2
    loaded = ref.load_all_insights(spec)
    assert loaded[0]["discoveries"]["file_insights"] == today["discoveries"]["file_insights"]
    assert loaded[0]["subtask_id"] == "subtask-1-2" and loaded[0]["success"] is True
    summary = ref.get_memory_summary(spec)
    assert summary["total_sessions"] == 1 and summary["total_gotchas"] == 1
    assert ref.load_gotchas(spec) == ["Tiles below zoom 3 are pre-rendered"]


@pytest.mark.parametrize("bad, field", [
    ({"discoveries": {"file_insights": [{"file_path": "/etc/passwd", "purpose": "x"}]}},
     "insights.discoveries.file_insights[0].file_path"),
    ({"discoveries": {"file_insights": [{"purpose": "no path"}]}},
     "insights.discoveries.file_insights[0].file_path"),
    ({"discoveries": {"file_insights": ["src/a.py"]}}, "insights.discoveries.file_insights[0]"),
    ({"discoveries": {"gotchas_discovered": [{"gotcha": 5}]}},
     "insights.discoveries.gotchas_discovered[0]"),
    ({"discoveries": {"patterns_discovered": [{"pattern": "a\x00b"}]}},
     "insights.discoveries.patterns_discovered[0]"),
    ({"discoveries": {"approach_outcome": ["done"]}}, "insights.discoveries.approach_outcome"),
    ({"success": "yes"}, "insights.success"),
])
def test_graphmem_writes_todays_shape_strictly(spec_dir, bad, field):
    with Memory(spec_dir) as m:
        with pytest.raises(ValidationError) as err:
            m.save_session_insights(1, bad)
    assert err.value.field.startswith(field), err.value.field
    assert not (spec_dir / "memory" / "session_insights" / "session_001.json").exists()


# ---- retry loops ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """A spec of 3,347 sessions: 40 productive ones, then a QA loop failing the same way."""
    root = tmp_path_factory.mktemp("loop")
    spec = root / "proj" / "specs" / "007-qa-loop"
    write_spec(spec, total=3347, productive=40)
    return spec


def test_a_3000_session_retry_loop_is_a_handful_of_items_with_counts(loop):
    with Memory(loop) as m:
        every = m.files.insight_items()
    items = [it for it in every if it.metadata["count"] > 100]
    rounds = [it for it in every if int(it.metadata["last_session"]) > 40]
    # 3,307 rounds of the loop are a handful of memories (old code: one or more per session);
    # the 40 productive sessions before it keep their distinct lessons
    assert len(rounds) <= 10, [it.text for it in rounds]
    assert len(every) < 300
    failed = next(it for it in items if it.text == f"Failed to complete subtask: {LOOP_SUBTASK}")
    # rounds alternate failed / implemented: 3,307 loop rounds, the odd ones failed
    assert failed.metadata["count"] == 1654
    assert failed.metadata["first_session"] == "41" and failed.metadata["last_session"] == "3347"
    assert failed.metadata["first"] < failed.metadata["last"]
    outcome = next(it for it in items if it.text.startswith("Approach outcome: failed"))
    assert outcome.metadata["count"] == 1654  # "attempt 1", "attempt 3" ... are one memory
    assert "attempt 3307" in outcome.text  # the latest wording
    # distinct subtasks without a loop are not merged for sharing a shape
    worked = [it for it in every if it.text.startswith("Writing the test for")]
    assert len(worked) == 40


def test_search_context_and_consolidation_show_the_count(loop, isolated_env):
    with Memory(loop) as m:
        counts = m.reindex()
        hits = m.search("failed to complete the QA subtask", limit=10)
        merge = m.search("what did the sessions learn about merge conflicts", limit=3)
        context = m.context("why does the QA fix keep failing", max_tokens=600)
        report = m.consolidate(sessions=3347)
    assert counts["items"] < 300  # 3,347 sessions: old code indexed one or more per session
    # the symptom: this search returned subtask names; now the gotcha answers it
    assert merge[0].kind == "gotcha" and merge[0].text.startswith("The lockfile conflicts")
    texts = [h.text for h in hits]
    assert len(texts) == len(set(texts))  # one hit per memory, not one per session
    failed = next(h for h in hits if h.text == f"Failed to complete subtask: {LOOP_SUBTASK}")
    assert failed.metadata["count"] == 1654
    assert "seen in 1654 sessions (sessions 41-3347, 2026-10-01 to 2026-10-17)" in context
    assert context.count(f"Failed to complete subtask: {LOOP_SUBTASK}") == 1
    summary = Path(report["path"]).read_text()
    line = next(ln for ln in summary.splitlines() if f"Failed to complete subtask: {LOOP_SUBTASK}" in ln)
    assert "seen in 1654 sessions, latest session 3347, earliest session 41" in line
    assert len(summary) < 20_000  # not thousands of session labels
    assert "Bank feed timestamps are local to the bank" in summary  # today's gotchas summarised
    failed_section = summary.split("## What failed")[1].split("\n## ")[0]
    assert "Approach outcome: failed. Summary: QA rejected attempt 3307" in failed_section
    out = run_cli("search", "failed to complete the QA subtask", "--spec-dir", str(loop))
    assert out.returncode == 0, out.stderr
    assert "seen in 1654 sessions" in out.stdout


def test_saving_another_round_of_a_loop_updates_the_count(spec_dir):
    with Memory(spec_dir) as m:
        for n in (1, 2, 3):
            m.save_session_insights(n, {"what_failed": [f"Attempt {n}: lint still fails"],
                                        "subtask_id": "fix-lint", "success": False})
        m.save_session_insights(4, {"what_failed": ["Lesson 4"]})
        m.save_session_insights(5, {"what_failed": ["Lesson 5"]})
        hits = m.search("lint still fails", kinds=["insight"], limit=10)
        lessons = m.search("Lesson", kinds=["insight"], limit=10)
    lint = [h for h in hits if "lint still fails" in h.text]
    assert len(lint) == 1 and lint[0].metadata["count"] == 3
    assert lint[0].text == "Attempt 3: lint still fails" and lint[0].session == "3"
    assert {h.text for h in lessons} >= {"Lesson 4", "Lesson 5"}  # no subtask: kept apart


def test_a_gotcha_in_a_session_and_in_gotchas_md_is_one_memory(spec_dir):
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {"discoveries": {"gotchas_discovered": ["Ports below 1024 need root"]}})
        m.save_session_insights(2, {"discoveries": {"gotchas_discovered": ["Ports below 1024 need root"]}})
        m.append_gotcha("Ports below 1024 need root")
        items = [it for it in m.items() if it.kind == "gotcha"]
        assert m.summary()["total_gotchas"] == 1
    assert len({it.id for it in items}) == 1  # same id: the index holds it once
    assert max(it.metadata.get("count", 0) for it in items) == 2


def test_shapes_nobody_planned_for_are_read_for_their_text_never_an_error(spec_dir):
    folder = spec_dir / "memory" / "session_insights"
    folder.mkdir(parents=True)
    odd = {
        "session_number": 1, "timestamp": "not a time", "success": "maybe", "subtask_id": ["x"],
        "what_worked": "a string, not a list",
        "what_failed": [None, 7, {"step": "migrate", "error": "lock timeout on the orders table"}],
        "discoveries": {
            "file_insights": {"src/orders.py": {"purpose": "order state machine"},
                              "src/empty.py": {"lines_added": 3}},
            "gotchas_discovered": "one gotcha as a bare string: retries double-charge cards",
            "patterns_discovered": [1, None, {"name": "Idempotency keys on every charge"}],
            "approach_outcome": "done",
            "deep": [[[[[[[[[[[["too deep to matter"]]]]]]]]]]]],
        },
        "future_field": {"lesson": "the payment sandbox resets every night"},
        "trace": json.loads("[" * 700 + "]" * 700),  # parses, but deeper than pickle or deepcopy go
    }
    (folder / "session_001.json").write_text(json.dumps(odd))
    (folder / "session_002.json").write_text("[" * 5000 + "]" * 5000)  # valid JSON, absurdly deep
    (folder / "session_003.json").write_text(json.dumps({"discoveries": ["not", "an", "object"]}))
    with pytest.warns(Warning, match="session_002.json"):
        with Memory(spec_dir) as m:
            s = m.summary()
            assert m.load_all_insights()[0]["future_field"] == odd["future_field"]
            texts = [it.text for it in m.items()]
            m.reindex()
            hits = m.search("payment sandbox resets nightly", limit=3)
            report = m.consolidate()
    assert s["total_sessions"] == 2 and s["total_files_mapped"] == 1  # src/empty.py: no purpose
    assert s["total_gotchas"] == 1 and s["total_patterns"] == 1
    assert "Step: migrate. Error: lock timeout on the orders table" in texts
    assert "a string, not a list" in texts and {"not", "an", "object"} <= set(texts)
    assert not any("too deep" in t for t in texts)
    assert hits[0].metadata["field"] == "future_field"
    assert report["sessions_scanned"] == 2


def test_mcp_takes_todays_shape_and_its_search_shows_the_count(spec_dir):
    import anyio
    from mcp import Client

    from graphmem.serve.mcp_server import build_server

    today = json.loads((TODAY / "memory" / "session_insights" / "session_001.json").read_text())
    for key in ("session_number", "timestamp"):
        today.pop(key)

    def data(result) -> dict:
        assert not result.is_error, result.content
        return result.structured_content

    async def main():
        async with Client(build_server(spec_dir)) as c:
            data(await c.call_tool("save_session_insights", {"session_num": 1, "insights": today}))
            for n in (2, 3):
                data(await c.call_tool("save_session_insights", {"session_num": n, "insights": {
                    "what_failed": [f"Render soak test timed out after {n * 10} minutes"],
                    "subtask_id": "soak-1", "success": False}}))
            bad = await c.call_tool("save_session_insights", {"session_num": 4, "insights": {
                "discoveries": {"file_insights": [{"file_path": "/etc/hosts", "purpose": "x"}]}}})
            assert bad.is_error and "file_insights" in str(bad.content)
            summary = data(await c.call_tool("memory_summary", {}))
            hits = data(await c.call_tool("search_memory", {"query": "soak test timed out"}))["hits"]
            return summary, hits

    summary, hits = anyio.run(main)
    assert (summary["total_sessions"], summary["total_files_mapped"], summary["total_gotchas"]) == (3, 2, 1)
    soak = [h for h in hits if "soak test timed out" in h["text"]]
    assert len(soak) == 1 and soak[0]["metadata"]["count"] == 2
    saved = json.loads((spec_dir / "memory" / "session_insights" / "session_001.json").read_text())
    assert saved["discoveries"]["gotchas_discovered"] == today["discoveries"]["gotchas_discovered"]


def test_saving_a_round_again_recounts_what_it_shared(spec_dir):
    same = {"what_failed": ["Migration 12 timed out on the orders table"], "subtask_id": "migrate",
            "success": False}
    with Memory(spec_dir) as m:
        m.save_session_insights(1, same)
        m.save_session_insights(2, same)
        assert m.search("migration timed out", kinds=["insight"])[0].metadata["count"] == 2
        m.save_session_insights(2, {"what_worked": ["Splitting the migration in batches"],
                                    "subtask_id": "migrate", "success": True})
        hits = m.search("migration timed out orders table", kinds=["insight"], limit=5)
    timed_out = [h for h in hits if "timed out" in h.text]
    assert len(timed_out) == 1 and timed_out[0].metadata["count"] == 1
    assert timed_out[0].metadata["last_session"] == "1"


def test_saving_over_a_session_file_holding_a_list_keeps_the_list_aside(spec_dir):
    folder = spec_dir / "memory" / "session_insights"
    folder.mkdir(parents=True)
    (folder / "session_001.json").write_text('["an agent wrote a list here"]')
    with Memory(spec_dir) as m:
        with pytest.warns(Warning, match="holds a JSON list"):
            m.save_session_insights(1, {"what_worked": ["fresh"]})
    [side] = folder.glob("session_001.json.corrupt-*")
    assert side.read_text() == '["an agent wrote a list here"]'


def test_consolidation_embeds_each_fact_once_per_embedder():
    import asyncio

    from graphmem.rules.consolidate import Fact, near_dedupe

    class Counting:
        name, dimension, embedded = "counting", 3, 0

        async def embed(self, texts):
            self.embedded += len(texts)
            return [[1.0, 0.0, 0.0] if "cache" in t else [0.0, 1.0, 0.0] for t in texts]

    emb = Counting()
    texts = ["the cache is per worker", "tokens expire hourly", "the cache is per worker!"]
    for _ in range(3):  # a server consolidating again: the same facts are not embedded again
        kept, dropped = asyncio.run(near_dedupe([Fact("gotcha", t, ["s1"]) for t in texts], emb))
    assert emb.embedded == 3
    assert dropped == 1 and [f.text for f in kept] == texts[:2]


def test_an_index_built_with_per_session_ids_is_caught_up_once(spec_dir, isolated_env):
    """An index from before retry loops collapsed holds one insight row per session; the first
    search after the upgrade reconciles the project with its files (no copies left)."""
    import asyncio
    import sqlite3

    from graphmem.models import MemoryItem, stable_id

    same = {"what_failed": ["The e2e suite times out on the checkout page"]}
    with Memory(spec_dir) as m:
        m.save_session_insights(1, same)
        m.save_session_insights(2, same)
        project, spec = m.files._scope()  # as items name them
        old_rows = [MemoryItem(id=stable_id(project, spec, "insight", str(n), "what_failed",
                                            same["what_failed"][0]),
                               kind="insight", text=same["what_failed"][0], project=project,
                               spec=spec, session=str(n)) for n in (1, 2)]
        asyncio.run(m.aio.derived.local.index.upsert(old_rows))  # as the old code indexed them
    db = sqlite3.connect(isolated_env / "index.sqlite3")
    with db:  # the database's mark as the old code wrote it
        db.execute("UPDATE search_meta SET key = 'caught_up:' || substr(key, 13) "
                   "WHERE key LIKE 'caught_up:2:%'")
    db.close()
    with Memory(spec_dir) as m:
        hits = m.search("e2e suite times out on checkout", kinds=["insight"], limit=10)
    assert [h.metadata.get("count") for h in hits if "e2e suite" in h.text] == [2]


def test_a_replayed_index_write_brings_the_count_up_to_date(spec_dir):
    """The index journal's replay reconciles by content hash; a retry item's count changes
    while its text does not, so the replay rewrites it too."""
    import asyncio

    from graphmem.facade import repair

    same = {"what_failed": ["Flaky: test_upload_resumes"], "subtask_id": "fix-upload", "success": False}
    with Memory(spec_dir) as m:
        m.save_session_insights(1, same)
        # session 2 reaches the files but not the index (as when its index write failed)
        m.files.save_session_insights(2, same)
        project, spec = m.files._scope()
        asyncio.run(repair.reconcile(m.aio.derived.local.index, project, m.files.items(), spec=spec))
        hits = m.search("flaky upload test", kinds=["insight"], limit=3)
    assert hits[0].metadata["count"] == 2
