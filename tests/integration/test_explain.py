"""Per-turn reads are index-backed: the plan seeks the tenant index, never scans."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import neo4j
import pytest

from symfonic_graph._cypher import query

pytestmark = pytest.mark.anyio

_COMMON = {"tenant_id": "acme", "namespace": "user-7", "write_id": None}
PER_TURN_READS: dict[str, tuple[str, dict[str, Any]]] = {
    "skills_visible": (
        "Skill",
        {**_COMMON, "include_drafts": False, "include_retracted": False, "query": "", "action_tool": "deliver",
         "limit": 100},
    ),
    "triggers_pending": ("Trigger", _COMMON),
    "facts_visible": ("Fact", _COMMON),
}


async def test_the_tenant_indexes_exist(driver: neo4j.AsyncDriver) -> None:
    records, _, _ = await driver.execute_query(
        "SHOW RANGE INDEXES YIELD name, labelsOrTypes, properties, state RETURN name, labelsOrTypes, properties, state"
    )
    found = {(r["labelsOrTypes"][0], tuple(r["properties"])): (r["name"], r["state"]) for r in records}
    for label, _ in PER_TURN_READS.values():
        assert found[(label, ("tenant_id",))] == (f"{label.lower()}_tenant", "ONLINE")


def _operators(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", ""))
    for child in plan.get("children", []):
        yield from _operators(child)


@pytest.mark.parametrize("name", sorted(PER_TURN_READS))
@pytest.mark.parametrize("namespace", ["user-7", None])
async def test_per_turn_read_seeks_the_tenant_index(
    driver: neo4j.AsyncDriver, name: str, namespace: str | None
) -> None:
    label, params = PER_TURN_READS[name]
    q = query(name)
    q.check_args(params)
    async with driver.session() as session:
        result = await session.run("EXPLAIN " + q.text, {**params, "namespace": namespace})
        summary = await result.consume()
    assert summary.plan is not None
    operators = list(_operators(summary.plan))
    kinds = {op for op, _ in operators}
    assert not kinds & {"NodeByLabelScan", "AllNodesScan", "UnionNodeByLabelsScan", "IntersectionNodeByLabelsScan"}, (
        operators
    )
    seeks = [details for op, details in operators if op == "NodeIndexSeek"]
    assert any(f":{label}(tenant_id) WHERE tenant_id = $tenant_id" in d for d in seeks), operators
