"""``StoreSkillGetter``: a gate lookup that reads the graph on every call.

Kept for code written against the first release. It is a ``TurnMemory``
whose ``max_age`` defaults to 0, so it reads the one projection on every call
and finds the scope like every other lookup (``turn_scope``).
"""

from __future__ import annotations

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.memory.turn_scope import ScopeFrom, scope_from_state

__all__ = ["ScopeFrom", "StoreSkillGetter", "scope_from_state"]


class StoreSkillGetter(TurnMemory):
    """``get_active_skills`` for the gate that reads the graph on every call.

    Example:
        >>> gate = create_precondition_gate_node(StoreSkillGetter(store))
    """

    def __init__(self, store: GraphMemoryStore, *, scope_from: ScopeFrom | None = None, max_age: float = 0.0) -> None:
        super().__init__(store, max_age=max_age, scope_from=scope_from)

    async def __call__(self, state: object) -> list[object]:
        return list(await self.get_active_skills(state))
