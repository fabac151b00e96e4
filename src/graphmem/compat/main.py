"""``memory.main``: the memory CLI (``python -m graphmem.compat.main --spec-dir DIR --action A``).

Actions as the original's: ``summary``, ``list-insights``, ``list-map``, ``list-patterns``,
``list-gotchas``, ``clear`` (asks for ``yes``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import (append_gotcha, append_pattern, clear_memory, get_memory_dir, get_memory_summary,
               get_session_insights_dir, is_graphiti_memory_enabled, load_all_insights,
               load_codebase_map, load_gotchas, load_patterns, save_session_insights,
               update_codebase_map)

__all__ = ["append_gotcha", "append_pattern", "clear_memory", "get_memory_dir",
           "get_memory_summary", "get_session_insights_dir", "is_graphiti_memory_enabled",
           "load_all_insights", "load_codebase_map", "load_gotchas", "load_patterns",
           "main", "save_session_insights", "update_codebase_map"]

ACTIONS = ["summary", "list-insights", "list-map", "list-patterns", "list-gotchas", "clear"]


def main(argv: list[str] | None = None) -> int:
    """Run one action on a spec's memory; the exit status, as the original's."""
    parser = argparse.ArgumentParser(
        description="Session Memory System - Manage memory for auto-claude specs")
    parser.add_argument("--spec-dir", type=Path, required=True,
                        help="Path to spec directory (e.g., auto-claude/specs/001-feature)")
    parser.add_argument("--action", choices=ACTIONS, default="summary", help="Action to perform")
    args = parser.parse_args(argv)
    if not args.spec_dir.exists():
        print(f"Error: Spec directory not found: {args.spec_dir}")
        return 1
    if args.action == "summary":
        summary = get_memory_summary(args.spec_dir)
        print("\n" + "=" * 70 + "\n  MEMORY SUMMARY\n" + "=" * 70)
        print(f"\nSpec: {args.spec_dir.name}")
        print(f"Total sessions: {summary['total_sessions']}")
        print(f"Files mapped: {summary['total_files_mapped']}")
        print(f"Patterns: {summary['total_patterns']}")
        print(f"Gotchas: {summary['total_gotchas']}")
        if summary["recent_insights"]:
            print("\nRecent sessions:")
            for insight in summary["recent_insights"]:
                done = insight.get("subtasks_completed", [])
                count = len(done) if isinstance(done, list) else 1
                print(f"  Session {insight.get('session_number')}: {count} subtasks completed")
    elif args.action == "list-insights":
        print(json.dumps(load_all_insights(args.spec_dir), indent=2))
    elif args.action == "list-map":
        print(json.dumps(load_codebase_map(args.spec_dir), indent=2, sort_keys=True))
    elif args.action in ("list-patterns", "list-gotchas"):
        patterns = args.action == "list-patterns"
        print("\nCode Patterns:" if patterns else "\nGotchas:")
        for text in (load_patterns if patterns else load_gotchas)(args.spec_dir):
            print(f"  - {text}")
    elif args.action == "clear":
        confirm = input(f"Clear all memory for {args.spec_dir.name}? (yes/no): ")
        if confirm.lower() == "yes":
            clear_memory(args.spec_dir)
            print("Memory cleared.")
        else:
            print("Cancelled.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
