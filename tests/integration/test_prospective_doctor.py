"""doctor on triggers of every kind, through a real Neo4j: what a turn would never offer, named per trigger."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer
from symfonic_graph.ops.doctor import diagnose

pytestmark = pytest.mark.anyio


async def _seed(store: GraphMemoryStore, tenant: str, props: dict[str, Any], cypher: str = "") -> str:
    tid = f"seed-{uuid.uuid4().hex}"
    await store.driver.execute_query(
        "CREATE (t:Trigger {id: $id, tenant_id: $tenant, condition: 'c', task: 'x', status: 'pending', "
        "created_at: datetime()}) SET t += $props " + cypher, id=tid, tenant=tenant, props=props,
        database_=store.database)
    return tid


async def test_doctor_names_what_a_turn_would_never_offer(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProspectiveLayer(store)
    scope = MemoryScope(tenant, "u1")
    good = [await layer.set_trigger(scope, task="Weekly.", due_at=4102444800, recurrence="FREQ=WEEKLY"),
            await layer.set_trigger(scope, condition="c", task="Text.", expires_at=4102444800),
            await layer.set_trigger(scope, condition="c", task="Meant.", embedding=[0.6, 0.8])]
    bad = {
        await _seed(store, tenant, {"kind": "telepathy"}): "kind 'telepathy' is not text|time",
        await _seed(store, tenant, {"kind": "time"}): "a time trigger without due_at",
        await _seed(store, tenant, {"kind": "time"}, ", t.due_at = localdatetime('2031-01-01T09:00')"):
            "due_at is a LOCAL DATETIME, not a datetime with a time zone",
        await _seed(store, tenant, {}, ", t.expires_at = datetime('2020-01-01T00:00Z')"): "expired at 2020-01-01",
        await _seed(store, tenant, {"kind": "time", "recurrence": "FREQ=SOMETIMES"},
                    ", t.due_at = datetime('2031-01-01T09:00Z')"): "recurrence is not a valid RRULE",
        await _seed(store, tenant, {"kind": "time", "recurrence": "FREQ=DAILY"}): "has no due_at with a time zone",
        await _seed(store, tenant, {"kind": "semantic"}): "a semantic trigger whose embedding is missing",
        await _seed(store, tenant, {"kind": "semantic", "embedding": ["a", "b"]}):
            "a semantic trigger whose embedding is a LIST<STRING>, not a list of numbers",
        await _seed(store, tenant, {"kind": "semantic", "embedding": [0.0, 0.0]}):
            "a semantic trigger whose embedding is all zeros",
        await _seed(store, tenant, {"kind": "semantic", "embedding": [1e300, 1.0]}):
            "a semantic trigger whose embedding is all zeros, empty or out of float32 range",
        await _seed(store, tenant, {"embedding": [0.6, 0.8]}): "an embedding on a trigger that is not semantic",
    }
    await store.stamp_keys()
    stale = await layer.set_trigger(scope, task="Moved by hand.", due_at=4102444800)
    await store.driver.execute_query("MATCH (t:Trigger {id: $id}) SET t.due_at = datetime('2030-01-01T00:00Z')",
                                     id=stale, database_=store.database)
    bad[stale] = "its offer key differs from its due_at"

    await layer.set_trigger(MemoryScope(tenant, "u2"), condition="c", task="Other model.", embedding=[0.6, 0.8, 0.0])
    findings = await diagnose(store, tenant)
    [lengths] = [f for f in findings if f.check == "embedding_lengths"]
    assert "1 of length 3" in lengths.problem and "of length 2" in lengths.problem, lengths.problem
    found = {(f.node, f.problem) for f in findings}
    for node, problem in bad.items():
        assert any(n == node and problem in p for n, p in found), (node, problem, found)
    assert not [f for f in findings if f.node in good]
