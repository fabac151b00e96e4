"""The graph's rows in ``graphmem doctor``: server health, outbox size, drift."""

from __future__ import annotations

from typing import Any


def client_row() -> dict:
    """Which reply parser the graph client runs: hiredis (C) or redis-py's own Python one
    (with it, LoCoMo searches with the graph on took p50 / p95 22.6 / 28.8 ms instead of 16.6 /
    20.3 ms: ``bench/locomo.py --graph``)."""
    from importlib.metadata import PackageNotFoundError, version

    from ..health import row

    try:
        import redis.utils

        fast = bool(redis.utils.HIREDIS_AVAILABLE)
        detail = f"redis-py {version('redis')}, falkordb {version('falkordb')}"
    except (ImportError, PackageNotFoundError) as exc:
        return row("client", "error", f"the FalkorDB client is not installed: {exc}")
    if fast:
        return row("client", "ok", detail + ", replies parsed by hiredis")
    return row("client", "warn", detail + ": hiredis is missing, so every graph query's reply is "
               "parsed in Python and graph searches are slower (pip install hiredis)")


def check(sections: dict, settings: Any, ctx: Any) -> None:
    """Append the graph section: server, outbox and drift (files vs graph) for the given spec."""
    from ..health import row
    from . import server

    rows = sections.setdefault("graph", [])
    mode = settings.graph.mode
    running = False
    if mode == "off":
        rows.append(row("graph", "ok", "off (set GRAPHMEM_GRAPH=on or auto to enable)"))
    else:
        ext = server.external_endpoint(settings)
        if ext is not None:
            reason = server.ping(ext)
            running = reason is None
            rows.append(row("server", "ok" if running else "error",
                            f"external {ext.describe()}: " + ("answering" if running else reason)))
            from ..team import author, host

            rows.append(row("team", "ok", f"shared server: items written here record "
                            f"{author(settings, ctx.project_dir)} on {host(settings)} "
                            "(GRAPHMEM_AUTHOR, GRAPHMEM_HOST); searches take in teammates' writes"))
        else:
            st = server.EmbeddedServer(settings).status()
            running = st["running"]
            rows.append(row("server", "ok" if running else "warn",
                            f"embedded pid {st['pid']}, {st['socket']}, FalkorDB "
                            f"{st.get('falkordb_version')}, {len(st.get('graphs', []))} graph(s), "
                            f"{st['data_bytes']} bytes" if running else
                            "embedded server not running (starts on first use, or `graphmem db start`)"))
        rows.append(client_row())
    if ctx.spec_dir is None:
        return
    from ..files.outbox import Outbox
    from ..files.spec_store import SpecStore

    store = SpecStore(ctx.spec_dir, ctx.project_dir)
    queued = Outbox(store.memory_dir).size()
    rows.append(row("outbox", "ok" if queued == 0 else "warn",
                    "empty" if queued == 0 else f"{queued} item(s) waiting for the graph; "
                    "run `graphmem sync`"))
    if mode == "off" or not running:
        return
    from ..memory import Memory

    from .._sync import run

    with Memory(ctx.spec_dir, ctx.project_dir, settings=settings) as mem:
        d = mem.drift()
        try:
            got = run(mem.backends.graph_embedder(mem.project.key))
            graph = run(mem.backends.graph_store())
            ours = (graph.embedder.name, int(graph.embedder.dimension))
        except Exception as exc:  # reported, never fatal to the rest of the report
            rows.append(row("embedder", "warn", f"not checked: {exc}"))
        else:
            if got is None:
                rows.append(row("embedder", "ok", f"no graph yet for {mem.project.key}; the first "
                                f"write records {ours[0]} ({ours[1]}-d)"))
            elif got == ours:
                rows.append(row("embedder", "ok", f"{got[0]} ({got[1]}-d), the same as here"))
            else:
                rows.append(row("embedder", "error", str(graph.mismatch(mem.project.key, got))))
    if d["graph"] != "on":
        return
    missing, extra = len(d["missing"]), len(d["extra"])
    status = "ok" if missing == extra == 0 else "warn"
    detail = f"{d['files']} item(s) in files, {d['in_graph']} in the graph"
    if missing:
        detail += f", {missing} missing ({d['queued']} queued)"
    if extra:
        detail += f", {extra} in the graph but no longer in files"
    if missing or extra:
        detail += " (`graphmem doctor --fix`)"
    rows.append(row("drift", status, detail))
