"""The real store, recording the named queries it sends (no stand-in: every query reaches Neo4j)."""

from __future__ import annotations

from typing import Any

from symfonic_graph import GraphMemoryStore


class CountingStore(GraphMemoryStore):
    """``GraphMemoryStore`` on the same driver, appending each read query's name to ``reads``.

    ``sent`` lists every query it sends, in order: reads, one-shot writes by
    name, and each write transaction as ``"write"``.
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.reads: list[str] = []
        self.sent: list[str] = []

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self.reads.append(name)
        self.sent.append(name)
        return await super().read(name, **params)

    async def write_once(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self.sent.append(name)
        return await super().write_once(name, **params)

    async def write(self, steps: Any) -> Any:
        self.sent.append("write")
        return await super().write(steps)
