"""The human format of search hits, shared by ``graphmem search`` and the warm search server
(which renders it for a client that has no terminal, so that client never imports rich)."""

from __future__ import annotations


def show_hits(rows: list[dict], console) -> None:
    """The human format of ``graphmem search``; the warm search server renders it too.
    Piped (not a terminal), no line is wrapped: a path stays on one line for grep and copy."""
    from rich.markup import escape

    from graphmem.cli.display import safe_data
    from graphmem.files.insight_items import count_note

    wrap = {"soft_wrap": not console.is_terminal}
    rows = safe_data(rows)  # the server renders with this function too
    if not rows:
        console.print("No matching memories.")
    for i, h in enumerate(rows, 1):
        console.print(f"[bold]{i:>2}.[/] [cyan]{h['kind']}[/] [dim]{h['score']:.3f} "
                      f"{h['backend']}[/]", **wrap)
        console.print(f"    {h['text']}", markup=False, highlight=False, **wrap)
        # where to open it here; a teammate's project not checked out here: key and stored path
        where = h.get("local_path") or f"{h['project']}: {h['source']}".rstrip(": ")
        meta = h.get("metadata") or {}
        seen = count_note(meta)  # a retry loop's item: how often, since when
        who = (f" (by {meta['author']}" + (f" on {meta['host']})" if meta.get("host") else ")")
               if meta.get("author") else "")
        console.print(f"    [dim]{escape(where + who + ('; ' + seen if seen else ''))}[/]",
                      highlight=False, **wrap)
        mark = stale_note(meta)
        if mark:
            console.print(f"    [yellow]{escape(mark)}[/]", highlight=False, **wrap)


def stale_note(meta: dict) -> str:
    """A hit's marks in one line ("possibly superseded: reverted in session 3: ...", "gone:
    src/x.py:alpha", "moved: a.py -> b.py", "changed since: a.py", "reverted in session 4 (its
    change is undone in the tree)"); for a current one only what of its code is gone, if any."""
    from graphmem.code.freshness import reverted_note
    from graphmem.rules.context import validity_note

    out = [note for note in (validity_note(meta),) if note]
    f = x if isinstance(x := meta.get("freshness"), dict) else {}
    state = f.get("state")
    if state == "gone" and f.get("undone"):
        out.append(reverted_note(f))
    elif state == "gone":
        out.append("gone: " + ", ".join(map(str, (f.get("gone") or [])[:3])))
        work = x if isinstance(x := f.get("work_gone"), dict) else {}
        if work.get("symbols"):
            out.append(f"the {len(work['symbols'])} symbols its work wrote are defined nowhere now")
        if work.get("files"):
            out.append(f"{len(work['files'])} of the {work.get('of')} files its work changed "
                       "are no longer in the tree")
        removed = x if isinstance(x := f.get("removed_in"), dict) else {}
        out.extend(f"{name} was removed in session {', '.join(map(str, who))}"
                   for name, who in list(removed.items())[:3] if isinstance(who, list) and who)
    elif state == "moved":
        from graphmem.code.freshness import moves_of
        from graphmem.code.whereabouts import moved_note

        moved = _moves_shown(f)
        if moved:
            out.append("moved: " + moved)
        said = {m.get("symbol") for m in moves_of(f)}
        out.extend(moved_note({"asked_moved": {k: v for k, v in (f.get("asked_moved") or {}).items()
                                               if k not in said}}))  # "`X` is now in b.py"
        if f.get("changed"):  # renamed and mostly rewritten in one commit
            out.append("changed since: " + ", ".join(map(str, f["changed"][:3])))
        if f.get("reason"):  # and some of the rest of its code is gone
            out.append(str(f["reason"]))

    elif state == "changed":
        changed = f.get("changed") or []
        since = ["changed since: " + ", ".join(map(str, changed[:3]))] if changed else []
        out.append("; ".join([*since, *([str(f["reason"])] if f.get("reason") else [])])
                   or "changed since")
        moved = _moves_shown(f)  # the rest of its code may have moved
        if moved:
            out.append("moved: " + moved)
    elif f.get("reason"):  # current, less than half of the code it names gone: to know, no mark
        out.append(str(f["reason"]))
    return "; ".join(out)


def _moves_shown(f: dict) -> str:
    """Up to three moves, "a.py -> b.py" for a file renamed, "`refund` a.py -> b.py" for a
    function that left a file still there, "`refund` a.py (deleted) -> b.py" for one that left
    a file now gone (``freshness.describe_move`` words them alike)."""
    from graphmem.code.freshness import describe_move, moves_of

    shown = [describe_move(m, arrow=True) for m in moves_of(f)]
    return ", ".join(list(dict.fromkeys(shown))[:3])
