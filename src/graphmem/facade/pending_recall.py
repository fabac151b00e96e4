"""What a search adds after its ranking: the memories the query repeats verbatim, first, and the
prompts an agent hook captured that no digest has read yet.

Verbatim: a memory whose text is the query (case and spacing aside; or one the start of the
other, the shorter at least ``PREFIX_CHARS`` long: a prompt kept cut, a query pasting part of a
long one) is what the search was for, and comes first. Code recall (``code/reorder.py``) ranks a
task's memories by the files they are about; a prompt that names no file ("3, but enabled by
default", "/mcp") fell out of the top ten below them, though the index ranked it first.

Pending: a prompt is in its session's spool (``<project>/.graphmem/spool``, ``agent_spool.py``)
as soon as the UserPromptSubmit hook returns, and in the index only once the digest worker,
started at the turn's Stop, has read it. Until then the spool is read here: the prompts after
the offset the digest reached join the hits, those repeating the query first, the others ranked
among the hits by the share of the query's words they hold (the same measure for both, so a
prompt holding every word of the query comes before a memory holding half). Nothing is written:
the spool is the truth until the digest turns it into the episodic session, and a worker
killed half-way leaves the offset where it was, so its prompts stay found.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..models import Hit

PREFIX_CHARS = 200  # a verbatim match by its start: the shorter text at least this long
MIN_SHARE = 0.5  # a pending prompt holding less of the query's words is left out
STEP = 1e-4  # score between two hits placed one after the other


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def verbatim(text: str, query: str) -> bool:
    """Whether ``text`` is ``query`` (case and spacing aside), or one starts the other and the
    shorter has at least ``PREFIX_CHARS`` characters."""
    a, b = _norm(text), _norm(query)
    if a == b:
        return bool(a)
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= PREFIX_CHARS and long.startswith(short)


def verbatim_first(hits: list[Hit], candidates: list[Hit], query: str,
                   fetch: Callable[[list[str]], list[Hit]]) -> list[Hit]:
    """``hits`` with the ``candidates`` (the first ranking's) that repeat ``query`` verbatim
    first, scored above the best; ``fetch(ids)`` gives those the re-ranking left out."""
    ids = list(dict.fromkeys(h.id for h in candidates if verbatim(h.text, query)))
    if not ids:
        return hits
    have = {h.id: h for h in hits}
    missing = [i for i in ids if i not in have]
    if missing:
        have.update({h.id: h for h in fetch(missing)})
    top = max((h.score for h in hits), default=0.0)
    first = [have[i].replaced(score=round(top + 0.01 - n * STEP, 6))
             for n, i in enumerate(i for i in ids if i in have)]
    taken = {h.id for h in first}
    return [*first, *(h for h in hits if h.id not in taken)]


def pending_hit(p: dict, project: str, spec: str, score: float) -> Hit:
    """A prompt of the spool as a search hit: a user turn, ``metadata["pending"]`` (no digest
    has read it yet), its source the session's spool."""
    digest = hashlib.sha256(f"{p['session']}:{p['offset']}".encode()).hexdigest()[:24]
    when = datetime.fromtimestamp(p["t"], timezone.utc) if p["t"] else None
    return Hit(id=f"spool-{digest}", kind="turn", text=p["prompt"], score=score,
               project=project, spec=spec, time=when,
               metadata={"role": "user", "speaker": "user", "pending": True,
                         "agent_session": p["session"]},
               source=str(Path(".graphmem") / "spool" / f"{p['session']}.jsonl"))


def with_pending(hits: list[Hit], prompts: list[dict], query: str, project: str, spec: str,
                 limit: int) -> list[Hit]:
    """``hits`` with the spool's undigested ``prompts`` that match ``query`` (see the module
    docstring), at most ``limit`` of them; a prompt an indexed turn already holds (digested
    between the two reads) is left out."""
    from ..index.text import tokenize

    if not prompts:
        return hits
    words = set(tokenize(query))
    held = {_norm(h.text) for h in hits if h.kind == "turn"}

    def share(text: str) -> float:
        return len(words & set(tokenize(text))) / len(words) if words else 0.0

    found: list[tuple[float, float, dict]] = []
    for p in prompts:
        if _norm(p["prompt"]) in held:
            continue
        s = 2.0 if verbatim(p["prompt"], query) else share(p["prompt"])
        if s >= MIN_SHARE:
            found.append((s, p["t"], p))
    if not found:
        return hits
    found.sort(key=lambda x: (-x[0], -x[1]))  # the best, then the newest
    found = found[:limit]
    lead = 0  # the verbatim memories verbatim_first put first stay first
    while lead < len(hits) and verbatim(hits[lead].text, query):
        lead += 1
    shares = [share(h.text) for h in hits]
    out, i = list(hits[:lead]), lead
    for s, _, p in found:
        while i < len(hits) and s <= shares[i]:
            out.append(hits[i])
            i += 1
        above = out[-1].score if out else None
        below = hits[i].score if i < len(hits) else None
        score = ((above + below) / 2 if above is not None and below is not None
                 else above - STEP if above is not None
                 else below + STEP if below is not None else 1.0)
        out.append(pending_hit(p, project, spec, round(score, 6)))
    return out + hits[i:]
