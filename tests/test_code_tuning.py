"""Code memory's knobs are one frozen ``CodeTuning`` in force per process, read when code runs
(a replaced value changes the next search), and its caches one ``CodeCaches`` whose ``forget``
empties every cache of a read."""

from __future__ import annotations

import dataclasses

import pytest

from graphmem import Memory
from graphmem.code import code_tuning, forget_caches
from graphmem.code.code_caches import CACHES
from graphmem.errors import ValidationError
from test_code_freshness import PAY, commit, project


def test_a_tuning_is_frozen_and_only_a_code_tuning_is_put_in_force():
    before = code_tuning.current()
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.file_gain = 0.0  # type: ignore[misc]
    for bad in (None, {"file_gain": 0.0}, "fast"):
        with pytest.raises(ValidationError) as err:
            code_tuning.use(bad)  # type: ignore[arg-type]
        assert err.value.field == "tuning"
    assert code_tuning.current() is before  # a refused value replaced nothing


def test_a_replaced_tuning_changes_the_next_search(tmp_path, tune_code):
    """The gone hit drops ``gone_drop`` places: read at each search, not at import."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/gone.py": "def old_helper():\n    pass\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("old_helper in src/gone.py rounds the refund amount")
        for n in range(6):
            mem.append_gotcha(f"refund amount note {n} about the order total")
        (root / "src" / "gone.py").unlink()
        commit(root, "drop gone.py")

        def place() -> int:
            hits = mem.search("old_helper rounds the refund amount", scope="project", limit=10)
            return [h.text for h in hits].index("old_helper in src/gone.py rounds the refund amount")

        tune_code(gone_drop=None)  # below every other hit
        last = place()
        tune_code(gone_drop=0)  # where the ranking put it
        assert place() < last


def test_forget_empties_every_cache_of_a_read(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` in src/pay.py rounds half up")
        (root / "src" / "pay.py").write_text(PAY + "\n\ndef more():\n    return 2\n")
        commit(root, "more")
        mem.search("refund rounds half up", scope="project", limit=5)
        assert CACHES.snapshots and CACHES.histories and len(CACHES.query_symbols)  # filled
        compacted = dict(CACHES.compacted)
        forget_caches()
        reads = {name: value for name, value in vars(CACHES).items()
                 if name != "compacted" and not name.endswith("_lock")}
        assert all(len(v) == 0 for v in reads.values()), {k: len(v) for k, v in reads.items() if len(v)}
        assert CACHES.compacted == compacted  # when a file may compact again is no read
