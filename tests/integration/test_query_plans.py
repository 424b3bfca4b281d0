"""Every per-turn query starts from an index seek on the tenant (no timing, only EXPLAIN plans)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore
from symfonic_graph._store.cypher import all_queries, query
from symfonic_graph.shape._embedding import meaning

pytestmark = pytest.mark.anyio

_SKILLS = {
    "tenant_id": "t-plan", "namespace": None, "write_id": None, "include_drafts": False,
    "include_retracted": False, "query": "", "limit": 2**62,
}
NOW = datetime(2031, 5, 1, tzinfo=UTC)
PER_TURN = [
    pytest.param("skills_visible", _SKILLS, id="skills_visible"),
    pytest.param("skills_visible", {**_SKILLS, "namespace": "u-1", "include_drafts": True},
                 id="skills_visible-namespaced"),
    pytest.param("triggers_pending", {"tenant_id": "t-plan", "namespace": None, "write_id": None, "limit": 100},
                 id="triggers_pending"),
    pytest.param("triggers_pending", {"tenant_id": "t-plan", "namespace": "u-1", "write_id": "w-1", "limit": 100},
                 id="triggers_pending-namespaced"),
    pytest.param("triggers_offerable", {"tenant_id": "t-plan", "namespace": "u-1", "write_id": None, "limit": 100,
                                        "now": NOW, **meaning(None)}, id="triggers_offerable"),
    pytest.param("catalog_version", {"tenant_id": "t-plan"}, id="catalog_version"),
    pytest.param("facts_visible", {"tenant_id": "t-plan", "namespace": "u-1", "write_id": None}, id="facts_visible"),
    pytest.param("turn_snapshot", {"scopes": [{"tenant_id": "t-plan", "namespace": "u-1", "known_version": None,
                                               "write_id": None, "include_drafts": False,
                                               "include_retracted": False}], "max_triggers": 100,
                                   "now": NOW},
                 id="turn_snapshot"),
    pytest.param("turn_snapshot_warm", {"scopes": [{"tenant_id": "t-plan", "namespace": "u-1", "known_version": 3,
                                                    "write_id": None, "include_drafts": False,
                                                    "include_retracted": False}], "max_triggers": 100,
                                        "now": NOW},
                 id="turn_snapshot_warm"),
    *(pytest.param(name, {"scopes": [{"tenant_id": "t-plan", "namespace": "u-1", "known_version": known,
                                       "write_id": None, "include_drafts": False, "include_retracted": False,
                                       "packed": True, **meaning([1.0, 0.0])}], "max_triggers": 100, "now": NOW},
                   id=name) for name, known in (("turn_snapshot_semantic", None), ("turn_snapshot_warm_semantic", 3))),
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
        # the tenant index, an index led by the tenant (`skill_scope`: tenant, namespace), or a trigger's scope key
        assert op in SEEKS and ("(tenant_id)" in details or "(tenant_id, namespace)" in details
                                or "(symfonic_scope, status" in details), (
            f"{name} starts from {op} {details!r}, not a tenant seek")


async def test_the_tenant_indexes_exist(driver: neo4j.AsyncDriver) -> None:
    records, _, _ = await driver.execute_query(
        "SHOW RANGE INDEXES YIELD name, labelsOrTypes, properties, state RETURN name, labelsOrTypes, properties, state"
    )
    found = {(r["labelsOrTypes"][0], tuple(r["properties"])): (r["name"], r["state"]) for r in records}
    for label in ("Skill", "Trigger", "Fact", "Precondition"):
        assert found[(label, ("tenant_id",))] == (f"{label.lower()}_tenant", "ONLINE")
    assert found[("Trigger", ("symfonic_scope", "status"))] == ("trigger_scope", "ONLINE")
    assert found[("Trigger", ("symfonic_scope", "status", "symfonic_offer_at"))] == ("trigger_offer", "ONLINE")
    assert found[("Trigger", ("expires_at",))] == ("trigger_expiry", "ONLINE")
    assert found[("SymfonicTriggerSelection", ("tenant_id",))] == ("trigger_selection_tenant", "ONLINE")


async def _db_hits(store: GraphMemoryStore, name: str, params: dict[str, Any]) -> int:
    def hits(plan: dict[str, Any]) -> int:
        return int(plan.get("dbHits", 0)) + sum(hits(child) for child in plan.get("children") or [])

    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        result = await session.run("PROFILE " + query(name).text, params)
        summary = await result.consume()
    assert summary.profile is not None
    return hits(summary.profile)


DOCTOR_PER_TENANT = {
    "doctor_foreign_preconditions": {"after": "", "limit": 500},
    "doctor_skills": {"after": "", "limit": 500},
    "doctor_keys": {"after": "", "limit": 500},
    "doctor_catalogs": {"after": "", "limit": 500},
    "doctor_bad_triggers": {"after": "", "limit": 500},
    "doctor_trigger_keys": {"after": "", "limit": 500},
    "doctor_recurrences": {"after": "", "limit": 500},
    "doctor_trigger_wheres": {"after": "", "limit": 500},
    "doctor_trigger_cap": {"max_triggers": 100},
    "doctor_skill_cap": {"max_skills": 2000, "max_chars": 4000},
    "doctor_scope_budget": {"max_weight": 8 * 1024 * 1024},
    "doctor_identifiers": {},
    "doctor_embedding_lengths": {},
}


async def test_doctor_for_one_tenant_reads_that_tenant_only(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """`doctor --tenant` costs what the tenant holds: a neighbour's skills, triggers and catalog cost it nothing.

    Every per-tenant check but `copied_ids` (which compares ids across tenants) starts from the tenant's
    index; the scan of every tenant, for `doctor` without a tenant, is filtered out before it starts.
    """
    neighbour = f"{tenant}-neighbour"
    forget.append(neighbour)
    await driver.execute_query(
        "UNWIND range(1, 300) AS i CREATE (:Skill {id: 's' + i, tenant_id: $t, label: 'x', steps: ['a'], "
        "status: 'approved'})-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'a'}), "
        "(:Trigger {id: 't' + i, tenant_id: $t, condition: 'c', task: 'x', status: 'pending'})", {"t": neighbour})
    await driver.execute_query("CREATE (:SymfonicCatalog {tenant_id: $t, version: 0})", {"t": neighbour})
    assert set(DOCTOR_PER_TENANT) == {q.name for q in all_queries() if q.name.startswith("doctor_")
                                     and "tenant_id" in q.params and q.name != "doctor_copied_ids"}
    for name, params in DOCTOR_PER_TENANT.items():
        quiet = await _db_hits(store, name, {"tenant_id": tenant, **params})
        assert quiet <= 10, f"{name} read {quiet} records for a tenant that holds nothing"
        everyone = await _db_hits(store, name, {"tenant_id": None, **params})
        least = 1 if name == "doctor_catalogs" else 300  # the neighbour has one catalog, 300 skills and triggers
        assert everyone >= least, f"{name} without a tenant read only {everyone} records"


async def test_the_decision_log_of_one_tenant_costs_another_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """Report, prune and erase seek the tenant's decisions (index `decision_tenant`, migration 0009)."""
    neighbour = f"{tenant}-neighbour"
    forget.append(neighbour)
    await driver.execute_query(
        "UNWIND range(1, 500) AS i CREATE (:SymfonicDecision {tenant_id: $t, namespace: null, tool: 'refund', "
        "call_id: 'c' + i, rule_ids: ['s1'], decision: 'block', mode: 'enforce', reason: 'x', at: 0.0})",
        {"t": neighbour})
    quiet = {
        "decisions_report": {"tenant_id": tenant, "namespace": None, "since": 0.0},
        "decisions_totals": {"tenant_id": tenant, "namespace": None, "since": 0.0},
        "decisions_prune": {"tenant_id": tenant, "before": 2.0**40, "limit": 1000},
        "erase_nodes_batch": {"tenant_id": tenant, "namespace": None, "whole_tenant": True, "limit": 1000},
    }
    for name, params in quiet.items():
        hits = await _db_hits(store, name, params)
        assert hits <= 50, f"{name} read {hits} records for a tenant that holds nothing (the neighbour holds 500)"
    await driver.execute_query("MATCH (d:SymfonicDecision {tenant_id: $t}) DELETE d", {"t": neighbour})


async def test_the_change_records_of_one_tenant_cost_another_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """History and erasure receipts seek the tenant (indexes `change_tenant`, `erasure_tenant`, migration 0010)."""
    neighbour = f"{tenant}-neighbour"
    forget.append(neighbour)
    await driver.execute_query(
        "UNWIND range(1, 500) AS i CREATE (:SymfonicChange {tenant_id: $t, namespace: null, target_id: 's1', "
        "identifier: 'refund', at: datetime(), change: 'approve', from: 'draft', to: 'approved'}), "
        "(:SymfonicErasure {tenant_id: $t, namespace: 'u' + i, counts: '{}', at: datetime()})", {"t": neighbour})
    quiet = {
        "change_history": {"tenant_id": tenant, "namespace": None, "target": "refund"},
        "erasures_list": {"tenant_id": tenant},
    }
    for name, params in quiet.items():
        hits = await _db_hits(store, name, params)
        assert hits <= 20, f"{name} read {hits} records for a tenant that holds nothing (the neighbour holds 500)"
    assert await _db_hits(store, "erasures_list", {"tenant_id": None}) >= 500  # every tenant's, when asked
    await driver.execute_query("MATCH (n) WHERE (n:SymfonicChange OR n:SymfonicErasure) AND n.tenant_id = $t "
                               "DELETE n", {"t": neighbour})
