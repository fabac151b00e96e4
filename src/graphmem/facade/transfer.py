"""Memory in and out: ``export`` (graphmem's JSON Lines), ``import`` (other agents' files and
exports, ``files/agent_files.py``), and the section ``agents-md`` writes into an agent's file.

Import reads every input before it writes anything: a file named on the command line that cannot
be read (binary, a malformed ``.mdc`` front matter, an export line of the wrong shape) is a
``ValidationError`` naming it and nothing is written; a file found by walking a folder is skipped
with its reason instead. Then one write per kind: the notes go through the same path as
``append_gotcha`` (size, redaction, deduplication, stable ids), so importing twice adds nothing.
An export's session files are placed in the same entry (``files/session_transfer.py``: never
over a session here, one already here not again), their learnings' exported ids mapped to the
ids they get here. An export's validity events and review steps follow, their ids mapped to the
ids here and appended in one write (``review_log.replay`` says which are new, and when a step
made here wins). An export's episodes (turns and steps) are written whole, never over one here
(``files/episode_transfer.py``), with their episodes index rows and search items.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..errors import ValidationError
from ..files import agent_files as af
from ..files import episode_transfer as et
from ..files import export_format as ef
from ..files import session_transfer as st
from ..models import Note, SaveReport, parse, stable_id
from .episode_import import import_episodes

if TYPE_CHECKING:
    from .derived_sync import DerivedSync
    from .episode_log import EpisodeLog
    from .notes import SpecNotes
    from .scope import Scope
    from .validity import Validity
    from .write_rules import WriteRules

NOTE_KINDS = ("gotcha", "pattern")
EMBED = ("now", "later")  # when an import's notes are embedded
_GLOB = set("*?[]{}")


@dataclass
class Inputs:
    """Everything read from the paths of one import, before any write."""

    found: list[af.Found]
    skipped: list[tuple[str, str]]
    # (where, event, exported id -> (kind, text or a file's path)) in export order
    events: list[tuple[str, dict, dict[str, tuple[str, str]]]]
    broken: dict[str, str] = field(default_factory=dict)  # exported id -> its bad review line
    # (an exported session file as read, its export's id map) in export order
    sessions: list[tuple[st.Incoming, dict[str, tuple[str, str]]]] = field(default_factory=list)
    episodes: list[et.Incoming] = field(default_factory=list)  # in export order


@dataclass(eq=False)
class Transfer:
    """``export``, ``import_paths`` and ``agents_md`` of one ``AsyncMemory``."""

    scope: Scope
    rules: WriteRules
    sync: DerivedSync
    notes: SpecNotes
    validity: Validity
    episodes: EpisodeLog

    # ---- export -------------------------------------------------------------------------
    def export_lines(self) -> list[dict]:
        """The export of this memory (the whole project when project-wide) as its lines."""
        from ..files.walk import project_items, spec_items

        project = self.scope.project
        if self.scope.project_wide:
            items, specs = project_items(project)
        else:
            specs = [self.scope.spec_dir]
            items = spec_items(project, self.scope.spec_dir)
        from ..files.session_names import NAME
        from ..files.spec_store import SpecStore

        lines = [ef.header(project.key, None if self.scope.project_wide else self.scope.spec_key)]
        lines += [ef.item_line(i) for i in items]
        for spec in specs:
            key = project.rel(spec)
            lines += [ef.session_line(key, project.rel(path), s.data)
                      for path, s in SpecStore(spec, project).sessions() if NAME.fullmatch(path.name)]
        from ..files.walk import episode_specs

        lines += et.episode_lines(project, episode_specs(project.root)
                                  if self.scope.project_wide else specs)
        for spec in specs:
            key = project.rel(spec)
            lines += [ef.event_line(key, ev) for ev in _events(spec)]
        return lines

    # ---- import -------------------------------------------------------------------------
    def read_inputs(self, paths: list[str | Path]) -> Inputs:
        """Every note of ``paths`` (files or folders); raises on a named file it cannot read."""
        if not paths:
            raise ValidationError("name at least one file or folder to import", field="paths")
        out = Inputs([], [], [])
        for given in paths:
            path = Path(given)
            if path.is_dir():
                walked = _walk(path)
                for file, origin in walked:
                    try:
                        self._read_one(file, origin, out)
                    except ValidationError as exc:
                        out.skipped.append((self._label(file), str(exc)))
                if not walked:
                    out.skipped.append((str(given), "no agent memory files in this folder"))
            elif path.is_file():
                self._read_one(path, _origin(path), out)
            else:
                raise ValidationError("is not a file or folder here", field=str(given))
        return out

    def _label(self, path: Path) -> str:
        try:
            return os.path.relpath(path.resolve(), self.scope.root)
        except ValueError:
            return str(path)

    def _read_one(self, path: Path, origin: str | None, out: Inputs) -> None:
        label = self._label(path)
        if origin == "export":
            head, items, events, bad, sessions, episodes = ef.read_export(
                path, af.read_text(path, ef.MAX_BYTES))
            ids: dict[str, tuple[str, str]] = {}
            held = {(rec["spec"], rec["source"]) for _, rec in sessions}
            src = str(head.get("project") or "")
            for n, rec in sessions:
                out.sessions.append((st.Incoming(f"{label} line {n}", src, rec["spec"],
                                                 rec["session"], rec["source"], rec["data"]), ids))
            for n, rec in episodes:
                out.episodes.append(et.incoming(f"{label} line {n}", rec))
                held |= et.held_sources(rec["spec"], rec["source"])
            lost: Counter[str] = Counter()  # an episode's folder -> its items not carried whole
            for rec in items:
                kind = rec["kind"]
                if (rec["spec"], rec["source"]) in held:
                    continue  # taken with its session file or episode
                folder = et.folder_of(kind, rec["source"])
                if folder is not None:
                    lost[folder] += 1
                elif kind in NOTE_KINDS:
                    out.found.append(af.Found(kind, rec["text"], label, "graphmem"))
                    ids[rec["id"]] = (kind, rec["text"])
                elif kind == "file" and isinstance(rec["metadata"].get("path"), str):
                    meta = rec["metadata"]
                    out.found.append(af.Found("file", str(meta.get("purpose", "")), label,
                                              "graphmem", path=meta["path"]))
                    ids[rec["id"]] = ("file", meta["path"])
                else:
                    out.skipped.append((f"{label}: {rec['id']}", _why_not(kind, rec, head)))
            for where, count in lost.items():
                out.skipped.append((f"{label}: {where}", et.lost(count, head.get("version", 1))))
            for n, rec, name, why in bad:
                out.skipped.append((f"{label} line {n}", f"review line not applied: '{name}' {why}"))
                if isinstance(rec.get("item"), str):
                    out.broken.setdefault(rec["item"], f"{label} line {n}")
            out.events += [(f"{label} line {n}", ev, ids) for n, ev in events]
            return
        if origin is None:
            raise ValidationError("is not a format graphmem imports (CLAUDE.md, AGENTS.md, "
                                  "GEMINI.md, .mdc, a memory folder's .md, claude-mem or mem0 "
                                  "JSON, a graphmem export)", field=label)
        read = af.read_foreign(path, origin, label)
        out.found += read.found
        out.skipped += read.skipped

    async def import_paths(self, paths: list[str | Path], embed: str = "now") -> dict[str, Any]:
        """Import ``paths``; the report: what it took (by kind and format), what it added, and
        what it skipped and why. ``embed="later"``: the notes are indexed by their words at
        once and embedded by the next ``reindex`` (``index.local_index.embed_later``)."""
        if embed not in EMBED:
            raise ValidationError(f"must be one of {', '.join(EMBED)}, not {embed!r}", field="embed")
        inputs = self.read_inputs(paths)
        notes: dict[str, list[str]] = {k: [] for k in NOTE_KINDS}
        files: dict[str, str] = {}
        took: Counter[tuple[str, str]] = Counter()
        skipped = list(inputs.skipped)
        for f in inputs.found:
            if f.kind == "file" and not _GLOB & set(f.path) and f.text:
                files[f.path] = f.text
                took[(f.origin, "file")] += 1
                continue
            text = f"{f.path}: {f.text}" if f.kind == "file" else f.text
            kind = "pattern" if f.kind == "file" else f.kind
            try:
                note = parse(Note, {"text": text}, kind, wrapped=True).text
                self.rules.check_size(note, kind)
            except ValidationError as exc:
                skipped.append((f.source, str(exc)))
                continue
            notes[kind].append(note)
            took[(f.origin, kind)] += 1
        incoming = self._incoming(inputs, skipped)
        added, placed = await self._write(notes, files, [inc for inc, _, _ in incoming],
                                          later=embed == "later")
        moved = self._sessions_here(incoming, placed, skipped)
        if moved:
            took[("graphmem", "session")] += len(moved)
        added["episode"], episodes = await import_episodes(
            self.episodes, self.scope, self.rules, self.sync, inputs.episodes, skipped,
            later=embed == "later")
        if episodes:
            took[("graphmem", "episode")] += len(episodes)
        review = await self._replay(inputs, skipped)
        added["validity"] = review.pop("lines")
        by_kind: Counter[str] = Counter()
        for (_, kind), n in took.items():
            by_kind[kind] += n
        return {"took": dict(by_kind), "by_source": {f"{o}/{k}": n for (o, k), n in sorted(took.items())},
                "added": added, "review": review, "sessions": moved, "episodes": episodes,
                "skipped": [{"where": w, "why": y} for w, y in skipped],
                "spec_dir": str(self.scope.spec_dir), "embed": embed}

    def _incoming(self, inputs: Inputs, skipped: list[tuple[str, str]]
                  ) -> list[tuple[st.Incoming, dict, dict[str, tuple[str, str]]]]:
        """The exported session files redacted, each with its content as exported and its
        export's id map; one over the size limit is skipped with the reason."""
        out = []
        for inc, ids in inputs.sessions:
            data = self.rules.clean(inc.data)
            try:
                self.rules.check_size(data, "insights")
            except ValidationError as exc:
                skipped.append((inc.where, str(exc)))
                continue
            out.append((st.Incoming(inc.where, inc.project, inc.spec, inc.number, inc.source,
                                    data), inc.data, ids))
        return out

    def _sessions_here(self, incoming: list[tuple[st.Incoming, dict, dict[str, tuple[str, str]]]],
                       placed: list[st.Placed], skipped: list[tuple[str, str]]) -> list[dict]:
        """Map the ids of the learnings of each session now here (written or already here) in
        its export's id map, report one kept out -> each session's ``from``, ``to`` and ``new``."""
        here = (self.scope.project.key, self.scope.spec_key)
        out = []
        for (inc, raw, ids), p in zip(incoming, placed):
            if not p.new and not p.why.startswith("already here"):
                skipped.append((inc.where, f"session {inc.number} not written: {p.why}"))
                continue
            for old, new in st.id_map((inc.project, inc.spec or ""), raw, here, p.data).items():
                ids[old] = ("id", new)
            out.append({"from": f"{inc.where}: {inc.source}", "to": p.name, "new": p.new})
        return out

    async def _write(self, notes: dict[str, list[str]], files: dict[str, str],
                     sessions: list[st.Incoming] | None = None,
                     later: bool = False) -> tuple[dict[str, int], list[st.Placed]]:
        """Append the notes (deduplicated), merge the map entries and place the session files
        (``session_transfer.place``, under the folder's lock) in one journal entry; ``later``:
        their index rows without vectors (``embed_later``) -> what was added, and where each
        session went."""
        from contextlib import nullcontext

        from ..index.local_index import embed_later

        store = self.notes.files
        added = {"gotcha": 0, "pattern": 0, "file": 0, "session": 0}
        placed: list[st.Placed] = []
        if not any(notes.values()) and not files and not sessions:
            return added, placed
        await self.sync.guard()
        with self.sync.journal() as entry:
            items = []
            if sessions:
                placed = self._place(sessions)
                written = {p.name for p in placed if p.new}
                added["session"] = len(written)
                if written:
                    ids = {i.id for path, s in store.sessions() if path.name in written
                           for i in store.session_items(s.data, path)}
                    items += [i for i in store.insight_items() if i.id in ids]
            for kind, texts in notes.items():
                new = store.append_bullets(kind, [self.rules.clean(t) for t in texts])
                added[kind] = len(new)
                items += store.bullet_items(kind, new)
            if files:
                clean = self.rules.clean(files)
                before = store.load_codebase_map()
                changed = {p: v for p, v in clean.items() if before.get(p) != v}
                if changed:
                    store.update_codebase_map(changed)
                    items += store.map_items(changed)
                    added["file"] = len(changed)
            with embed_later() if later else nullcontext():
                await self.sync.propagate(items, SaveReport(path=str(store.memory_dir)), entry)
        return added, placed

    def _place(self, sessions: list[st.Incoming]) -> list[st.Placed]:
        """Where each session goes here, the new ones written (atomically, never over a file)."""
        from ..files.atomic import atomic_write_json
        from ..files.safe import real_dir

        store = self.notes.files
        with store.lock():
            here = {path.name: s.data for path, s in store.sessions()}
            taken = frozenset(os.listdir(store.insights_dir)) - set(here) \
                if real_dir(store.insights_dir) else frozenset()
            placed = st.place(sessions, here, store.committed, store.next_session_number(), taken)
            new = [p for p in placed if p.new]
            if new:
                real_dir(store.insights_dir, create=True)
            for p in new:
                atomic_write_json(store.insights_dir / p.name, p.data, sync=store.sync)
        return placed

    async def _replay(self, inputs: Inputs, skipped: list[tuple[str, str]]) -> dict[str, Any]:
        """Log the exported validity events and review steps of the memories just imported,
        under their ids here (``review_log.replay`` decides which lines are new), in one append
        -> the lines logged and the review state of the memories they name."""
        from ..files.lock import folder_lock
        from ..files.review_log import replay
        from ..files.validity_log import (PENDING, PROPOSED, REJECTED, REVIEW_STATES, STATES,
                                          log_records, validity_file, validity_log)
        from .validity import LOCK_NAME

        out: dict[str, Any] = {"lines": 0, PENDING: 0, PROPOSED: 0, REJECTED: 0, "kept_here": 0}
        if not inputs.events:
            return out
        mapped, failed = self._mapped(inputs, skipped)
        incoming = []
        for where, src, line in mapped:
            if src in failed:
                skipped.append((where, f"not applied: {failed[src]}, so none of this memory's "
                                "steps are"))
            elif line["state"] not in STATES + REVIEW_STATES:
                skipped.append((where, f"not applied: its state {line['state']!r} is unknown"))
            else:
                incoming.append((where, src, line))
        spec_dir = self.scope.require_spec()
        with folder_lock(validity_file(spec_dir).parent, name=LOCK_NAME):
            here = [r for r in log_records(spec_dir) if r.get("state") in STATES + REVIEW_STATES]
            new, notes = replay(here, incoming)
            self.validity.append_records(new)
            events = validity_log(spec_dir).events
        skipped += notes
        touched = list(dict.fromkeys(line["item"] for _, _, line in incoming))
        out.update(lines=len(new), kept_here=sum(1 for _, why in notes if why.startswith("kept")))
        for item in touched:
            state = (events.get(item) or {}).get("state")
            if state in (PENDING, PROPOSED, REJECTED):
                out[state] += 1
        if new:
            await self.validity.to_graph(list(dict.fromkeys(r["item"] for r in new)))
        return out

    def _mapped(self, inputs: Inputs, skipped: list[tuple[str, str]]
                ) -> tuple[list[tuple[str, str, dict]], dict[str, str]]:
        """The exported validity lines of the memories this import took, their ids (``item``,
        ``by``, and those inside ``was`` and ``before``) the ids here, each as (where, exported
        id, line); and the exported ids whose lines cannot all be mapped (-> why)."""
        project, spec = self.scope.project.key, self.scope.spec_key
        present = {i.id for i in self.scope.files.items()}
        failed = {src: f"another review line of this memory ({where}) is not valid"
                  for src, where in inputs.broken.items()}

        memo: dict[tuple[str, str], str | None] = {}

        def here(old: Any, ids: dict[str, tuple[str, str]]) -> str | None:
            if not isinstance(old, str) or old not in ids:
                return None
            kind, text = ids[old]
            if (kind, text) in memo:
                return memo[(kind, text)]
            if kind == "id":  # a session's learning: its id here (``session_transfer.id_map``)
                new: str | None = text
            elif kind == "file":
                new = stable_id(project, spec, "file", text)
            else:
                try:
                    clean = parse(Note, {"text": text}, kind, wrapped=True).text
                    new = stable_id(project, spec, kind, self.rules.clean(clean))
                except ValidationError:
                    new = None
            memo[(kind, text)] = got = new if new in present else None
            return got

        def moved(ev: dict, ids: dict[str, tuple[str, str]], at: str) -> dict:
            # the fields graphmem writes, nested no deeper than it nests them (was.before)
            keep = ef.LOG_FIELDS if not at else ef.LOG_FIELDS[:-2] if at.count(".") > 1 \
                else tuple(k for k in ef.LOG_FIELDS if k != "was")
            line = {k: ev[k] for k in keep if k in ev}
            for key in ("item", "by"):
                if line.get(key) is not None:
                    line[key] = here(ev[key], ids)
                    if line[key] is None:
                        raise KeyError(f"{at}{key}")
            if isinstance(line.get("reason"), str):
                line["reason"] = self.rules.clean(line["reason"])
            for key in ("was", "before"):
                if isinstance(line.get(key), dict):
                    line[key] = moved(line[key], ids, f"{at}{key}.")
            return line

        out = []
        for where, ev, ids in inputs.events:
            if here(ev["item"], ids) is None:
                skipped.append((where, "not applied: its memory is not one this import took"))
                continue
            try:
                out.append((where, ev["item"], moved(ev, ids, "")))
            except KeyError as exc:
                why = f"'{exc.args[0]}' names a memory this import did not take"
                skipped.append((where, f"not applied: {why}"))
                failed.setdefault(ev["item"], f"{where}: {why}")
        return out, failed

    # ---- write-through ------------------------------------------------------------------
    async def agents_md(self, search: Callable[..., Awaitable[list]], write: str | Path | None,
                        max_bytes: int) -> dict[str, Any]:
        """The rendered section, and the file it was written to (``agents_md.py``)."""
        from ..rules import agents_md as am

        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < am.MIN_BYTES:
            raise ValidationError(f"must be an integer of at least {am.MIN_BYTES}", field="max_bytes")
        hits = await search(am.QUERY, scope="project", kinds=list(am.KINDS), limit=am.CANDIDATES)
        body = am.render(hits, self.scope.root, max_bytes)
        if write is None:
            return {"section": body, "path": None, "changed": False}
        path = Path(write)
        changed = am.write_section(path, body)
        return {"section": body, "path": str(path), "changed": changed}


    async def refresh_agents_md(self, search: Callable[..., Awaitable[list]],
                                max_bytes: int | None = None) -> dict[str, Any]:
        """Re-render the section in every agent file of the project that already carries the
        markers (``agents_md.marked_files``); a file whose section is unchanged is not written.
        Off (nothing read, nothing written) when ``agents_md.refresh`` is false."""
        from ..rules import agents_md as am

        conf = self.rules.settings.agents_md
        out: dict[str, Any] = {"refreshed": [], "unchanged": [], "failed": [], "off": False}
        if not conf.refresh:
            out["off"] = True
            return out
        files = am.marked_files(self.scope.root)
        if not files:
            return out
        section = await self.agents_md(search, None, max_bytes or conf.max_bytes)
        for path in files:
            rel = os.path.relpath(path, self.scope.root)
            try:
                changed = am.write_section(path, section["section"])
            except (ValidationError, OSError) as exc:  # two begin markers, say: left as it is
                out["failed"].append({"path": rel, "why": str(exc)})
                continue
            out["refreshed" if changed else "unchanged"].append(rel)
        return out


def _why_not(kind: str, rec: dict, head: dict) -> str:
    """Why an exported item is not imported."""
    if rec["session"] is not None and head.get("version", 1) < 3:
        return (f"a {kind} item of a session file, which a version {head.get('version')} export "
                "does not carry: export it again with this graphmem")
    return (f"a {kind} item of {rec['source']}, which import does not write (it takes gotchas, "
            "patterns, files and session files)")


def _events(spec_dir: Path) -> list[dict]:
    """Every validity event of a spec, in log order (a line that is not one is left out, as the
    log's reader leaves it out)."""
    from ..files.validity_log import log_records

    return [ev for ev in log_records(spec_dir) if isinstance(ev.get("state"), str)]


def _origin(path: Path) -> str | None:
    """The format of one named file."""
    if path.suffix == ".jsonl" and ef.is_export(path):
        return "export"
    if path.suffix == ".json":
        return "json"
    origin = af.origin_of(path)
    return origin or ("rules" if path.suffix == ".md" else None)


def _walk(folder: Path) -> list[tuple[Path, str]]:
    """The agent memory files of a folder: a memory folder's own ``.md`` files (Claude Code's
    auto-memory holds ``MEMORY.md``; Serena's ``.serena/memories``), else a project's rules files,
    ``.claude/CLAUDE.md``, ``.cursor/rules/**/*.mdc`` and ``.serena/memories/*.md``."""
    if (folder / "MEMORY.md").is_file():
        return [(p, "auto-memory") for p in sorted(folder.glob("*.md"))]
    if folder.name == "memories" and folder.parent.name == ".serena":
        return [(p, "serena") for p in sorted(folder.glob("*.md"))]
    if folder.name == "rules" and folder.parent.name == ".cursor":
        return [(p, "cursor") for p in sorted(folder.glob("**/*.mdc"))]
    if folder.name == ".cursor":
        return _walk(folder / "rules")
    if folder.name == ".serena":
        return _walk(folder / "memories")
    if folder.name == ".claude":
        return [(folder / "CLAUDE.md", "rules")] if (folder / "CLAUDE.md").is_file() else []
    found = [(folder / n, "rules") for n in af.RULE_FILES if (folder / n).is_file()]
    if (folder / ".claude" / "CLAUDE.md").is_file():
        found.append((folder / ".claude" / "CLAUDE.md", "rules"))
    found += [(p, "cursor") for p in sorted((folder / ".cursor" / "rules").glob("**/*.mdc"))]
    found += [(p, "serena") for p in sorted((folder / ".serena" / "memories").glob("*.md"))]
    return found
