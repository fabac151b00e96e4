"""Prompt context: the most relevant memories for a task as markdown, within a token budget.

Tokens are estimated, not counted with a model tokenizer (which would cost a heavy import on
every call): ``ceil(characters / 4)``, the usual rule of thumb for English and code under BPE
tokenizers, which tends to over-count slightly, so the block stays within the caller's budget.
"""

from __future__ import annotations

import math
from pathlib import Path

from .errors import ValidationError
from .insight_items import count_note
from .models import Hit, normalise

MIN_TOKENS, MAX_TOKENS = 20, 200_000
SECTIONS = (  # (title, kinds), in the order an agent should read them
    ("Gotchas", ("gotcha",)),
    ("Patterns", ("pattern",)),
    ("Files", ("file",)),
    ("Lessons from past sessions", ("insight", "fact", "turn", "step")),
)


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
        if project_dir is not None and src:
            src = str(Path(src).relative_to(project_dir))
    except ValueError:
        pass
    if hit.session and hit.kind in ("insight", "turn", "step", "fact"):
        src = f"{src}, session {hit.session}"
    seen = count_note(hit.metadata)  # many sessions said it: one line with their count
    return f"{src}; {seen}" if seen else src


def build_context(task: str, hits: list[Hit], max_tokens: int, project_dir: Path | None) -> str:
    """Markdown sections of deduplicated hits, best first within each, cut to ``max_tokens``."""
    header = f"## Memory relevant to: {task[:120]}\n"
    budget = max_tokens - estimate_tokens(header)
    seen: set[str] = set()
    chosen: dict[str, list[str]] = {title: [] for title, _ in SECTIONS}
    section_of = {k: title for title, kinds in SECTIONS for k in kinds}
    # Walk hits by relevance so the budget goes to the best ones whatever their kind.
    for hit in hits:
        key = normalise(hit.text)
        if key in seen or hit.kind not in section_of:
            continue
        title = section_of[hit.kind]
        line = f"- {' '.join(hit.text.split())} _(source: {_where(hit, project_dir)})_\n"
        cost = estimate_tokens(line) + (0 if chosen[title] else estimate_tokens(f"\n### {title}\n"))
        if cost > budget:
            continue  # a shorter, less relevant line may still fit
        seen.add(key)
        chosen[title].append(line)
        budget -= cost
    if not seen:
        return ""
    parts = [header]
    for title, _ in SECTIONS:
        if chosen[title]:
            parts.append(f"\n### {title}\n")
            parts.extend(chosen[title])
    return "".join(parts)
