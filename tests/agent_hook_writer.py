"""One writer of a parallel-sessions test: an agent (or a subagent) of session ARGV[2] firing
prompts, tool steps and Stops through the installed hook command, as Claude Code would."""

import json
import os
import subprocess
import sys

root, sid, writer = sys.argv[1], sys.argv[2], sys.argv[3]
hooks = json.load(open(os.path.join(root, ".claude", "settings.json")))["hooks"]


def command(event: str) -> str:
    return next(h["command"] for g in hooks[event] for h in g["hooks"]
                if h["command"].endswith(f"hook claude-code {event}"))


def fire(event: str, payload: dict) -> None:
    data = json.dumps({"session_id": sid, "cwd": root, "hook_event_name": event, **payload})
    p = subprocess.run(["sh", "-c", command(event)], input=data, text=True, capture_output=True,
                       cwd=root, timeout=60)
    # A prompt's context may give up at its deadline when 12 writers queue at one server on a
    # busy machine (quietly, as designed: the prompt is captured before); nothing else may.
    late = event == "UserPromptSubmit" and p.stderr.strip().endswith("gave up at its deadline")
    if p.returncode != 0 or (p.stderr and not late) or (event != "UserPromptSubmit" and p.stdout):
        sys.exit(f"{event}: {p.returncode} {p.stdout} {p.stderr}")


for k in range(2):
    fire("UserPromptSubmit", {"prompt": f"writer {writer} of {sid} asks about zebra {k}"})
    for step in range(10 if k == 0 else 0):
        if step == 0:  # each writer edits its own file: the session's insight names all three
            fire("PostToolUse", {"tool_name": "Edit", "tool_input": {
                "file_path": os.path.join(root, "notes", f"{sid}-{writer}.md")},
                "tool_response": {}})
            continue
        fire("PostToolUse", {"tool_name": "Bash", "tool_input": {"command": f"echo {writer}-{step}"},
                             "tool_response": {"stdout": "x" * 3000}})
    fire("Stop", {"stop_hook_active": False})
