"""Hooks that run graphmem from other programs' lifecycles.

- ``git_hooks.py``: optional git hooks running ``graphmem anchors refresh`` detached.
- Agent hooks (issue 32), graphmem in front of a coding agent with no glue code. The one
  command an agent's settings run is ``graphmem hook <agent> <Event>``
  (``cli/hook_command.py``, standard library only, so a hook costs one Python start-up): it
  reads the event's JSON on stdin and answers in the agent's format. ``agents.py`` holds each
  agent's protocol as data; ``agent_settings.py`` writes and removes the hooks in the agent's
  settings file; reads (a briefing, context for a prompt, what is known about a file) are
  answered by ``agent_context.py`` inside the warm search server; captures append one redacted
  line to a per-session spool (``spool.py``); the end of a turn or session starts the project's
  digest worker (``digest_state.py``), which turns the spools into memories with no LLM
  (``digest.py``). A SessionStart that finds no warm server tells the briefing kept on disk
  while it is current (``brief_cache.py``) and starts the server in the background.
"""
