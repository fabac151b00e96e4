"""Supersession judged by an LLM through the provider seam, behind a loopback server in OpenAI's
documented shape (the request it receives is checked); a failed or garbage answer loses nothing
and leaves the decision to the rule without an LLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphmem import Memory
from test_code_freshness import PAY, project
from test_consolidate import FakeOpenAI

KEY = "sk-test-supersede-000000000000"
REFUSED = (401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                           "param": None, "code": "invalid_api_key"}})  # OpenAI's documented shape


def write_with_llm(monkeypatch, root: Path, spec: Path, answer, notes: list[str],
                   query: str) -> tuple[FakeOpenAI, list, list]:
    """Write ``notes`` with the LLM behind a loopback server answering ``answer``; then the
    search for ``query`` -> (server, default hits, hits with history)."""
    server = FakeOpenAI(answer)
    monkeypatch.setenv("GRAPHMEM_LLM_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    try:
        with Memory(spec, root) as mem:
            for text in notes:
                mem.append_gotcha(text)
            return (server, mem.search(query, limit=10),
                    mem.search(query, limit=10, include_history=True))
    finally:
        server.close()


def events(spec: Path) -> list[dict]:
    path = spec / "memory" / "validity.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def numbered(body: dict) -> dict[int, str]:
    """The older notes the request lists, by number."""
    out = {}
    for line in body["messages"][-1]["content"].splitlines():
        if line.startswith("[") and "] " in line:
            n, _, text = line[1:].partition("] ")
            out[int(n)] = text
    return out


def test_the_llm_judges_which_older_note_on_the_same_code_a_new_one_replaces(tmp_path, monkeypatch):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/other.py": "X = 1\n"})

    def answer(body):  # the reversal replaces the note about retries, keeps the related one
        notes = numbered(body)
        new = body["messages"][-1]["content"].split("\n", 1)[0]
        hit = [n for n, t in notes.items() if "retried three times" in t and "never" in new]
        return json.dumps({"updates": hit, "reason": "the retry policy was reversed"})

    server, hits, history = write_with_llm(monkeypatch, root, spec, answer, [
        "`refund` calls are retried three times by src/pay.py",
        "`refund` needs the order's currency",
        "X in src/other.py must stay an int",  # other code: not shown to the LLM
        "`refund` is never retried any more: the gateway deduplicates"], "is refund retried")
    plain = [h.text for h in hits]
    every = {h.text: h for h in history}
    last = server.requests[-1]
    assert last["path"] == "/v1/chat/completions" and last["auth"] == f"Bearer {KEY}"
    assert last["body"]["response_format"]["type"] == "json_schema"
    shown = numbered(last["body"])
    assert sorted(shown.values()) == ["`refund` calls are retried three times by src/pay.py",
                                      "`refund` needs the order's currency"]
    assert "never retried any more" in last["body"]["messages"][-1]["content"]
    assert "`refund` calls are retried three times by src/pay.py" not in plain
    assert "`refund` needs the order's currency" in plain
    old = every["`refund` calls are retried three times by src/pay.py"]
    new = every["`refund` is never retried any more: the gateway deduplicates"]
    assert old.metadata["validity"]["state"] == "superseded"
    assert old.metadata["validity"]["by"] == new.id
    assert "the retry policy was reversed" in old.metadata["validity"]["reason"]
    assert [e["state"] for e in events(spec)] == ["superseded"]


@pytest.mark.parametrize("reply", ["garbage", "out of range", "refused"])
def test_a_failed_or_garbage_answer_loses_nothing_and_the_rule_decides(tmp_path, monkeypatch, reply):
    root, spec = project(tmp_path, {"src/pay.py": PAY})

    def answer(body):
        if reply == "refused":
            return REFUSED
        if reply == "out of range":
            return json.dumps({"updates": [7], "reason": "made up"})
        return "I think the first one, probably?"

    server, found, _ = write_with_llm(monkeypatch, root, spec, answer, [
        "`refund` allows 3 retries in CI", "`refund` allows 5 retries in CI"], "refund retries in CI")
    hits = {h.text: h for h in found}
    assert server.requests  # the LLM was asked
    assert set(hits) >= {"`refund` allows 3 retries in CI", "`refund` allows 5 retries in CI"}
    old = hits["`refund` allows 3 retries in CI"]
    assert old.metadata["validity"]["state"] == "possibly superseded"  # the rule's mark
    assert [e["state"] for e in events(spec)] == ["possibly superseded"]
    assert (spec / "memory" / "gotchas.md").read_text().count("retries in CI") == 2
