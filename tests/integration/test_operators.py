"""Operators and production: per-tenant ids, atomic scripts, tenants, erasure, identifiers."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph._store.cypher import cypher_root
from symfonic_graph._store.schema import migrations as _migrations
from symfonic_graph.errors import ValidationError
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.recall import recall
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

_ID_CONSTRAINTS = [("Skill", "skill_id_per_tenant", "skill_id"), ("Trigger", "trigger_id_per_tenant", "trigger_id"),
                   ("Fact", "fact_id_per_tenant", "fact_id")]


async def _constraints(driver: neo4j.AsyncDriver) -> set[str]:
    records, _, _ = await driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")
    return set(records[0]["names"])


@pytest.mark.schema_change  # drops and creates constraints of the shared server: under xdist it runs alone
async def test_migration_0006_turns_global_ids_into_per_tenant_ids_on_data_of_the_previous_schema(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    try:
        # The database as the previous release left it: global id constraints, migration 6 not recorded.
        for label, new, old in _ID_CONSTRAINTS:
            await driver.execute_query(f"DROP CONSTRAINT {new} IF EXISTS")
            await driver.execute_query(
                f"CREATE CONSTRAINT {old} IF NOT EXISTS FOR (n:{label}) REQUIRE n.id IS UNIQUE")
        await driver.execute_query("MATCH (m:SymfonicMigration {version: 6}) DELETE m")
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
        for q in next(m.statements for m in _migrations() if m.version == 6):  # whatever failed above, 0006 holds again
            await store._schema_statement(q)


_PREVIOUS_RECALL_INDEX = "symfonic_memory_text_v2"


async def _fulltext_indexes(driver: neo4j.AsyncDriver) -> set[str]:
    records, _, _ = await driver.execute_query("SHOW FULLTEXT INDEXES YIELD name RETURN collect(name) AS names")
    return set(records[0]["names"])


@pytest.mark.schema_change  # creates and drops a full-text index of the shared server: under xdist it runs alone
async def test_the_previous_releases_recall_index_stays_until_the_rollout_is_over(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, neo4j_settings: Neo4jSettings, tenant: str
) -> None:
    scope = MemoryScope(tenant)
    try:
        # The database as this release's rollout finds it: the previous release's recall index, 0008 not recorded.
        await driver.execute_query("MATCH (m:SymfonicMigration {version: 8}) DELETE m")
        for q in next(m.statements for m in _migrations() if m.version == 4):
            await store._schema_statement(q)
        await driver.execute_query("CALL db.awaitIndexes(300)")

        # During the rollout: `schema apply` keeps the index a process of the previous release searches.
        assert await store.apply_schema() == []
        assert await store.waiting_migrations() == [8]
        fact_id = await SemanticLayer(store).add_fact(scope, "the invoice is overdue")
        records, _, _ = await driver.execute_query(
            "CALL db.index.fulltext.queryNodes($index, 'overdue') YIELD node WHERE node.tenant_id = $t "
            "RETURN collect(node.id) AS ids", {"index": _PREVIOUS_RECALL_INDEX, "t": tenant})
        assert records[0]["ids"] == [fact_id], "the previous release's recall still finds what this one writes"
        applied = run_cli_on(neo4j_settings, "schema", "apply")
        assert applied.returncode == 0, applied.stderr
        assert "waiting for the rollout: migrations [8]" in applied.stdout
        assert "symfonic-graph schema apply --after-rollout" in applied.stdout
        status = run_cli_on(neo4j_settings, "schema", "status", "--json")
        assert json.loads(status.stdout)["waiting_for_rollout"] == [8]
        assert _PREVIOUS_RECALL_INDEX in await _fulltext_indexes(driver)
        doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", tenant, "--strict")
        assert doctor.returncode == 0, "a rollout in progress is no problem of the data"
        assert "notice: migrations [8] wait for the end of the rollout" in doctor.stderr, doctor.stderr

        # After it: the index goes, and recall (this release's index) still finds the fact.
        finished = run_cli_on(neo4j_settings, "schema", "apply", "--after-rollout")
        assert (finished.returncode, finished.stdout.strip()) == (0, "applied migrations [8]"), finished.stderr
        assert _PREVIOUS_RECALL_INDEX not in await _fulltext_indexes(driver)
        assert await store.waiting_migrations() == []
        assert [hit.node_id for hit in await recall(store, scope, "overdue")] == [fact_id]
        again = run_cli_on(neo4j_settings, "schema", "apply", "--after-rollout")
        assert again.stdout.strip() == "schema is up to date"
        assert "notice" not in run_cli_on(neo4j_settings, "doctor", "--tenant", tenant).stderr
    finally:
        await store.apply_schema(after_rollout=True)  # whatever failed above, the suite's schema holds again


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
        proc = run_cli_on(neo4j_settings, "skills", "list", "--tenant", t, "--drafts", "--json")
        assert proc.returncode == 0, proc.stderr
        return [(s["id"], s["tenant_id"], s["precondition"]) for s in json.loads(proc.stdout)]

    for script in (first, copy):
        ran = run_cli_on(neo4j_settings, "cypher", "run", str(script))
        assert ran.returncode == 0, ran.stderr
    acme_rules = listed(acme)
    assert [i for i, _, _ in acme_rules] == ["seed-acme-deliver", "seed-acme-schedule", "seed-acme-purge-draft"]
    assert {t for _, t, _ in acme_rules} == {acme}
    assert listed(fabrikam) == [(i, fabrikam, p) for i, _, p in acme_rules]  # same ids, its own nodes

    # the copy's rule changes later: acme keeps its own
    copy.write_text(copy.read_text().replace("value: 'slack'", "value: 'teams'"), encoding="utf-8")
    assert run_cli_on(neo4j_settings, "cypher", "run", str(copy)).returncode == 0
    assert listed(acme) == acme_rules
    assert listed(fabrikam)[0][2] == ["get_integration_status",
                                      {"state": {"path": "channel", "op": "eq", "value": "teams"}}]

    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", fabrikam, "--json")
    copied = [f for f in json.loads(doctor.stdout) if f["check"] == "copied_ids"]
    assert {(f["node"], f["tenant_id"]) for f in copied} == {(i, fabrikam) for i, _, _ in acme_rules}
    assert all(acme in f["problem"] for f in copied)
    text = run_cli_on(neo4j_settings, "doctor", "--tenant", fabrikam).stdout
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
        proc = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant, "--json")
        return [s["id"] for s in json.loads(proc.stdout)]

    proc = run_cli_on(neo4j_settings, "cypher", "run", str(script))
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {script}:3: statement 3 of 3 failed on the server: ")
    assert f"The statement starts: MATCH (s:Skill {{tenant_id: '{tenant}'}})" in line
    assert "Nothing of the script was written" in line
    assert proc.stdout == ""
    assert ids() == []  # nothing of it was written

    per = run_cli_on(neo4j_settings, "cypher", "run", "--per-statement", str(script))
    assert per.returncode == 2 and "Ran 2 statement(s) before it" in per.stderr
    assert sorted(ids()) == ["a", "b"]  # the old behaviour: earlier statements committed


# -- tenants -----------------------------------------------------------------------------------------------


async def test_tenants_list_and_a_notice_for_a_tenant_that_holds_nothing(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(MemoryScope(tenant), label="A", steps=["a"], source_tag="authored:x")
    await layer.seed_authored_skill(MemoryScope(tenant, "user-7"), label="B", steps=["b"], source_tag="authored:x")
    await layer.propose_skill(MemoryScope(tenant), label="D", steps=["d"], source_tag="learned:x")
    await ProspectiveLayer(store).set_trigger(MemoryScope(tenant, "user-8"), condition="c", task="t")

    proc = run_cli_on(neo4j_settings, "tenants", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = [r for r in json.loads(proc.stdout) if r["tenant_id"] == tenant]
    assert row == {"tenant_id": tenant, "namespaces": sorted(row["namespaces"]), "skills": 2, "drafts": 1,
                   "rejected": 0, "triggers": 1, "facts": 0, "catalog_version": row["catalog_version"]}
    assert sorted(row["namespaces"]) == ["user-7", "user-8"] and row["catalog_version"] >= 3
    text = run_cli_on(neo4j_settings, "tenants", "list").stdout
    assert f"{tenant}  namespaces=2  skills=2  drafts=1  rejected=0  triggers=1" in text

    typo = tenant[:-1]
    for command in (["skills", "list"], ["triggers", "list"], ["explain", "--tool", "deliver"], ["doctor"]):
        proc = run_cli_on(neo4j_settings, *command, "--tenant", typo)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == f"notice: tenant {typo!r} holds nothing; did you mean {tenant!r}?\n", command
    proc = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant)
    assert proc.stderr == ""  # a tenant that holds something: no notice


# -- erasure -----------------------------------------------------------------------------------------------

_NAMESPACES = [None, "u1", "u2"]


async def _read_scope(store: GraphMemoryStore, scope: MemoryScope) -> tuple[list[str], list[str], list[str]]:
    skills = sorted(s.label for s in await ProceduralLayer(store).query_skills(scope, include_drafts=True))
    triggers = sorted(t.task for t in await ProspectiveLayer(store).get_pending(scope))
    facts = sorted(f.text for f in await SemanticLayer(store).list_facts(scope))
    return skills, triggers, facts


async def test_erase_against_the_isolation_model(store: GraphMemoryStore, tenant: str, forget: list[str]) -> None:
    """Random namespaces and tenants are erased; every other scope reads exactly what the model expects."""
    rng = random.Random(20)
    tenants = [f"{tenant}-{i}" for i in range(3)]
    forget += tenants
    model: dict[tuple[str, str | None], str] = {}  # scope -> the name of its own nodes
    for t in tenants:
        for ns in _NAMESPACES:
            scope, name = MemoryScope(t, ns), f"{t}/{ns}"
            await ProceduralLayer(store).seed_authored_skill(
                scope, label=name, identifier="rule", steps=["deliver"], source_tag="authored:x",
                precondition=["check", {"state": {"path": "a", "op": "eq", "value": 1}}])
            await ProspectiveLayer(store).set_trigger(scope, condition="c", task=name)
            await SemanticLayer(store).add_fact(scope, name)
            model[(t, ns)] = name

    def expected(t: str, ns: str | None) -> tuple[list[str], list[str], list[str]]:
        own = sorted(model[k] for k in ((t, None), (t, ns)) if k in model and (k[1] is None or ns is not None))
        own = sorted(set(own))
        return own, own, own

    erasures = [(t, ns) for t in tenants[:2] for ns in ("u1", "u2")]
    rng.shuffle(erasures)
    steps = [*erasures[:3], (tenants[1], None)]  # three namespaces, then one whole tenant
    for t, ns in steps:
        counts = await store.erase(MemoryScope(t, ns), batch_size=2)
        if ns is None:
            gone = [k for k in model if k[0] == t]
            assert counts["SymfonicCatalog"] == 1
        else:
            gone = [(t, ns)] if (t, ns) in model else []
        assert counts["Skill"] == counts["Trigger"] == counts["Fact"] == len(gone), (t, ns, counts)
        assert counts["Precondition"] == 2 * len(gone)
        for key in gone:
            del model[key]
        for t2 in tenants:
            for ns2 in _NAMESPACES:
                assert await _read_scope(store, MemoryScope(t2, ns2)) == expected(t2, ns2), (t, ns, t2, ns2)
    records, _, _ = await store.driver.execute_query(
        "UNWIND $ts AS t CALL (t) { MATCH (n {tenant_id: t}) WHERE NOT n:SymfonicErasure RETURN count(n) AS c } "
        "RETURN sum(c) AS nodes", {"ts": [tenants[1]]})
    assert records[0]["nodes"] == 0  # nothing of the erased tenant is left, catalog included (only its receipts)


async def test_tenants_erase_cli_refuses_without_yes_and_reports_counts(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    wide, user = MemoryScope(tenant), MemoryScope(tenant, "user-7")
    await ProceduralLayer(store).seed_authored_skill(wide, label="W", steps=["w"], source_tag="authored:x")
    await ProceduralLayer(store).seed_authored_skill(user, label="U", steps=["u"], source_tag="authored:x",
                                                     precondition=["p"])
    refused = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--namespace", "user-7")
    assert refused.returncode == 2 and "add --yes to confirm" in refused.stderr
    assert len(await ProceduralLayer(store).query_skills(user)) == 2
    done = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--namespace", "user-7", "--yes",
                      "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"] == {"Skill": 1, "Precondition": 1, "Trigger": 0, "Fact": 0,
                                                 "SymfonicTriggerSelection": 0}
    assert [s.label for s in await ProceduralLayer(store).query_skills(user)] == ["W"]
    whole = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", tenant, "--yes")
    assert whole.stdout.startswith(f"erased tenant {tenant} (whole): 2 node(s) (Skill 1, SymfonicCatalog 1)")


# -- identifiers ---------------------------------------------------------------------------------------------


async def test_retract_and_restore_take_an_identifier_inside_the_scope(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    layer = ProceduralLayer(store)
    wide, user = MemoryScope(tenant), MemoryScope(tenant, "user-7")
    skill = await layer.seed_authored_skill(wide, label="Deliver", identifier="deliver", steps=["deliver"],
                                            source_tag="authored:x")
    listed = run_cli_on(neo4j_settings, "skills", "list", "--tenant", tenant).stdout
    assert f"{skill.id}  identifier=deliver  namespace=(tenant-wide)  approved" in listed

    refused = run_cli_on(neo4j_settings, "retract", "deliver", "--tenant", tenant, "--namespace", "user-7")
    assert refused.returncode == 2
    assert (f"belongs to tenant {tenant} (tenant-wide); tenant {tenant}, namespace user-7 sees it but cannot "
            "change it") in refused.stderr
    assert "MemoryScope(" not in refused.stderr and "None" not in refused.stderr
    done = run_cli_on(neo4j_settings, "retract", "deliver", "--tenant", tenant)
    assert done.stdout.strip() == f"retracted {skill.id} (identifier deliver)"
    assert await layer.query_skills(wide) == []
    assert await store.restore(wide, "deliver") == skill.id
    assert [s.id for s in await layer.query_skills(user)] == [skill.id]

    # an identifier naming two nodes of the scope (the live skill and its draft) changes nothing
    draft = await layer.propose_skill(wide, label="Deliver v2", identifier="deliver", steps=["deliver"],
                                      source_tag="learned:x")
    with pytest.raises(ValidationError, match="names 2 nodes"):
        await store.retract(wide, "deliver")
    assert {s.id for s in await layer.query_skills(wide, include_drafts=True)} == {skill.id, draft.id}
    missing = run_cli_on(neo4j_settings, "restore", "nothing-here", "--tenant", tenant)
    assert missing.returncode == 2 and f"visible in tenant {tenant} (tenant-wide)" in missing.stderr


# -- seed counts -----------------------------------------------------------------------------------------------


async def test_seed_prints_created_updated_unchanged_and_plan_writes_nothing(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tmp_path: Path, tenant: str, forget: list[str]
) -> None:
    path = tmp_path / "seed.yaml"

    def write(label: str) -> None:
        path.write_text(f"tenant: {tenant}\nskills:\n"
                        f"  - {{label: {label}, identifier: a, steps: [a], source_tag: 'authored:x'}}\n"
                        "  - {label: B, identifier: b, steps: [b], source_tag: 'authored:x', precondition: [p]}\n"
                        "triggers:\n  - {condition: c, task: t}\n", encoding="utf-8")

    write("A")
    plan = run_cli_on(neo4j_settings, "seed", "--plan", str(path))
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip() == (f"plan for tenant {tenant} (tenant-wide): skills: 2 created, 0 updated, "
                                   "0 unchanged; triggers: 1 created, 0 updated, 0 unchanged (nothing written)")
    assert await ProceduralLayer(store).query_skills(MemoryScope(tenant)) == []  # the plan wrote nothing
    assert await store.catalog_version(MemoryScope(tenant)) == 0
    first = run_cli_on(neo4j_settings, "seed", str(path))
    assert "skills: 2 created, 0 updated, 0 unchanged; triggers: 1 created" in first.stdout
    assert f"notice: tenant {tenant!r} holds nothing yet: this seed creates it" in first.stderr
    write("A2")
    planned = json.loads(run_cli_on(neo4j_settings, "seed", "--plan", "--json", str(path)).stdout)
    assert planned[0]["changes"] == {"skills": {"created": 0, "updated": 1, "unchanged": 1},
                                     "triggers": {"created": 0, "updated": 0, "unchanged": 1}}
    assert sorted(s.label for s in await ProceduralLayer(store).query_skills(MemoryScope(tenant))) == ["A", "B"]
    second = run_cli_on(neo4j_settings, "seed", str(path))
    assert "skills: 0 created, 1 updated, 1 unchanged; triggers: 0 created, 0 updated, 1 unchanged" in second.stdout


# -- smaller ones ----------------------------------------------------------------------------------------------


async def test_smoke_leaves_nothing_behind(neo4j_settings: Neo4jSettings, store: GraphMemoryStore) -> None:
    proc = run_cli_on(neo4j_settings, "smoke")
    assert proc.returncode == 0, proc.stderr
    smoke_tenant = proc.stdout.split(" in tenant ")[1].split(":")[0]
    [row] = await store.read("tenant_holds", tenant_id=smoke_tenant)
    assert row["holds"] is False


def test_an_unknown_database_is_one_typed_line_naming_it(neo4j_settings: Neo4jSettings) -> None:
    settings = Neo4jSettings(neo4j_settings.uri, neo4j_settings.user, neo4j_settings.password, "no-such-db")
    proc = run_cli_on(settings, "skills", "list", "--tenant", "acme")
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: database 'no-such-db' does not exist on bolt://"), line
    assert "NEO4J_DATABASE" in line


def test_version_flag() -> None:
    from importlib.metadata import version

    proc = subprocess.run([sys.executable, "-m", "symfonic_graph.cli", "--version"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == f"symfonic-graph {version('symfonic-graph')}"
