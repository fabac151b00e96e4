"""Prompt context: the most relevant memories for a task as markdown, within a token budget.

Tokens are estimated, not counted with a model tokenizer (which would cost a heavy import on
every call): ``ceil(characters / 4)``, the usual rule of thumb for English and code under BPE
tokenizers, which tends to over-count slightly, so the block stays within the caller's budget.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from graphmem.errors import ValidationError
from graphmem.index.text import term_set, tokenize
from graphmem.files.insight_items import count_note
from graphmem.models import Hit, normalise

MIN_TOKENS, MAX_TOKENS = 20, 200_000
SECTIONS = (  # (title, kinds), in the order an agent should read them
    ("Current value", ()),  # the answer to a version question (metadata["current_value"])
    ("Gotchas", ("gotcha",)),
    ("Patterns", ("pattern",)),
    ("Files", ("file",)),
    ("Lessons from past sessions", ("insight", "fact", "step")),
    ("From past conversations", ("turn",)),
)
RELEVANCE_FLOOR = 0.3  # share of the best hit's score a hit needs to be shown (see bench/codemem.py)
# Quoted turns rank high through their session's neighbours, and scores are relative to the
# best hit: on a small corpus an off-topic turn of a relevant session scores near the top. A
# turn is shown only when its own text shares RAW_TERMS of the task's words or it scores within
# RAW_STRONG of the best (a match by meaning alone). Steps are left to the plain floor: they
# name the files a session touched (on entire-cli, filtering them too cost FileRecall@4k .05).
RAW_KINDS = ("turn",)
RAW_TERMS = 2
RAW_STRONG = 0.85
FILES_PER_LINE = 3  # anchored files named after a lesson
# Two quotes of one speaker whose terms overlap this much (Jaccard, NEAR_TERMS terms or more)
# say the same: a prompt sent twice with a word changed is shown once.
NEAR_SAME = 0.9
NEAR_TERMS = 6


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: one per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def check_budget(max_tokens: object) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) \
            or not MIN_TOKENS <= max_tokens <= MAX_TOKENS:
        raise ValidationError(f"must be an integer from {MIN_TOKENS} to {MAX_TOKENS}, "
                              f"got {max_tokens!r}", field="max_tokens")
    return max_tokens


def _where(hit: Hit, project_dir: Path | None) -> str:
    """A short source label: the file relative to the project, plus the session if any."""
    src = hit.source or hit.project
    try:
        # a relative source (the usual: sources are relative to the project) is never inside
        # an absolute folder, so no path is built for it
        if project_dir is not None and src and (os.path.isabs(src) or not project_dir.is_absolute()):
            src = str(Path(src).relative_to(project_dir))
    except ValueError:
        pass
    if hit.session and hit.kind in ("insight", "turn", "step", "fact"):
        src = f"{src}, session {hit.session}"
    seen = count_note(hit.metadata)  # many sessions said it: one line with their count
    return f"{src}; {seen}" if seen else src


def _current(hit: Hit) -> str | None:
    """The id of the memory that replaced ``hit`` now (its validity mark's ``current``)."""
    v = hit.metadata.get("validity")
    return v.get("current") if isinstance(v, dict) else None


def _freshness(hit: Hit) -> dict:
    f = hit.metadata.get("freshness")
    return f if isinstance(f, dict) else {}


def validity_note(meta: dict) -> str:
    """A hit's validity mark as one line ("possibly superseded: reverted in session 12: ..."),
    empty when its metadata carries none: what ``context`` and ``graphmem search`` show."""
    v = m if isinstance(m := meta.get("validity"), dict) else {}
    if not v.get("state"):
        return ""
    reason = " ".join(str(v.get("reason") or "").split())  # one line, even from an old log
    state = str(v["state"])
    if state == "proposed":  # an LLM's judgement held for review (facade/review.py)
        state = f"proposed as {v.get('proposes') or 'superseded'}, waiting for review"
    return f"{state}: {reason}" if reason else state


def replaced_note(meta: dict, shown: int = 3) -> str:
    """The values a current memory replaced, as one note ("was 2.31.0 until session 3, 2.28.1
    until session 2"), empty when it replaced none: from ``metadata["replaces"]``."""
    chain = [r for r in meta.get("replaces") or () if isinstance(r, dict) and r.get("was")]
    parts = [f"{r['was']}" + (f" until {r['until']}" if r.get("until") else "")
             for r in chain[:shown]]
    more = f" and {len(chain) - shown} earlier" if len(chain) > shown else ""
    return "was " + ", ".join(parts) + more if parts else ""


def _line(hit: Hit, project_dir: Path | None) -> str:
    """One bullet: moved paths rewritten to their current names, changed code marked, a turn
    quoted with its session, and where the memory applies (its anchored files, current names)."""
    fresh = _freshness(hit)
    text, notes = _moved(" ".join(hit.text.split()), fresh)
    if fresh.get("asked_moved"):  # a map entry listing `X` for a file that no longer defines it
        from graphmem.code.whereabouts import moved_note

        said = " ".join(notes)  # "`X` moved from a.py to b.py" already says it
        asked = fresh["asked_moved"] if isinstance(fresh["asked_moved"], dict) else {}
        notes.extend(moved_note({"asked_moved": {k: v for k, v in asked.items()
                                                 if f"`{k}` moved from" not in said}}))
    changed = fresh.get("changed") or []
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        n = sum(v for p, v in (fresh.get("commits") or {}).items() if p in changed)
        notes.append(f"{shown} changed since this was learned"
                     + (f" ({n} commit{'s' if n != 1 else ''})" if n else ""))
    if fresh.get("reason"):
        notes.append(str(fresh["reason"]))  # "src/c.py is gone": part of its code is
    from graphmem.code.freshness import reverted_note

    undone = reverted_note(fresh)
    if undone:
        notes.append(undone)
    why = validity_note(hit.metadata)  # e.g. "possibly superseded: reverted in session 12: ..."
    if why:
        notes.append(why)
    was = replaced_note(hit.metadata)  # "was 2.31.0 until session 3": the value it replaced
    if was:
        notes.insert(0, was)
    if hit.kind == "turn":
        who = _speaker(hit)
        when = f", {hit.time:%Y-%m-%d}" if hit.time else ""
        body = f'"{text}" ({who} in session {hit.session}{when})'
    else:
        body = f"{text} _(source: {_where(hit, project_dir)})_"
    files = [p for p in fresh.get("paths") or [] if p not in text][:FILES_PER_LINE]
    if files and hit.kind != "file":
        notes.insert(0, "files: " + ", ".join(files))
    notes = list(dict.fromkeys(notes))  # a moved name can also be the one the query asked
    return f"- {body}" + (f" [{'; '.join(notes)}]" if notes else "") + "\n"


def _moved(text: str, fresh: dict) -> tuple[str, list[str]]:
    """The text with moved paths rewritten to their new names, and the notes saying what moved.
    A path is rewritten only when all the memory's code there went to one new path (the file was
    renamed, or every function it names there moved to one file); when some of its code is still
    there, or went to several files, the text keeps the path (the other names it lists there are
    still in it). The note is "a.py is now b.py" when a.py was renamed to one file, else one per
    moved symbol ("`refund` moved from a.py (deleted) to b.py", ``freshness.describe_move``)."""
    from graphmem.code.freshness import describe_move, is_rename, moves_of

    moves = moves_of(fresh)
    homes: dict[str, set[str]] = {}
    for m in moves:
        homes.setdefault(m["from"], set()).add(m["to"])
    notes = []
    anchored_now = set(fresh.get("paths") or ())  # where its code is now, moved or not
    for old, new in homes.items():
        if old not in anchored_now and len(new) == 1:
            text = text.replace(old, next(iter(new)))
        here = [m for m in moves if m["from"] == old]
        renamed = [m for m in here if is_rename(m)]
        if renamed and len(new) == 1:  # the file itself went to its new name: one note
            notes.append(describe_move(renamed[0]))
            continue
        notes.extend(describe_move(m) for m in here)
    return text, notes


def _defined_now(task: str, project_dir: Path | None, budget: int) -> str:
    """Where the functions and classes the task names are defined now (a renamed file or a
    moved function shows under its current path), if the budget leaves room."""
    from graphmem.code import defined_now

    rows = defined_now(task, project_dir)
    lines = [f"- `{r['symbol']}` is defined in {r['path']} (lines {r['lines'][0]}-{r['lines'][1]})\n"
             for r in rows]
    block = "\n### Code the task names, where it is now\n" + "".join(lines) if lines else ""
    return block if estimate_tokens(block) <= budget else ""


def _speaker(hit: Hit) -> str:
    """Who said a quoted turn (``user`` when its metadata does not say)."""
    return str(hit.metadata.get("speaker") or hit.metadata.get("role") or "user")


def _repeats(hit: Hit, quoted: list[tuple[str, frozenset[str]]]) -> bool:
    """Whether a turn already shown has the same speaker and nearly the same terms
    (``NEAR_SAME``): a near-duplicate quote would spend the budget twice on one thing."""
    terms = term_set(hit.text)
    if len(terms) < NEAR_TERMS:
        return False
    who = _speaker(hit)
    return any(w == who and len(terms & t) >= NEAR_SAME * len(terms | t) for w, t in quoted)


def _count(n: int) -> str:
    """"1 matching memory", "2 matching memories"."""
    return f"{n} matching {'memory' if n == 1 else 'memories'}"


def build_context(task: str, hits: list[Hit], max_tokens: int, project_dir: Path | None,
                  pinned: set[str] | frozenset[str] = frozenset(), retired: int = 0,
                  notes: list[str] | tuple[str, ...] = ()) -> str:
    """Markdown sections of deduplicated hits, best first within each, cut to ``max_tokens``.

    Hits scoring under ``RELEVANCE_FLOOR`` of the best one are left out, and so are quoted
    turns sharing fewer than ``RAW_TERMS`` words with the task unless they score within
    ``RAW_STRONG`` of the best (``pinned`` ids, e.g. memories anchored to the files the agent
    works on, are kept); so are memories whose code is gone, with a count of what was hidden.
    ``notes`` (the graph did not answer, a file nothing is known about) close the block.
    """
    header = f"## Memory relevant to: {task[:120]}\n"
    told = "\n" + "".join(f"_Note: {n}._\n" for n in notes) if notes else ""
    if estimate_tokens(header + told) > max_tokens // 2:
        told = ""  # no room: the caller still has them (``Memory.search_notes``)
    budget = max_tokens - estimate_tokens(header) - estimate_tokens(told)
    where = _defined_now(task, project_dir, budget // 4)  # first: it answers "where is X now"
    budget -= estimate_tokens(where)
    seen: set[str] = set()
    chosen: dict[str, list[str]] = {title: [] for title, _ in SECTIONS}
    section_of = {k: title for title, kinds in SECTIONS for k in kinds}
    # pinned hits score what the search gave them (0 when it did not find them)
    top = max((h.score for h in hits if _freshness(h).get("state") != "gone"), default=0.0)
    task_terms = None
    hidden = 0
    folded: set[str] = set()  # older values a shown line names ("was 2.31.0 until session 3")
    quoted: list[tuple[str, frozenset[str]]] = []  # (speaker, terms) of the turns shown
    # Walk hits by relevance so the budget goes to the best ones whatever their kind.
    for hit in hits:
        if hit.kind not in section_of:
            continue
        if hit.id not in pinned and RELEVANCE_FLOOR > 0 and hit.score < RELEVANCE_FLOOR * top:
            continue
        key = normalise(hit.text)  # after the floor: most hits are under it
        if key in seen or hit.id in folded or _current(hit) in folded:
            continue  # an older value of a fact whose current line says it
        if hit.kind in RAW_KINDS and hit.id not in pinned and hit.score < RAW_STRONG * top:
            if task_terms is None:
                task_terms = set(tokenize(task))
            if len(task_terms.intersection(term_set(hit.text))) < RAW_TERMS:
                continue  # an exchange that does not talk about the task
        if _freshness(hit).get("state") == "gone":
            hidden += 1
            seen.add(key)
            continue
        if hit.kind == "turn" and _repeats(hit, quoted):
            continue  # the same words from the same speaker are already quoted
        title = "Current value" if hit.metadata.get("current_value") else section_of[hit.kind]
        line = _line(hit, project_dir)
        cost = estimate_tokens(line) + (0 if chosen[title] else estimate_tokens(f"\n### {title}\n"))
        if cost > budget:
            continue  # a shorter, less relevant line may still fit
        seen.add(key)
        if hit.kind == "turn":
            quoted.append((_speaker(hit), term_set(hit.text)))
        chosen[title].append(line)
        budget -= cost
        if replaced_note(hit.metadata):  # the older values it names: their lines are folded
            folded.add(hit.id)
            folded.update(r["id"] for r in hit.metadata.get("replaces") or ()
                          if isinstance(r, dict) and isinstance(r.get("id"), str))
    if not any(chosen.values()) and not hidden and not retired and not where and not told:
        return ""
    parts = [header, where]
    for title, _ in SECTIONS:
        if chosen[title]:
            parts.append(f"\n### {title}\n")
            parts.extend(chosen[title])
    if hidden:
        they = "it describes is" if hidden == 1 else "they describe is"
        parts.append(f"\n_{_count(hidden)} left out: the code {they} gone._\n")
    if retired:
        parts.append(f"\n_{_count(retired)} left out: retired or superseded, or not accepted "
                     "in review._\n")
    parts.append(told)
    return "".join(parts)
