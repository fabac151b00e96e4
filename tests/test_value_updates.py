"""Values that change over time (issue 34): a newer memory stating the same fact about the same
subject with another value is the current one. Search ranks it first, ``context`` shows it and
says what it replaced ("was 2.31.0 until session 3"), ``include_history`` shows the chain; the
rule does not fire on merely similar texts, and an LLM (a loopback server in OpenAI's documented
shape) judges when one is configured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphmem import Memory
from test_code_freshness import project
from test_consolidate import FakeOpenAI

QUERY = "Which version of requests do we use?"


def events(spec: Path) -> list[dict]:
    path = spec / "memory" / "validity.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def three_sessions(mem: Memory) -> None:
    for n, v in enumerate(["2.28.1", "2.31.0", "2.32.3"], 1):
        mem.save_session_insights(n, {"subtasks_completed": [f"Upgrade requests to {v}"]})


def test_the_newest_value_is_first_and_the_context_says_what_it_replaced(tmp_path):
    root, spec = project(tmp_path, {"app.py": "import requests\n"})
    with Memory(spec, root) as mem:
        three_sessions(mem)
        hits = mem.search(QUERY)
        block = mem.context(QUERY, max_tokens=300)
        history = mem.search(QUERY, include_history=True)
    assert hits[0].text == "Upgrade requests to 2.32.3"
    assert hits[0].score == max(h.score for h in hits)
    old = {h.text: h.metadata.get("validity") or {} for h in hits[1:]}
    assert old["Upgrade requests to 2.31.0"]["state"] == "possibly superseded"
    assert old["Upgrade requests to 2.31.0"]["by"] == hits[0].id
    assert "replaced in session 3" in old["Upgrade requests to 2.31.0"]["reason"]
    # the context names the current value, and the old ones only as what it replaced
    line = next(x for x in block.splitlines() if "2.32.3" in x)
    assert "[was 2.31.0 until session 3, 2.28.1 until session 2]" in line
    assert "Upgrade requests to 2.31.0" not in block and "Upgrade requests to 2.28.1" not in block
    chain = history[0].metadata["replaces"]
    assert [(r["text"], r["was"], r["until"]) for r in chain] == [
        ("Upgrade requests to 2.31.0", "2.31.0", "session 3"),
        ("Upgrade requests to 2.28.1", "2.28.1", "session 2")]


def test_the_current_value_is_brought_in_when_the_search_did_not_find_it(tmp_path):
    root, spec = project(tmp_path, {"app.py": "import requests\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": [
            "Pin the requests library of the HTTP client module to 2.28.1"]})
        for n in range(2, 40):  # many memories between: the newer one is out of a 1-hit search
            mem.save_session_insights(n, {"subtasks_completed": [f"Refactor module {n} logging"]})
        mem.save_session_insights(40, {"subtasks_completed": [
            "Pin the requests library of the HTTP client module to 2.32.3"]})
        hits = mem.search("requests library HTTP client module 2.28.1", limit=1)
    assert [h.text for h in hits] == ["Pin the requests library of the HTTP client module to 2.32.3"]


@pytest.mark.parametrize("first, second", [
    ("Upgrade requests to 2.31.0", "Upgrade urllib3 to 2.31.0"),  # two packages
    ("Upgrade requests to 2.31.0", "Upgrade urllib3 to 2.0.7"),
    ("Upgrade requests to 2.31.0", "requests retries 3 times on a 502 from the proxy"),  # unrelated
    ("Fix #12 in the parser", "Fix #34 in the parser"),  # issue references are not values
    ("Bump to 2.0", "Bump to 3.0"),  # no subject left to say what changed
    ("Add tests to the parser", "Add tests to the lexer"),  # not a change of a value
    ("Upgrade requests to 2.31.0", "Upgrade requests to 2.31.0 in the CI image"),
    ("`step1` in src/part1.py must stay pure", "`step2` in src/part2.py must stay pure"),
    ("`mise run test 2>&1 | tail -40` passed", "`mise run test 2>&1 | tail -60` passed"),  # code
])
def test_merely_similar_texts_are_not_one_fact(tmp_path, first, second):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": [first]})
        mem.save_session_insights(2, {"subtasks_completed": [second]})
        mem.append_gotcha(first)
        mem.append_gotcha(second)
        hits = mem.search(f"{first} {second}", limit=10)
    assert events(spec) == []
    assert all(not h.metadata.get("validity") and not h.metadata.get("replaces") for h in hits)


def test_the_same_value_said_again_replaces_nothing(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        for n, v in enumerate(["2.31.0", "2.32.3", "2.32.3"], 1):
            mem.save_session_insights(n, {"subtasks_completed": [f"Upgrade requests to {v}"],
                                          "what_worked": ["Ran the whole test suite"]})
    assert [e["reason"] for e in events(spec)] == ["replaced in session 2: Upgrade requests to 2.32.3"]


@pytest.mark.parametrize("old, new, was", [
    ("Switch the HTTP client to httpx", "Switch the HTTP client to aiohttp.", "httpx"),
    ("Use requests for HTTP calls", "Use httpx for HTTP calls", "requests"),
    ("build(deps): bump django from 3.1.4 to 3.1.5 in /testing (#8235)",
     "Bump django from 3.1.5 to 3.1.6 in /testing (#8326)", "3.1.5"),
    ("Set the default cache_dir to .cache/old", "Set the default cache_dir to .cache/new", ".cache/old"),
])
def test_a_chosen_library_a_path_and_a_dependabot_bump_are_values(tmp_path, old, new, was):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": [old]})
        mem.save_session_insights(2, {"subtasks_completed": [new]})
        hits = mem.search(old, limit=5, include_history=True)
    assert hits[0].text == new
    assert hits[0].metadata["replaces"][0]["was"] == was
    assert [e["state"] for e in events(spec)] == ["possibly superseded"]


def test_contradicting_gotchas_and_an_explicit_supersede_rank_the_current_first(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("The upload limit of the API gateway is 10 MB for every tenant")
        mem.append_gotcha("The upload limit of the API gateway is 25 MB for every tenant")
        mem.append_pattern("Wrap every handler of the billing service in a retry loop with jitter")
        old = mem.search("billing handler retry loop jitter", limit=1)[0]
        mem.supersede(old.id, "Billing handlers are idempotent; no client retries any more",
                      reason="the gateway deduplicates")
        limit = mem.search("upload limit API gateway 10 MB tenant", limit=5)
        billing = mem.search("billing handler retry loop jitter", limit=5)
        history = mem.search("billing handler retry loop jitter", limit=5, include_history=True)
        block = mem.context("billing handler retry loop jitter", max_tokens=400)
    assert limit[0].text.startswith("The upload limit of the API gateway is 25 MB")
    assert limit[1].metadata["validity"]["state"] == "possibly superseded"
    assert billing[0].text == "Billing handlers are idempotent; no client retries any more"
    assert old.id not in {h.id for h in billing}  # superseded: out of default results
    assert history[0].metadata["replaces"][0]["id"] == old.id
    assert history[0].metadata["replaces"][0]["was"] is None  # not one fact with two values
    assert "replaces" not in billing[0].metadata  # its text stays out of default results
    assert "Wrap every handler" not in block and "Billing handlers are idempotent" in block
    assert "was 10 MB" not in block and limit[0].metadata["replaces"] == [
        {"id": limit[1].id, "was": "10", "until": limit[0].metadata["replaces"][0]["until"]}]


def test_an_llm_judges_a_value_update_of_insights_and_a_garbage_answer_leaves_the_rule(
        tmp_path, monkeypatch):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    asked: list[str] = []

    def answer(body):
        asked.append(body["messages"][-1]["content"])
        if "New insight: Upgrade requests to 2.32.3" in json.dumps(body["messages"]):
            return "not json at all"  # and again when asked to correct it
        return json.dumps({"updates": [1], "reason": "requests was upgraded"})

    server = FakeOpenAI(answer)
    monkeypatch.setenv("GRAPHMEM_LLM_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-value-updates-0000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    try:
        with Memory(spec, root) as mem:
            three_sessions(mem)
            hits = mem.search(QUERY)
    finally:
        server.close()
    assert len(asked) >= 2 and "New insight: Upgrade requests to 2.31.0" in asked[0]
    assert "New insight: Upgrade requests to 2.32.3" in asked[1]  # then asked to correct it
    assert "[1] Upgrade requests to 2.28.1" in asked[0]
    states = [(e["state"], e["reason"]) for e in events(spec)]
    assert states[0][0] == "superseded" and "requests was upgraded" in states[0][1]
    assert states[1] == ("possibly superseded", "replaced in session 3: Upgrade requests to 2.32.3")
    assert [h.text for h in hits][:2] == ["Upgrade requests to 2.32.3", "Upgrade requests to 2.31.0"]
    assert "Upgrade requests to 2.28.1" not in [h.text for h in hits]  # judged: superseded


def test_a_garbage_validity_log_hides_nothing_and_loops_end(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": ["Upgrade requests to 2.31.0"]})
        mem.save_session_insights(2, {"subtasks_completed": ["Upgrade the cache layer to v3"]})
        a, b = (h.id for h in mem.search("upgrade requests cache layer", limit=2))
        path = spec / "memory" / "validity.jsonl"
        path.write_text("\n".join([
            json.dumps({"item": a, "state": "possibly superseded", "by": b}),
            json.dumps({"item": b, "state": "possibly superseded", "by": a}),  # a loop
            json.dumps({"item": "0" * 24, "state": "possibly superseded", "by": 7}),
            json.dumps({"item": a, "state": "bogus", "by": "f" * 24}),
            "not json"]) + "\n")
        hits = mem.search("upgrade requests cache layer", limit=5)
        block = mem.context("upgrade requests cache layer", max_tokens=300)
    assert {h.id for h in hits} == {a, b}
    assert "2.31.0" in block and "v3" in block


def test_a_version_question_naming_a_package_gets_its_current_version_first(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": [
            "build(deps): bump django from 4.2 to 4.2.1 in /testing (#10)"]})
        for n, who in enumerate(["Ann", "Bob", "Cyd", "Dan", "Eve", "Fay"], 2):  # closer texts
            mem.save_session_insights(n, {"what_worked": [
                f"{who} asked which version of django the project should pin"]})
        mem.save_session_insights(12, {"what_worked": [
            "Bumps [django](https://github.com/django/django) from 4.2.1 to 5.0. - [Commits]"]})
        for n in range(13, 20):  # later work: the newest memories
            mem.save_session_insights(n, {"what_worked": [f"Tidied module {chr(97 + n)} imports"]})
        first = mem.search("Which version of django does the project pin?", limit=1)
        other = mem.search("Which version of flask does the project pin?", limit=3)
        block = mem.context("Which version of django does the project pin?", max_tokens=200)
    assert [h.session for h in first] == ["12"]
    assert first[0].metadata["replaces"][0]["was"] == "4.2.1"
    assert not other[0].text.startswith("Bumps [django]")  # another package: no answer forced
    assert "5.0" in block and "[was 4.2.1 until session 12]" in block
    assert block.split("\n### ")[1].startswith("Current value\n- Bumps [django]")  # first
