"""The gate's store-backed skill lookup, and where it finds the scope.

``StoreSkillGetter`` is a ``get_active_skills`` for a gate node that reads
the graph on every call: it takes the scope from the graph state and fetches
only the skills whose action tool the terminal AI message calls (index-backed
on the tenant). ``TurnMemory`` (``turn.py``) is the one-read-per-turn
alternative that also serves pre-flight and triggers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from symfonic_graph.errors import ScopeError
from symfonic_graph.gate import terminal_tool_calls
from symfonic_graph.layers.procedural import ProceduralLayer
from symfonic_graph.models import Skill
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore

ScopeFrom = Callable[[Mapping[str, Any]], MemoryScope]


def scope_from_state(key: str = "memory_scope") -> ScopeFrom:
    """Read the scope from ``state[key]``: a MemoryScope or ``{"tenant_id", "namespace"}``.

    Example:
        >>> scope_from_state()({"memory_scope": {"tenant_id": "acme"}})
        MemoryScope(tenant_id='acme', namespace=None)
    """

    def read(state: Mapping[str, Any]) -> MemoryScope:
        value = state.get(key) if isinstance(state, Mapping) else None
        if isinstance(value, MemoryScope):
            return value
        if isinstance(value, Mapping) and "tenant_id" in value:
            return MemoryScope(value["tenant_id"], value.get("namespace"))
        raise ScopeError(f"graph state has no usable {key!r}: set it to a MemoryScope or {{'tenant_id': ...}}")

    return read


class StoreSkillGetter:
    """``get_active_skills`` for the gate, backed by the graph.

    Example:
        >>> gate = create_precondition_gate_node(StoreSkillGetter(store))
    """

    def __init__(self, store: GraphMemoryStore, *, scope_from: ScopeFrom | None = None) -> None:
        self.layer = ProceduralLayer(store)
        self.scope_from = scope_from or scope_from_state()

    async def __call__(self, state: Mapping[str, Any]) -> list[Skill]:
        scope = self.scope_from(state)
        names = list(dict.fromkeys(call.name for call in terminal_tool_calls(state.get("messages"))))
        if not names:
            return []
        if len(names) == 1:
            return await self.layer.query_skills(scope, action_tool=names[0])
        return await self.layer.query_skills(scope)
