"""One scenario run against a ``memory`` package, printed as JSON: Auto-Claude's own (with its
``apps/backend`` as argv[2]) or graphmem.compat (argv[2] = "graphmem"). Timestamps are masked,
paths made relative to the spec, so the two outputs compare equal where the packages agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

spec = Path(sys.argv[1])
if sys.argv[2] == "graphmem":
    import graphmem.compat

    graphmem.compat.install()
else:
    sys.path.insert(0, sys.argv[2])

import memory  # noqa: E402

REFERENCE = {
    "subtasks_completed": ["subtask-1", "subtask-2"],
    "discoveries": {"files_understood": {"src/api/auth.py": "JWT authentication handler"},
                    "patterns_found": ["Use async/await for all DB calls"],
                    "gotchas_encountered": ["Must close DB connections in workers"]},
    "what_worked": ["Added error handling first"], "what_failed": ["Inline validation"],
    "recommendations_for_next_session": ["Focus on integration tests next"],
}
NEWER = {"subtasks_completed": ["qa-1"], "discoveries": {
    "file_insights": [{"file": "src/billing/ledger.py", "purpose": "posts ledger entries"}]}}
OBJECT = {"discoveries": {"file_insights": {"src/refunds.py": {"purpose": "reverses charges"}}},
          "what_worked": "a text, not a list"}


def mask(value):
    """Timestamps out; what is left compares across packages."""
    if isinstance(value, dict):
        return {k: "<time>" if k in ("timestamp", "last_updated") else mask(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


out = {}
out["enabled"] = memory.is_graphiti_memory_enabled()
out["memory_dir"] = str(memory.get_memory_dir(spec).relative_to(spec))
out["insights_dir"] = str(memory.get_session_insights_dir(spec).relative_to(spec))
out["save_1"] = memory.save_session_insights(spec, 1, REFERENCE)
memory.save_session_insights(spec, 2, {"what_worked": ["second"]})
memory.save_session_insights(spec, 10, NEWER)
memory.save_session_insights(spec, 11, OBJECT)
memory.save_session_insights(spec, 2, {"what_failed": ["saved again"]})
out["insights"] = mask(memory.load_all_insights(spec))
out["map_1"] = memory.update_codebase_map(spec, {"src/a.py": "entry point", "src/b.py": "helpers"})
memory.update_codebase_map(spec, {"src/b.py": "helpers, renamed", "src/c.py": "more"})
out["map"] = memory.load_codebase_map(spec)
out["map_file"] = mask(json.loads((spec / "memory/codebase_map.json").read_text()))
for g in ["Close the pool", "Rate limits: 100/min", "Close the pool", "  ", "Close the pool  "]:
    memory.append_gotcha(spec, g)
for p in ["Decimal for money", "Decimal for money"]:
    memory.append_pattern(spec, p)
out["gotchas"] = memory.load_gotchas(spec)
out["patterns"] = memory.load_patterns(spec)
out["gotchas_file"] = (spec / "memory/gotchas.md").read_text()
out["summary"] = mask(memory.get_memory_summary(spec))
memory.clear_memory(spec)
out["after_clear"] = [memory.load_all_insights(spec), memory.load_codebase_map(spec),
                      memory.load_gotchas(spec), memory.load_patterns(spec)]
print(json.dumps(out, indent=1, sort_keys=True))
