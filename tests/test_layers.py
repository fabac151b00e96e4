"""The layering contract. The folders are the layers: `lint-imports` checks the contracts in
pyproject.toml ([tool.importlinter]: one layer per folder, one adapter per foreign system, the
façade reached through Memory). What import-linter cannot express is checked here, from the code's
own imports (every ``import``, also inside functions): ``providers/``, which ships as
``graphmem.providers`` from outside ``src/`` where import-linter does not look; rules finer than a
folder (a module that may import less than its layer); and no import cycle anywhere."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = {"graphmem": REPO / "src" / "graphmem", "graphmem.providers": REPO / "providers"}

# The bottom layer: the types, the settings and small leaf utilities every layer may use.
BOTTOM = {"graphmem.errors", "graphmem.models", "graphmem.settings", "graphmem.config_sources",
          "graphmem.health", "graphmem.lru", "graphmem._sync"}

# module or package -> the graphmem modules (and packages) it may import, besides its own.
MAY_IMPORT: dict[str, set[str]] = {
    # The leaves providers/ rests on import nothing of graphmem (else its rule would be hollow).
    "graphmem.errors": set(),
    "graphmem.health": set(),
    "graphmem.lru": set(),
    "graphmem._sync": set(),
    # The spools read back by the hook processes and by search: the standard library only.
    "graphmem.agent_spool": set(),
    "graphmem.providers": BOTTOM,
    "graphmem.rules.turn_input": BOTTOM,
    "graphmem.cli.display": set(),
    # Reordering by code is a pure ranking stage over hits and anchor records (issue 17).
    "graphmem.code.reorder": BOTTOM | {"graphmem.code.anchors", "graphmem.code.code_caches",
                                       "graphmem.code.code_tuning"},
    # code/'s knobs and its caches' owner sit under every module of code/ that reads them.
    "graphmem.code.code_tuning": BOTTOM,
    "graphmem.code.code_caches": BOTTOM | {"graphmem.code.code_tuning"},
    # Code memory (issue 17): git history, the LLM's supersession judgement and the context
    # builder take what they need from below, never the façade, search or the graph.
    "graphmem.code.history": BOTTOM | {"graphmem.code.code_caches", "graphmem.code.code_tuning"},
    # A session's work (issue 17): git, the parsers and the snapshot, nothing of the anchors above it.
    "graphmem.code.changes": BOTTOM | {"graphmem.code.history", "graphmem.code.symbols",
                                       "graphmem.code.tree", "graphmem.code.code_tuning"},
    "graphmem.rules.supersession": BOTTOM | {"graphmem.code.anchors"},
    "graphmem.rules.context": BOTTOM | {"graphmem.index.text", "graphmem.files.insight_items",
                                        "graphmem.code"},
    # Session listing shares the home's database (``index.db``) and nothing else of index/.
    "graphmem.index.episode_index": BOTTOM | {"graphmem.files", "graphmem.index.db"},
    # The value every derived-store write is given instead of the façade.
    "graphmem.facade.scope": BOTTOM | {"graphmem.files.spec_store", "graphmem.identity"},
    # The source of truth: the bottom and the identity of its project, nothing else (no redaction:
    # the façade redacts before the files are written).
    "graphmem.files": BOTTOM | {"graphmem.identity"},
    # The graph writes the code knowledge it stores as File/Symbol nodes, never
    # ``code.about_answer`` (the façade's side of ``about``).
    "graphmem.graph": BOTTOM | {"graphmem.files", "graphmem.providers", "graphmem.redact",
                                "graphmem.code.roots", "graphmem.code.anchors",
                                "graphmem.code.freshness", "graphmem.code.mention",
                                "graphmem.code.tree"},
}

# packages inside which no import cycle may exist.
ACYCLIC = ["graphmem"]  # the whole package: no import cycle anywhere (issue 16's done-when)


def _module_name(root: str, base: Path, path: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root, *parts])


def modules() -> dict[str, Path]:
    """Every graphmem module by dotted name (providers/ ships as graphmem.providers)."""
    found = {}
    for root, base in SOURCES.items():
        for path in sorted(base.rglob("*.py")):
            found[_module_name(root, base, path)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The absolute names module ``name`` imports; ``from X import y`` counts as X.y when that
    is a module (and as X only when some name is not)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            mods = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            if len(mods) < len(node.names):  # ``from pkg import mod`` imports mod, not pkg's names
                out.add(target)
            out.update(mods)
    return out


def graph() -> dict[str, set[str]]:
    """module -> the modules it imports (graphmem modules and foreign ones)."""
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_walker_sees_known_edges():
    """The contract below means something only if the walker finds imports at all."""
    edges = graph()
    assert "graphmem.providers.onnx_runtime" in edges["graphmem.providers.local"]
    assert "graphmem.errors" in edges["graphmem.providers.local"]  # relative: ..errors
    assert "graphiti_core" in {e.split(".")[0] for e in edges["graphmem.graph.store"]}
    assert "graphmem.index.maxsim" in edges["graphmem.index.late"]  # inside a function


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_layer_imports_only_what_lies_below_it(package):
    allowed = MAY_IMPORT[package]
    bad = sorted(f"{mod} imports {dep}" for mod, deps in graph().items() if _inside(mod, package)
                 for dep in deps if _inside(dep, "graphmem") and not _inside(dep, package)
                 and not any(_inside(dep, ok) for ok in allowed))
    assert bad == [], f"{package} may import only {sorted(allowed)}:\n" + "\n".join(bad)


def test_import_linter_contracts_hold():
    """The folders are the layers: pyproject.toml's [tool.importlinter] contracts, as CI runs them."""
    linter = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(linter), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                       cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout and " KEPT" in r.stdout, r.stdout[-2000:]


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_cycle_inside(package):
    edges = {m: {d for d in deps if _inside(d, package) and d != m}
             for m, deps in graph().items() if _inside(m, package)}
    cycle = _find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if state.get(start) is None and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_cycles():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
