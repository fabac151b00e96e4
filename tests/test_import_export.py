"""``graphmem import`` / ``export`` / ``agents-md``: other agents' files in, graphmem's JSON Lines
out, and a marked section written back into AGENTS.md, CLAUDE.md or a ``.mdc`` rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory, ValidationError
from graphmem.files import agent_files as af
from graphmem.rules import agents_md as am
from test_code_freshness import PAY, commit, project

FIXTURES = Path(__file__).parent / "fixtures" / "agent_files"


def _memory_files(root: Path) -> dict[str, bytes]:
    mem = root / ".graphmem" / "memory"
    return {str(p.relative_to(mem)): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts} \
        if mem.is_dir() else {}


def test_the_kind_rule_and_paths_of_a_rules_file():
    text = ("# Proj\n\nIntro paragraph that says to use uv.\n\n## Testing\n\n"
            "- Never run the suite against production.\n- Prefer `pytest -q`.\n"
            "- `src/api/` — the HTTP handlers\n- Node.js: version 20 or newer\n\n```bash\nrm -rf /\n```\n"
            "| a | b |\n|---|---|\n")
    read = af.markdown_notes(text, "AGENTS.md", "rules")
    got = {(f.kind, f.text, f.path) for f in read.found}
    assert ("gotcha", "Testing: Never run the suite against production.", "") in got
    assert ("pattern", "Testing: Prefer `pytest -q`.", "") in got
    assert ("file", "the HTTP handlers", "src/api/") in got
    assert ("pattern", "Testing: Node.js: version 20 or newer", "") in got  # a name, not a path
    assert ("pattern", "Intro paragraph that says to use uv.", "") in got
    assert not any("rm -rf" in f.text for f in read.found)  # code blocks are not memory
    assert {w for _, w in read.skipped} == {"a code block", "a table"}
    rule = af.cursor_rule("---\ndescription: API rules\nglobs: web/**/*.ts, worker/**\n---\n"
                          "- Avoid default exports, see [x.ts](mdc:web/x.ts)\n", "r.mdc")
    assert [(f.kind, f.text) for f in rule.found] == [
        ("gotcha", "In `web/**/*.ts`, `worker/**` (API rules): Avoid default exports, see web/x.ts")]
    only = af.cursor_rule("---\ndescription: How to add API routes\nglobs:\n---\n- Use zod.\n", "r.mdc")
    assert [f.text for f in only.found] == ["How to add API routes: Use zod."]
    bare = af.cursor_rule("---\ndescription: Prefer tabs\nglobs: '*.go'\n---\n", "r.mdc")
    assert [f.text for f in bare.found] == ["In `*.go`: Prefer tabs"]


def test_import_finds_the_rules_and_paths_of_three_public_repositories(tmp_path):
    root, _ = project(tmp_path, {"web/src/features/public-api/server/withMiddlewares.ts": "x\n",
                                 "llm/__init__.py": ""})
    with Memory(None, root) as m:
        r = m.import_paths([FIXTURES / "langfuse", FIXTURES / "pydantic-ai", FIXTURES / "llm"])
        gotchas, patterns, files = m.load_gotchas(), m.load_patterns(), m.load_codebase_map()
    assert r["took"]["gotcha"] >= 20 and r["took"]["pattern"] >= 100
    assert {"cursor/pattern", "rules/gotcha", "rules/pattern"} <= set(r["by_source"])
    assert r["added"]["gotcha"] == len(gotchas) and r["added"]["pattern"] == len(patterns)
    # langfuse: a "never" rule is a gotcha; its .mdc link became the path it names, anchored
    assert any("Never invoke Node-installed binaries" in g for g in gotchas)
    assert any("web/src/features/public-api/server/withMiddlewares.ts" in p for p in patterns)
    anchors = (root / ".graphmem" / "memory" / "anchors.jsonl").read_text()
    assert "web/src/features/public-api/server/withMiddlewares.ts" in anchors
    assert "web/" in files  # "- `web/`: ..." names a folder: a codebase map entry
    # pydantic-ai: a "never" rule; llm: its setup steps, with their code blocks skipped
    assert any("Never add yourself (Claude) as a co-author" in g for g in gotchas)
    assert any("Install the project with its test dependencies" in p for p in patterns)
    assert any(s["why"] == "a code block" and "llm/AGENTS.md" in s["where"] for s in r["skipped"])
    with Memory(None, root) as m:  # the rules folder named on its own: the same notes
        alone = m.import_paths([FIXTURES / "langfuse" / ".cursor" / "rules"])
    assert alone["took"] == {"gotcha": r["by_source"]["cursor/gotcha"],
                             "pattern": r["by_source"]["cursor/pattern"]}
    assert alone["added"]["pattern"] == 0
    before = _memory_files(root)
    with Memory(None, root) as m:  # importing twice adds nothing
        again = m.import_paths([FIXTURES / "langfuse", FIXTURES / "pydantic-ai", FIXTURES / "llm"])
    assert again["added"] == {"gotcha": 0, "pattern": 0, "file": 0, "session": 0, "episode": 0,
                              "validity": 0}
    assert _memory_files(root) == before  # not a byte changed


def test_import_reads_auto_memory_serena_claude_mem_and_mem0_and_redacts(tmp_path):
    root, _ = project(tmp_path, {"src/pay.py": PAY})
    auto = tmp_path / "claude-projects" / "memory"
    auto.mkdir(parents=True)
    (auto / "MEMORY.md").write_text("# Memory index\n\n- [Payments](payments.md): refunds\n")
    (auto / "payments.md").write_text("---\nname: payments\ndescription: refunds\ntype: project\n"
                                      "---\n\nDo not retry refund() in src/pay.py: it double-charges.\n")
    serena = tmp_path / "s" / ".serena" / "memories"
    serena.mkdir(parents=True)
    (serena / "style.md").write_text("Always format with ruff; token ghp_" + "a" * 36 + "\n")
    cm = tmp_path / "cm.json"
    cm.write_text(json.dumps({"exportedAt": "2026-01-01", "observations": [
        {"type": "bugfix", "title": "Refund rounding", "narrative": "refund() rounded half-up",
         "facts": json.dumps(["use half-even"]), "files_modified": json.dumps(["src/pay.py"])},
        "not an object"], "sessions": [{"id": 1}], "summaries": [], "prompts": []}))
    m0 = tmp_path / "mem0.json"
    m0.write_text(json.dumps({"results": [{"id": "1", "memory": "Prefers pnpm over npm"},
                                          {"id": "2"}]}))
    with Memory(None, root) as m:
        r = m.import_paths([auto, serena.parent.parent, cm, m0])
        gotchas, patterns = m.load_gotchas(), m.load_patterns()
    assert "Do not retry refund() in src/pay.py: it double-charges." in gotchas
    assert not [p for p in patterns if "payments.md" in p]  # MEMORY.md's index lines
    assert any(g.startswith("Refund rounding. refund() rounded half-up. use half-even. Files: src/pay.py")
               for g in gotchas)  # a claude-mem bugfix is a gotcha, its files named
    assert "Prefers pnpm over npm" in patterns
    style = [p for p in patterns if p.startswith("Always format with ruff")]
    assert style and "ghp_" + "a" * 36 not in style[0]  # redacted on the way in
    assert {"auto-memory/gotcha", "serena/pattern", "claude-mem/gotcha", "mem0/pattern"} <= \
        set(r["by_source"])
    whys = " | ".join(s["why"] for s in r["skipped"])
    assert "1 index lines pointing at topic files" in whys
    assert "not an object" in whys and "no 'memory' text" in whys and "session records" in whys


def test_export_holds_the_history_and_imports_elsewhere_with_it(tmp_path):
    a, _ = project(tmp_path / "a", {"src/pay.py": PAY})
    with Memory(None, a) as m:
        m.append_gotcha("Staging proxy drops websockets.")
        m.append_gotcha("Refunds round half-up.")
        m.append_pattern("Pin requests 2.31.0.")
        gone = next(i.id for i in m.items() if i.text == "Refunds round half-up.")
        old = next(i.id for i in m.items() if i.text == "Pin requests 2.31.0.")
        m.retire(gone, "we round half-even now")
        m.supersede(old, "Pin requests 2.32.3.", reason="security fix")
        out = tmp_path / "export.jsonl"
        m.export(out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["format"] == "graphmem-export" and lines[0]["version"] == 4
    items = {x["text"]: x for x in lines if x["type"] == "item"}
    assert {"Refunds round half-up.", "Pin requests 2.31.0.", "Pin requests 2.32.3."} <= set(items)
    events = [x for x in lines if x["type"] == "validity"]
    assert {(e["item"], e["state"]) for e in events} == {(gone, "retired"), (old, "superseded")}
    b, _ = project(tmp_path / "b", {"README.md": "b\n"})
    with Memory(None, b) as m:
        r = m.import_paths([out])
        assert r["added"]["validity"] == 2
        ids = {i.text: i.id for i in m.items()}
        texts = {h.text for h in m.search("refunds round requests pin proxy", limit=10)}
    assert "Refunds round half-up." not in texts and "Pin requests 2.31.0." not in texts
    assert "Pin requests 2.32.3." in texts  # current memory is searchable, history is not
    log = [json.loads(x) for x in (b / ".graphmem" / "memory" / "validity.jsonl").read_text().splitlines()]
    assert {(e["item"], e["state"], e["by"]) for e in log} == {
        (ids["Refunds round half-up."], "retired", None),
        (ids["Pin requests 2.31.0."], "superseded", ids["Pin requests 2.32.3."])}
    with Memory(None, b) as m:  # idempotent: no second event
        assert m.import_paths([out])["added"] == {"gotcha": 0, "pattern": 0, "file": 0,
                                                  "session": 0, "episode": 0, "validity": 0}


def test_garbage_input_is_refused_naming_it_and_nothing_is_written(tmp_path):
    root, _ = project(tmp_path, {"README.md": "x\n"})
    good = tmp_path / "AGENTS.md"
    good.write_text("- Never push to main.\n")
    binary = tmp_path / "CLAUDE.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 binary")
    mdc = tmp_path / "rules" / "bad.mdc"
    mdc.parent.mkdir()
    mdc.write_text("---\ndescription: x\nthis line is not yaml\n---\n- Use tabs.\n")
    export = tmp_path / "e.jsonl"
    export.write_text('{"format": "graphmem-export", "version": 1, "project": "p", "spec": null}\n'
                      '{"type": "item", "id": "1", "kind": "gotcha", "text": "fine", "spec": null, '
                      '"session": null, "time": null, "source": "", "metadata": {}}\n'
                      '{"type": "item", "id": "2", "kind": "gotcha", "text": 42}\n')
    with Memory(None, root) as m:
        with pytest.raises(ValidationError, match="binary"):
            m.import_paths([good, binary])
        with pytest.raises(ValidationError, match="line 3 of the front matter"):
            m.import_paths([good, mdc])
        with pytest.raises(ValidationError, match=r"e\.jsonl line 3: 'text' must be str, got int"):
            m.import_paths([good, export])
    assert not (root / ".graphmem" / "memory" / "gotchas.md").exists()  # nothing half-written
    # found by walking a folder, a bad file is skipped with its reason instead
    walked = tmp_path / "w"
    (walked / ".cursor" / "rules").mkdir(parents=True)
    (walked / ".cursor" / "rules" / "bad.mdc").write_text("---\nglobs: x\n- Use tabs.\n")
    (walked / "AGENTS.md").write_text("- Never push to main.\n")
    with Memory(None, root) as m:
        r = m.import_paths([walked])
        assert m.load_gotchas() == ["Never push to main."]
    assert any("never closed" in s["why"] for s in r["skipped"])
    p = run_cli("import", str(binary), "--project-dir", str(root))
    assert p.returncode != 0 and "CLAUDE.md" in p.stderr and "binary" in p.stderr


def test_agents_md_writes_current_memory_between_markers_byte_identical(tmp_path):
    root, _ = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        m.append_gotcha("refund() in src/pay.py must round half-even.")
        m.append_gotcha("The old staging proxy drops websockets.")
        m.append_pattern("Use the Client class of src/pay.py for charges.")
        m.append_pattern("Pin requests 2.31.0.")
        for w in ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
                  "november oscar papa quebec romeo sierra tango uniform victor whiskey").split():
            m.append_pattern(f"Zoned {w} fixtures follow the layout of the module they serve, each "
                             "named after the function it prepares, so a failing test reads well.")
        ids = {i.text: i.id for i in m.items()}
        m.retire(ids["The old staging proxy drops websockets."], "proxy replaced")
        m.supersede(ids["Pin requests 2.31.0."], "Pin requests 2.32.3.")
    commit(root, "memory")
    (root / "src" / "pay.py").write_text(PAY.replace("order.total", "round(order.total, 2)"))
    commit(root, "change refund")
    agents = root / "AGENTS.md"
    agents.write_text("# Our rules\n\nHand-written, keep me.\n")
    with Memory(None, root) as m:
        out = m.agents_md(agents)
        first = agents.read_bytes()
        again = m.agents_md(agents)
    assert out["changed"] and not again["changed"] and agents.read_bytes() == first
    text = first.decode()
    assert text.startswith("# Our rules\n\nHand-written, keep me.\n\n" + am.BEGIN)
    section = text[text.index(am.BEGIN):]
    assert len(section.encode()) <= 2048 and section.endswith(am.END + "\n")
    assert "staging proxy" not in section  # retired
    assert not [x for x in section.splitlines() if x.startswith("- Pin requests 2.31.0")]  # superseded
    assert "Pin requests 2.32.3." in section and "### Gotchas" in section
    assert "Zoned alpha" in section and "Zoned whiskey" not in section  # cut to the budget
    assert "src/pay.py changed since this was learned" in section  # stale, marked
    agents.write_text(text.replace("Hand-written", "Edited by hand"))
    with Memory(None, root) as m:
        m.agents_md(agents)
    assert "Edited by hand, keep me." in agents.read_text()
    assert agents.read_text().count(am.BEGIN) == 1
    mdc = root / ".cursor" / "rules" / "graphmem.mdc"
    p = run_cli("agents-md", "--write", str(mdc), "--max-bytes", "600", "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    body = mdc.read_text()
    assert body.startswith("---\ndescription: ") and "alwaysApply: true\n---\n" in body
    assert len(body[body.index(am.BEGIN):].encode()) <= 600
    broken = root / "CLAUDE.md"
    broken.write_text(f"x\n{am.BEGIN}\nold\n")
    with Memory(None, root) as m, pytest.raises(ValidationError, match="markers"):
        m.agents_md(broken)
    assert broken.read_text() == f"x\n{am.BEGIN}\nold\n"
    p = run_cli("agents-md", "--project-dir", str(root))
    assert p.returncode == 0 and p.stdout.startswith(am.TITLE) and am.BEGIN not in p.stdout


def test_the_section_is_an_mcp_tool(tmp_path):
    import anyio
    from mcp import Client

    from graphmem.serve.mcp_server import build_server

    root, _ = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        m.append_gotcha("refund() in src/pay.py must round half-even.")
        want = m.agents_md()["section"]

    async def main():
        async with Client(build_server(None, root)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["agents_md_section"].annotations.read_only_hint is True
            res = await c.call_tool("agents_md_section", {"project_dir": str(root)})
            assert not res.is_error
            assert res.structured_content["section"] == want and "half-even" in want
    anyio.run(main)


def test_an_export_of_the_wrong_shape_is_refused_naming_the_line(tmp_path):
    from graphmem.files.export_format import read_export

    head = '{"type": "header", "format": "graphmem-export", "version": 1, "project": "p", "spec": null}'
    cases = [("", "is empty"), ('{"format": "other"}', "line 1: must be the header"),
             (head.replace('"version": 1', '"version": 5'), "line 1: version 5 is not one"),
             (head + "\nnot json", "line 2: is not JSON"),
             (head + "\n[1, 2]", "line 2: must be a JSON object, got list"),
             (head + '\n{"type": "note"}', "line 2: 'type' must be 'item', 'session', 'episode' or 'validity'"),
             (head + '\n\n{"type": "validity", "item": "x"}', "line 3: has no 'spec'")]
    for text, why in cases:
        with pytest.raises(ValidationError, match=why):
            read_export(tmp_path / "e.jsonl", text)
