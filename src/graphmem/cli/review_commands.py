"""``graphmem review``: what the agent hooks and an LLM proposed, listed, accepted, rejected, undone."""

from __future__ import annotations

import argparse

from graphmem.cli.app import _console, _emit, _memory, _spec_args, command, escape

ACTIONS = ("list", "accept", "reject", "undo")


def _review_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", default="list", choices=ACTIONS,
                   help="list (default) what waits; accept or reject ids (or --all); undo the "
                        "latest accept or reject")
    p.add_argument("ids", nargs="*", help="memory ids, as `graphmem review` lists them")
    p.add_argument("--all", action="store_true", help="accept or reject everything listed")
    p.add_argument("--reason", default=None, help="why (kept in the validity log)")
    _spec_args(p)


def _cmd_review(args: argparse.Namespace) -> int:
    from graphmem.errors import ValidationError

    if args.action in ("list", "undo") and (args.ids or args.all or args.reason is not None):
        raise ValidationError(f"`review {args.action}` takes no ids, --all or --reason",
                              field="ids")
    with _memory(args) as m:
        if args.action == "list":
            return _emit(args, m.review_pending(), _show_list)
        if args.action == "undo":
            out = m.undo_review()
        else:
            decide = m.accept if args.action == "accept" else m.reject
            out = decide(args.ids or None, all=args.all, reason=args.reason)
    return _emit(args, out, _show_step)


def _show_list(r: dict) -> None:
    c = _console()
    if not r["pending"] and not r["proposed"]:
        hint = "" if r["mode"] == "hold" else (" (review.mode is apply: the agent hooks' memories "
                                               "and LLM supersessions take effect at once; "
                                               "GRAPHMEM_REVIEW=hold holds them)")
        c.print(f"Nothing waits for review{escape(hint)}.")
        return
    if r["pending"]:
        c.print(f"[bold]Pending memories ({len(r['pending'])})[/], hidden until accepted:")
        for x in r["pending"]:
            where = f"session {x['session']}" if x.get("session") else ""
            c.print(f"  {x['id']}  {escape(x['kind']):8} {escape(where):11} {escape(x['text'])}",
                    highlight=False)
    if r["proposed"]:
        c.print(f"[bold]Proposed ({len(r['proposed'])})[/], applied when accepted:")
        for x in r["proposed"]:
            newer = f" by {x['by']}" + (" (pending)" if x.get("by_pending") else "") \
                if x.get("by") else ""
            c.print(f"  {x['id']}  {escape(str(x.get('proposes')))}{escape(newer)}: "
                    f"{escape(x['text'])}", highlight=False)
            if x.get("by_text"):
                c.print(f"      now: {escape(x['by_text'])}", highlight=False)
            if x.get("reason"):
                c.print(f"      why: {escape(x['reason'])}", highlight=False)
    c.print("Decide with `graphmem review accept ID...` or `reject ID...` (--all for every one); "
            "`graphmem review undo` takes back the latest.", highlight=False)


def _show_step(r: dict) -> None:
    verb = {"accept": "Accepted", "reject": "Rejected", "undo": "Undid"}[r["action"]]
    what = f" {r['undoes']}" if r["action"] == "undo" else ""
    print(f"{verb}{what}: {len(r['lines'])} line(s) appended to the validity log "
          f"(step {r['act']}, by {r['who']}).")
    for line in r["lines"]:
        print(f"  {line['item']} -> {line['state']}")


command("review", "list, accept, reject or undo what the agent hooks and an LLM proposed "
        "(GRAPHMEM_REVIEW=hold)")(_cmd_review)(_review_args)
