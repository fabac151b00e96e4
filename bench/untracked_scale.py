"""Searches spaced further apart than ``UNTRACKED_TTL`` on a large generated git project: what
the code snapshot's list of untracked files costs a search when an agent searches minutes apart.

    .venv/bin/python bench/untracked_scale.py [--files 20000] [--searches 30] [--pause 0]

A project of ``--files`` committed Python modules in folders of 10 (plus ``--untracked`` new
files, and an ignored ``node_modules/`` and ``__pycache__/`` folders as a real tree has) is built
once in ``--state`` and ``--memories`` gotchas naming its files are written. Then, per round, the
work tree is left alone for the spacing, and ``snapshot`` (the code snapshot a search reads) and
``Memory.search`` are each timed cold. The spacing is real with ``--pause SECONDS``; without it,
``tree.UNTRACKED_TTL`` is set to 0, which is what any spacing past the TTL means to the code.
Every ``--edit-every`` rounds an untracked file is edited between the calls (the list must be read
again then). Counts the ``git ls-files -o`` runs. Run it on another checkout with
``PYTHONPATH=<checkout>/src`` to compare.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ListingCounter, pct, table, write_json


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def build(state: Path, files: int, untracked: int, memories: int) -> Path:
    """The generated project (kept between runs) with its spec folder written."""
    from graphmem import Memory, Settings

    root = state / "project"
    if (state / "done").exists():
        return root
    root.mkdir(parents=True)
    for i in range(files):
        d = root / "src" / f"pkg{i // 500}" / f"sub{i // 50 % 10}" / f"leaf{i // 10 % 5}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"def handle_{i}(x):\n    return x + {i}\n")
    (root / ".gitignore").write_text("node_modules/\n__pycache__/\n/specs/\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "b@example.invalid")
    git(root, "config", "user.name", "b")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    for i in range(untracked):
        (root / "src" / "pkg0" / f"new{i}.py").write_text(f"def draft_{i}():\n    return {i}\n")
    for i in range(2000):
        d = root / "node_modules" / f"lib{i // 20}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.js").write_text("module.exports = 1\n")
    for p in list((root / "src").glob("pkg*/sub*"))[:200]:
        (p / "__pycache__").mkdir(exist_ok=True)
        (p / "__pycache__" / "x.pyc").write_bytes(b"\0" * 16)
    spec = root / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec, root, settings=Settings.load(home=str(state / "home"))) as mem:
        for i in range(memories):
            n = i * 37 % files
            path = f"src/pkg{n // 500}/sub{n // 50 % 10}/leaf{n // 10 % 5}/mod{n}.py"
            mem.append_gotcha(f"{path}: handle_{n} must stay idempotent for retries ({i})")
    (state / "done").write_text("")
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--untracked", type=int, default=40)
    ap.add_argument("--memories", type=int, default=200)
    ap.add_argument("--searches", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between rounds (0: UNTRACKED_TTL set to 0 instead)")
    ap.add_argument("--edit-every", type=int, default=0, metavar="N",
                    help="edit an untracked file before every Nth round (0: never)")
    ap.add_argument("--state", default=os.path.join(tempfile.gettempdir(), "graphmem-untracked-scale"))
    ap.add_argument("--out", default="untracked_scale")
    args = ap.parse_args()
    from graphmem import Memory, Settings
    from graphmem.code import tree

    state = Path(args.state) / f"f{args.files}"
    root = build(state, args.files, args.untracked, args.memories)
    if not args.pause:
        tree.UNTRACKED_TTL = 0.0
    listings = ListingCounter()
    lat: dict[str, list[float]] = {"snapshot": [], "search": []}
    spec = root / "specs" / "001"
    with Memory(spec, root, settings=Settings.load(home=str(state / "home"))) as mem:
        mem.search("warm up the model and the snapshot", scope="project", limit=10)
        time.sleep(0.05)
        for r in range(args.searches):
            if args.edit_every and r % args.edit_every == 0:
                (root / "src" / "pkg0" / "new0.py").write_text(f"def draft_0():\n    return {r}\n")
            if args.pause:
                time.sleep(args.pause)
            t = time.perf_counter()
            tree.snapshot(root, max_age=0)
            lat["snapshot"].append((time.perf_counter() - t) * 1000)
            if args.pause:
                time.sleep(args.pause)
            t = time.perf_counter()
            mem.search(f"which handler must stay idempotent for retries {r}", scope="project",
                       limit=20)
            lat["search"].append((time.perf_counter() - t) * 1000)
    listings.stop()
    out = {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)} for k, v in lat.items()}
    out["ls_files_o_runs"] = listings.runs
    out["graphmem"] = str(Path(tree.__file__).parent.parent)
    table(f"{args.files} files, {args.searches} rounds, spacing "
          f"{args.pause or 'UNTRACKED_TTL=0'} (load {os.getloadavg()[0]:.1f}); git ls-files -o "
          f"ran {listings.runs} times", ["call", "n", "p50 ms", "p95 ms"],
          [[k, v["n"], v["p50"], v["p95"]] for k, v in out.items() if isinstance(v, dict)])
    write_json(args.out, {**out, "args": vars(args), "load_average": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
