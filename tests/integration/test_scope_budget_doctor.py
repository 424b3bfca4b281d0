"""doctor flags owning scopes over the budget a turn read may ship, computed from the graph: data seeded by
hand with plain Cypher (no library bookkeeping) is flagged as well as anything a write could have left."""

from __future__ import annotations

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, doctor
from symfonic_graph.shape import _limits

pytestmark = pytest.mark.anyio


async def test_doctor_flags_hand_seeded_scopes_over_the_budget_and_only_them(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str
) -> None:
    # by hand: the tenant-wide scope gets 600 skills of 16 KB of steps each (9.6 MB), the end user
    # "user-fat" 100 reminders of 100 KB each (what set_trigger refuses)
    within = MemoryScope(tenant, "user-ok")  # written through the API: within every bound
    await driver.execute_query(
        "UNWIND range(1, 600) AS i CREATE (s:Skill {id: $t + '-' + i, tenant_id: $t, label: 'L' + i, "
        "steps: [$blob, $blob], status: 'approved', active: true})"
        "-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'run_tests'})",
        {"t": tenant, "blob": "s" * 8000})
    await driver.execute_query(
        "UNWIND range(1, 100) AS i CREATE (:Trigger {id: $t + '-t' + i, tenant_id: $t, namespace: 'user-fat', "
        "condition: 'c', task: $blob, status: 'pending'})", {"t": tenant, "blob": "r" * 100_000})
    await ProceduralLayer(store).seed_authored_skill(within, label="ok", steps=["deploy"], source_tag="authored:t",
                                                     action_tool="deploy", precondition=["run_tests"])
    await ProspectiveLayer(store).set_trigger(within, condition="c", task="t")

    found = {(f.tenant_id, f.namespace): f for f in await doctor.diagnose(store, tenant) if f.check == "scope_budget"}
    assert found.keys() == {(tenant, None), (tenant, "user-fat")}
    skills = found[(tenant, None)]
    assert skills.label == "Scope" and f"over the budget of {_limits.MAX_SCOPE_WEIGHT:,}" in skills.problem
    weight = 600 * (2 * _limits.NODE_WEIGHT + 2 * 8001 + len(f"{tenant}-600") + 5 + 9)
    assert int(skills.problem.split(" characters")[0].removeprefix("holds ").replace(",", "")) >= weight * 0.95
    assert "retract unused skills" in skills.problem and "resolve old reminders" in skills.problem
    # the whole database's run finds them too
    everyone = [f for f in await doctor.diagnose(store, None) if f.check == "scope_budget" and f.tenant_id == tenant]
    assert len(everyone) == 2
