"""``graphmem hooks install|uninstall <agent>``: graphmem's hooks in the agent's settings file.

The settings file keeps every entry graphmem did not write, in its order. graphmem's own
handlers are those whose command is ``graphmem hook <agent> <Event>`` (or
``python -m graphmem.cli hook ...``): install removes them and adds the current ones (so it
is idempotent and updates an older install); uninstall removes exactly them, and the matcher
groups and event lists they leave empty. A settings file that is not a JSON object is refused,
untouched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from graphmem.errors import ValidationError
from graphmem.hooks.agents import Agent

PLUGIN_COMMAND = "graphmem"  # the plugin's hooks name the command on PATH
_OURS = re.compile(r"(?:^|[/\s'\"])(?:graphmem['\"]?|-m graphmem\.cli) hook ([\w.-]+) (\w+)$")


def hook_command(agent: Agent, event: str, exe: str | None = None) -> str:
    """The command line a hook runs: ``graphmem hook <agent> <Event>``."""
    return f"{exe or executable()} hook {agent.name} {event}"


def executable() -> str:
    """How settings name graphmem: ``graphmem`` when the one on PATH is this installation's,
    else the absolute path of this installation's script (quoted for the shell if needed)."""
    mine = Path(sys.executable).parent / "graphmem"
    found = shutil.which("graphmem")
    if found and (not mine.exists() or os.path.realpath(found) == os.path.realpath(mine)):
        return "graphmem"
    if mine.exists():
        import shlex

        return shlex.quote(str(mine))
    return "graphmem"


def hooks_config(agent: Agent, exe: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """graphmem's hooks for ``agent`` in the documented settings shape
    (``{Event: [{"matcher": ..., "hooks": [{"type": "command", ...}]}]}``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for h in agent.hooks:
        group: dict[str, Any] = {} if h.matcher is None else {"matcher": h.matcher}
        group["hooks"] = [{"type": "command", "command": hook_command(agent, h.event, exe),
                           "timeout": h.timeout * agent.timeout_unit}]
        out.setdefault(h.event, []).append(group)
    return out


def settings_file(agent: Agent, project_dir: Path | None, user: bool) -> Path:
    """The settings file: the project's (``.claude/settings.json``, ``.gemini/settings.json``)
    or, ``user``, the user's (the same under ``~``)."""
    base = Path.home() if user else Path(project_dir or Path.cwd())
    if not user and not base.is_dir():
        raise ValidationError(f"{base} is not a folder", field="project_dir")
    return base / agent.settings


def is_ours(handler: Any, agent: Agent) -> bool:
    """Whether a handler is one graphmem wrote for ``agent``."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    m = _OURS.search(handler["command"].strip())
    return bool(m) and m.group(1) == agent.name


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValidationError(f"{path} is not valid JSON ({exc}); fix it first, nothing was "
                              "changed", field="settings") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise ValidationError(f"{path} must be a JSON object whose 'hooks' is an object; "
                              "nothing was changed", field="settings")
    return data


def _without_ours(hooks: dict[str, Any], agent: Agent) -> tuple[dict[str, Any], int]:
    """``hooks`` with graphmem's handlers removed (and the groups they empty); how many."""
    removed, out = 0, {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            out[event] = groups
            continue
        kept = []
        for g in groups:
            inner = g.get("hooks") if isinstance(g, dict) else None
            if not isinstance(inner, list):
                kept.append(g)
                continue
            mine = [h for h in inner if is_ours(h, agent)]
            removed += len(mine)
            if mine and len(mine) == len(inner):
                continue
            kept.append({**g, "hooks": [h for h in inner if not is_ours(h, agent)]} if mine else g)
        if kept or not groups:
            out[event] = kept
    return out, removed


def _write(path: Path, data: dict[str, Any]) -> None:
    from graphmem.files.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def install(agent: Agent, project_dir: Path | None = None, user: bool = False,
            exe: str | None = None) -> dict[str, Any]:
    """Write graphmem's hooks into the agent's settings; what was written where."""
    path = settings_file(agent, project_dir, user)
    data = _read(path)
    hooks, replaced = _without_ours(data.get("hooks", {}), agent)
    for event, groups in hooks_config(agent, exe).items():
        hooks.setdefault(event, []).extend(groups)
    data["hooks"] = hooks
    _write(path, data)
    return {"agent": agent.name, "settings": str(path), "events": [h.event for h in agent.hooks],
            "replaced": replaced, "command": hook_command(agent, "<Event>", exe)}


def uninstall(agent: Agent, project_dir: Path | None = None, user: bool = False
              ) -> dict[str, Any]:
    """Remove exactly graphmem's hooks from the agent's settings; how many."""
    path = settings_file(agent, project_dir, user)
    if not path.exists():
        return {"agent": agent.name, "settings": str(path), "removed": 0}
    data = _read(path)
    hooks, removed = _without_ours(data.get("hooks", {}), agent)
    if removed:
        if hooks:
            data["hooks"] = hooks
        else:
            data.pop("hooks", None)
        _write(path, data)
    return {"agent": agent.name, "settings": str(path), "removed": removed}
