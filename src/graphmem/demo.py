"""``python -m graphmem.demo`` (``make demo``): the whole job on a realistic scenario, timed.

Two projects of a coding agent's life (``demo_data/*.json``, shipped in the package) are saved
through the public API: sessions with conversation turns, insights, codebase discoveries,
patterns and gotchas. Then: three searches (one only meaning can answer, one exact file path,
one across projects), a prompt context for a new task, a consolidation and a doctor report.

Everything happens in a fresh folder (default ``./.graphmem-demo``) with its own
``GRAPHMEM_HOME`` and embedded FalkorDB, so the user's real memory is never touched. No key is
needed; provider keys already in the environment are used. Exit status 1 when any step fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

MARKER = ".graphmem-demo"  # marks a folder the demo created, so only such folders are wiped
PROJECT_FILES = ("shopfront.json", "telemetry.json")
# The demo's graph is its own embedded one: a user's external server is never written to.
_EXTERNAL_GRAPH_VARS = ("GRAPHMEM_FALKORDB_URL", "GRAPHITI_FALKORDB_HOST", "GRAPHITI_FALKORDB_PORT",
                        "GRAPHITI_FALKORDB_PASSWORD")


def load_data(name: str) -> dict[str, Any]:
    """One scenario file shipped in ``graphmem/demo_data``."""
    return json.loads((resources.files("graphmem") / "demo_data" / name).read_text("utf-8"))


def stems(text: str) -> set[str]:
    """Lower-cased, Snowball-stemmed word tokens (``charged`` and ``charges`` are one word)."""
    import Stemmer

    return set(Stemmer.Stemmer("english").stemWords(re.findall(r"[a-z0-9]+", text.lower())))


@dataclass
class Step:
    """One timed step of the demo and what came of it."""

    name: str
    seconds: float = 0.0
    ok: bool = True
    result: str = ""
    data: dict[str, Any] = field(default_factory=dict)


class Demo:
    """Runs the scenario in ``root`` and records every step."""

    def __init__(self, root: Path, graph: bool = True):
        self.root = root
        self.graph = graph
        self.steps: list[Step] = []
        self.projects: dict[str, dict[str, Any]] = {}  # name -> {data, dir, spec, memory}
        self.server = None

    # ---- bookkeeping ----------------------------------------------------------------------
    @contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Time the block; an exception marks the step failed instead of ending the demo."""
        st = Step(name)
        start = time.perf_counter()
        try:
            yield st
        except Exception as exc:  # a failed step is reported, and the demo goes on
            st.ok = False
            st.result = f"{type(exc).__name__}: {exc}"
            if os.environ.get("GRAPHMEM_DEMO_DEBUG"):
                traceback.print_exc()
        st.seconds = time.perf_counter() - start
        self.steps.append(st)

    def check(self, st: Step, condition: bool, failure: str) -> None:
        """Mark ``st`` failed, saying why, unless ``condition`` holds."""
        if not condition:
            st.ok = False
            st.result = f"{st.result}  FAILED: {failure}".strip()

    # ---- steps ----------------------------------------------------------------------------
    def prepare(self) -> None:
        with self.step("prepare a fresh folder") as st:
            if self.root.exists():
                if not (self.root / MARKER).exists() and any(self.root.iterdir()):
                    raise RuntimeError(f"{self.root} exists and was not made by the demo; "
                                       "pick another --dir")
                _stop_leftover_server(self.root / "home")
                shutil.rmtree(self.root)
            (self.root / "home").mkdir(parents=True)
            (self.root / MARKER).write_text("made by python -m graphmem.demo; safe to delete\n")
            for var in _EXTERNAL_GRAPH_VARS:
                os.environ.pop(var, None)
            for var in ("GRAPHMEM_CONFIG", "GRAPHMEM_ENV_FILE"):  # files the user named: keep them
                if os.environ.get(var):
                    os.environ[var] = str(Path(os.environ[var]).resolve())
            os.chdir(self.root)  # so a graphmem.toml in the user's folder is not read
            os.environ["GRAPHMEM_HOME"] = str(self.root / "home")
            os.environ["GRAPHMEM_GRAPH"] = "on" if self.graph else "off"
            for name in PROJECT_FILES:
                data = load_data(name)
                project = self.root / "projects" / data["project"]
                spec = project / "auto-claude" / "specs" / data["spec"]
                spec.mkdir(parents=True)
                # A committed project id, as a team would write it: every entry point given only
                # the spec folder finds this project (``graphmem.identity``).
                (project / ".graphmem").mkdir()
                (project / ".graphmem" / "project.toml").write_text(
                    f'id = "example.com/demo/{data["project"]}"\n', encoding="utf-8")
                self.projects[data["project"]] = {"data": data, "dir": project, "spec": spec}
            st.result = f"{self.root} (GRAPHMEM_HOME={self.root / 'home'})"

    def start_graph(self) -> None:
        if not self.graph:
            return
        with self.step("start embedded FalkorDB") as st:
            from .graph.server import EmbeddedServer, external_endpoint
            from .settings import Settings

            settings = Settings.load()
            if external_endpoint(settings) is not None:
                raise RuntimeError("the config file you named sets a FalkorDB server; the demo only "
                                   "writes to its own embedded one (unset it, or use --no-graph)")
            self.server = EmbeddedServer(settings)
            endpoint = self.server.ensure()
            st.result = f"{endpoint.describe()}, pid {self.server.running()}"

    def save_project(self, name: str) -> None:
        from graphmem.facade.memory import Memory

        p = self.projects[name]
        data = p["data"]
        with self.step(f"save {name}") as st:
            mem = p["memory"] = Memory(p["spec"])  # the project is found from the spec
            counts = {"sessions": 0, "turns": 0, "items": 0, "graph": set()}
            for session in data["sessions"]:
                sid = mem.start_session(str(p["dir"]), model=session.get("model"), mode="agent")
                for turn in session["turns"]:
                    mem.record_turn(sid, turn["role"], turn["content"], model=session.get("model"))
                    counts["turns"] += 1
                mem.end_session(sid)
                rep = mem.save_session_insights(session["number"], session["insights"])
                # As an agent does: what it discovered also goes to gotchas.md / patterns.md
                # (same stable ids as the session file's copies, so nothing is indexed twice).
                found = session["insights"].get("discoveries", {})
                reports = [rep]
                reports += [mem.append_gotcha(g) for g in
                            found.get("gotchas_encountered", []) + session.get("gotchas", [])]
                reports += [mem.append_pattern(x) for x in
                            found.get("patterns_found", []) + session.get("patterns", [])]
                for r in reports:
                    counts["items"] += r.items
                    counts["graph"].add(r.graph)
                counts["sessions"] += 1
            rep = mem.update_codebase_map(data["codebase_map"])
            counts["items"] += rep.items
            counts["graph"].add(rep.graph)
            st.result = (f"{counts['sessions']} sessions, {counts['turns']} turns, {counts['items']} "
                         f"memory items; graph: {', '.join(sorted(counts['graph']))}")
            st.data = {k: sorted(v) if isinstance(v, set) else v for k, v in counts.items()}
            self.check(st, counts["graph"] <= {"written", "off"},
                       f"graph writes were {sorted(counts['graph'])}")

    def search(self, spec: dict[str, Any]) -> None:
        mem = self.projects[spec["project"]]["memory"]
        with self.step(f"search: {spec['name']}") as st:
            hits = mem.search(spec["query"], scope=spec["scope"], limit=max(spec["within"], 5))
            rank = next((i + 1 for i, h in enumerate(hits)
                         if any(h.text.startswith(e) for e in spec["expect_any"])
                         and h.kind == spec.get("kind", h.kind)), None)
            top = hits[0] if hits else None
            st.data = {"query": spec["query"], "scope": spec["scope"], "rank": rank,
                       "hits": [{"text": h.text, "project": Path(h.project).name, "kind": h.kind,
                                 "backend": h.backend, "source": h.source} for h in hits]}
            st.result = (f"{spec['query']!r} -> expected at #{rank or '-'}; top: "
                         + (f"[{top.kind}, {Path(top.project).name}, {top.backend}] {_short(top.text)}"
                            if top else "no hits"))
            self.check(st, rank is not None and rank <= spec["within"],
                       f"expected {spec.get('kind', 'an item')} {spec['expect_any'][0]!r} "
                       f"in the top {spec['within']}")
            if spec.get("meaning_only"):
                shared = stems(spec["query"]) & self.vocabulary()
                st.data["shared_words"] = sorted(shared)
                self.check(st, not shared, f"the query shares words with stored memories: {shared}")
            if spec.get("expect_projects"):
                found = {Path(h.project).name for h in hits}
                self.check(st, set(spec["expect_projects"]) <= found,
                           f"expected hits from {spec['expect_projects']}, got {sorted(found)}")

    def vocabulary(self) -> set[str]:
        """Every stemmed word the demo stores, to prove a query can only be answered by meaning."""
        return set().union(*(stems(json.dumps(p["data"])) for p in self.projects.values()))

    def context(self, spec: dict[str, Any]) -> None:
        mem = self.projects[spec["project"]]["memory"]
        with self.step("context for a new task") as st:
            block = mem.context(spec["task"], max_tokens=spec["max_tokens"])
            path = self.root / "context.md"
            path.write_text(block, encoding="utf-8")
            st.data = {"task": spec["task"], "chars": len(block), "file": str(path)}
            st.result = (f"{spec['task']!r}: {len(block.splitlines())} lines, ~{len(block) // 4} "
                         f"tokens (budget {spec['max_tokens']}) -> {path.name}")
            self.check(st, spec["expect"].lower() in block.lower(),
                       f"context does not mention {spec['expect']!r}")

    def consolidate(self) -> None:
        with self.step("consolidate past sessions") as st:
            parts, summaries = [], []
            for name, p in self.projects.items():
                report = p["memory"].consolidate(project=True)
                st.data[name] = report
                summaries.append(report["path"])
                parts.append(f"{name}: {report['sessions_scanned']} sessions scanned, "
                             f"{report['candidate_facts']} candidate facts, "
                             f"{report['facts_written']} written ({report['mode']})")
            st.data["summaries"] = summaries
            st.result = "; ".join(parts)
            missing = [s for s in summaries if not s or not Path(s).is_file()]
            self.check(st, not missing, f"memory_summary.md not written: {missing}")

    def doctor(self) -> None:
        from graphmem.cli.doctor import run_doctor

        p = next(iter(self.projects.values()))
        with self.step("doctor") as st:
            report = run_doctor(p["spec"], None)
            st.data = report
            sections = ", ".join(f"{name} {_worst(rows)}" for name, rows in report["sections"].items())
            st.result = f"{report['errors']} errors, {report['warnings']} warnings ({sections})"
            self.check(st, report["errors"] == 0, "doctor reported errors")

    def finish(self) -> None:
        for p in self.projects.values():
            if "memory" in p:
                p["memory"].close()
        if self.server is not None:
            with self.step("stop embedded FalkorDB") as st:
                st.result = "stopped" if self.server.stop() else "was not running"

    # ---- the whole run --------------------------------------------------------------------
    def run(self) -> bool:
        """Every step in order; True when all of them worked."""
        queries = load_data("queries.json")
        cwd = os.getcwd()
        self.prepare()
        if not self.steps[-1].ok:
            os.chdir(cwd)
            return False
        try:
            self.start_graph()
            for name in self.projects:
                self.save_project(name)
            if all(s.ok for s in self.steps):
                for spec in queries["searches"]:
                    self.search(spec)
                self.context(queries["context"])
                self.consolidate()
                self.doctor()
        finally:
            self.finish()
            os.chdir(cwd)
        ok = all(s.ok for s in self.steps)
        (self.root / "demo-report.json").write_text(json.dumps(
            {"ok": ok, "root": str(self.root), "steps": [s.__dict__ for s in self.steps]},
            indent=2, default=str), encoding="utf-8")
        return ok


def _stop_leftover_server(home: Path) -> None:
    # A previous run that was killed may have left its embedded FalkorDB running on this data.
    if (home / "falkordb" / "server.json").exists():
        from .graph.server import EmbeddedServer
        from .settings import Settings

        EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": str(home)})).stop()


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _worst(rows: list[dict]) -> str:
    statuses = {r["status"] for r in rows}
    return "error" if "error" in statuses else "warn" if "warn" in statuses else "ok"


def show(demo: Demo, ok: bool) -> None:
    """The rich table of steps, then where the files are."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=150)
    table = Table(title="graphmem demo", show_lines=False)
    table.add_column("step")
    table.add_column("time", justify="right")
    table.add_column("result", overflow="fold")
    for s in demo.steps:
        mark = "[green]ok[/]" if s.ok else "[red]FAILED[/]"
        table.add_row(f"{mark} {s.name}", f"{s.seconds * 1000:,.0f} ms", Text(s.result))
    console.print(table)
    if not demo.projects:  # nothing was written: the folder could not be prepared
        console.print(Text(f"graphmem demo: {demo.steps[0].result}", style="red"))
        return
    context = demo.root / "context.md"
    if context.is_file():
        from rich.panel import Panel

        console.print(Panel(Text(context.read_text(encoding="utf-8").strip()),
                            title="prompt context for the new task (get_context)", expand=False))
    console.print(f"[bold]Files[/] under {demo.root}:")
    for name, p in demo.projects.items():
        console.print(f"  {name}: {p['spec'] / 'memory'}  (gotchas.md, patterns.md, "
                      "codebase_map.json, session_insights/)")
    for path in next((s.data.get("summaries", []) for s in demo.steps
                      if s.name == "consolidate past sessions"), []):
        console.print(f"  consolidated summary: {path}")
    console.print(f"  prompt context: {demo.root / 'context.md'}")
    console.print(f"  index and graph data (GRAPHMEM_HOME): {demo.root / 'home'}")
    console.print(f"  step report (JSON): {demo.root / 'demo-report.json'}")
    first = next(iter(demo.projects.values()), None)
    if first is not None:
        console.print(f"Try: GRAPHMEM_HOME={demo.root / 'home'} graphmem search \"stripe webhook "
                      f"retries\" --spec-dir {first['spec']}", markup=False, highlight=False)
    console.print("[green]Demo finished.[/]" if ok else "[red]Demo failed: see the steps above.[/]")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 when every step worked."""
    parser = argparse.ArgumentParser(prog="python -m graphmem.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(".graphmem-demo"),
                        help="working folder, wiped and recreated (default: ./.graphmem-demo)")
    parser.add_argument("--no-graph", action="store_true", help="leave the graph off (files + index)")
    args = parser.parse_args(argv)
    os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
    demo = Demo(args.dir.resolve(), graph=not args.no_graph)
    ok = demo.run()
    show(demo, ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
