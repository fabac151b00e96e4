"""Supersession judged by an LLM: which older notes on the same code does a new note replace?

With an LLM configured (``providers.llm``), a new gotcha or pattern is shown to it beside the
older notes of its spec that share one of its own anchors (the files and symbols both name,
``code/anchors.py``) or that the no-LLM rule picks (``validity.possible_update``), at most
``MAX_CANDIDATES`` of them, newest first. The LLM answers in structured output (``Judgement``,
through the provider seam's ``LLM.generate_json``) with the numbers of the notes the new one
replaces; those are logged ``superseded`` and leave default retrieval. An answer that cannot be
used (the provider fails, the reply does not validate, a number names no candidate) changes
nothing: the caller then falls back to the no-LLM rule, and no note is ever lost.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from graphmem.errors import ProviderError

MAX_CANDIDATES = 8
MAX_NOTE_CHARS = 1_000

SYSTEM = ("You keep a software project's memory of short coding notes (gotchas and patterns). "
          "A new note was just written. Decide which of the numbered older notes it makes out "
          "of date: it states a changed value for the same thing (a version, a default, a "
          "limit, a path), reverses a decision, or replaces the advice. An older note that is "
          "only related, or that the new note adds detail to, is NOT replaced. Answer with the "
          "numbers of the replaced notes (an empty list when none is) and one short reason.")


class Judgement(BaseModel):
    """The LLM's answer: the older notes the new one replaces, by number."""

    updates: list[int] = Field(default_factory=list,
                               description="numbers of the older notes the new note replaces")
    reason: str = Field(default="", description="one short sentence: what changed")


def anchor_keys(rec: dict | None) -> set[tuple[str, str | None]]:
    """The own anchors of an anchor record as (path, symbol) keys."""
    return {(a.get("path"), a.get("symbol")) for a in (rec or {}).get("anchors") or ()
            if isinstance(a, dict) and not a.get("via")}


def same_anchor(spec_dir: str | Path, new_id: str, texts: dict[str, str]) -> list[str]:
    """Ids of ``texts`` (older notes, id -> text) sharing an own anchor with ``new_id``, newest
    first: the same symbol, or the same file when either names the file alone."""
    from graphmem.code.anchors import book

    records = book(spec_dir).records
    mine = anchor_keys(records.get(new_id))
    if not mine:
        return []
    paths = {p for p, _ in mine}
    whole = {p for p, s in mine if s is None}
    out = []
    for item_id in reversed(list(texts)):
        theirs = anchor_keys(records.get(item_id))
        if item_id != new_id and (mine & theirs or any(
                p in paths and (s is None or p in whole) for p, s in theirs)):
            out.append(item_id)
    return out


async def judge(llm, kind: str, new_text: str, candidates: list[tuple[str, str]]) -> tuple[list[str], str]:
    """Ask ``llm`` which of ``candidates`` ((id, text), newest first) ``new_text`` replaces ->
    (their ids, the reason). Raises ``ProviderError`` when the answer cannot be used."""
    shown = candidates[:MAX_CANDIDATES]
    listing = "\n".join(f"[{n}] {text[:MAX_NOTE_CHARS]}" for n, (_, text) in enumerate(shown, 1))
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"New {kind}: {new_text[:MAX_NOTE_CHARS]}\n\n"
                                            f"Older {kind}s about the same code:\n{listing}"}]
    got = await llm.generate_json(messages, Judgement, max_tokens=300)
    if not isinstance(got, Judgement):
        raise ProviderError(f"{getattr(llm, 'name', 'llm')}: no judgement in the reply")
    bad = [n for n in got.updates if not 1 <= n <= len(shown)]
    if bad:
        raise ProviderError(f"{getattr(llm, 'name', 'llm')}: the reply names notes {bad}, "
                            f"but only 1-{len(shown)} were given")
    ids = list(dict.fromkeys(shown[n - 1][0] for n in got.updates))
    return ids, " ".join(got.reason.split())[:500]
