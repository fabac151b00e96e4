"""The façade's collaborators: what ``AsyncMemory`` (``graphmem.async_memory``) owns and calls.

Each is given the settings, the ``Scope`` and the collaborators it uses, nothing else; nothing
below the façade imports this package (``tests/test_layers.py``).

    notes.py         SpecNotes: insights, codebase map, gotchas and patterns, supersede
    sessions.py      Sessions: sessions, turns, steps, summaries, consolidation
    recall.py        Recall: search and context
    validity.py      Validity: retire, validity events
    about.py         About: about a file or symbol, anchors refresh
    derived_sync.py  DerivedSync: the write's derived steps, reindex, outbox sync, drift
    session_log.py   EpisodeLog: a spec's session files, group commit, queued rows, settle
    write_rules.py   WriteRules: size limit and redaction
"""
