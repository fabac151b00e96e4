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
