"""Health rows: the leaf type every subsystem returns and ``graphmem doctor`` assembles."""

from __future__ import annotations

from graphmem.health import drift_row


def test_index_and_graph_drift_are_one_sentence():
    """The index's and the graph's drift lines are built by one function, in the same words."""
    index = drift_row("index", 3, 2, 2, 1)
    graph = drift_row("graph", 3, 2, 2, 1, queued=1)
    assert index == {"name": "drift", "status": "warn", "detail": (
        "3 item(s) in files, 2 in the index, 2 missing, 1 no longer in files "
        "(`graphmem doctor --fix`)")}
    assert graph["detail"] == ("3 item(s) in files, 2 in the graph, 2 missing (1 queued), "
                               "1 no longer in files (`graphmem doctor --fix`)")
    assert drift_row("graph", 4, 4, 0, 0, queued=0) == {
        "name": "drift", "status": "ok", "detail": "4 item(s) in files, 4 in the graph"}
