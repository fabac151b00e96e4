"""Batch consolidation: what the recent sessions taught, deduplicated into ``memory_summary.md``.

Sources, per spec folder: each ``session_insights/session_NNN.json`` in any shape
(``insight_shapes``: gotchas, what failed, recommendations, patterns, what worked, outcomes) and
each episodic session's summary. "Most recent" means
the most recently written session files. Episodic sessions that have not ended are *active* and
skipped (their summary may still change); insight files are written once a session is over, so
they are never active. At most 32 facts are kept per session, in that order of categories.

Facts equal after normalisation merge (and so do the rounds of one subtask's retry loop that
differ only in numbers, ``insight_shapes.retry_key``; a line cited by more than ``MAX_CITED``
sessions shows their count instead of their names); so do facts of one category whose embeddings are nearly the
same (cosine >= ``NEAR``, tuned on the bundled bge-small, which the local default embedder hands
this pass) unless exactly one of them is negated. A merged fact cites every session it came from
and ranks by how many sessions said it, then by recency. With an LLM configured, the LLM rewrites
the deduplicated facts into groups (validated structured output; every line must cite fact numbers
we gave it); if that fails the deterministic summary is written and the report says why. Everything
runs under one lock in ``GRAPHMEM_HOME``, so two consolidations never interleave; session files are
read in parallel, at most ``concurrency`` at a time.

Where the summary goes: ``<spec>/memory/memory_summary.md`` for one spec, and
``<project>/.graphmem/memory_summary.md`` with ``project=True`` (every spec folder of the project).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field

from graphmem.errors import GraphmemError, ProviderError, StorageError, ValidationError
from graphmem.files.atomic import atomic_write_text
from graphmem.files.lock import folder_lock
from graphmem.files.safe import is_link, private_dir, read_bytes, real_dir
from graphmem.files import insight_shapes
from graphmem.files.insight_shapes import retry_key
from graphmem.lru import LRU
from graphmem.redact import redact_text

log = logging.getLogger("graphmem.rules.consolidate")

FACTS_PER_SESSION = 32
MAX_CITED = 5  # sessions named on one line; more are shown as a count
NEAR = 0.92
LOCK_NAME = "consolidate.lock"
# (category, insight key or None for episodic summaries, heading) - most useful first.
CATEGORIES = [
    ("gotcha", "discoveries.gotchas_encountered", "Gotchas and pitfalls"),
    ("failed", "what_failed", "What failed"),
    ("recommendation", "recommendations_for_next_session", "Recommendations"),
    ("pattern", "discoveries.patterns_found", "Patterns to follow"),
    ("worked", "what_worked", "What worked"),
    ("summary", None, "Session summaries"),
]
HEADINGS = {c: h for c, _, h in CATEGORIES}
_VECTORS: "weakref.WeakKeyDictionary[Any, LRU]" = weakref.WeakKeyDictionary()  # fact vectors
_NEGATION = re.compile(r"\b(not|never|no|don't|dont|doesn't|didn't|avoid|without|cannot|can't)\b")


class ConsolidationReport(BaseModel):
    """What one consolidation read and wrote."""

    sessions_scanned: int = 0
    sessions_with_facts: int = 0
    candidate_facts: int = 0  # unique after exact dedupe, as fed to the near-duplicate pass
    active_sessions_skipped: int = 0
    duplicates_dropped: int = 0
    near_duplicates_dropped: int = 0
    facts_written: int = 0
    path: str | None = None
    mode: str = "deterministic"  # or "llm"
    detail: str | None = None


@dataclass
class SessionRef:
    """One session file to read: where it is and how to cite it."""

    label: str
    path: Path
    kind: str  # "insight" | "episode"
    mtime: float
    spec: Path | None = None  # the spec folder it belongs to


@dataclass
class Fact:
    category: str
    text: str
    sessions: list[str] = field(default_factory=list)
    rank: int = 0  # order first seen: lower is more recent

    def line(self) -> str:
        if len(self.sessions) > MAX_CITED:  # a retry loop: its count, not thousands of labels
            return (f"- {self.text} (seen in {len(self.sessions)} sessions, latest "
                    f"{self.sessions[0]}, earliest {self.sessions[-1]})")
        return f"- {self.text} (sessions: {', '.join(self.sessions)})"


# ---- reading -------------------------------------------------------------------------------
def find_sessions(specs: Sequence[Path], label_spec: bool) -> list[SessionRef]:
    """Every session file of ``specs``, most recently written first."""
    refs = []
    for spec in specs:
        prefix = f"{spec.name}/" if label_spec else ""
        memory, insights = spec / "memory", spec / "memory" / "session_insights"
        if is_link(memory):  # links inside a memory folder are never followed (files/safe.py)
            continue
        for p in () if is_link(insights) else insights.glob("session_*.json"):
            if is_link(p):
                continue
            num = p.stem.removeprefix("session_").lstrip("0") or "0"
            if "-" in num:  # a committed memory's writer tag (files/session_names.py)
                num = "{} ({})".format(*num.split("-", 1))
            refs.append(SessionRef(f"{prefix}session {num}", p, "insight", _mtime(p), spec))
        episodes = memory / "episodes"
        if episodes.is_dir() and not is_link(episodes):
            for d in episodes.iterdir():
                meta = d / "session.json"
                if not d.name.startswith(".") and not is_link(d) and not is_link(meta) \
                        and meta.is_file():
                    refs.append(SessionRef(f"{prefix}{d.name}", meta, "episode", _mtime(meta),
                                           spec))
    return sorted(refs, key=lambda r: (-r.mtime, r.label))


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _same(text: str) -> str:
    return text


def read_facts(ref: SessionRef, clean: Callable[[str], str] = _same
               ) -> tuple[bool, list[tuple[str, str, str]]]:
    """(active, [(category, text, key)]) of one session, capped at ``FACTS_PER_SESSION``; facts
    with one key merge (``insight_shapes.retry_key``: rounds of one subtask's retry loop do).

    ``clean`` (redaction) sees each text as stored, before it is split into bullets or joined.
    """
    try:
        data = json.loads(read_bytes(ref.path).decode("utf-8"))
    except (OSError, ValueError, RecursionError, StorageError) as exc:
        log.warning("consolidate: cannot read %s (%s); skipped", ref.path, exc)
        return False, []
    if not isinstance(data, dict):
        return False, []
    facts: list[tuple[str, str]] = []
    if ref.kind == "episode":
        if not data.get("ended_at"):
            return True, []
        summary = data.get("summary")
        if isinstance(summary, str):
            summary = clean(summary)
            bullets = [ln.strip().lstrip("-*• ").strip() for ln in summary.splitlines()]
            bullets = [b for b in bullets if b]
            many = len(bullets) > 1 and all(ln.strip()[:1] in "-*•" for ln in summary.splitlines()
                                            if ln.strip())
            facts = [("summary", b) for b in bullets] if many else [("summary", " ".join(bullets))]
    else:
        subtask = insight_shapes.session_facts(data).get("subtask")
        by_category: dict[str, list[str]] = {}
        for entry in insight_shapes.entries(data):  # every shape (insight_shapes)
            category = _category(entry, data)
            if category:
                by_category.setdefault(category, []).append(" ".join(clean(entry.text).split()))
        facts = [(c, text) for c, _, _ in CATEGORIES for text in by_category.get(c, [])]
        return False, [(c, t, retry_key(t, subtask)) for c, t in facts if t][:FACTS_PER_SESSION]
    return False, [(c, t, retry_key(t)) for c, t in facts if t][:FACTS_PER_SESSION]


_FAILED = {"failed", "failure", "error", "blocked", "rejected", "incomplete"}


def _category(entry: "insight_shapes.Entry", data: dict) -> str | None:
    """The summary section of one learning (None: not summarised, e.g. subtask names)."""
    if entry.kind in ("gotcha", "pattern"):
        return entry.kind
    name = entry.field.rsplit(".", 1)[-1]
    if name == "approach_outcome":  # where the outcome was read: top level or in discoveries
        outcome: Any = data
        for part in entry.field.split("."):
            outcome = outcome.get(part) if isinstance(outcome, dict) else None
        status = outcome.get("status") if isinstance(outcome, dict) else None
        failed = data.get("success") is False or str(status).lower() in _FAILED
        return "failed" if failed else "worked"
    return {"what_failed": "failed", "what_worked": "worked", "recommendations": "recommendation",
            "recommendations_for_next_session": "recommendation"}.get(name)


async def collect(refs: list[SessionRef], concurrency: int,
                  progress: Callable[[int, int], None] | None = None,
                  clean: Callable[[str], str] = _same) -> list[tuple[SessionRef, bool, list]]:
    """Read the sessions in parallel, at most ``concurrency`` at a time, keeping their order."""
    sem = asyncio.Semaphore(concurrency)
    done = 0

    async def one(ref: SessionRef):
        nonlocal done
        async with sem:
            active, facts = await asyncio.to_thread(read_facts, ref, clean)
        done += 1
        if progress:
            progress(done, len(refs))
        return ref, active, facts

    return list(await asyncio.gather(*[one(r) for r in refs]))


# ---- dedupe --------------------------------------------------------------------------------
def exact_dedupe(results: list[tuple[SessionRef, bool, list]], report: ConsolidationReport,
                 history: dict[Path, set[str]] | None = None) -> list[Fact]:
    """Merge facts equal after normalisation; fills the session counts of ``report``. A fact
    whose text (normalised) ``history`` lists for its spec (retired, superseded) is left out."""
    from graphmem.models import normalise

    facts: dict[str, Fact] = {}
    for ref, active, items in results:
        report.sessions_scanned += 1
        if active:
            report.active_sessions_skipped += 1
            continue
        if items:
            report.sessions_with_facts += 1
        gone = (history or {}).get(ref.spec) if ref.spec is not None else None
        for category, text, k in items:
            if not k or (gone and normalise(text) in gone):
                continue
            if k in facts:
                report.duplicates_dropped += 1
                if ref.label not in facts[k].sessions:
                    facts[k].sessions.append(ref.label)
            else:
                facts[k] = Fact(category, text, [ref.label], len(facts))
    report.candidate_facts = len(facts)
    return list(facts.values())


async def near_dedupe(facts: list[Fact], embedder: Any, threshold: float = NEAR) -> tuple[list[Fact], int]:
    """Merge near-duplicates within each category (greedy, most recent wording kept)."""
    import numpy as np

    if len(facts) < 2 or embedder is None:
        return facts, 0
    from graphmem.providers.base import Embedder

    if isinstance(embedder, Embedder):  # it may name a better judge of sameness (declared)
        embedder = embedder.similarity_embedder()
    try:  # a long-lived process (MCP server) embeds each fact once per embedder
        memo = _VECTORS.setdefault(embedder, LRU(20_000))
    except TypeError:  # an embedder that cannot be weakly referenced: no memory
        memo = LRU(20_000)
    have = {f.text: v for f in facts if (v := memo.get(f.text)) is not None}
    todo = list(dict.fromkeys(f.text for f in facts if f.text not in have))
    if todo:
        got = await embedder.embed(todo)
        if len(got) != len(todo):
            raise ProviderError(f"the embedder returned {len(got)} vectors for {len(todo)} facts")
        for text, vec in zip(todo, got):
            have[text] = memo.put(text, np.asarray(vec, dtype=np.float32))
    vecs = np.stack([have[f.text] for f in facts]).astype(np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    kept: list[int] = []
    dropped = 0
    for i, f in enumerate(facts):
        same = [j for j in kept if facts[j].category == f.category]
        if same:
            sims = vecs[same] @ vecs[i]
            best = int(np.argmax(sims))
            j = same[best]
            neg = bool(_NEGATION.search(f.text.lower())) != bool(_NEGATION.search(facts[j].text.lower()))
            if sims[best] >= threshold and not neg:
                facts[j].sessions += [s for s in f.sessions if s not in facts[j].sessions]
                dropped += 1
                continue
        kept.append(i)
    return [facts[i] for i in kept], dropped


def rank(facts: list[Fact]) -> dict[str, list[Fact]]:
    """Facts grouped by category (in ``CATEGORIES`` order), most-cited then most recent first."""
    groups: dict[str, list[Fact]] = {}
    for c, _, _ in CATEGORIES:
        members = sorted((f for f in facts if f.category == c), key=lambda f: (-len(f.sessions), f.rank))
        if members:
            groups[HEADINGS[c]] = members
    return groups


# ---- the LLM pass ---------------------------------------------------------------------------
class LLMLine(BaseModel):
    text: str = Field(min_length=1, max_length=1000)
    sources: list[int] = Field(min_length=1)


class LLMGroup(BaseModel):
    title: str = Field(min_length=1, max_length=120)
    facts: list[LLMLine] = Field(min_length=1)


class LLMSummary(BaseModel):
    groups: list[LLMGroup] = Field(min_length=1)


PROMPT = (
    "You maintain the long-term memory of a coding agent. Below are numbered facts learned in past "
    "sessions, each with its category and how many sessions reported it. Merge facts that say the "
    "same thing, rewrite each as one short, specific line, drop nothing useful, and group them "
    "under short titles. Put the most useful groups and lines first (pitfalls and failures before "
    "successes). Every line must list in 'sources' the numbers of the facts it is based on. "
    "Reply with JSON only.")


async def llm_groups(llm: Any, groups: dict[str, list[Fact]]) -> dict[str, list[Fact]]:
    """Let the LLM merge and rewrite; raises GraphmemError when its answer cannot be used."""
    numbered = [f for members in groups.values() for f in members]
    listing = "\n".join(f"[{i}] ({f.category}; {len(f.sessions)} session(s)) {f.text}"
                        for i, f in enumerate(numbered, 1))
    answer = await llm.generate_json([{"role": "system", "content": PROMPT},
                                      {"role": "user", "content": listing}], LLMSummary,
                                     max_tokens=4096)
    out: dict[str, list[Fact]] = {}
    for g in answer.groups:
        for line in g.facts:
            bad = [n for n in line.sources if not 1 <= n <= len(numbered)]
            if bad:
                raise ValidationError(f"cites facts {bad} that do not exist", field="llm.sources")
            cited: list[str] = []
            for n in line.sources:
                cited += [s for s in numbered[n - 1].sessions if s not in cited]
            text = " ".join(line.text.split())
            out.setdefault(" ".join(g.title.split()), []).append(
                Fact("llm", text, cited, min(numbered[n - 1].rank for n in line.sources)))
    return out


# ---- writing -------------------------------------------------------------------------------
def render(groups: dict[str, list[Fact]], report: ConsolidationReport, scope: str) -> str:
    """The markdown summary: header, then one section per group, every line citing its sessions."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total = sum(len(v) for v in groups.values())
    lines = ["# Memory summary", "",
             f"Consolidated by graphmem on {when} from the {report.sessions_scanned} most recent "
             f"sessions of this {scope} ({report.active_sessions_skipped} still active, skipped): "
             f"{total} facts{' merged by the LLM' if report.mode == 'llm' else ''}. "
             "Each line cites the sessions it came from.", ""]
    for title, members in groups.items():
        lines += [f"## {title}", ""] + [f.line() for f in members] + [""]
    return "\n".join(lines)


def summary_path(spec_dir: Path | None, project_dir: Path, project: bool) -> Path:
    """Where ``memory_summary.md`` goes for this scope."""
    if project or spec_dir is None:
        return Path(project_dir) / ".graphmem" / "memory_summary.md"
    return Path(spec_dir) / "memory" / "memory_summary.md"


async def consolidate(*, specs: Sequence[Path], target: Path, home: Path, sessions: int,
                      concurrency: int, label_spec: bool, scope: str, embedder: Any = None,
                      llm: Any = None, progress: Callable[[int, int], None] | None = None,
                      lock_timeout: float = 600.0, redact: bool = True,
                      history: dict[Path, set[str]] | None = None) -> ConsolidationReport:
    """Read, dedupe, (LLM-merge) and write the summary under the global consolidation lock.

    With ``redact`` (the default), facts are redacted as they are read, since an agent may have
    written the session files itself, and so is what the LLM answers: no secret reaches the LLM
    or the summary. ``history``: spec folder -> the normalised texts of its retired and
    superseded memories, which the summary leaves out.
    """
    clean = redact_text if redact else _same
    report = ConsolidationReport()
    with folder_lock(private_dir(Path(home)), timeout=lock_timeout, name=LOCK_NAME):
        refs = (await asyncio.to_thread(find_sessions, specs, label_spec))[:sessions]
        results = await collect(refs, concurrency, progress, clean)
        facts = exact_dedupe(results, report, history)
        try:
            facts, report.near_duplicates_dropped = await near_dedupe(facts, embedder)
        except GraphmemError as exc:  # an embedder outage costs the near pass, not the summary
            report.detail = f"near-duplicate pass skipped: {exc}"
        groups = rank(facts)
        if llm is not None and groups:
            try:
                groups = {clean(title): [Fact(f.category, clean(f.text), f.sessions, f.rank)
                                         for f in members]
                          for title, members in (await llm_groups(llm, groups)).items()}
                report.mode = "llm"
            except Exception as exc:  # any failure: the deterministic summary still goes out
                report.detail = f"LLM merge failed, deterministic summary written: {exc}"
                log.warning("consolidate: %s", report.detail)
        report.facts_written = sum(len(v) for v in groups.values())
        if report.facts_written:
            real_dir(target.parent, create=True)  # a linked memory/ or .graphmem/ is refused
            atomic_write_text(target, render(groups, report, scope))
            report.path = str(target)
        else:
            report.detail = report.detail or "no facts in the scanned sessions; nothing written"
    return report

