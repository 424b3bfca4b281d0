"""Operators and production (SPEC §14): per-tenant ids, atomic scripts, tenants, erasure, identifiers."""

from __future__ import annotations

import json
from pathlib import Path

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph._cypher import cypher_root
from tests.conftest import Neo4jSettings
from tests.integration.test_cli import _cli

pytestmark = pytest.mark.anyio

_ID_CONSTRAINTS = [("Skill", "skill_id_per_tenant", "skill_id"), ("Trigger", "trigger_id_per_tenant", "trigger_id"),
                   ("Fact", "fact_id_per_tenant", "fact_id")]


async def _constraints(driver: neo4j.AsyncDriver) -> set[str]:
    records, _, _ = await driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")
    return set(records[0]["names"])


async def test_migration_0006_turns_global_ids_into_per_tenant_ids_on_data_of_the_previous_schema(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    # The database as the previous release left it: global id constraints, migration 6 not recorded.
    for label, new, old in _ID_CONSTRAINTS:
        await driver.execute_query(f"DROP CONSTRAINT {new} IF EXISTS")
        await driver.execute_query(f"CREATE CONSTRAINT {old} IF NOT EXISTS FOR (n:{label}) REQUIRE n.id IS UNIQUE")
    await driver.execute_query("MATCH (m:SymfonicMigration {version: 6}) DELETE m")
    try:
        scope = MemoryScope(tenant)
        skill = await ProceduralLayer(store).seed_authored_skill(
            scope, label="Deliver", identifier="deliver", steps=["deliver"], source_tag="authored:ops",
            precondition=["get_status"])
        await driver.execute_query(
            "CREATE (:Trigger {id: $id, tenant_id: $t, condition: 'c', task: 'x', status: 'pending', "
            "created_at: datetime()})", {"id": f"old-{tenant}", "t": tenant})
        other = f"{tenant}-other"
        forget.append(other)
        with pytest.raises(neo4j.exceptions.ConstraintError):  # the previous schema: one id for all tenants
            await driver.execute_query("CREATE (:Skill {id: $id, tenant_id: $t})", {"id": skill.id, "t": other})

        assert await store.apply_schema() == [6]
        assert await store.apply_schema() == []  # idempotent
        names = await _constraints(driver)
        assert {new for _, new, _ in _ID_CONSTRAINTS} <= names
        assert not {old for _, _, old in _ID_CONSTRAINTS} & names
        [read] = await ProceduralLayer(store).query_skills(scope)  # existing data keeps working
        assert (read.id, read.metadata["precondition"]) == (skill.id, ["get_status"])
        assert [t.id for t in await ProspectiveLayer(store).get_pending(scope)] == [f"old-{tenant}"]
        await driver.execute_query("CREATE (:Skill {id: $id, tenant_id: $t})", {"id": skill.id, "t": other})
        with pytest.raises(neo4j.exceptions.ConstraintError):  # still unique inside one tenant
            await driver.execute_query("CREATE (:Skill {id: $id, tenant_id: $t})", {"id": skill.id, "t": other})
    finally:
        await driver.execute_query("MATCH (n:Skill {tenant_id: $t}) DETACH DELETE n", {"t": f"{tenant}-other"})
        await store.apply_schema()


def _tenant_literals(text: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        text = text.replace(f"'{old}'", f"'{new}'")
    return text


async def test_a_seed_script_copied_for_another_tenant_leaves_the_first_tenants_rules(
    neo4j_settings: Neo4jSettings, tmp_path: Path, tenant: str, forget: list[str]
) -> None:
    acme, globex, fabrikam = tenant, f"{tenant}-globex", f"{tenant}-fabrikam"
    forget += [globex, fabrikam]
    shipped = (cypher_root() / "seeds" / "01_two_tenants_skills.cypher").read_text(encoding="utf-8")
    first = tmp_path / "acme.cypher"
    first.write_text(_tenant_literals(shipped, {"acme": acme, "globex": globex}), encoding="utf-8")
    copy = tmp_path / "fabrikam.cypher"  # the operator's copy: only the tenant id changed
    copy.write_text(_tenant_literals(first.read_text(), {acme: fabrikam}), encoding="utf-8")

    def listed(t: str) -> list[tuple[str, str, object]]:
        proc = _cli(neo4j_settings, "skills", "list", "--tenant", t, "--drafts", "--json")
        assert proc.returncode == 0, proc.stderr
        return [(s["id"], s["tenant_id"], s["precondition"]) for s in json.loads(proc.stdout)]

    for script in (first, copy):
        ran = _cli(neo4j_settings, "cypher", "run", str(script))
        assert ran.returncode == 0, ran.stderr
    acme_rules = listed(acme)
    assert [i for i, _, _ in acme_rules] == ["seed-acme-deliver", "seed-acme-schedule", "seed-acme-purge-draft"]
    assert {t for _, t, _ in acme_rules} == {acme}
    assert listed(fabrikam) == [(i, fabrikam, p) for i, _, p in acme_rules]  # same ids, its own nodes

    # the copy's rule changes later: acme keeps its own
    copy.write_text(copy.read_text().replace("value: 'slack'", "value: 'teams'"), encoding="utf-8")
    assert _cli(neo4j_settings, "cypher", "run", str(copy)).returncode == 0
    assert listed(acme) == acme_rules
    assert listed(fabrikam)[0][2] == ["get_integration_status",
                                      {"state": {"path": "channel", "op": "eq", "value": "teams"}}]

    doctor = _cli(neo4j_settings, "doctor", "--tenant", fabrikam, "--json")
    copied = [f for f in json.loads(doctor.stdout) if f["check"] == "copied_ids"]
    assert {(f["node"], f["tenant_id"]) for f in copied} == {(i, fabrikam) for i, _, _ in acme_rules}
    assert all(acme in f["problem"] for f in copied)
    text = _cli(neo4j_settings, "doctor", "--tenant", fabrikam).stdout
    assert f"[copied_ids] Skill seed-acme-deliver in tenant {fabrikam} (tenant-wide): " in text


async def test_cypher_run_is_all_or_nothing_and_names_the_failing_statement(
    neo4j_settings: Neo4jSettings, tmp_path: Path, tenant: str, forget: list[str]
) -> None:
    script = tmp_path / "three.cypher"
    script.write_text(
        f"CREATE (:Skill {{tenant_id: '{tenant}', id: 'a', label: 'A', status: 'approved', steps: ['a']}});\n"
        f"CREATE (:Skill {{tenant_id: '{tenant}', id: 'b', label: 'B', status: 'approved', steps: ['b']}});\n"
        f"MATCH (s:Skill {{tenant_id: '{tenant}'}})\nSET s.label = nonsense(;\n", encoding="utf-8")

    def ids() -> list[str]:
        proc = _cli(neo4j_settings, "skills", "list", "--tenant", tenant, "--json")
        return [s["id"] for s in json.loads(proc.stdout)]

    proc = _cli(neo4j_settings, "cypher", "run", str(script))
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {script}:3: statement 3 of 3 failed on the server: ")
    assert f"The statement starts: MATCH (s:Skill {{tenant_id: '{tenant}'}})" in line
    assert "Nothing of the script was written" in line
    assert proc.stdout == ""
    assert ids() == []  # nothing of it was written

    per = _cli(neo4j_settings, "cypher", "run", "--per-statement", str(script))
    assert per.returncode == 2 and "Ran 2 statement(s) before it" in per.stderr
    assert sorted(ids()) == ["a", "b"]  # the old behaviour: earlier statements committed
