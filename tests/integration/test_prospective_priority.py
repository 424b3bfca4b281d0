"""Over max_triggers, a turn keeps its due time triggers ahead of older text ones (real Neo4j, PROFILE-checked)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph._store.cypher import query
from symfonic_graph.shape._embedding import meaning
from symfonic_graph.triggers import GraphPendingTriggers

pytestmark = pytest.mark.anyio


async def test_due_time_triggers_are_kept_first_over_the_cap(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    texts = [await layer.set_trigger(scope, condition="c", task=f"Old text {k}.") for k in range(10)]
    tenant_wide = await layer.set_trigger(MemoryScope(tenant), task="Tenant-wide due.", due_at=1_000_000)
    due = await layer.set_trigger(scope, task="Due now.", due_at=1_000_000)  # long due, written last
    await layer.set_trigger(scope, task="Due next year.", due_in="365d")

    snapshot = await TurnMemory(store, max_triggers=3).begin(scope)
    # both due time triggers kept, then the oldest text; shown oldest first (created_at)
    assert [t.trigger_id for t in snapshot.triggers] == [texts[0], tenant_wide, due]
    offered = await GraphPendingTriggers(store, max_triggers=2).pending(scope)
    assert [t.trigger_id for t in offered] == [tenant_wide, due]
    # under the cap nothing changes: every offerable one, oldest first
    everything = await TurnMemory(store, max_triggers=100).begin(scope)
    assert [t.trigger_id for t in everything.triggers] == [*texts, tenant_wide, due]

    # PROFILE: index seeks only, at most 2 x the cap per scope key, never the one due next year
    params = {"tenant_id": tenant, "namespace": "u1", "write_id": None, "limit": 3, "now": datetime.now(UTC),
              **meaning(None)}
    async with store.driver.session(database=store.database) as session:
        result = await session.run("PROFILE " + query("triggers_offerable").text, params)
        [record] = [r async for r in result]
        summary = await result.consume()
    assert [t["id"] for t in record["triggers"]] == [texts[0], tenant_wide, due]
    assert summary.profile is not None
    seeks = _offer_seeks(summary.profile)
    assert {op for op, _ in seeks} == {"NodeIndexSeek"}
    assert any("kind" in details for _, details in seeks)  # the time seek ran (the namespace's seek was full)
    assert _rows_out_of_seeks(summary.profile) <= 2 * 2 * 3


def _offer_seeks(plan: Any) -> list[tuple[str, str]]:
    details = str(plan.get("args", {}).get("Details", ""))
    own = [(plan["operatorType"].split("@")[0], details)] if "symfonic_offer_at" in details and (
        "Seek" in plan["operatorType"] or "Scan" in plan["operatorType"]) else []
    return own + [s for child in plan.get("children") or [] for s in _offer_seeks(child)]


def _rows_out_of_seeks(plan: Any) -> int:
    details = str(plan.get("args", {}).get("Details", ""))
    own = plan["rows"] if "IndexSeek" in plan["operatorType"] and "symfonic_offer_at" in details else 0
    return own + sum(_rows_out_of_seeks(child) for child in plan.get("children") or [])
