"""What the hooks tell the agent, computed where the models are loaded (the warm search server,
or in-process when it is off): a session's briefing, context for a prompt, what is known
about a file. Each answer is markdown, or '' when nothing is worth the agent's tokens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.errors import ValidationError

if TYPE_CHECKING:
    from graphmem.facade.async_memory import AsyncMemory

PROMPT_BUDGET = 800  # tokens injected for a prompt at most (estimated, ``context.py``)
BRIEF_BUDGET = 160  # tokens of a session's briefing (with a prompt's 800: ~800 on average)
FILE_BUDGET = 250  # tokens of what is known about one file
FILE_ITEMS = 3  # current memories shown about one file
# A prompt gets context only when one of its best memories shares FLOOR_TERMS of its words
# (stemmed, no stop words), or one word and a cosine of FLOOR_NEAR, or a cosine of FLOOR_COSINE
# alone: else nothing. The cosines are the bundled bge-small's, whose unrelated pairs sit near
# 0.78-0.80 and related ones at 0.84-0.88 (other embedders: the word test decides).
FLOOR_TERMS = 2
FLOOR_NEAR = 0.82
FLOOR_COSINE = 0.86
ACTIONS = ("brief", "prompt", "file")


async def answer(mem: "AsyncMemory", req: dict[str, Any]) -> str:
    """The text for one hook request (``{"action": "brief"|"prompt"|"file", ...}``)."""
    action = req.get("action")
    if action == "brief":
        return await brief(mem, req.get("budget") or BRIEF_BUDGET)
    if action == "prompt":
        return await prompt_context(mem, req.get("prompt"), req.get("budget") or PROMPT_BUDGET)
    if action == "file":
        return await file_note(mem, req.get("path"))
    raise ValidationError(f"must be one of {', '.join(ACTIONS)}, got {action!r}", field="action")


async def brief(mem: "AsyncMemory", budget: int = BRIEF_BUDGET) -> str:
    """The project's gotchas and patterns (current ones, marked when their code changed) and
    what its last sessions worked on; nothing whose code is gone."""
    from graphmem.rules.context import build_context

    recent = _recent_tasks(mem.project_dir)
    query = recent[0] if recent else "gotchas pitfalls conventions patterns of this project"
    hits = await mem.search(query, scope="project", kinds=["gotcha", "pattern"], limit=12)
    hits = [h.replaced(score=1.0) for h in hits]  # a briefing: no floor among them
    body = build_context(query, hits, max(budget - 60, 60), mem.project_dir) if hits else ""
    body = body.split("\n", 1)[1] if body else ""  # our own title instead
    lines = [f"- {t if len(t) <= 100 else t[:99] + chr(0x2026)}\n" for t in recent[:3]]
    if lines:
        body += "\n### Recent sessions worked on\n" + "".join(lines)
    if not body.strip():
        return ""
    return "## graphmem: this project's memory\n" + body


async def prompt_context(mem: "AsyncMemory", prompt: Any, budget: int = PROMPT_BUDGET) -> str:
    """``context`` for the prompt within ``budget`` tokens, or '' when its best memory is
    under the relevance floor (nothing rather than noise) and it names no code of the project
    (a symbol it names is answered with where it is defined now)."""
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    prompt = " ".join(prompt.split())[:2000]
    from graphmem.code import defined_now

    if not defined_now(prompt, mem.project_dir, limit=1):  # code it names: always worth saying
        hits = await mem.search(prompt, scope="project", limit=5)
        if not hits or not await _relevant(prompt, hits, mem):
            return ""
    return fit(await mem.context(prompt, max_tokens=budget * 2), budget)


LINE_CHARS = 360  # a quoted line is cut to this many characters (its marks kept)
_TAIL = re.compile(r" (?:_\(source: | \(user in session |\(\w+ in session |\[files: )")


def fit(text: str, budget: int) -> str:
    """``text`` with each long bullet cut (its source and marks kept), then its lines up to
    ``budget`` tokens; a section title left with no bullet is dropped."""
    from graphmem.rules.context import estimate_tokens

    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith("- ") and len(line) > LINE_CHARS:
            m = _TAIL.search(line, 40)
            body, tail = (line[:m.start()], line[m.start():]) if m else (line.rstrip("\n"), "\n")
            keep = max(80, LINE_CHARS - len(tail[:160]))
            line = body[:keep].rstrip() + "\u2026" + (tail if len(tail) <= 160 else
                                                      tail[:159].rstrip() + "\u2026\n")
        lines.append(line)
    out, used = [], 0
    for line in lines:
        cost = estimate_tokens(line)
        if used + cost > budget:
            if line.startswith("- "):
                continue  # a shorter bullet further down may fit
            break
        out.append(line)
        used += cost
    kept = [line for i, line in enumerate(out)  # a section title with no bullet left under it
            if not line.startswith("### ") or next(
                (x for x in out[i + 1:] if x.strip()), "").startswith("- ")]
    return "".join(kept).rstrip() + "\n" if any(x.startswith("- ") for x in kept) else ""


async def _relevant(prompt: str, hits: list, mem: "AsyncMemory") -> bool:
    """Whether any of the best hits shares ``FLOOR_TERMS`` distinctive words with the prompt,
    or is close in meaning to it (``FLOOR_COSINE``)."""
    from graphmem.index.text import term_set, tokenize

    words = set(tokenize(prompt))
    shared = [len(words & term_set(h.text)) for h in hits]
    if max(shared) >= FLOOR_TERMS:
        return True
    try:
        import numpy as np

        from graphmem.providers.base import embed_query

        emb = mem.derived.local.embedder
        q = np.asarray(await embed_query(emb, prompt))
        rest = np.asarray(await emb.embed([h.text for h in hits]))
        cos = rest @ q / (np.linalg.norm(rest, axis=1) * np.linalg.norm(q) + 1e-9)
        return any(c >= FLOOR_COSINE or (n and c >= FLOOR_NEAR) for c, n in zip(cos, shared))
    except Exception:
        return False


async def file_note(mem: "AsyncMemory", path: Any) -> str:
    """What is known about ``path`` (relative to the project): its current memories, marked
    when the code changed since; '' when nothing current is known."""
    if not isinstance(path, str) or not path:
        return ""
    try:
        ans = await mem.about(path)
    except ValidationError:
        return ""  # a file outside the project, or a name about() refuses: nothing to say
    current = [e for e in ans.get("current", []) if e.get("kind") != "turn"][:FILE_ITEMS]
    if not current:
        return ""
    from graphmem.rules.context import estimate_tokens

    from graphmem.rules.context import _moved

    out = f"## graphmem: known about {path}\n"
    for e in current:
        fresh = e.get("freshness") or {}
        text, notes = _moved(" ".join(str(e.get("text", "")).split())[:400], fresh)
        symbols = [f"`{x}`" for x in fresh.get("symbols_changed") or []][:3]
        if symbols:
            notes.append(f"{', '.join(symbols)} changed since this was learned")
        elif fresh.get("changed") or fresh.get("state") == "changed":
            notes.append("its code changed since this was learned")
        mark = f" [{'; '.join(dict.fromkeys(notes))}]" if notes else ""
        line = f"- {text}{mark}\n"
        if estimate_tokens(out + line) > FILE_BUDGET:
            break
        out += line
    return out if out.count("\n") > 1 else ""


def _recent_tasks(root: Path) -> list[str]:
    """The tasks of the project's latest hook sessions, newest first (``digest.py`` writes them)."""
    import json

    folder = Path(root) / ".graphmem" / "memory" / "session_insights"
    try:
        files = sorted(folder.glob("session_*.json"), reverse=True)[:10]
    except OSError:
        return []
    tasks = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        done = data.get("subtasks_completed") if isinstance(data, dict) else None
        if isinstance(done, list) and done and isinstance(done[0], str):
            tasks.append(" ".join(done[0].split())[:160])
    return tasks
