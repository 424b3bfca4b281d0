"""ProspectiveLayer: stored reminders (a condition and a task)."""

from __future__ import annotations

from symfonic_graph import _validate as v
from symfonic_graph.errors import NotFoundError
from symfonic_graph.models import Trigger, trigger_from_row
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore, check_write_id, new_id


class ProspectiveLayer:
    """Triggers in the graph: set, list pending, resolve.

    Example:
        >>> layer = ProspectiveLayer(store)
        >>> tid = await layer.set_trigger(MemoryScope("acme", "u1"),
        ...     condition="user mentions their invoice", task="Tell them it is overdue.")
        >>> [t.id for t in await layer.get_pending(MemoryScope("acme", "u1"))]
        [tid]
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        self.store = store

    async def set_trigger(
        self, scope: MemoryScope, *, condition: str, task: str, write_id: str | None = None
    ) -> str:
        """Store a pending trigger; return its id."""
        row = {
            "id": new_id(),
            "tenant_id": scope.tenant_id,
            "namespace": scope.namespace,
            "condition": v.text("condition", condition),
            "task": v.text("task", task),
            "write_id": check_write_id(write_id),
        }
        await self.store.write_staged(scope, row["write_id"], [("triggers_write", {"rows": [row]})])
        return str(row["id"])

    async def get_pending(self, scope: MemoryScope, *, write_id: str | None = None) -> list[Trigger]:
        """Unresolved triggers the scope sees, oldest first."""
        rows = await self.store.read("triggers_pending", **scope.params(), write_id=check_write_id(write_id))
        return [t for t in (trigger_from_row(r["trigger"]) for r in rows) if t is not None]

    async def resolve_trigger(self, scope: MemoryScope, trigger_id: str) -> None:
        """Mark a trigger resolved: it is no longer pending."""
        params = {**scope.params(), "trigger_id": v.text("trigger_id", trigger_id)}
        results = await self.store.write([("trigger_resolve", params)])
        if not results[0]:
            raise NotFoundError(f"no pending trigger {trigger_id!r} in tenant {scope.tenant_id!r}")
