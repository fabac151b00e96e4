"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_opens_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    head = text[:1500]
    assert "make demo" in head and "make test" in head


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "Refresh tokens must be rotated on every use" in out
    assert (tmp_path / "demo-project/auto-claude/specs/001-auth/memory/patterns.md").exists()


def test_use_with_claude_code_is_on_the_first_screen_and_its_command_installs_the_hooks(tmp_path):
    import json
    import shlex

    from conftest import run_cli

    text = README.read_text(encoding="utf-8")
    first_screen = "\n".join(text.splitlines()[:40])
    assert "### Use with Claude Code" in first_screen
    block = re.search(r"### Use with Claude Code\n+```bash\n(.*?)```", first_screen, re.S).group(1)
    line = next(x for x in block.splitlines() if "hooks install claude-code" in x)
    argv = shlex.split(line, comments=True)
    assert argv[0].endswith("graphmem")
    project = tmp_path / "my-project"
    project.mkdir()
    args = [str(project) if a.startswith("~/") else a for a in argv[1:]]
    out = run_cli(*args)
    assert out.returncode == 0, out.stderr
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "SessionEnd"):
        commands = [h["command"] for g in hooks[event] for h in g["hooks"]]
        assert any(c.endswith(f"hook claude-code {event}") for c in commands), event
    from graphmem.hooks.agent_context import BRIEF_BUDGET, PROMPT_BUDGET

    said = " ".join(text[text.index("### Use with Claude Code"):text.index("```python")].split())
    assert f"at most {BRIEF_BUDGET} tokens, once" in said  # the budgets it states are the code's
    assert f"each prompt (at most {PROMPT_BUDGET} tokens" in said
