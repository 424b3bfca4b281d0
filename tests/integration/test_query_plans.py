"""Every per-turn query starts from an index seek on the tenant (no timing, only EXPLAIN plans)."""

from __future__ import annotations

from typing import Any

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore
from symfonic_graph._cypher import query

pytestmark = pytest.mark.anyio

_SKILLS = {
    "tenant_id": "t-plan", "namespace": None, "write_id": None, "include_drafts": False,
    "include_retracted": False, "query": "", "limit": 2**62,
}
PER_TURN = [
    pytest.param("skills_visible", _SKILLS, id="skills_visible"),
    pytest.param("skills_visible", {**_SKILLS, "namespace": "u-1", "include_drafts": True},
                 id="skills_visible-namespaced"),
    pytest.param("triggers_pending", {"tenant_id": "t-plan", "namespace": None, "write_id": None, "limit": 100},
                 id="triggers_pending"),
    pytest.param("triggers_pending", {"tenant_id": "t-plan", "namespace": "u-1", "write_id": "w-1", "limit": 100},
                 id="triggers_pending-namespaced"),
    pytest.param("catalog_version", {"tenant_id": "t-plan"}, id="catalog_version"),
    pytest.param("facts_visible", {"tenant_id": "t-plan", "namespace": "u-1", "write_id": None}, id="facts_visible"),
    pytest.param("turn_snapshot", {"scopes": [{"tenant_id": "t-plan", "namespace": "u-1", "known_version": None,
                                               "write_id": None, "include_drafts": False,
                                               "include_retracted": False}], "max_triggers": 100},
                 id="turn_snapshot"),
    pytest.param("turn_snapshot_warm", {"scopes": [{"tenant_id": "t-plan", "namespace": "u-1", "known_version": 3,
                                                    "write_id": None, "include_drafts": False,
                                                    "include_retracted": False}], "max_triggers": 100},
                 id="turn_snapshot_warm"),
]
SEEKS = {"NodeIndexSeek", "NodeUniqueIndexSeek"}


def _operators(plan: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(operator type, details, is_leaf) for every operator of the plan tree."""
    children = plan.get("children") or []
    here = (plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")), not children)
    return [here] + [op for child in children for op in _operators(child)]


@pytest.mark.parametrize(("name", "params"), PER_TURN)
async def test_per_turn_query_starts_from_a_tenant_index_seek(
    store: GraphMemoryStore, name: str, params: dict[str, Any]
) -> None:
    q = query(name)
    assert set(params) == set(q.params)
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        result = await session.run("EXPLAIN " + q.text, params)
        summary = await result.consume()
    assert summary.plan is not None
    operators = _operators(summary.plan)
    scans = [op for op, _, _ in operators if "Scan" in op]
    assert not scans, f"{name} scans instead of seeking: {scans}"
    # Leaves that find no nodes (the row of parameters a query starts from) are fine; every leaf that
    # finds nodes must be a seek on the tenant index, or on a trigger's scope key (tenant + namespace).
    leaves = [(op, details) for op, details, leaf in operators
              if leaf and op not in ("Argument", "Projection", "Unwind")]
    assert leaves, f"{name} has no leaf that finds nodes"
    for op, details in leaves:
        assert op in SEEKS and ("(tenant_id)" in details or "(symfonic_scope, status)" in details), (
            f"{name} starts from {op} {details!r}, not a tenant seek")


async def test_the_tenant_indexes_exist(driver: neo4j.AsyncDriver) -> None:
    records, _, _ = await driver.execute_query(
        "SHOW RANGE INDEXES YIELD name, labelsOrTypes, properties, state RETURN name, labelsOrTypes, properties, state"
    )
    found = {(r["labelsOrTypes"][0], tuple(r["properties"])): (r["name"], r["state"]) for r in records}
    for label in ("Skill", "Trigger", "Fact", "Precondition"):
        assert found[(label, ("tenant_id",))] == (f"{label.lower()}_tenant", "ONLINE")
    assert found[("Trigger", ("symfonic_scope", "status"))] == ("trigger_scope", "ONLINE")
