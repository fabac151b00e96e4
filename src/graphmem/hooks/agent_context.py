"""What the hooks tell the agent, computed where the models are loaded (the warm search server,
or in-process when it is off): a session's briefing, context for a prompt, what is known
about a file. Each answer is markdown, or '' when nothing is worth the agent's tokens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Any

from graphmem.errors import ValidationError

if TYPE_CHECKING:
    from graphmem.facade.async_memory import AsyncMemory

PROMPT_BUDGET = 800  # tokens injected for a prompt at most (estimated, ``context.py``)
BRIEF_BUDGET = 240  # tokens of a session's briefing, once a session (see README: budgets)
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
        budget = req.get("budget") or BRIEF_BUDGET
        if budget != BRIEF_BUDGET or not isinstance(req.get("key"), str):
            return await brief(mem, budget)
        return await remember_brief(mem, req["key"], req.get("project_dir"))
    if action == "prompt":
        return await prompt_context(mem, req.get("prompt"), req.get("budget") or PROMPT_BUDGET)
    if action == "file":
        return await file_note(mem, req.get("path"))
    raise ValidationError(f"must be one of {', '.join(ACTIONS)}, got {action!r}", field="action")


async def brief(mem: "AsyncMemory", budget: int = BRIEF_BUDGET) -> str:
    """What the project's last sessions worked on (their tasks and the files they edited, under
    the files' current names) and its gotchas and patterns (current ones, marked when their code
    changed); nothing whose code is gone. Composed before any prompt: it is what is worth
    knowing at the start of any task."""
    from graphmem.rules.context import build_context, estimate_tokens

    snap = _snapshot(mem.project_dir)
    recent = _recent_work(mem.project_dir, snap, await _held_sessions(mem))
    work = "".join(_work_line(task, files) for task, files in recent[:RECENT_SESSIONS])
    work = fit("### Recent work (files under their current names)\n" + work,
               min(RECENT_BUDGET, budget)) if work else ""
    query = next((t for t, _ in recent if t != NO_PROMPT),
                 "gotchas pitfalls conventions patterns of this project")
    hits = await mem.search(query, scope="project", kinds=["gotcha", "pattern"], limit=12)
    hits = [h.replaced(score=1.0) for h in hits]  # a briefing: no floor among them
    left = budget - estimate_tokens(TITLE + work) - 2
    body = build_context(query, hits, 4 * budget, mem.project_dir) if hits and left > 20 else ""
    body = body.split("\n", 1)[1] if body else ""  # our own title instead
    body = _INSIGHT_SOURCE.sub(lambda m: f"session {int(m.group(1))}", body)
    body = re.sub(r"\n### Code the task names[^\n]*\n(?:- [^\n]*\n)*", "", body)  # no task yet
    lessons = fit(body, left, line_chars=BRIEF_LINE_CHARS) if body.strip() else ""
    text = work + lessons
    return TITLE + text.lstrip("\n") if text.strip() else ""


async def remember_brief(mem: "AsyncMemory", key: str, project: str | None = None) -> str:
    """The briefing, also kept on disk for a SessionStart that finds no warm server
    (``brief_cache.py``; ``key``: the search server's, which the hook checks it against)."""
    import os

    from graphmem.hooks.brief_cache import remember

    return await remember(project or str(mem.project_dir), key,
                          os.path.realpath(mem.settings.home), mem.project.key,
                          lambda: brief(mem))


TITLE = "## graphmem: this project's memory\n"
RECENT_SESSIONS = 3  # the last sessions that left an insight (files edited, checks failed)
NO_PROMPT = "(no prompt recorded)"
RECENT_FILES = 4  # files named per session
RECENT_BUDGET = 110  # tokens of the briefing's recent work, at most
BRIEF_LINE_CHARS = 240  # a briefing's gotcha is cut to this many characters (its marks kept)
_INSIGHT_SOURCE = re.compile(r"(?<=_\()source: \.graphmem/memory/session_insights/"
                             r"session_(\d+)(?:-[0-9a-f]{6})?\.json"  # a writer's tag or none
                             r"(?:, session \d+)?")  # the session it names once


def _work_line(task: str, files: list[str]) -> str:
    """One session's bullet: its task cut to 90 characters, then the files it edited."""
    task = task if len(task) <= 90 else task[:89].rstrip() + "\u2026"
    more = f" and {len(files) - RECENT_FILES} more" if len(files) > RECENT_FILES else ""
    named = f" \u2014 edited {', '.join(files[:RECENT_FILES])}{more}" if files else ""
    return f"- {task}{named}\n"


def _snapshot(root: Path) -> Any:
    """The project's tree now (None when it cannot be read: the briefing goes on without it)."""
    from graphmem.code.tree import snapshot

    try:
        return snapshot(root, max_age=0)
    except Exception:
        return None


def _now(path: str, snap: Any) -> tuple[str | None, bool]:
    """Where ``path`` is now, and whether the project ever had it: itself while in the tree, its
    new name when git saw it renamed (a chain followed), None when it is gone, or was never a
    file of the project's history (or the tree could not be read)."""
    if snap is None:
        return None, False
    if path in snap.files:
        return path, True
    from graphmem.code.history import history

    hist = history(snap.root, snap.head) if snap.git and snap.head else None
    if hist is None or path not in hist.touched:
        return None, False
    now, at = path, -1
    while True:  # each step moves forward in time: the walk ends
        later = [(place, new) for place, new in hist.renamed.get(now, ()) if place > at]
        if not later:
            break
        at, now = min(later)
    return (now if now in snap.files else None), True


PATH_IN_TEXT = re.compile(r"(?<![\w./@+~-])[\w@+~-][\w.@+~-]*(?:/[\w.@+~-]+)+\.\w+")


def _current_text(text: str, snap: Any) -> str:
    """``text`` with the project's paths in it that were renamed since under their current
    names, and a mark naming those that are gone."""
    if snap is None:
        return text
    gone = []
    for tok in dict.fromkeys(PATH_IN_TEXT.findall(text)):
        now, known = _now(tok, snap)
        if now and now != tok:
            text = re.sub(rf"(?<![\w./@+~-]){re.escape(tok)}(?![\w/@+~-])", now, text)
        elif known and not now:
            gone.append(tok)
    return text + (f" [{', '.join(gone[:2])} gone now]" if gone else "")


async def prompt_context(mem: "AsyncMemory", prompt: Any, budget: int = PROMPT_BUDGET) -> str:
    """``context`` for the prompt within ``budget`` tokens, or '' when its best memory is
    under the relevance floor (nothing rather than noise) and it names no code of the project
    (a symbol it names is answered with where it is defined now)."""
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    prompt = " ".join(prompt.split())[:2000]
    from graphmem.code import defined_now

    if not defined_now(prompt, mem.project_dir, limit=1):  # code it names: always worth saying
        hits = await mem.search(prompt, scope="project", limit=5, pending=False)  # not itself
        if not hits or not await _relevant(prompt, hits, mem):
            return ""
    text = await mem.context(prompt, max_tokens=budget * 2)
    return fit(_INSIGHT_SOURCE.sub(lambda m: f"session {int(m.group(1))}", text), budget)


LINE_CHARS = 360  # a quoted line is cut to this many characters (its marks kept)
TAIL_CHARS = 200  # of which its source and marks (files named whole) take at most this many
# A lesson's or a file's line is cut shorter: what it is for is said in its first words, the
# files it names are what the agent opens (a budget-bound context names more of them).
TERSE = ("### Lessons from past sessions", "### Files")
TERSE_CHARS = 240
_TAIL = re.compile(r" (?:_\(source: |_\(session \d| \(user in session |\(\w+ in session |\[files: )")


def fit(text: str, budget: int, line_chars: int = LINE_CHARS) -> str:
    """``text`` with each long bullet cut to ``line_chars`` (``TERSE_CHARS`` under a ``TERSE``
    title; its source and marks kept), then its lines up to ``budget`` tokens; a section title
    left with no bullet is dropped."""
    from graphmem.rules.context import estimate_tokens

    lines, cap = [], line_chars
    for line in text.splitlines(keepends=True):
        if line.startswith("### "):
            cap = min(line_chars, TERSE_CHARS) if line.strip() in TERSE else line_chars
        if line.startswith("- ") and len(line) > cap:
            m = _TAIL.search(line, 40)
            body, tail = (line[:m.start()], line[m.start():]) if m else (line.rstrip("\n"), "\n")
            tail = _cut_tail(tail)
            keep = max(80, cap - len(tail))
            line = body[:keep].rstrip() + "\u2026" + tail
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


def _cut_tail(tail: str, chars: int = TAIL_CHARS) -> str:
    """A bullet's source and marks within about ``chars``, cut between two items of its lists
    (a file path is named whole or not at all: half a path points nowhere)."""
    if len(tail) <= chars:
        return tail
    end = tail.rstrip("\n")
    marks = end.find(" [")  # the list of files and notes after the source
    cut = max(end.rfind(", ", 0, chars), end.rfind("; ", 0, chars))
    if marks < 0 or cut < marks:
        return end[:chars - 1].rstrip() + "\u2026\n"
    head = end[:cut]
    return head + (", \u2026" if head.rfind("]") > marks else ", \u2026]") + "\n"


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


async def _held_sessions(mem: "AsyncMemory") -> set[str]:
    """The names of the session insight files whose insight waits for a person
    (``review.mode = hold``): their tasks are left out of the recent work, as their memories are
    out of search until accepted."""
    try:
        waiting = await mem.review_pending()
    except Exception:
        return set()
    return {Path(str(r["source"])).name for r in waiting.get("pending", [])
            if r.get("kind") == "insight" and r.get("source")}


def _recent_work(root: Path, snap: Any, held: AbstractSet[str] = frozenset()) -> list[tuple[str, list[str]]]:
    """The project's latest hook sessions that edited files, newest first (``digest.py`` writes
    them): each task (paths in it renamed since under their current names, gone ones marked),
    and the files it edited that are still in the tree, under their current names. One line per
    task: a session digested in parts wrote it more than once. Files named in ``held`` (pending
    review) are left out."""
    import json

    from graphmem.files.session_names import name_order

    folder = Path(root) / ".graphmem" / "memory" / "session_insights"
    try:
        files = sorted((f for f in folder.glob("session_*.json") if f.name not in held),
                       key=lambda f: name_order(f.name), reverse=True)[:12]
    except OSError:
        return []
    out: dict[str, list[str]] = {}
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        done = data.get("subtasks_completed")
        task = " ".join(done[0].split())[:160] if isinstance(done, list) and done and \
            isinstance(done[0], str) else ""
        found = (data.get("discoveries") or {}).get("files_understood") \
            if isinstance(data.get("discoveries"), dict) else None
        edited = list(found) if isinstance(found, dict) else []
        if not edited and isinstance(data.get("changed_files"), list):
            edited = [p for p in data["changed_files"] if isinstance(p, str)]
        now = [p for p in (_now(p, snap)[0] for p in edited if isinstance(p, str)) if p]
        if not task and not now:
            continue
        key = _current_text(task, snap) if task else NO_PROMPT
        had = out.setdefault(key, [])
        had.extend(p for p in now if p not in had)
    return list(out.items())
