"""Agent lifecycle hooks: graphmem in front of a coding agent with no glue code.

``graphmem hook <agent> <Event>`` is the one command an agent's settings run (``run.py``):
it reads the event's JSON on stdin and answers in the agent's documented format. Reads
(a session's briefing, context for a prompt, what is known about a file) are answered by the
warm search server (``recall.py`` runs inside it); captures append one redacted line to a
per-session spool (``spool.py``); the end of a turn or session hands the spool to a detached
worker that turns it into memories with no LLM (``digest.py``). ``install.py`` writes and
removes the hooks in the agent's settings; ``agents.py`` holds each agent's protocol.

Every module the hook process imports is standard library only, so a hook costs about one
Python start-up; the heavy ones (``recall.py``, ``digest.py``) run in other processes.
"""
