"""Cost isolation: a neighbour's data never costs a turn's trigger read or recall anything.

Cost is counted, never timed: PROFILE db hits and rows of the query a turn or
recall runs. The other tests prove the keys that make this so (migration
0007) never change what is read: plain-Cypher nodes without them are still
read, stale keys only hide, and ``stamp_keys`` (run by ``apply_schema``)
fills them in.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph._store import tenant_token
from symfonic_graph._store.cypher import query
from symfonic_graph.doctor import diagnose
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.recall import recall, recall_search
from tests._recall import yielded

# Every test here seeds plain-Cypher nodes without keys and reads them before or after a database-wide
# stamp_keys: another worker's stamp_keys in between would change what they see, so they run alone.
pytestmark = [pytest.mark.anyio, pytest.mark.schema_change]

PLAIN_TRIGGERS = """
UNWIND range(1, $n) AS i
CREATE (:Trigger {id: $prefix + toString(i), tenant_id: $tenant_id, namespace: $namespace,
                  condition: $word + ' condition ' + toString(i), task: 'remind ' + toString(i),
                  status: 'pending', created_at: datetime()})
"""
PLAIN_FACT = "CREATE (:Fact {id: $id, tenant_id: $tenant_id, namespace: null, text: $text, created_at: datetime()})"


def _profile_totals(plan: dict[str, Any]) -> tuple[int, int]:
    """(db hits, rows) summed over every operator of a PROFILEd plan."""
    hits = int(plan.get("dbHits", plan.get("args", {}).get("DbHits", 0)))
    rows = int(plan.get("rows", plan.get("args", {}).get("Rows", 0)))
    for child in plan.get("children") or []:
        h, r = _profile_totals(child)
        hits, rows = hits + h, rows + r
    return hits, rows


def _procedure_rows(plan: dict[str, Any]) -> list[int]:
    here = []
    if plan["operatorType"].startswith("ProcedureCall"):
        here.append(int(plan.get("rows", plan["args"].get("Rows", 0))))
    return here + [n for child in plan.get("children") or [] for n in _procedure_rows(child)]


async def _profile(store: GraphMemoryStore, name: str, params: dict[str, Any]) -> dict[str, Any]:
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        summary = await (await session.run("PROFILE " + query(name).text, params)).consume()
    assert summary.profile is not None
    return summary.profile


def _scans(plan: dict[str, Any]) -> list[str]:
    here = [plan["operatorType"]] if "Scan" in plan["operatorType"] else []
    return here + [op for child in plan.get("children") or [] for op in _scans(child)]


async def _turn_cost(store: GraphMemoryStore, scope: MemoryScope) -> tuple[int, int]:
    params = {"scopes": [{**scope.params(), "known_version": 0, "write_id": None, "include_drafts": False,
                          "include_retracted": False}], "max_triggers": 100, "now": datetime.now(UTC)}
    plan = await _profile(store, "turn_snapshot_warm", params)
    # a scan (e.g. of every unkeyed trigger of the database) would grow with everyone's data
    assert not _scans(plan), _scans(plan)
    return _profile_totals(plan)


async def _plain_triggers(store: GraphMemoryStore, scope: MemoryScope, n: int, word: str = "plain") -> None:
    await store.driver.execute_query(
        PLAIN_TRIGGERS, {"n": n, "prefix": f"plain-{uuid.uuid4().hex[:8]}-", "word": word, **scope.params()},
        database_=store.database)


async def _tasks(store: GraphMemoryStore, scope: MemoryScope) -> list[str]:
    snapshot = await TurnMemory(store, coalesce_window=None).begin(scope)
    return sorted(t.task for t in snapshot.triggers)


async def test_a_quiet_namespace_turn_costs_the_same_whatever_its_neighbour_holds(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    quiet, busy = MemoryScope(tenant, "u-quiet"), MemoryScope(tenant, "u-busy")
    triggers = ProspectiveLayer(store)
    for i in range(3):
        await triggers.set_trigger(quiet, condition=f"quiet {i}", task=f"quiet task {i}")
        await triggers.set_trigger(MemoryScope(tenant), condition=f"wide {i}", task=f"wide task {i}")
    await triggers.set_trigger(busy, condition="busy 0", task="busy task 0")
    await store.stamp_keys()  # leftovers of other runs must not keep the unkeyed fallback on
    small = await _turn_cost(store, quiet)

    await _plain_triggers(store, busy, 2_000)  # the documented plain-Cypher shape, then stamped
    assert await store.stamp_keys() == 2 * 2_000  # a scope key and a tenant token each
    large = await _turn_cost(store, quiet)
    assert large == small, f"the quiet turn's (db hits, rows) grew from {small} to {large}"
    assert await _tasks(store, quiet) == sorted([f"quiet task {i}" for i in range(3)]
                                                + [f"wide task {i}" for i in range(3)])
    assert len(await _tasks(store, busy)) == 100  # its own and the tenant-wide ones, capped at max_triggers


async def test_unkeyed_plain_cypher_triggers_are_read_reported_and_stamped(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    user, other = MemoryScope(tenant, "u-1"), MemoryScope(tenant, "u-2")
    await ProspectiveLayer(store).set_trigger(user, condition="keyed", task="keyed task")
    await _plain_triggers(store, user, 2)
    await _plain_triggers(store, MemoryScope(tenant), 1)
    await _plain_triggers(store, other, 1)
    expected = ["keyed task", "remind 1", "remind 1", "remind 2"]
    assert await _tasks(store, user) == expected  # the unkeyed ones too, through the fallback
    assert [t.task for t in await ProspectiveLayer(store).get_pending(other)] == ["remind 1", "remind 1"]
    findings = [f for f in await diagnose(store, tenant) if f.check == "trigger_keys"]
    assert len(findings) == 4 and all("no scope key" in f.problem and "schema apply" in f.problem for f in findings)

    await store.apply_schema()  # the operator's fix line: stamps them
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $tenant}) RETURN t.symfonic_scope AS key, t:SymfonicScoped AS scoped, "
        "t.namespace AS namespace", {"tenant": tenant}, database_=store.database)
    assert all(r["scoped"] and r["key"] == tenant + "\u001f" + (r["namespace"] or "") for r in records)
    assert await _tasks(store, user) == expected
    assert not [f for f in await diagnose(store, tenant) if f.check in ("trigger_keys", "tenant_tokens")]


async def test_a_stale_key_never_shows_a_trigger_to_its_old_scope(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    old, new = MemoryScope(tenant, "u-old"), MemoryScope(tenant, "u-new")
    elsewhere = MemoryScope(f"t-{uuid.uuid4().hex}", "u-old")
    forget.append(elsewhere.tenant_id)
    layer = ProspectiveLayer(store)
    moved = await layer.set_trigger(old, condition="c", task="moved with plain Cypher")
    emigrated = await layer.set_trigger(old, condition="c", task="moved to another tenant")
    await layer.set_trigger(old, condition="c", task="stays")
    await store.driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $tenant, id: $moved}) SET t.namespace = 'u-new' "
        "WITH 1 AS one MATCH (t:Trigger {tenant_id: $tenant, id: $emigrated}) SET t.tenant_id = $elsewhere",
        {"tenant": tenant, "moved": moved, "emigrated": emigrated, "elsewhere": elsewhere.tenant_id},
        database_=store.database)
    # the keys still name u-old of this tenant: the post-filter keeps both out of u-old's turn
    assert await _tasks(store, old) == ["stays"]
    assert [t.task for t in await layer.get_pending(old)] == ["stays"]
    assert await _tasks(store, new) == [] and await _tasks(store, elsewhere) == []  # hidden, never leaked
    stale = [f for f in await diagnose(store, tenant) if f.check == "trigger_keys"]
    assert [f.node for f in stale] == [moved] and "another scope" in stale[0].problem

    await store.stamp_keys()
    assert await _tasks(store, old) == ["stays"]
    assert await _tasks(store, new) == ["moved with plain Cypher"]
    assert await _tasks(store, elsewhere) == ["moved to another tenant"]


async def test_stamping_backfills_data_seeded_without_keys_and_is_idempotent(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    scope = MemoryScope(tenant, "u-1")
    await _plain_triggers(store, scope, 3)
    await driver.execute_query(PLAIN_FACT, {"id": "f-1", "tenant_id": tenant, "text": "a plain fact"})
    await driver.execute_query(
        "CREATE (:Skill {id: 's-1', tenant_id: $tenant, namespace: null, label: 'Plain skill', steps: ['a'], "
        "status: 'approved', created_at: datetime()})", {"tenant": tenant})
    # migration 0007 applied again from scratch (its record removed) on this data
    await driver.execute_query("MATCH (m:SymfonicMigration {version: 7}) DETACH DELETE m")
    assert await store.apply_schema() == [7]
    records, _, _ = await driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $tenant AND (n:Skill OR n:Trigger OR n:Fact) "
        "RETURN labels(n) AS labels, n.symfonic_tenant_token AS token, n.symfonic_scope AS key", {"tenant": tenant})
    assert len(records) == 5
    for r in records:
        assert "SymfonicTokened" in r["labels"] and r["token"] == tenant_token(tenant)
        if "Trigger" in r["labels"]:
            assert "SymfonicScoped" in r["labels"] and r["key"] == tenant + "\u001fu-1"
    assert await store.apply_schema() == []
    assert await store.stamp_keys() == 0, "a second run changes nothing"


async def test_recall_in_acme_does_not_read_the_postings_of_acme_eu(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    acme, acme_eu = MemoryScope(f"{tenant}-acme"), MemoryScope(f"{tenant}-acme-eu")
    forget.extend([acme.tenant_id, acme_eu.tenant_id])
    word = "okapi" + tenant[-12:]
    facts = SemanticLayer(store)
    await facts.add_facts(acme, [f"{word} acme fact {i}" for i in range(2)])
    await facts.add_facts(acme_eu, [f"{word} acme-eu fact {i}" for i in range(50)])
    await store.stamp_keys()
    params = {**acme.params(), "write_id": None, "search": recall_search(acme.tenant_id, word),
              "search_unstamped": recall_search(acme.tenant_id, word, unstamped=True),
              "labels": ["Fact", "Skill", "Trigger"], "limit": 10}
    assert _procedure_rows(await _profile(store, "memory_recall", params)) == [2]
    assert sorted(await yielded(driver, recall_search(acme.tenant_id, word))) == [acme.tenant_id] * 2
    assert len(await recall(store, acme, word)) == 2


async def test_a_tenant_id_of_punctuation_only_finds_only_its_own(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    rng = random.Random(tenant)
    ids = ["".join(rng.choice("!#%&*+-=?@^~.,;:") for _ in range(40)) for _ in range(3)]
    forget.extend(ids)
    word = "okapi" + tenant[-12:]
    for tid in ids:
        await SemanticLayer(store).add_facts(MemoryScope(tid), [f"{word} of {tid}"] * 5)
    await store.stamp_keys()
    for tid in ids:
        assert await yielded(driver, recall_search(tid, word)) == [tid] * 5


async def test_plain_cypher_facts_without_a_token_are_recalled_reported_and_stamped(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    scope = MemoryScope(tenant)
    word = "okapi" + tenant[-12:]
    await SemanticLayer(store).add_fact(scope, f"{word} written by the library")
    await driver.execute_query(PLAIN_FACT, {"id": "f-plain", "tenant_id": tenant, "text": f"{word} plain fact"})
    await _plain_triggers(store, scope, 1, word=word)
    expected = [f"[prospective] {word} condition 1 -> remind 1", f"[semantic] {word} plain fact",
                f"[semantic] {word} written by the library"]
    assert sorted(str(h) for h in await recall(store, scope, word)) == expected
    [finding] = [f for f in await diagnose(store, tenant) if f.check == "tenant_tokens"]
    assert finding.problem.startswith("2 skills, triggers or facts without a tenant token")
    assert "schema apply" in finding.problem

    await store.apply_schema()
    assert sorted(str(h) for h in await recall(store, scope, word)) == expected
    assert sorted(await yielded(driver, recall_search(tenant, word))) == [tenant] * 3  # by token alone now
    assert not [f for f in await diagnose(store, tenant) if f.check == "tenant_tokens"]


async def test_a_neighbours_plain_cypher_node_never_changes_a_tenants_recall_query_or_cost(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """One hand-seeded node of any tenant once switched every tenant's recall to the unstamped search."""
    quiet, neighbour = MemoryScope(f"{tenant}-quiet"), MemoryScope(f"{tenant}-hand")
    forget.extend([quiet.tenant_id, neighbour.tenant_id])
    word = "okapi" + tenant[-12:]
    await SemanticLayer(store).add_facts(quiet, [f"{word} quiet fact {i}" for i in range(3)])
    await store.stamp_keys()  # leftovers of other runs must not hold the fallback on for this tenant
    params = {**quiet.params(), "write_id": None, "search": recall_search(quiet.tenant_id, word),
              "search_unstamped": "this search would fail: the quiet tenant has no unstamped node",
              "labels": ["Fact", "Skill", "Trigger"], "limit": 10}
    before = _profile_totals(await _profile(store, "memory_recall", params))

    await driver.execute_query(PLAIN_FACT, {"id": "f-plain", "tenant_id": neighbour.tenant_id,
                                            "text": f"{word} plain fact"})
    for kind in ("Skill", "Trigger"):  # every label recall reads, hand-seeded without a token
        await driver.execute_query(f"CREATE (:{kind} {{id: 'plain', tenant_id: $t, label: $w, condition: $w,"
                                   " task: 'x', status: 'approved'})", {"t": neighbour.tenant_id, "w": word})
    after = _profile_totals(await _profile(store, "memory_recall", params))  # a bad search would raise here
    assert after == before, f"the quiet tenant's recall (db hits, rows) went from {before} to {after}"
    assert sorted(str(h) for h in await recall(store, neighbour, word)) == [  # its own are still found
        f"[procedural] {word}", f"[semantic] {word} plain fact"]
