"""``graphmem about``, ``graphmem anchors refresh`` and ``graphmem hooks install|uninstall``."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphmem.cli.app import _emit, command


def _about_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path_or_symbol", help="a file path relative to the project (src/x.py), or a "
                   "symbol name (refund, Client.charge)")
    p.add_argument("--spec-dir", type=Path, default=None, help="only this spec folder's memories")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="project root (default: the git work tree or .graphmem/project.toml "
                        "folder enclosing the spec, else two levels above it; without "
                        "--spec-dir the current folder)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _project(args: argparse.Namespace) -> Path | None:
    from graphmem.models import check_folders

    check_folders(spec=getattr(args, "spec_dir", None), project=args.project_dir)
    if args.project_dir is None and getattr(args, "spec_dir", None) is None:
        return Path.cwd()
    return args.project_dir


def _cmd_about(args: argparse.Namespace) -> int:
    from graphmem.code.about_answer import format_about
    from graphmem.facade.memory import Memory

    with Memory(args.spec_dir, _project(args)) as m:
        ans = m.about(args.path_or_symbol)
    return _emit(args, ans, format_about)


command("about", "everything known about a file or symbol: current memories first, then those "
        "whose code is gone, then history")(
    _cmd_about)(_about_args)


def _anchors_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["refresh"], help="refresh: anchor new items and record "
                   "every anchored memory's freshness (what the git hooks run)")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="project root (default: the current folder)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _cmd_anchors(args: argparse.Namespace) -> int:
    from graphmem.facade.memory import Memory

    with Memory(None, _project(args)) as m:
        out = m.refresh_anchors()
        root = m.project.root
    where = out["head"] or ("a repository with no commit yet" if out.get("git") else
                            _non_git(root))
    return _emit(args, out, lambda o: print(
        f"Anchors refreshed at {where}: {o['anchored']} new, states "
        + (", ".join(f"{k} {v}" for k, v in sorted(o["states"].items())) or "none")))


def _non_git(root: Path) -> str:
    """How ``anchors refresh`` names a tree git does not see: a broken worktree link says so."""
    from graphmem.identity import broken_link

    missing = broken_link(root)
    return "a non-git tree" if missing is None else (
        f"a non-git tree (its .git file points to {missing}, which does not exist; "
        "`graphmem doctor` says how to mend the link)")


command("anchors", "refresh the anchors of a project's memories (run by the git hooks)")(
    _cmd_anchors)(_anchors_args)


def _hooks_args(p: argparse.ArgumentParser) -> None:
    from graphmem.hooks.agents import AGENTS

    p.add_argument("action", choices=["install", "uninstall"],
                   help="install: post-commit, post-merge and post-checkout hooks that refresh "
                        "anchors in the background (an existing hook is chained, run first); "
                        "uninstall: remove them and restore chained hooks")
    p.add_argument("agent", nargs="?", choices=sorted(AGENTS),
                   help="an agent instead of git: graphmem's hooks in its settings file "
                        "(claude-code: .claude/settings.json); uninstall removes only graphmem's")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="the git repository or project (default: the current folder)")
    p.add_argument("--user", action="store_true",
                   help="with an agent: the user's settings (~/.claude/settings.json), every project")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _cmd_hooks(args: argparse.Namespace) -> int:
    from graphmem.hooks import git_hooks as hooks

    if args.agent is not None:
        return _agent_hooks(args)
    if args.user:
        from graphmem.errors import ValidationError

        raise ValidationError("--user needs an agent (graphmem hooks install claude-code --user)",
                              field="user")
    project = _project(args)
    if args.action == "install":
        out = hooks.install(project)
        return _emit(args, out, lambda o: print(
            f"Installed {', '.join(o['installed'])} in {o['hooks_dir']}"
            + (f" (chained to your {', '.join(o['chained'])})" if o["chained"] else "")))
    out = hooks.uninstall(project)
    return _emit(args, out, lambda o: print(
        f"Removed {', '.join(o['removed']) or 'no graphmem hooks'} from {o['hooks_dir']}"
        + (f"; restored your {', '.join(o['restored'])}" if o["restored"] else "")))


command("hooks", "install or remove git hooks that refresh anchors after commits and checkouts, "
        "or an agent's hooks (graphmem hooks install claude-code)")(_cmd_hooks)(_hooks_args)


def _agent_hooks(args: argparse.Namespace) -> int:
    from graphmem.hooks import agent_settings as install
    from graphmem.hooks.agents import get_agent

    agent = get_agent(args.agent)
    project = None if args.user else _project(args)
    if args.action == "install":
        out = install.install(agent, project, user=args.user)
        return _emit(args, out, lambda o: print(
            f"Installed graphmem's {agent.name} hooks ({', '.join(o['events'])}) in "
            f"{o['settings']}; each runs `{o['command']}`"))
    out = install.uninstall(agent, project, user=args.user)
    return _emit(args, out, lambda o: print(
        f"Removed {o['removed']} graphmem hook{'s' if o['removed'] != 1 else ''} from "
        f"{o['settings']}"))


def _hook_args(p: argparse.ArgumentParser) -> None:
    from graphmem.hooks.agents import AGENTS

    p.add_argument("agent", choices=sorted(AGENTS), help="the agent that runs the hook")
    p.add_argument("event", help="the agent's event name (SessionStart, UserPromptSubmit, ...)")


def _cmd_hook(args: argparse.Namespace) -> int:
    from graphmem.cli.hook_command import main

    return main([args.agent, args.event])


command("hook", "what an agent's hook runs: reads the event's JSON on stdin, answers in the "
        "agent's format, always exits 0")(_cmd_hook)(_hook_args)
