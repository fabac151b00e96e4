"""``graphmem sync`` as a user runs it: without a spec it replays every queued outbox of the home."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from graphmem import Memory, Settings
from graphmem.files.outbox import Outbox


def _queued_spec(root: Path, name: str, gotcha: str) -> Path:
    """A spec whose items were written while the graph was off, then queued as after an outage."""
    spec = root / name / "specs" / "001-feature"
    spec.mkdir(parents=True)
    with Memory(spec) as m:
        m.append_gotcha(gotcha)
        items = m.items()
    Outbox(spec / "memory").add(items, "simulated outage")
    return spec


def test_sync_without_a_spec_replays_every_outbox_of_the_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "off")
    specs = [_queued_spec(tmp_path, "shop", "stripe webhooks arrive twice"),
             _queued_spec(tmp_path, "blog", "the feed cache must be warmed")]
    quiet = tmp_path / "wiki" / "specs" / "001-feature"  # indexed, nothing queued: left alone
    quiet.mkdir(parents=True)
    Memory(quiet).append_pattern("pages render server-side")

    off = run_cli("sync", "--json")  # graph off: nothing can be replayed, the exit code says so
    assert off.returncode == 1, off.stderr
    assert json.loads(off.stdout)["remaining"] == 2 and json.loads(off.stdout)["graph"] == "off"

    graph_on = {"GRAPHMEM_GRAPH": "on", "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"}
    r = run_cli("sync", "--json", env=graph_on)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert sorted(s["spec_dir"] for s in report["specs"]) == sorted(str(s.resolve()) for s in specs)
    assert report["replayed"] == 2 and report["remaining"] == 0 and report["graph"] == "written"
    for spec in specs:
        assert not Outbox(spec / "memory").path.exists()
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    with Memory(specs[0], settings=Settings.load()) as m:
        drift = m.drift()
    assert drift["missing"] == [] and drift["in_graph"] == 1

    again = run_cli("sync", env=graph_on)  # nothing left: a human line, exit 0
    assert again.returncode == 0, again.stderr
    assert "replayed 0 item(s); 0 still queued" in again.stdout
