"""Store-backed skill lookups for a turn: the gate's getter and the pre-flight block.

``StoreSkillGetter`` is the ``get_active_skills`` a gate node takes: it reads
the scope from the graph state and fetches only the skills whose action tool
the terminal AI message calls (index-backed on the tenant).

``PreflightSource`` renders the pre-flight block from the tenant's catalog,
reusing the fetched skills while the tenant's catalog version is unchanged, so
a turn costs one small read and the block stays byte-identical.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from symfonic_graph.contributions import PluginContribution
from symfonic_graph.errors import ScopeError
from symfonic_graph.layers.procedural import ProceduralLayer
from symfonic_graph.models import Skill
from symfonic_graph.preflight import build_preflight_contribution
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


def _tool_call_names(state: Mapping[str, Any]) -> list[str]:
    messages = state.get("messages") or []
    if not messages:
        return []
    last = messages[-1]
    calls = last.get("tool_calls") if isinstance(last, Mapping) else getattr(last, "tool_calls", None)
    names = []
    for call in calls or []:
        name = call.get("name") if isinstance(call, Mapping) else getattr(call, "name", None)
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


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
        names = _tool_call_names(state)
        if not names:
            return []
        if len(names) == 1:
            return await self.layer.query_skills(scope, action_tool=names[0])
        return await self.layer.query_skills(scope)


@dataclass
class _Cached:
    version: int
    fetched_at: float
    skills: Sequence[Skill]


@dataclass
class PreflightSource:
    """The cached pre-flight block of a scope.

    Skills are refetched only when the tenant's catalog version moves (every
    library write bumps it) or after ``max_age`` seconds (a bound for
    plain-Cypher seeders that do not bump it).

    Example:
        >>> source = PreflightSource(store)
        >>> block = await source.contribution(MemoryScope("acme"), state={"channel": "slack"})
    """

    store: GraphMemoryStore
    max_age: float = 30.0
    include_negative: bool = False
    _cache: dict[MemoryScope, _Cached] = field(default_factory=dict, repr=False)

    async def skills(self, scope: MemoryScope) -> Sequence[Skill]:
        """The scope's visible skills, from cache while the catalog is unchanged."""
        version = await self.store.catalog_version(scope)
        cached = self._cache.get(scope)
        now = time.monotonic()
        if cached and cached.version == version and now - cached.fetched_at < self.max_age:
            return cached.skills
        skills = await ProceduralLayer(self.store).query_skills(scope)
        self._cache[scope] = _Cached(version, now, tuple(skills))
        return skills

    async def contribution(
        self, scope: MemoryScope, state: Mapping[str, Any] | None = None
    ) -> PluginContribution | None:
        """The ``## ENFORCED PRE-FLIGHT RULES`` block for this turn, or None."""
        skills = await self.skills(scope)
        return build_preflight_contribution(list(skills), state, include_negative=self.include_negative)
