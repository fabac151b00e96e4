"""The naive capture hook bench/agent_hooks.py compares graphmem's Claude Code hooks with.

A Claude Code command hook: every prompt and every tool use is appended to
``$CLAUDE_PROJECT_DIR/.naive-capture/captured.jsonl``; on each prompt, BM25's top captured prompts
and commands (before this one is added) are printed as plain stdout, which Claude Code adds as
context, cut to ``NAIVE_BUDGET`` tokens (chars / 4, default 800). Terms are graphmem's lexical
tokenizer when it imports (as codemem's BM25 baseline), else lower-cased words and paths.

    settings.json: {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
        "command": "python bench/_naive_capture_hook.py"}]}], "PostToolUse": [...same...]}}
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections import Counter
from pathlib import Path

WORD = re.compile(r"[\w./-]+")


def terms(text: str) -> list[str]:
    """BM25's terms of ``text``."""
    try:
        from graphmem.index.text import tokenize
    except ImportError:
        out = []
        for tok in WORD.findall(text.lower()):
            out.append(tok)
            parts = re.split(r"[./_-]+", tok)
            if len(parts) > 1:
                out.extend(p for p in parts if p)
        return out
    return tokenize(text)


def item(event: dict) -> str | None:
    """The captured text of one event: the prompt, or the tool and its input, relative paths."""
    name, cwd = event.get("hook_event_name"), event.get("cwd") or ""
    if name == "UserPromptSubmit":
        return "prompt: " + " ".join(str(event.get("prompt", "")).split())
    if name not in ("PostToolUse", "PostToolUseFailure"):
        return None
    tool, inp = event.get("tool_name", ""), event.get("tool_input") or {}
    rel = lambda p: os.path.relpath(p, cwd) if cwd and os.path.isabs(p) else p  # noqa: E731
    if "command" in inp:
        what = inp["command"]
    elif "file_path" in inp:
        what = rel(inp["file_path"])
    elif "pattern" in inp:
        what = inp["pattern"] + (f" in {rel(inp['path'])}" if inp.get("path") else "")
    else:
        what = inp.get("description") or json.dumps(inp, ensure_ascii=False)[:200]
    failed = " (failed)" if name == "PostToolUseFailure" else ""
    return f"{tool}: {' '.join(str(what).split())}{failed}"


def indexed(store: Path) -> list[tuple[str, Counter]]:
    """Every captured item with its terms; terms of new items are computed once and kept."""
    cap, cache = store / "captured.jsonl", store / "terms.jsonl"
    texts = [json.loads(x)["text"] for x in cap.open(encoding="utf-8")] if cap.exists() else []
    known = [json.loads(x) for x in cache.open(encoding="utf-8")] if cache.exists() else []
    if len(known) < len(texts):
        new = [terms(t) for t in texts[len(known):]]
        with cache.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(n) + "\n" for n in new)
        known += new
    return [(t, Counter(k)) for t, k in zip(texts, known)]


def bm25(rows: list[tuple[str, Counter]], query: str, k1: float = 1.2, b: float = 0.75) -> list[str]:
    """The items in BM25's order (ties: newest first), positive scores only."""
    q = set(terms(query))
    if not rows or not q:
        return []
    lengths = [sum(c.values()) for _, c in rows]
    avg = sum(lengths) / len(rows) or 1.0
    df = Counter(t for _, c in rows for t in q if t in c)
    idf = {t: math.log(1 + (len(rows) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scored = []
    for i, ((text, c), dl) in enumerate(zip(rows, lengths)):
        s = sum(idf[t] * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * dl / avg))
                for t in idf if t in c)
        if s > 0:
            scored.append((-s, -i, text))
    scored.sort()
    return [t for _, _, t in scored]


def context(ranked: list[str], budget: int) -> str:
    """The best items, deduplicated, that fit ``budget`` tokens (chars / 4) under a header."""
    header = "Captured in earlier sessions (naive BM25 capture):\n"
    left, seen, lines = budget - math.ceil(len(header) / 4), set(), []
    for text in ranked:
        key = " ".join(text.casefold().split())
        line = f"- {text}\n"
        cost = math.ceil(len(line) / 4)
        if key in seen or cost > left:
            continue
        seen.add(key)
        lines.append(line)
        left -= cost
    return header + "".join(lines) if lines else ""


def main() -> int:
    try:
        event = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        store = Path(os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or ".") / ".naive-capture"
        text = item(event)
        if text is None:
            return 0
        store.mkdir(exist_ok=True)
        if event.get("hook_event_name") == "UserPromptSubmit":
            ctx = context(bm25(indexed(store), event.get("prompt", "")),
                          int(os.environ.get("NAIVE_BUDGET", "800")))
            if ctx:
                sys.stdout.write(ctx)
        with (store / "captured.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"text": text, "session": event.get("session_id")}) + "\n")
    except Exception as exc:  # a broken capture never breaks the agent: one line, exit 0
        print(f"naive capture hook: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
