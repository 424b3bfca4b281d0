"""SemanticLayer: plain facts, searched by generic recall beside the other layers."""

from __future__ import annotations

from symfonic_graph import _validate as v
from symfonic_graph.models import Fact, fact_from_row
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore, check_write_id, new_id


class SemanticLayer:
    """Facts in the graph.

    Example:
        >>> fid = await SemanticLayer(store).add_fact(MemoryScope("acme"), "Invoices are due on the 5th.")
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        self.store = store

    async def add_fact(self, scope: MemoryScope, text: str, *, write_id: str | None = None) -> str:
        """Store one fact; return its id."""
        row = {
            "id": new_id(),
            "tenant_id": scope.tenant_id,
            "namespace": scope.namespace,
            "text": v.text("text", text),
            "write_id": check_write_id(write_id),
        }
        await self.store.write_staged(scope, row["write_id"], [("facts_write", {"rows": [row]})])
        return str(row["id"])

    async def list_facts(self, scope: MemoryScope, *, write_id: str | None = None) -> list[Fact]:
        """Facts the scope sees, oldest first."""
        rows = await self.store.read("facts_visible", **scope.params(), write_id=check_write_id(write_id))
        return [f for f in (fact_from_row(r["fact"]) for r in rows) if f is not None]
