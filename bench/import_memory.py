"""Importing a Claude Code auto-memory folder: ``MEMORY.md`` plus N topic files (target: 500 files
in under 10 s, issue 36).

The folder is synthetic (a topic file per subject, each with front matter, a few rules and a
paragraph naming a source file of the project). Runs ``Memory.import_paths`` into a fresh project
in a fresh ``GRAPHMEM_HOME``: a cold import (the models load, every note is embedded), then the
same import again (nothing new: the idempotent path). Prints a table and writes
``results/import_memory.json``.

Besides wall time it records the process's CPU time (every thread) and the share spent in the
embedding model (wall time inside ``late.encode_shared`` / ``encode_missing`` / the embedder):
on a shared machine the wall time follows the load, the CPU time much less. The model runs one
text per ONNX run (the int8 model quantises activations per tensor, so a batch would change a
text's vectors) on two threads, so on an idle two-core machine the cold import takes about
(model CPU) / 2 + the rest.

    python bench/import_memory.py [--files 500] [--embed now|later]
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
from _common import table, write_json

SUBJECTS = ("billing", "search", "auth", "uploads", "reports", "exports", "sync", "cache")


def write_folder(folder: Path, root: Path, files: int) -> int:
    """``MEMORY.md`` and ``files - 1`` topic files; returns the notes written."""
    folder.mkdir(parents=True)
    index = ["# Memory index", ""]
    notes = 0
    for i in range(1, files):
        subject = f"{SUBJECTS[i % len(SUBJECTS)]}-{i}"
        src = root / "src" / f"{subject.replace('-', '_')}.py"
        src.write_text(f"def handle_{i}():\n    return {i}\n")
        (folder / f"{subject}.md").write_text(
            f"---\nname: {subject}\ndescription: what we learned about {subject}\ntype: project\n---\n\n"
            f"# {subject}\n\n"
            f"- Never call handle_{i}() from a request thread in {subject}; it blocks on the queue.\n"
            f"- Prefer the batch endpoint for {subject} writes over {i % 7 + 2} single calls.\n"
            f"- Always log the {subject} request id before retrying.\n\n"
            f"The {subject} code lives in src/{src.name} and was last reworked in sprint {i}.\n")
        index.append(f"- [{subject}]({subject}.md): what we learned about {subject}")
        notes += 4
    (folder / "MEMORY.md").write_text("\n".join(index) + "\n")
    return notes + files - 1


def _time_the_model() -> dict[str, float]:
    """Add the wall time spent embedding (every path the index embeds by) to the returned
    dict's ``seconds``, however the embedder is configured."""
    import functools

    from graphmem.index import late, local_index

    spent = {"seconds": 0.0}

    def timing(fn):
        @functools.wraps(fn)
        async def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return await fn(*a, **k)
            finally:
                spent["seconds"] += time.perf_counter() - t
        return wrapper

    late.encode_shared = timing(late.encode_shared)
    late.encode_missing = timing(late.encode_missing)
    local_index.LocalIndex._embed = timing(local_index.LocalIndex._embed)
    return spent


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500, help="files in the folder (default 500)")
    ap.add_argument("--embed", choices=("now", "later"), default="now",
                    help="later: the import indexes the notes by their words only, and a "
                         "`reindex` (timed as its own row) embeds them, as `graphmem import "
                         "--embed later` does in the background")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gm-import-bench-"))
    os.environ["GRAPHMEM_HOME"] = str(tmp / "home")
    os.environ.setdefault("GRAPHMEM_SEARCH_SERVER", "off")
    root = tmp / "proj"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    notes = write_folder(tmp / "memory", root, args.files)

    from graphmem import Memory
    from graphmem.files import agent_files as af

    t = time.perf_counter()
    parsed = sum(len(af.read_foreign(p, "auto-memory", p.name).found)
                 for p in sorted((tmp / "memory").glob("*.md")))
    parse_s = time.perf_counter() - t
    rows, data = [], {"files": args.files, "notes_written": notes, "parse_seconds": round(parse_s, 3),
                      "notes_parsed": parsed, "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    model = _time_the_model()
    data["embed"] = args.embed
    runs = ("cold", "reindex", "again") if args.embed == "later" else ("cold", "again")
    for run in runs:
        model["seconds"] = 0.0
        t, cpu = time.perf_counter(), time.process_time()
        with Memory(None, root) as m:
            if run == "reindex":  # the background part of `import --embed later`
                got = m.reindex()
                r = {"took": {}, "added": {"embedded": got["embedded"]}, "skipped": []}
            else:
                r = m.import_paths([tmp / "memory"], embed=args.embed)
        s, cpu = time.perf_counter() - t, time.process_time() - cpu
        added = sum(v for k, v in r["added"].items() if k != "validity")
        rows.append([run, args.files, sum(r["took"].values()), added, len(r["skipped"]), s, cpu,
                     model["seconds"], s - model["seconds"]])
        data[run] = {"seconds": round(s, 3), "cpu_seconds": round(cpu, 3),
                     "model_seconds": round(model["seconds"], 3), "took": r["took"],
                     "added": r["added"], "skipped": len(r["skipped"])}
    table(f"import of an auto-memory folder ({args.files} files, --embed {args.embed})",
          ["run", "files", "took", "added", "skipped", "seconds", "cpu s", "model s", "rest s"],
          rows)
    print(f"\nparsing alone: {parse_s:.3f} s for {parsed} notes; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    what = ("files, anchors and index rows by words; the model ran in the reindex row"
            if args.embed == "later" else "files, anchors, and the bundled embedder embedding "
            "every note")
    print(f"target: {args.files} files in under 10 s; cold import took {data['cold']['seconds']} s "
          f"({what})")
    write_json(f"import_memory{'_later' if args.embed == 'later' else ''}", data)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
