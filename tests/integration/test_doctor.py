"""doctor against hand-seeded bad data: it reports every problem and never crashes.

Every node is written with plain Cypher (the way an operator seeds), in fresh
tenants, and carries a ``doctor_test_run`` marker so the test deletes all of it
afterwards: doctor without ``--tenant`` reports untenanted nodes to everyone,
so the dev database must be left as found.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import neo4j
import pytest
from neo4j.spatial import CartesianPoint
from neo4j.time import Duration

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory
from symfonic_graph.doctor import Finding, diagnose
from symfonic_graph.errors import ScopeError
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

_LABELS = "Skill|Trigger|Precondition|SymfonicCatalog|Fact"


class Seeder:
    """Plain-Cypher writes that mark every node for the cleanup."""

    def __init__(self, driver: neo4j.AsyncDriver, database: str | None) -> None:
        self.driver, self.database = driver, database
        self.run = uuid.uuid4().hex

    async def cypher(self, text: str, **params: Any) -> list[dict[str, Any]]:
        records, _, _ = await self.driver.execute_query(text, {**params, "run": self.run}, database_=self.database)
        return [r.data() for r in records]

    async def node(self, label: str, props: dict[str, Any]) -> str:
        """Create a node of ``label`` with exactly ``props`` (any types); return its element id."""
        [eid] = await self.nodes(label, [props])
        return eid

    async def nodes(self, label: str, rows: list[dict[str, Any]]) -> list[str]:
        """``node`` for many at once, in one transaction; element ids in the order of ``rows``."""
        assert label in _LABELS.split("|")
        created = await self.cypher(
            f"UNWIND range(0, size($rows) - 1) AS i CREATE (n:{label}) SET n = $rows[i], n.doctor_test_run = $run "
            "RETURN i, elementId(n) AS eid ORDER BY i", rows=rows)
        return [str(row["eid"]) for row in created]

    async def requires(self, skill_eid: str, precondition_eid: str, position: Any) -> None:
        await self.cypher(
            "MATCH (s) WHERE elementId(s) = $s MATCH (p) WHERE elementId(p) = $p "
            "CREATE (s)-[:REQUIRES {position: $position}]->(p)", s=skill_eid, p=precondition_eid, position=position)

    async def cleanup(self) -> None:
        await self.cypher(f"MATCH (n:{_LABELS}) WHERE n.doctor_test_run = $run DETACH DELETE n")


@pytest.fixture
async def seeder(driver: neo4j.AsyncDriver, neo4j_settings: Neo4jSettings) -> AsyncIterator[Seeder]:
    seeding = Seeder(driver, neo4j_settings.database)
    try:
        yield seeding
    finally:
        await seeding.cleanup()
        left = await seeding.cypher(f"MATCH (n:{_LABELS}) WHERE n.doctor_test_run = $run RETURN count(n) AS n")
        assert left == [{"n": 0}]


def _skill(tenant: str, node_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "tenant_id": tenant, "label": "Deliver", "steps": ["deliver"], "action_tool": "deliver",
            "status": "approved", **extra}


def _trigger(tenant: str, node_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "tenant_id": tenant, "condition": "invoice", "task": "Say it is overdue.",
            "status": "pending", "created_at": datetime.now(UTC), **extra}


def _found(findings: list[Finding], check: str, node: str, *fragments: str) -> list[Finding]:
    return [f for f in findings if f.check == check and f.node == node and all(x in f.problem for x in fragments)]


def _as_findings(stdout: str) -> list[Finding]:
    return [Finding(**f) for f in json.loads(stdout)]


async def _seed_reported_cases(seeder: Seeder, tenant: str) -> dict[str, str]:
    """One node (or edge) for each problem doctor must name; returns the names to look for."""
    other = f"other-{uuid.uuid4().hex}"
    tag = uuid.uuid4().hex
    names = {"other": other, "untenanted_id": f"untenanted-{tag}"}
    # list-typed status, id and tenant_id
    await seeder.node("Skill", _skill(tenant, f"list-status-{tag}", status=["approved"]))
    names["list_status"] = f"list-status-{tag}"
    await seeder.node("Skill", _skill(tenant, "ignored", id=[f"list-id-{tag}", "x"]))
    names["list_id"] = repr([f"list-id-{tag}", "x"])
    await seeder.node("Skill", _skill("ignored", names["untenanted_id"], tenant_id=[tenant]))
    # list-typed kind, and a REQUIRES edge to another tenant's precondition
    holder = await seeder.node("Skill", _skill(tenant, f"holder-{tag}"))
    names["holder"] = f"holder-{tag}"
    listed = await seeder.node("Precondition", {"tenant_id": tenant, "kind": ["tool"], "tool": "get_status"})
    await seeder.requires(holder, listed, 0)
    foreign = await seeder.node("Precondition", {"tenant_id": other, "kind": "tool", "tool": "get_status"})
    await seeder.requires(holder, foreign, 1)
    # a skill whose key names another tenant
    await seeder.node("Skill", _skill(tenant, f"foreign-key-{tag}", identifier="deliver",
                                      symfonic_key=json.dumps(["skill", other, None, "deliver"])))
    names["foreign_key"] = f"foreign-key-{tag}"
    # a staged trigger keyed in the right scope (a NUL-separated suffix): not reported
    await seeder.node("Trigger", _trigger(tenant, f"staged-{tag}", identifier="r",
                                          symfonic_key=json.dumps(["trigger", tenant, None, "r"]) + "\x00staged:w1"))
    # bad triggers: list status, list id, non-string condition, empty task
    await seeder.node("Trigger", _trigger(tenant, f"trigger-list-status-{tag}", status=["pending"]))
    names["trigger_list_status"] = f"trigger-list-status-{tag}"
    await seeder.node("Trigger", _trigger(tenant, "ignored", id=[f"trigger-list-id-{tag}"]))
    await seeder.node("Trigger", _trigger(tenant, f"trigger-condition-{tag}", condition=42))
    names["trigger_condition"] = f"trigger-condition-{tag}"
    await seeder.node("Trigger", _trigger(tenant, f"trigger-empty-{tag}", task="  "))
    names["trigger_empty"] = f"trigger-empty-{tag}"
    # an odd catalog version
    await seeder.node("SymfonicCatalog", {"tenant_id": tenant, "version": [1]})
    # the trigger cap, in a tenant of its own: 40 tenant-wide + 61 in n1 (101 seen there), 60 in n2 (100: fine)
    cap = names["cap"] = f"cap-{uuid.uuid4().hex}"
    for ns, n in ((None, 40), ("n1", 61), ("n2", 60)):
        await seeder.cypher(
            "UNWIND range(1, $n) AS i CREATE (:Trigger {id: $tag + '-' + coalesce($ns, '') + '-' + i, "
            "tenant_id: $tenant, namespace: $ns, condition: 'c', task: 't', status: 'pending', "
            "created_at: datetime(), doctor_test_run: $run})", n=n, ns=ns, tag=tag, tenant=cap)
    # a scope over the cap on its own: 101 tenant-wide triggers in the other tenant
    await seeder.cypher(
        "UNWIND range(1, 101) AS i CREATE (:Trigger {id: $tag + '-other-' + i, tenant_id: $other, condition: 'c', "
        "task: 't', status: 'pending', created_at: datetime(), doctor_test_run: $run})", tag=tag, other=other)
    return names


def _assert_reported(findings: list[Finding], tenant: str, names: dict[str, str]) -> None:
    assert _found(findings, "bad_skills", names["list_status"], "status")
    assert _found(findings, "bad_skills", names["list_id"], "id: Input should be a valid string")
    assert _found(findings, "bad_preconditions", names["holder"], "precondition[0]", "unknown kind")
    [edge] = _found(findings, "foreign_preconditions", names["holder"], "position 1", f"tenant {names['other']}")
    assert edge.label == "Skill"
    [key] = _found(findings, "keys", names["foreign_key"], repr(names["other"]), repr(tenant))
    assert key.label == "Skill"
    assert not [f for f in findings if f.check == "keys" and f.node.startswith("staged-")]
    assert _found(findings, "bad_triggers", names["trigger_list_status"], "status is a LIST<STRING>")
    assert [f for f in findings if f.check == "bad_triggers" and "id is a LIST<STRING>" in f.problem]
    assert _found(findings, "bad_triggers", names["trigger_condition"], "condition is a INTEGER")
    assert _found(findings, "bad_triggers", names["trigger_empty"], "task is empty")
    assert _found(findings, "catalogs", tenant, "version ? (LIST<INTEGER>)")
    cap = names["cap"]
    caps = {f.node: f.problem for f in findings if f.check == "trigger_cap"}
    assert set(caps) >= {f"tenant {cap!r} namespace 'n1'", f"tenant {names['other']!r} (tenant-wide)"}
    assert f"tenant {cap!r} namespace 'n2'" not in caps and f"tenant {cap!r} (tenant-wide)" not in caps
    assert caps[f"tenant {cap!r} namespace 'n1'"].startswith("101 pending triggers (40 tenant-wide, 61 own)")
    assert caps[f"tenant {names['other']!r} (tenant-wide)"].startswith("101 pending triggers (tenant-wide")


async def test_doctor_reports_each_problem_for_one_tenant(
    store: GraphMemoryStore, seeder: Seeder, tenant: str
) -> None:
    names = await _seed_reported_cases(seeder, tenant)
    findings = [f for t in (tenant, names["other"], names["cap"]) for f in await diagnose(store, t)]
    _assert_reported(findings, tenant, names)
    assert not [f for f in findings if f.check == "untenanted"], "untenanted nodes are reported only across tenants"


async def test_doctor_cli_json_and_across_all_tenants(
    store: GraphMemoryStore, seeder: Seeder, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    names = await _seed_reported_cases(seeder, tenant)
    per_tenant = [run_cli_on(neo4j_settings, "doctor", "--tenant", t, "--json")
                  for t in (tenant, names["other"], names["cap"])]
    assert all(p.returncode == 0 for p in per_tenant), [p.stderr for p in per_tenant]
    _assert_reported([f for p in per_tenant for f in _as_findings(p.stdout)], tenant, names)

    everything = await diagnose(store)
    _assert_reported(everything, tenant, names)
    assert _found(everything, "untenanted", names["untenanted_id"], "tenant_id is a LIST<STRING>")
    proc = run_cli_on(neo4j_settings, "doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    everything_cli = _as_findings(proc.stdout)
    _assert_reported(everything_cli, tenant, names)
    assert _found(everything_cli, "untenanted", names["untenanted_id"])
    strict = run_cli_on(neo4j_settings, "doctor", "--tenant", tenant, "--strict")
    assert strict.returncode == 1 and f"[keys] Skill {names['foreign_key']} in tenant {tenant}" in strict.stdout


# One value of every property type Neo4j stores, for the properties doctor reads.
def _zoo(tag: str) -> dict[str, Any]:
    unique = uuid.uuid4().int % 2**62
    return {
        "list": [f"zoo-{tag}", "x"],
        "int_list": [unique, 1],
        "int": unique,
        "float": unique / 7.0,
        "bool": True,
        "point": CartesianPoint((unique / 3.0, 1.0)),
        "datetime": datetime.now(UTC),
        "duration": Duration(seconds=unique % 100_000),
        "empty": "",
    }


_SKILL_PROPS = ("id", "tenant_id", "namespace", "status", "steps", "action_tool", "label", "active", "context",
                "identifier", "source", "created_at", "symfonic_key", "symfonic_rev", "symfonic_replaced_by",
                "symfonic_write_id")
_TRIGGER_PROPS = ("id", "tenant_id", "namespace", "status", "condition", "task", "created_at", "symfonic_key",
                  "symfonic_write_id", "symfonic_replaced_by")
_PRECONDITION_PROPS = ("tenant_id", "kind", "tool", "path", "op", "value", "text", "symfonic_rev")
_CATALOG_PROPS = ("version", "published_writes", "tenant_id")


async def test_doctor_never_crashes_whatever_the_property_types(
    store: GraphMemoryStore, seeder: Seeder, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    tag = uuid.uuid4().hex
    zoo = _zoo(tag)
    holder = await seeder.node("Skill", _skill(tenant, f"zoo-holder-{tag}"))
    skills: list[dict[str, Any]] = []
    triggers: list[tuple[dict[str, Any], bool]] = []  # (properties, unpublished)
    requires: list[tuple[dict[str, Any], Any]] = []  # (precondition properties, position of its edge)
    catalogs: list[dict[str, Any]] = []
    position = 0
    for kind, value in zoo.items():
        unique_ok = kind not in ("bool", "empty")  # ids and keys are unique: one node per value
        for prop in _SKILL_PROPS:
            if prop in ("id", "symfonic_key") and not unique_ok:
                continue
            props = _skill(tenant, f"zoo-skill-{prop}-{kind}-{tag}", symfonic_key=f"zoo-{prop}-{kind}-{tag}")
            props[prop] = value
            skills.append(props)
        for prop in _TRIGGER_PROPS:
            if prop in ("id", "symfonic_key") and not unique_ok:
                continue
            props = _trigger(tenant, f"zoo-trigger-{prop}-{kind}-{tag}", symfonic_key=f"zoo-t-{prop}-{kind}-{tag}")
            props[prop] = value
            triggers.append((props, prop in ("symfonic_write_id", "symfonic_replaced_by")))
        for prop in _PRECONDITION_PROPS:
            props = {"tenant_id": tenant, "kind": "state", "path": "a", "op": "eq", "value": 1}
            props[prop] = value
            requires.append((props, position))
            position += 1
        requires.append(({"tenant_id": tenant, "kind": "tool", "tool": "t"}, value))
        for prop in _CATALOG_PROPS:
            catalog_tenant = f"zoo-catalog-{prop}-{kind}-{tag}"
            props = {"tenant_id": catalog_tenant, "version": 1, "published_writes": []}
            if prop == "tenant_id" and not unique_ok:
                continue  # the catalog's tenant is unique too
            props[prop] = value
            catalogs.append(props)
    # Written in a few transactions (one per label): each node alone was a commit of its own.
    await seeder.nodes("Skill", skills)
    trigger_eids = await seeder.nodes("Trigger", [props for props, _ in triggers])
    await seeder.cypher("MATCH (t) WHERE elementId(t) IN $eids SET t:SymfonicUnpublished",
                        eids=[eid for eid, (_, unpublished) in zip(trigger_eids, triggers, strict=True) if unpublished])
    precondition_eids = await seeder.nodes("Precondition", [props for props, _ in requires])
    await seeder.cypher(
        "MATCH (s) WHERE elementId(s) = $s UNWIND $edges AS edge MATCH (p) WHERE elementId(p) = edge.p "
        "CREATE (s)-[:REQUIRES {position: edge.position}]->(p)",
        s=holder, edges=[{"p": eid, "position": pos}
                         for eid, (_, pos) in zip(precondition_eids, requires, strict=True)])
    await seeder.nodes("SymfonicCatalog", catalogs)
    # a catalog of the tenant with an unusable list of published writes
    await seeder.node("SymfonicCatalog", {"tenant_id": tenant, "version": 1, "published_writes": "not a list"})

    findings = await diagnose(store, tenant)
    expected = (("bad_skills", f"zoo-skill-status-list-{tag}"), ("bad_triggers", f"zoo-trigger-status-int-{tag}"),
                ("bad_triggers", f"zoo-trigger-namespace-point-{tag}"), ("foreign_preconditions", f"zoo-holder-{tag}"),
                ("keys", f"zoo-skill-label-int-{tag}"))
    for check, node in expected:
        assert [f for f in findings if f.check == check and f.node == node], (check, node)
    # the holder's bad preconditions (or, while the read model fails on an odd `op`, the holder itself)
    assert [f for f in findings if f.check in ("bad_preconditions", "bad_skills") and f.node == f"zoo-holder-{tag}"]
    assert any("published_writes is a STRING" in f.problem for f in findings if f.check == "catalogs")
    everything = await diagnose(store)
    for kind in ("list", "int", "point", "empty"):
        assert any(f.check == "untenanted" and f.node == f"zoo-skill-tenant_id-{kind}-{tag}" for f in everything)
    for args in (("--tenant", tenant), ()):
        proc = run_cli_on(neo4j_settings, "doctor", *args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "" or "Traceback" not in proc.stderr
        assert all(line.startswith("[") for line in proc.stdout.splitlines()), "one finding per line"


async def test_doctor_rejects_a_malformed_tenant(store: GraphMemoryStore, neo4j_settings: Neo4jSettings) -> None:
    with pytest.raises(ScopeError):
        await diagnose(store, "")
    proc = run_cli_on(neo4j_settings, "doctor", "--tenant", "")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


async def test_a_turn_reads_the_cap_doctor_reports(store: GraphMemoryStore, seeder: Seeder, tenant: str) -> None:
    names = await _seed_reported_cases(seeder, tenant)
    memory = TurnMemory(store)
    assert len((await memory.begin(MemoryScope(names["cap"], "n1"))).triggers) == 100, "101 seen, capped at 100"
    assert len((await memory.begin(MemoryScope(names["cap"], "n2"))).triggers) == 100, "exactly at the cap"
