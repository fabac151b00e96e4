"""``graphmem search``, ``context`` and ``reindex`` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from graphmem import Memory


def _project(tmp_path: Path) -> tuple[Path, Path]:
    spec = tmp_path / "shop" / "specs" / "001-cart"
    spec.mkdir(parents=True)
    with Memory(spec) as m:
        m.append_gotcha("Stripe webhooks arrive twice; make the handler idempotent")
        m.update_codebase_map({"app/cart/checkout.py": "builds the order and charges the card"})
    return spec, spec.parent.parent


def test_search_context_and_reindex_from_the_command_line(tmp_path: Path):
    spec, project = _project(tmp_path)
    r = run_cli("search", "payment notifications delivered more than once", "--project-dir",
                str(project), "--json", "--limit", "1")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits[0]["kind"] == "gotcha" and hits[0]["backend"] == "local"
    assert hits[0]["source"].endswith("memory/gotchas.md")

    r = run_cli("search", "app/cart/checkout.py", "--spec-dir", str(spec), "--kind", "file")
    assert r.returncode == 0 and "app/cart/checkout.py" in r.stdout

    r = run_cli("context", "change the checkout flow and its webhooks", "--max-tokens", "200",
                cwd=project)
    assert r.returncode == 0, r.stderr
    assert "### Gotchas" in r.stdout and "Stripe webhooks" in r.stdout

    where = Path(json.loads(run_cli("search", "stripe", "--project-dir", str(project),
                                   "--json").stdout)[0]["project"])
    assert where == project.resolve()
    r = run_cli("reindex", "--project-dir", str(project), "--json")
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)
    assert counts["items"] == 2 and counts["specs"] == 1 and counts["embedded"] == 0
    assert r.stderr == ""


def test_reindex_old_project_spelling_still_works_with_a_warning(tmp_path: Path):
    _, project = _project(tmp_path)
    r = run_cli("reindex", "--project", str(project), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["project"] == str(project.resolve())
    assert "--project is deprecated; use --project-dir" in r.stderr
    assert "--project " not in run_cli("reindex", "--help").stdout.replace("--project-dir", "")


def test_cli_rejects_garbage_with_one_clear_line(tmp_path: Path):
    _, project = _project(tmp_path)
    cases = [(["search", "", "--project-dir", str(project)], "query"),
             (["search", "x", "--project-dir", str(project), "--limit", "0"], "limit"),
             (["search", "x", "--project-dir", str(project), "--scope", "galaxy"], "--scope"),
             (["search", "x", "--project-dir", str(project), "--kind", "bogus"], "--kind"),
             (["context", "x", "--project-dir", str(project), "--max-tokens", "0"], "max_tokens"),
             (["search", "x", "--project-dir", str(tmp_path / "missing")], "not found"),
             (["reindex", "--project-dir", str(tmp_path / "missing")], "not found")]
    for args, needle in cases:
        r = run_cli(*args)
        assert r.returncode != 0, args
        assert needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
