"""MCP round trips: the real `graphmem mcp` process over stdio, driven by the SDK's client.

Measures server start-up (spawn to first answered call) and per-call latency of add_gotcha,
search_memory and get_context, against the same calls made on ``AsyncMemory`` in-process, so
the MCP overhead (JSON-RPC, schema validation, stdio) can be read off. Graph off unless
``GRAPHMEM_GRAPH=on`` is set. Target: MCP adds < 10 ms p50 per call over the direct call.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json


WARM = 20  # unmeasured writes on each side before timing


def _stats(ms: list[float]) -> list[float]:
    return [pct(ms, 50), pct(ms, 95)]


async def run(n: int, tmp: Path) -> dict:
    from mcp import Client, StdioServerParameters

    from graphmem import AsyncMemory

    spec = tmp / "proj" / "auto-claude" / "specs" / "001-bench"
    spec.mkdir(parents=True)
    os.environ["GRAPHMEM_HOME"] = str(tmp / "home")
    texts = [f"Gotcha {i}: service {i % 37} needs env var FLAG_{i} before start" for i in range(n)]
    warm = [f"Warm-up note {i} about cache {i % 7}" for i in range(WARM)]
    results: dict[str, dict[str, list[float]]] = {"mcp": {}, "direct": {}}

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "graphmem.cli", "mcp", "--spec-dir", str(spec)])
    t0 = time.perf_counter()
    async with Client(params, read_timeout_seconds=120) as c:
        await c.call_tool("memory_summary", {})
        startup = (time.perf_counter() - t0) * 1000
        for t in warm:  # same warm-up as the direct side: models loaded, index opened
            await c.call_tool("add_pattern", {"text": t})
        calls = {"add_gotcha": [("add_gotcha", {"text": t}) for t in texts],
                 "search_memory": [("search_memory", {"query": f"service {i % 37} env var"})
                                   for i in range(n)],
                 "get_context": [("get_context", {"task": f"start service {i % 37}", "max_tokens": 400})
                                 for i in range(max(1, n // 4))]}
        for name, batch in calls.items():
            ms = []
            for tool, args in batch:
                t = time.perf_counter()
                r = await c.call_tool(tool, args)
                ms.append((time.perf_counter() - t) * 1000)
                assert not r.is_error, r.content
            results["mcp"][name] = ms

    spec2 = tmp / "proj2" / "auto-claude" / "specs" / "001-bench"
    spec2.mkdir(parents=True)
    os.environ["GRAPHMEM_HOME"] = str(tmp / "home2")  # a fresh index, like the server had
    async with AsyncMemory(spec2) as m:
        for t in warm:
            await m.append_pattern(t)
        direct = {"add_gotcha": [lambda t=t: m.append_gotcha(t) for t in texts],
                  "search_memory": [lambda i=i: m.search(f"service {i % 37} env var", scope="project")
                                    for i in range(n)],
                  "get_context": [lambda i=i: m.context(f"start service {i % 37}", max_tokens=400)
                                  for i in range(max(1, n // 4))]}
        for name, batch in direct.items():
            ms = []
            for fn in batch:
                t = time.perf_counter()
                await fn()
                ms.append((time.perf_counter() - t) * 1000)
            results["direct"][name] = ms
    return {"startup_ms": startup, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per tool (default 200)")
    args = parser.parse_args()
    import anyio

    with tempfile.TemporaryDirectory() as d:
        out = anyio.run(run, args.calls, Path(d))
    rows = []
    for name in ("add_gotcha", "search_memory", "get_context"):
        mcp_ms, direct_ms = out["results"]["mcp"][name], out["results"]["direct"][name]
        rows.append([name, len(mcp_ms), *_stats(mcp_ms), *_stats(direct_ms),
                     pct(mcp_ms, 50) - pct(direct_ms, 50)])
    table(f"MCP over stdio vs direct AsyncMemory (graph {os.environ.get('GRAPHMEM_GRAPH', 'off')}); "
          f"server start-up to first answer {out['startup_ms']:.0f} ms",
          ["tool", "calls", "mcp p50 ms", "mcp p95 ms", "direct p50 ms", "direct p95 ms",
           "overhead p50 ms"], rows)
    write_json("mcp_calls", {"startup_ms": out["startup_ms"], "graph": os.environ.get("GRAPHMEM_GRAPH", "off"),
                       "rows": [dict(zip(["tool", "calls", "mcp_p50", "mcp_p95", "direct_p50",
                                          "direct_p95", "overhead_p50"], r)) for r in rows]})


if __name__ == "__main__":
    main()
