"""A write's checks and a publish read only their own scope's nodes (PROFILE row counts, no timing).

A seed file of 50 namespaces ran the cap check and publish's listing once
per namespace; when each read every skill of the tenant (or every staged
node of every tenant) the file took minutes. Here one namespace holds 2
skills and a neighbour namespace of the same tenant 30 live and 30 staged:
no operator of the small namespace's checks may handle a row per neighbour.
"""

from __future__ import annotations

from typing import Any

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from symfonic_graph._store.cypher import query

pytestmark = pytest.mark.anyio

NEIGHBOUR = 30
WRITE_ID = "w-plans"


def _most_rows(plan: Any) -> int:
    return max([int(plan.get("rows", 0)), *(_most_rows(child) for child in plan.get("children") or [])])


async def _profile(driver: neo4j.AsyncDriver, store: GraphMemoryStore, name: str, params: dict[str, Any]) -> int:
    """The most rows any operator of ``name`` handled, run in a transaction rolled back."""
    q = query(name)
    assert set(params) == set(q.params)
    async with driver.session(database=store.database, notifications_min_severity="OFF") as session:
        tx = await session.begin_transaction()
        try:
            summary = await (await tx.run("PROFILE " + q.text, params)).consume()
        finally:
            await tx.rollback()
    assert summary.profile is not None
    return _most_rows(summary.profile)


async def test_a_scopes_checks_and_publish_read_only_that_scope(
    driver: neo4j.AsyncDriver, store: GraphMemoryStore, tenant: str
) -> None:
    small, big = MemoryScope(tenant, "small"), MemoryScope(tenant, "big")
    layer = ProceduralLayer(store)

    def specs(prefix: str, n: int) -> list[dict[str, Any]]:
        return [{"label": f"{prefix} {i}", "steps": ["act"], "source_tag": "authored:test", "action_tool": "act",
                 "precondition": ["check"], "identifier": f"{prefix}-{i}"} for i in range(n)]

    try:
        await layer.seed_skills(small, specs("small", 2))
        await layer.seed_skills(small, specs("small-staged", 2), write_id=WRITE_ID)
        await layer.seed_skills(big, specs("big", NEIGHBOUR))
        await layer.seed_skills(big, specs("big-staged", NEIGHBOUR), write_id=WRITE_ID)
        scope = small.params()
        staged = {**scope, "write_id": WRITE_ID}
        checks = {
            "skills_owned_count": scope,
            "skills_owned_after_staging": staged,
            "write_staged_count": staged,
            "write_prepare_batch": {**staged, "limit": 5000},
            "write_publish_listed": staged,
            "write_discard_batch": {**staged, "limit": 5000},
            "change_record_publish": {**staged, "actor": None, "reason": None},
        }
        for name, params in checks.items():
            most = await _profile(driver, store, name, params)
            assert most < NEIGHBOUR, f"{name} handled {most} rows for a scope of 4 nodes: it reads other scopes"
        # The tenant-wide scope (no namespace) is checked by the tenant index and sees none of the namespaces.
        [row] = await store.read("skills_owned_count", **MemoryScope(tenant).params())
        assert row["skills"] == 0
        [row] = await store.read("skills_owned_count", **scope)
        assert row["skills"] == 2
    finally:
        await store.erase(MemoryScope(tenant))
