"""The real store, recording the named queries it sends (no stand-in: every query reaches Neo4j)."""

from __future__ import annotations

from typing import Any

from symfonic_graph import GraphMemoryStore


class CountingStore(GraphMemoryStore):
    """``GraphMemoryStore`` on the same driver, appending each read query's name to ``reads``."""

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.reads: list[str] = []

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self.reads.append(name)
        return await super().read(name, **params)
