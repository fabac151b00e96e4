"""The façade: ``Memory`` and ``AsyncMemory``, and the collaborators ``AsyncMemory`` owns and calls.

Each collaborator is given the settings, the ``Scope`` and the collaborators it uses, nothing else;
nothing below the façade imports this package, the edges reach it through ``Memory`` and
``AsyncMemory``, and the collaborators never import those two (pyproject.toml's import contracts).

    memory.py        Memory: every AsyncMemory method, run on one private loop thread
    async_memory.py  AsyncMemory: builds one Scope and its collaborators; each method is one call
    scope.py         Scope: the project, and the spec folder when there is one
    derived.py       DerivedStores: the local index and the graph behind the files
    repair.py        index journal replay, drift, the repairs ``doctor --fix`` runs
    team.py          team memory on a shared graph server: stamps, and taking in teammates' writes

    notes.py         SpecNotes: insights, codebase map, gotchas and patterns, supersede
    episodic.py      Episodes: sessions, turns, steps, summaries, consolidation
    recall.py        Recall: search and context
    validity.py      Validity: retire, validity events
    about.py         About: about a file or symbol, anchors refresh
    derived_sync.py  DerivedSync: the write's derived steps, reindex, outbox sync, drift
    episode_log.py   EpisodeLog: a spec's session files, group commit, queued rows, settle
    write_rules.py   WriteRules: size limit and redaction
"""
