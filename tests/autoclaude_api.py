"""The public interface of Auto-Claude's memory code, read from its source with ``ast``.

Only names and parameters are taken (no code): for each module, its functions (sync or async,
each parameter's name, kind and default as written) and the names it imports from its own
package; for ``GraphitiMemory``, its public methods and properties. ``tests/fixtures/
autoclaude_memory_api.json`` holds what this read from Auto-Claude's main branch; set
``GRAPHMEM_AUTOCLAUDE_DIR`` to a checkout's ``apps/backend`` to compare against it directly.

    python tests/autoclaude_api.py PATH/TO/apps/backend > tests/fixtures/autoclaude_memory_api.json
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

# Auto-Claude module (under apps/backend) -> the graphmem module that stands in for it.
MODULES = {
    "memory/__init__.py": "graphmem.compat",
    "memory/paths.py": "graphmem.compat.paths",
    "memory/sessions.py": "graphmem.compat.sessions",
    "memory/codebase_map.py": "graphmem.compat.codebase_map",
    "memory/patterns.py": "graphmem.compat.patterns",
    "memory/summary.py": "graphmem.compat.summary",
    "memory/graphiti_helpers.py": "graphmem.compat.graphiti_helpers",
    "memory/main.py": "graphmem.compat.main",
    "integrations/graphiti/memory.py": "graphmem.compat.graphiti",
    "integrations/graphiti/queries_pkg/graphiti.py": "graphmem.compat.graphiti",
    "integrations/graphiti/queries_pkg/schema.py": "graphmem.compat.graphiti",
}
CONFIG_FUNCTIONS = ["is_graphiti_enabled", "get_graphiti_status", "get_available_providers",
                    "validate_graphiti_config"]  # of integrations/graphiti/config.py


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[list]:
    a = fn.args
    out: list[list] = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        out.append([arg.arg, "positional", None if default is None else ast.unparse(default)])
    if a.vararg:
        out.append([a.vararg.arg, "var_positional", None])
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append([arg.arg, "keyword_only", None if default is None else ast.unparse(default)])
    if a.kwarg:
        out.append([a.kwarg.arg, "var_keyword", None])
    return out


def _function(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    return {"async": isinstance(fn, ast.AsyncFunctionDef), "params": _params(fn)}


def module_api(source: str, config: bool = False) -> dict:
    """Functions, constants, classes and package-relative imports of one module's source."""
    tree = ast.parse(source)
    api: dict = {"functions": {}, "imports": [], "constants": [], "classes": {}}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            if not config or node.name in CONFIG_FUNCTIONS:
                api["functions"][node.name] = _function(node)
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                ("memory", "graphiti_config"))):
            api["imports"] += [a.asname or a.name for a in node.names]
        elif isinstance(node, ast.Assign) and not config:
            api["constants"] += [t.id for t in node.targets
                                 if isinstance(t, ast.Name) and t.id.isupper()]
        elif isinstance(node, ast.ClassDef) and not config:
            members = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        not item.name.startswith("_") or item.name == "__init__"):
                    prop = any(isinstance(d, ast.Name) and d.id == "property"
                               for d in item.decorator_list)
                    members[item.name] = {"property": True} if prop else _function(item)
                elif isinstance(item, ast.Assign):
                    for t in item.targets:
                        if isinstance(t, ast.Name) and t.id.isupper():
                            members[t.id] = {"constant": True}
            api["classes"][node.name] = members
    for key in ("imports", "constants"):
        api[key] = sorted(set(api[key]))
    return api


def extract(backend: Path) -> dict:
    """The whole interface, keyed by Auto-Claude module path."""
    out = {path: module_api((backend / path).read_text(encoding="utf-8")) for path in MODULES}
    out["integrations/graphiti/config.py"] = module_api(
        (backend / "integrations/graphiti/config.py").read_text(encoding="utf-8"), config=True)
    return out


if __name__ == "__main__":
    data = {"source": "AndyMik90/Auto-Claude apps/backend (AGPL-3.0): interface names and "
                      "parameters only, read with ast by tests/autoclaude_api.py; no code",
            "modules": extract(Path(sys.argv[1]))}
    if len(sys.argv) > 2:
        data["commit"] = sys.argv[2]
    print(json.dumps(data, indent=1, sort_keys=True))
