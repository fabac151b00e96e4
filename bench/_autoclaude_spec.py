"""A synthetic spec folder in today's Auto-Claude shape: a few productive sessions, then a QA loop.

The content is invented here (a bookkeeping app, "ledgerline"); nothing is copied from a real
spec folder. ``write_spec`` writes ``memory/session_insights/session_NNN.json`` files the way
today's Auto-Claude lays them out: ``discoveries.file_insights`` objects, ``patterns_discovered``,
``gotchas_discovered``, ``recommendations``, ``approach_outcome``, ``changed_files``,
``subtask_id``, ``success``, and a few sessions that mix in the reference's keys. After the
productive sessions, every session is one more round of a QA loop that keeps failing the same way
(``Implemented subtask: qa-fix-3`` / ``Failed to complete subtask: qa-fix-3``, attempt numbers and
times changing), as seen in a real folder of 3,347 sessions.

Used by ``bench/autoclaude.py`` and by ``tests/test_insight_shapes.py``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 10, 1, 8, 0, tzinfo=timezone.utc)

FILES = [
    ("src/ledger/posting.py", "Posts journal entries to accounts and keeps debits equal to credits",
     ["post_entry", "BalanceError"]),
    ("src/ledger/currency.py", "Converts amounts between currencies with daily rates held in Decimal",
     ["convert", "RateTable"]),
    ("src/api/invoices.py", "REST endpoints that create, void and list invoices",
     ["create_invoice", "void_invoice"]),
    ("src/sync/bank_feed.py", "Pulls bank transactions over the aggregator API and deduplicates them",
     ["fetch_since", "dedupe_by_fitid"]),
    ("web/src/ReconcileView.tsx", "React screen that matches bank lines with ledger entries",
     ["ReconcileView", "useMatches"]),
    ("migrations/0042_split_tax_lines.sql", "Splits tax amounts into their own ledger lines",
     []),
]
PATTERNS = [
    {"pattern": "Money is Decimal end to end",
     "description": "amounts are parsed to Decimal at the API edge and never touch float",
     "significance": "float rounding broke reconciliation by one cent"},
    {"pattern": "Every posting goes through post_entry",
     "description": "no module writes ledger lines directly", "significance": "keeps balances checked"},
]
GOTCHAS = [
    {"gotcha": "Bank feed timestamps are local to the bank",
     "description": "the aggregator returns naive times in the bank's own timezone",
     "risk": "transactions near midnight land on the wrong statement day",
     "mitigation": "convert with the bank's zone from bank_profiles before comparing dates"},
    {"gotcha": "The lockfile conflicts on every rebase",
     "description": "pnpm-lock.yaml is rewritten by each branch",
     "risk": "merge conflicts in the lockfile silently drop a dependency",
     "mitigation": "regenerate the lockfile with pnpm install after resolving, never hand-merge it"},
]
RECOMMENDATIONS = [
    {"priority": "high", "category": "testing",
     "recommendation": "Add a property test for currency round trips",
     "rationale": "conversions must be reversible within one minor unit"},
]
LOOP_SUBTASK = "qa-fix-3"


def _productive(n: int, when: datetime) -> dict:
    path, purpose, elements = FILES[n % len(FILES)]
    data = {
        "session_number": n, "timestamp": when.isoformat(),
        "subtask_id": f"subtask-{n}", "success": True,
        "subtasks_completed": [f"subtask-{n}"],
        "discoveries": {
            "file_insights": [{"file_path": path, "change_type": "modified", "purpose": purpose,
                               "key_elements": elements, "lines_added": 10 + n}],
            "patterns_discovered": [PATTERNS[n % len(PATTERNS)]],
            "gotchas_discovered": [GOTCHAS[n % len(GOTCHAS)]],
            "recommendations": RECOMMENDATIONS,
            "approach_outcome": {"status": "completed", "summary": f"Finished subtask-{n}",
                                 "key_accomplishments": [f"{path} updated"]},
            "changed_files": [path],
        },
        "what_worked": [f"Writing the test for subtask-{n} first"],
        "what_failed": [],
        "recommendations_for_next_session": ["Run the reconciliation suite before committing"],
    }
    if n % 5 == 0:  # some sessions mix in the reference's keys
        data["discoveries"]["files_understood"] = {"src/ledger/accounts.py": "Chart of accounts"}
        data["discoveries"]["gotchas_encountered"] = ["Account codes are strings, not integers"]
    return data


def _loop_round(n: int, attempt: int, when: datetime) -> dict:
    failed = attempt % 2 == 1
    return {
        "session_number": n, "timestamp": when.isoformat(),
        "subtask_id": LOOP_SUBTASK, "success": not failed,
        "subtasks_completed": [] if failed else [LOOP_SUBTASK],
        "discoveries": {
            "file_insights": [{"file_path": "src/ledger/posting.py", "change_type": "modified",
                               "purpose": FILES[0][1], "lines_added": attempt % 7}],
            "patterns_discovered": [], "gotchas_discovered": [],
            "approach_outcome": {
                "status": "failed" if failed else "completed",
                "summary": (f"QA rejected attempt {attempt}: 3 tests still fail in test_posting.py"
                            if failed else f"Implemented subtask: {LOOP_SUBTASK}")},
            "changed_files": ["src/ledger/posting.py"],
        },
        "what_worked": [] if failed else [f"Implemented subtask: {LOOP_SUBTASK}"],
        "what_failed": [f"Failed to complete subtask: {LOOP_SUBTASK}"] if failed else [],
        "recommendations_for_next_session": [
            "Read the QA report before changing posting.py again"],
    }


def sessions(total: int, productive: int = 40):
    """(number, content) of every session, oldest first."""
    for n in range(1, total + 1):
        when = START + timedelta(minutes=7 * n)
        yield n, _productive(n, when) if n <= productive else _loop_round(n, n - productive, when)


def write_spec(spec_dir: Path, total: int = 3347, productive: int = 40) -> Path:
    """Write the session files under ``spec_dir/memory/session_insights``; returns that folder."""
    folder = Path(spec_dir) / "memory" / "session_insights"
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in sessions(total, productive):
        (folder / f"session_{n:03d}.json").write_text(json.dumps(data, indent=2))
    return folder
