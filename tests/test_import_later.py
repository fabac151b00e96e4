"""``import --embed later`` (issue 36, a large auto-memory folder fast): the notes go into the files
and into the index by their words at once (a search finds them right away), and the next
``reindex`` embeds exactly those, after which they carry vectors like any other. Real files,
the real index and model, the CLI as a subprocess."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import ValidationError
from test_code_freshness import commit, git

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from import_memory import write_folder  # the bench's own synthetic folder


def setup(tmp_path: Path, files: int) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    folder = tmp_path / "memory"
    write_folder(folder, root, files)
    commit(root, "start")
    return root, folder


def unembedded(m: Memory) -> int:
    return len(m.derived.local.index.texts_without_vectors())


def test_later_indexes_by_words_now_and_reindex_embeds_exactly_those(tmp_path):
    root, folder = setup(tmp_path, 12)
    with Memory(None, root) as m:
        r = m.import_paths([folder], embed="later")
        notes = sum(r["took"].values())
        assert r["embed"] == "later" and notes == 44
        assert unembedded(m) == notes  # not one note went through the model
        hit = m.search("handle_7 request thread billing", limit=3)
        assert "handle_7()" in hit[0].text  # found by its words at once
        m.append_gotcha("Never deploy on a Friday afternoon")  # an ordinary write still embeds
        assert unembedded(m) == notes
        counts = m.reindex()
        assert counts["embedded"] == notes and unembedded(m) == 0
        assert "handle_7()" in m.search("handle_7 request thread billing", limit=3)[0].text
        again = m.import_paths([folder], embed="later")  # idempotent: nothing new, no rows lost
        assert sum(v for k, v in again["added"].items() if k != "validity") == 0
        assert unembedded(m) == 0


def test_the_cli_starts_the_reindex_that_embeds_them(tmp_path):
    root, folder = setup(tmp_path, 6)
    p = run_cli("import", str(folder), "--embed", "later", "--json", "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["embed"] == "later" and report["reindex_pid"] > 0
    deadline = time.monotonic() + 180
    with Memory(None, root) as m:
        while unembedded(m):
            assert time.monotonic() < deadline, "the background reindex never embedded them"
            time.sleep(0.5)
        assert len(m.derived.local.index.ids(m.project.key)) >= sum(report["took"].values())


def test_a_bad_embed_value_is_refused_naming_it_and_nothing_is_written(tmp_path):
    root, folder = setup(tmp_path, 3)
    with Memory(None, root) as m:
        with pytest.raises(ValidationError) as err:
            m.import_paths([folder], embed="soon")
    assert "embed" in str(err.value) and "soon" in str(err.value)
    assert not (root / ".graphmem" / "memory" / "gotchas.md").exists()
    p = run_cli("import", str(folder), "--embed", "soon", "--project-dir", str(root))
    assert p.returncode != 0 and "--embed" in p.stderr
