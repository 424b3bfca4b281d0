"""Bounds: a turn reads at most ``max_triggers`` pending triggers, oldest first."""

from __future__ import annotations

import pytest

from symfonic_graph import GraphMemoryStore, GraphPendingTriggers, MemoryScope, TurnMemory
from symfonic_graph.errors import ValidationError

pytestmark = pytest.mark.anyio


async def _seed(store: GraphMemoryStore, scope: MemoryScope, count: int) -> None:
    await store.driver.execute_query(
        "UNWIND range(0, $n - 1) AS i CREATE (:Trigger {id: $t + '-' + i, tenant_id: $t, namespace: $ns, "
        "condition: 'c', task: 'task ' + i, status: 'pending', created_at: datetime() - duration({seconds: $n - i})})",
        n=count, t=scope.tenant_id, ns=scope.namespace, database_=store.database)


async def test_a_turn_reads_at_most_max_triggers_oldest_first(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "user-1")
    await _seed(store, scope, 150)
    snapshot = await TurnMemory(store).begin(scope)
    assert [t.task for t in snapshot.triggers] == [f"task {i}" for i in range(100)]
    assert [t.task for t in await GraphPendingTriggers(store).pending(scope)] == [f"task {i}" for i in range(100)]
    small = await TurnMemory(store, max_triggers=3).begin(scope)
    assert [t.task for t in small.triggers] == ["task 0", "task 1", "task 2"]


@pytest.mark.parametrize("bad", [0, -1, 2**63, 1.5, True, "100"])
async def test_max_triggers_must_be_a_sensible_count(store: GraphMemoryStore, bad: object) -> None:
    with pytest.raises(ValidationError, match="max_triggers"):
        TurnMemory(store, max_triggers=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_triggers"):
        GraphPendingTriggers(store, max_triggers=bad)  # type: ignore[arg-type]
