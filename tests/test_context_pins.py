"""``context(files=[...])`` keeps its relevance floor: pinning the memory that best matches the
task must not let every weak match in (the floor is a share of the best score, and the pinned
memory was left out of that best, so the next weak match became the bar)."""

from __future__ import annotations

from graphmem import Memory
from test_code_freshness import project

NAMES = ["alpha", "bravo", "charlie", "delta", "echo"]
HELPER = "`helper` in lib/cache.py caches tokens forever"


def test_pinning_the_best_match_lets_no_weak_match_in(tmp_path):
    files = {f"src/{n}.py": f"def {n}_step(x):\n    return x\n" for n in NAMES}
    files["lib/cache.py"] = "def helper():\n    return 1\n"
    root, spec = project(tmp_path, files)
    with Memory(spec, root) as mem:
        sid = mem.start_session()
        for n in NAMES:
            mem.record_turn(sid, "user", f"please tidy src/{n}.py")
        mem.append_gotcha(HELPER)
        alone = mem.context("helper caches tokens forever")
        pinned = mem.context("helper caches tokens forever", files=["lib/cache.py"])
    assert HELPER in alone and "please tidy" not in alone
    assert HELPER in pinned and "please tidy" not in pinned, pinned
