"""Graph synchronisation on the façade: outbox replay (``sync``) and drift."""

from __future__ import annotations

from typing import Any


class GraphSyncMixin:
    """Graph operations of ``AsyncMemory``."""

    def _outbox(self):
        from .files.outbox import Outbox

        return Outbox(self.files.memory_dir)

    async def sync(self) -> dict[str, Any]:
        """Replay this spec's graph outbox now (reconnecting at once, without the usual pause).

        Returns ``{"replayed": items, "entries": n, "remaining": items, "graph": status}``; when
        the graph is still unreachable the entries stay queued and ``graph`` says why. On a
        shared server, ``pulled`` counts what was taken in from teammates (all of it, see
        ``team.pull_all``).
        """
        from .errors import GraphmemError

        outbox = self._outbox()
        if self.settings.graph.mode == "off":
            return {"replayed": 0, "entries": 0, "remaining": outbox.size(), "graph": "off"}
        try:
            done = await self.backends.replay_outbox(outbox, force=True)
            from .team import pull_all

            pulled = await pull_all(self)
            return {**done, "pulled": pulled} if pulled is not None else done
        except GraphmemError as exc:
            return {"replayed": 0, "entries": 0, "remaining": outbox.size(),
                    "graph": f"unavailable: {exc}"}

    async def drift(self) -> dict[str, Any]:
        """Items in this spec's files but not in the graph, and graph items no file holds (on a
        shared server, only those written from this machine: the rest are teammates')."""
        items = {i.id for i in await self.items()}
        queued = self._outbox().size()
        if self.settings.graph.mode == "off":
            return {"graph": "off", "files": len(items), "queued": queued}
        graph = await self.backends.graph_store()
        if graph is None:
            return {"graph": "off", "files": len(items), "queued": queued}
        in_graph = await graph.item_ids(self.project.key, self.spec_key)
        own = in_graph
        from .graph.server import external_endpoint

        if external_endpoint(self.settings) is not None:  # a shared server: teammates' items
            from .team import host  # of this spec are theirs to keep, not extra

            own = await graph.item_ids(self.project.key, self.spec_key, host=host(self.settings))
        return {"graph": "on", "files": len(items), "in_graph": len(in_graph), "queued": queued,
                "missing": sorted(items - in_graph), "extra": sorted(own - items)}
