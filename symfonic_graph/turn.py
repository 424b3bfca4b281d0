"""TurnMemory: everything a turn reads from the graph, in one round trip.

Before the model runs, ``await memory.begin(scope)`` reads the tenant's catalog
version, the pending triggers of the scope and, only when the catalog moved
since the last turn, the tenant's skills. The snapshot then serves the three
questions of the turn without another query:

- ``snapshot.preflight(state)``: the cached, byte-stable pre-flight block;
- ``snapshot`` as a trigger source (``pending(scope)``) for
  ``ProspectiveTriggerCapability``;
- ``memory.get_active_skills`` for the gate: the skills of the scope's latest
  snapshot, so the rules the model was shown are the rules enforced.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from symfonic_graph._isolation import keep_owned
from symfonic_graph.contributions import PluginContribution
from symfonic_graph.models import Skill, skill_from_row, trigger_from_row
from symfonic_graph.preflight import build_preflight_contribution
from symfonic_graph.scope import MemoryScope
from symfonic_graph.skill_source import ScopeFrom, scope_from_state
from symfonic_graph.store import GraphMemoryStore
from symfonic_graph.triggers import PendingTrigger

log = logging.getLogger("symfonic_graph.turn")

_STALE = -1  # a catalog version no tenant has: forces the skills to be read


@dataclass(frozen=True)
class TurnSnapshot:
    """What one turn read: the catalog version, the skills and the pending triggers.

    Example:
        >>> snapshot = await memory.begin(MemoryScope("acme", "user-7"))
        >>> block = snapshot.preflight({"channel": "slack"})
    """

    scope: MemoryScope
    version: int
    skills: tuple[Skill, ...]
    triggers: tuple[PendingTrigger, ...]
    taken_at: float
    include_negative: bool = False

    def preflight(self, state: Mapping[str, Any] | None = None) -> PluginContribution | None:
        """The ``## ENFORCED PRE-FLIGHT RULES`` block of this turn, or None."""
        return build_preflight_contribution(list(self.skills), state, include_negative=self.include_negative)

    async def pending(self, scope: MemoryScope) -> list[PendingTrigger]:
        """Pending triggers, as a ``ProspectiveTriggerCapability`` source of this scope."""
        if scope != self.scope:
            log.error("turn snapshot of %s asked for triggers of %s; returning none", self.scope, scope)
            return []
        return list(self.triggers)


@dataclass
class _Catalog:
    version: int
    fetched_at: float
    skills: tuple[Skill, ...]


class TurnMemory:
    """One read per turn, with the tenant's skills cached by catalog version.

    Args:
        store: the graph store.
        max_age: seconds after which skills are reread even if the catalog
            version did not move (bounds staleness for plain-Cypher seeders
            that do not bump ``SymfonicCatalog.version``).
        snapshot_ttl: how long the gate may reuse a scope's latest snapshot;
            older ones are replaced by a fresh read.
        scope_from: how the gate finds the scope in the graph state.
        include_negative: add the ``DO NOT`` sibling lines to the block.
        max_scopes: how many scopes' caches to keep (least recently used go).

    Example:
        >>> memory = TurnMemory(store)
        >>> gate = create_precondition_gate_node(memory.get_active_skills)
    """

    def __init__(
        self,
        store: GraphMemoryStore,
        *,
        max_age: float = 30.0,
        snapshot_ttl: float = 120.0,
        scope_from: ScopeFrom | None = None,
        include_negative: bool = False,
        max_scopes: int = 10_000,
    ) -> None:
        self.store = store
        self.max_age = max_age
        self.snapshot_ttl = snapshot_ttl
        self.scope_from = scope_from or scope_from_state()
        self.include_negative = include_negative
        self.max_scopes = max_scopes
        self._catalogs: OrderedDict[MemoryScope, _Catalog] = OrderedDict()
        self._snapshots: OrderedDict[MemoryScope, TurnSnapshot] = OrderedDict()

    async def begin(self, scope: MemoryScope) -> TurnSnapshot:
        """Read this turn's memory in one query and remember it for the gate."""
        now = time.monotonic()
        cached = self._catalogs.get(scope)
        known = cached.version if cached and now - cached.fetched_at < self.max_age else _STALE
        [row] = await self.store.read("turn_snapshot", **scope.params(), known_version=known)
        version = int(row["version"])
        if row["skills_fresh"] or cached is None:
            skills = tuple(keep_owned(scope, (s for s in map(skill_from_row, row["skills"]) if s), "skill"))
            cached = _Catalog(version, now, skills)
            _remember(self._catalogs, scope, cached, self.max_scopes)
        snapshot = TurnSnapshot(scope, version, cached.skills, _triggers(scope, row["triggers"]), now,
                                self.include_negative)
        _remember(self._snapshots, scope, snapshot, self.max_scopes)
        return snapshot

    async def get_active_skills(self, state: Mapping[str, Any]) -> Sequence[Skill]:
        """The gate's lookup: the skills of this turn's snapshot (read if missing or old)."""
        scope = self.scope_from(state)
        snapshot = self._snapshots.get(scope)
        if snapshot is None or time.monotonic() - snapshot.taken_at >= self.snapshot_ttl:
            snapshot = await self.begin(scope)
        return snapshot.skills


def _triggers(scope: MemoryScope, rows: Sequence[Mapping[str, Any]]) -> tuple[PendingTrigger, ...]:
    triggers = keep_owned(scope, (t for t in map(trigger_from_row, rows) if t), "trigger")
    return tuple(PendingTrigger(t.id, t.condition, t.task) for t in triggers)


def _remember(cache: OrderedDict[MemoryScope, Any], scope: MemoryScope, value: Any, limit: int) -> None:
    cache[scope] = value
    cache.move_to_end(scope)
    while len(cache) > limit:
        cache.popitem(last=False)
