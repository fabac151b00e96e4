"""Code recall (``code/recall.py``): a project's search is re-ranked by the files its best
candidates are about, and one item per session comes before a second one.

Real git repositories built here, the real index and the bundled embedder; the pure ``rerank``
is also checked on arrays.
"""

from __future__ import annotations

from graphmem import Memory
from graphmem.code import reorder as recall
from graphmem.code.code_tuning import current
from test_code_freshness import project

SCHED = "def tick(loop):\n    return loop\n\n\ndef backoff(n):\n    return n * 2\n"
DOCS = "def render(page):\n    return page\n"


def test_memories_about_the_files_of_the_best_matches_rise_above_word_matches(tmp_path, tune_code):
    """A lesson sharing no word with the task, about the file the best match is about, rises
    above lessons that share words with it but are each about other code."""
    tune_code(recency_gain=0.0)  # write times within a second or across two
    others = ("src/docs.py", "src/cli.py", "src/web.py")
    root, spec = project(tmp_path, {"src/sched.py": SCHED, **{p: DOCS for p in others}})
    sched = {"discoveries": {"files_understood": {"src/sched.py": "the scheduler loop"}}}
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {**sched, "what_worked": [
            "Fixed flaky retries of scheduled jobs when the worker restarts"]})
        mem.save_session_insights(2, {**sched, "what_worked": [
            "Moved the jitter computation out of the hot path"]})
        for n, (path, line) in enumerate(zip(others, [
                "The retries page of the documentation got a new diagram",
                "Worker docs: a restart section was added",
                "Scheduled builds of the documentation run nightly"]), start=3):
            mem.save_session_insights(n, {"what_worked": [line], "discoveries": {
                "files_understood": {path: "documentation"}}})
        hits = mem.search("scheduled jobs retry flakily after a worker restart", scope="project",
                          limit=5)
    texts = [h.text for h in hits]
    jitter = texts.index("Moved the jitter computation out of the hot path")
    assert texts[0] == "Fixed flaky retries of scheduled jobs when the worker restarts"
    # above documentation lessons sharing words with the task (without code recall: last)
    assert jitter < texts.index("The retries page of the documentation got a new diagram"), texts
    assert jitter < texts.index("Scheduled builds of the documentation run nightly"), texts


def test_one_item_per_session_before_a_second(tmp_path, tune_code):
    """Five lines of one session match best; the other session's line still makes the top 3."""
    tune_code(recency_gain=0.0)
    root, spec = project(tmp_path, {"src/sched.py": SCHED, "src/docs.py": DOCS})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {
            "discoveries": {"files_understood": {"src/sched.py": "the scheduler loop"}},
            "what_worked": [f"Retry backoff for scheduled jobs, step {n}: tuned the retry delay"
                            for n in range(5)]})
        mem.save_session_insights(2, {
            "discoveries": {"files_understood": {"src/docs.py": "renders the documentation"}},
            "what_worked": ["Documented the retry backoff of scheduled jobs"]})
        hits = mem.search("retry backoff of scheduled jobs", scope="project", limit=3,
                          kinds=["insight"])
    assert {h.session for h in hits} == {"1", "2"}, [(h.session, h.text) for h in hits]


def test_memories_with_no_code_keep_their_order(tmp_path):
    """Prose memories (no anchor record) are left as the index ranked them."""
    hits = [0.9, 0.8, 0.7]
    order, new = recall.rerank(hits, [[], [], []], ["a", "a", "a"], [None, None, None])
    assert order == [0, 1, 2] and new == hits


def test_rerank_predicts_files_from_the_best_candidates_and_the_named_files():
    scores = [1.0, 0.5, 0.45, 0.0]
    files = [["src/a.py"], ["src/b.py"], ["src/b.py"], ["src/c.py"]]
    weight = recall.predict_files(scores, files, named={"src/c.py"}, top=2)
    assert weight == {"src/a.py": 1.0, "src/b.py": 0.5, "src/c.py": current().named_weight}
    order, new = recall.rerank(scores, files, ["1", "2", "2", "3"], [None] * 4, named={"src/c.py"})
    assert abs(new[3] - current().file_gain) < 1e-9  # scored 0, about a named file
    assert order == [0, 1, 3, 2]  # session 2's second item after session 3's only one


WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo",
         "juniper", "kelp", "lumen")
ABOUT_SCHED = {"discoveries": {"files_understood": {"src/sched.py": "the scheduler loop"}}}


def search_after(tmp_path, sessions: list[list[str]], query: str, limit: int) -> list:
    """Sessions 1, 2, ... each writing its lines about the scheduler; then a project search."""
    root, spec = project(tmp_path, {"src/sched.py": SCHED, "src/docs.py": DOCS})
    with Memory(spec, root) as mem:
        for n, lines in enumerate(sessions, start=1):
            mem.save_session_insights(n, {**ABOUT_SCHED, "what_worked": lines})
        return mem.search(query, scope="project", limit=limit)


def test_older_sessions_about_a_file_join_beyond_one_long_session(tmp_path, tune_code):
    """The newest session wrote 144 lines about the scheduler, all matching the task: the two
    older sessions about the same file, sharing no word with it, still reach the top 3 (the
    memories joining the candidates are one per session, not the long session's lines)."""
    tune_code(recency_gain=0.0)
    hits = search_after(tmp_path, [["Moved the jitter out of the hot path"],
                                   ["Worker restarts clear the queue"],
                                   [f"Retry backoff of scheduled jobs: tuned the {a} {b} delay"
                                    for a in WORDS for b in WORDS]],
                        "retry backoff of scheduled jobs", 3)
    assert {h.session for h in hits} == {"1", "2", "3"}, [(h.session, h.text) for h in hits]


def test_the_newest_work_about_a_file_comes_first(tmp_path, tune_code):
    """Three sessions wrote about the scheduler, the oldest in the task's own words: the newest
    one ranks first (the code a task changes was last written by it)."""
    tune_code(recency_gain=0.0)  # only recency among the file's memories
    hits = search_after(tmp_path, [["Scheduled jobs retry after a worker restart"],
                                   ["Scheduled jobs: the backoff is capped at one minute"],
                                   ["Scheduled jobs retry from the queue after a worker restart"]],
                        "scheduled jobs retry after a worker restarts", 3)
    assert [h.session for h in hits][0] == "3", [(h.session, h.text, h.score) for h in hits]


def test_newest_work_gain_weights_each_file_and_decays_with_rank():
    gain = recall.newest_work_gain({"a.py": 2.0, "b.py": 1.0},
                                   [{"a.py": 0}, {"a.py": 1, "b.py": 0}, {}])
    d, first = current().file_recency_decay, current().file_recency
    assert gain == [first, first * (d + 0.5), 0.0]


PAY = "def refund(order):\n    return order.total\n"


def test_many_memories_about_one_file_do_not_outrank_an_exact_unanchored_match(tmp_path):
    """Twenty gotchas about one file, sharing no word with the task, and one prose gotcha that
    is the task word for word: the exact match comes first. Before, the file predicted by the
    twenty (their first-stage scores near 0) lifted every one of them above it."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/sched.py": SCHED})
    exact = "the nightly backup job must run before the cache flush"
    with Memory(spec, root) as mem:
        mem.append_gotcha(exact)
        for a, b in [(a, b) for a in WORDS[:5] for b in WORDS[5:9]]:
            mem.append_gotcha(f"`refund` in src/pay.py rounds {a} {b} amounts towards zero")
        assert len(mem.load_gotchas()) == 21
        for query in (exact, "nightly backup job before the cache flush"):
            texts = [h.text for h in mem.search(query, limit=5)]
            assert texts[0] == exact, texts


def test_a_memory_that_is_the_query_word_for_word_comes_first(tmp_path):
    """A short prompt naming no file ("3, but enabled by default"), recorded as a turn, and eight
    sessions about src/pay.py sharing its words: searched for word for word, the prompt comes
    first. Before, code recall lifted the file's memories above it and out of the top ten."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/sched.py": SCHED})
    said = "3, but enabled by default"
    with Memory(spec, root) as mem:
        mem.record_turn(mem.start_session(), "user", said)
        for n, word in enumerate(WORDS[:8], start=1):
            mem.record_turn(mem.start_session(), "user",
                            f"please make refund in src/pay.py enabled, {word} by default")
            mem.save_session_insights(n, {"what_worked": [f"refund {word} rounding enabled"],
                                          "discoveries": {"files_understood": {
                                              "src/pay.py": "refund"}}})
        texts = [h.text for h in mem.search(said, scope="project", limit=10)]
    assert texts[0] == said, texts
