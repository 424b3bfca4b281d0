"""SemanticLayer: plain facts, searched by generic recall beside the other layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from symfonic_graph._store import GraphMemoryStore, check_write_id, new_id, tenant_token
from symfonic_graph.errors import ScopeError, ValidationError
from symfonic_graph.shape.inputs import FactInput
from symfonic_graph.shape.models import Fact, fact_from_row
from symfonic_graph.shape.scope import MemoryScope

MAX_FACTS_PER_WRITE = 10_000
"""``add_facts`` writes at most this many facts in one call (one transaction)."""


class SemanticLayer:
    """Facts in the graph.

    Example:
        >>> fid = await SemanticLayer(store).add_fact(MemoryScope("acme"), "Invoices are due on the 5th.")
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        self.store = store

    async def add_fact(self, scope: MemoryScope, text: str, *, write_id: str | None = None) -> str:
        """Store one fact; return its id."""
        [fact_id] = await self._write(scope, [FactInput.of(text).text], write_id)
        return fact_id

    async def add_facts(self, scope: MemoryScope, texts: Sequence[str], *, write_id: str | None = None) -> list[str]:
        """Store several facts in one transaction (all or nothing); return their ids in order.

        At most ``MAX_FACTS_PER_WRITE`` per call. Every text is checked before
        anything is written (``ValidationError`` naming ``texts[i]``); an
        empty list writes nothing.

        Example:
            >>> ids = await SemanticLayer(store).add_facts(MemoryScope("acme"), ["Fact one.", "Fact two."])
        """
        if isinstance(texts, (str, bytes)) or not isinstance(texts, (list, tuple)):
            raise ValidationError("texts", f"must be a list of strings, got {type(texts).__name__}")
        if len(texts) > MAX_FACTS_PER_WRITE:
            raise ValidationError("texts", f"holds {len(texts)} facts; write at most {MAX_FACTS_PER_WRITE} per call")
        checked = [FactInput.of(t, f"texts[{i}]").text for i, t in enumerate(texts)]
        return await self._write(scope, checked, write_id) if checked else []

    async def _write(self, scope: MemoryScope, texts: list[str], write_id: str | None) -> list[str]:
        if not isinstance(scope, MemoryScope):
            raise ScopeError(f"scope must be a MemoryScope, got {type(scope).__name__}")
        wid = check_write_id(write_id)
        rows: list[dict[str, Any]] = [
            {"id": new_id(), "tenant_id": scope.tenant_id, "tenant_token": tenant_token(scope.tenant_id),
             "namespace": scope.namespace, "text": text, "write_id": wid}
            for text in texts
        ]
        await self.store.write_staged(scope, wid, [("facts_write", {"rows": rows})])
        return [str(row["id"]) for row in rows]

    async def list_facts(self, scope: MemoryScope, *, write_id: str | None = None) -> list[Fact]:
        """Facts the scope sees, oldest first."""
        rows = await self.store.read("facts_visible", **scope.params(), write_id=check_write_id(write_id))
        return [f for f in (fact_from_row(r["fact"]) for r in rows) if f is not None]
