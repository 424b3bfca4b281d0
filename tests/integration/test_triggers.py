"""Prospective triggers against a real Neo4j: visibility, lifecycle, write paths, audit."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer
from symfonic_graph.shape.contributions import PluginContribution
from symfonic_graph.triggers import (
    GraphPendingTriggers,
    Neo4jSelectionAuditSink,
    PendingTrigger,
    ProspectiveTriggerCapability,
)

pytestmark = pytest.mark.anyio


def contains(condition: str, cue: str) -> bool:
    return condition.lower() in cue.lower()


def req(prompt: str) -> SimpleNamespace:
    return SimpleNamespace(prompt=prompt)


async def seed_plain(store: GraphMemoryStore, tenant: str | None, namespace: str | None, condition: str,
                     task: str, status: str = "pending") -> str:
    """A trigger written by an operator with plain Cypher in the documented graph shape (no library call)."""
    tid = f"seed-{uuid.uuid4().hex}"
    await store.driver.execute_query(
        "CREATE (t:Trigger {id: $id, tenant_id: $tenant_id, namespace: $namespace, condition: $condition, "
        "task: $task, status: $status, created_at: datetime(), resolved_at: null})",
        id=tid, tenant_id=tenant, namespace=namespace, condition=condition, task=task, status=status,
        database_=store.database,
    )
    return tid


async def test_visibility_across_tenants_and_namespaces(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProspectiveLayer(store)
    u1, u2, wide = MemoryScope(tenant, "u1"), MemoryScope(tenant, "u2"), MemoryScope(tenant)
    prefix, longer = MemoryScope(tenant[:-3]), MemoryScope(tenant + "x", "u1")
    t_wide = await layer.set_trigger(wide, condition="c", task="tenant-wide")
    t_u1 = await layer.set_trigger(u1, condition="c", task="u1 only")
    t_u2 = await layer.set_trigger(u2, condition="c", task="u2 only")
    foreign = await layer.set_trigger(longer, condition="c", task="other tenant")
    source = GraphPendingTriggers(store)

    assert [t.trigger_id for t in await source.pending(u1)] == [t_wide, t_u1]
    assert [t.trigger_id for t in await source.pending(u2)] == [t_wide, t_u2]
    assert [t.trigger_id for t in await source.pending(wide)] == [t_wide]
    assert [t.trigger_id for t in await source.pending(MemoryScope(tenant, "u3"))] == [t_wide]
    assert await source.pending(prefix) == []
    assert [t.trigger_id for t in await source.pending(longer)] == [foreign]
    assert await source.pending(MemoryScope(tenant.upper(), "u1")) == []
    assert (await source.pending(u1))[1] == PendingTrigger(t_u1, "c", "u1 only")


async def test_turn_selection_is_scoped(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProspectiveLayer(store)
    await layer.set_trigger(MemoryScope(tenant, "u1"), condition="invoice", task="Remind u1.")
    await layer.set_trigger(MemoryScope(tenant + "-b"), condition="invoice", task="Remind tenant b.")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), contains, MemoryScope(tenant, "u2"))
    assert await cap.contribute(req("my invoice")) == []
    cap_u1 = ProspectiveTriggerCapability(GraphPendingTriggers(store), contains, MemoryScope(tenant, "u1"))
    [c] = await cap_u1.contribute(req("my invoice"))
    assert c.content == "## PENDING REMINDERS\n- Remind u1."


async def test_selection_lifecycle_over_turns(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    tid = await layer.set_trigger(scope, condition="invoice", task="Tell them the invoice is overdue.")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), contains, scope)
    expected = [PluginContribution("## PENDING REMINDERS\n- Tell them the invoice is overdue.",
                                   "dynamic", 20, "", "symfonic.prospective")]

    for _ in range(3):  # selected again on every matching turn: selection is not acknowledgement
        assert await cap.contribute(req("about my Invoice")) == expected
    assert await cap.contribute(req("hello")) == []  # a non-matching turn selects nothing ...
    assert [t.id for t in await layer.get_pending(scope)] == [tid]  # ... and writes nothing
    assert await cap.contribute(req("invoice again")) == expected

    await layer.resolve_trigger(scope, tid)
    for _ in range(2):
        assert await cap.contribute(req("invoice")) == []
    assert await layer.get_pending(scope) == []


async def test_every_write_path_is_read(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    source = GraphPendingTriggers(store)
    via_api = await layer.set_trigger(scope, condition="a", task="from set_trigger")

    staged = await layer.set_trigger(scope, condition="b", task="from a staged write", write_id="w1")
    assert staged not in {t.trigger_id for t in await source.pending(scope)}  # hidden until published
    assert await store.publish(scope, "w1") == 1

    seeded_ns = await seed_plain(store, tenant, "u1", "c", "from plain Cypher")
    seeded_wide = await seed_plain(store, tenant, None, "d", "from plain Cypher, tenant-wide")
    await seed_plain(store, tenant, "u1", "e", "already done", status="resolved")
    await seed_plain(store, None, "u1", "f", "no tenant: visible to nobody")
    await seed_plain(store, tenant, "u2", "g", "someone else's")

    got = {t.trigger_id: t.task for t in await source.pending(scope)}
    assert got == {
        via_api: "from set_trigger",
        staged: "from a staged write",
        seeded_ns: "from plain Cypher",
        seeded_wide: "from plain Cypher, tenant-wide",
    }
    cap = ProspectiveTriggerCapability(source, lambda c, q: True, scope)
    [c] = await cap.contribute(req(""))
    assert c.content.count("\n- ") == 4

    # a resolve through the library works on a hand-seeded trigger too
    await layer.resolve_trigger(scope, seeded_ns)
    assert seeded_ns not in {t.trigger_id for t in await source.pending(scope)}


async def test_discarded_and_retracted_triggers_are_not_offered(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    layer = ProspectiveLayer(store)
    await layer.set_trigger(scope, condition="x", task="staged then discarded", write_id="w2")
    await store.discard(scope, "w2")
    retracted = await layer.set_trigger(scope, condition="x", task="retracted")
    await store.retract(scope, retracted, reason="test")
    source = GraphPendingTriggers(store)
    assert await source.pending(scope) == []
    await store.restore(scope, retracted)
    assert [t.trigger_id for t in await source.pending(scope)] == [retracted]


async def test_hand_seeded_trigger_with_empty_task_is_never_selected(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await seed_plain(store, tenant, None, "x", "")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), lambda c, q: True, scope)
    assert await cap.contribute(req("x")) == []


async def test_audit_sink_records_each_selection(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    t1 = await layer.set_trigger(scope, condition="invoice", task="Say it is overdue.")
    t2 = await layer.set_trigger(MemoryScope(tenant), condition="birthday", task="Congratulate.")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), contains, scope,
                                       sink=Neo4jSelectionAuditSink(store))
    await cap.contribute(req("invoice and birthday"))
    await cap.contribute(req("nothing"))
    await cap.contribute(req("invoice"))

    records, _, _ = await store.driver.execute_query(
        "MATCH (a:SymfonicTriggerSelection) WHERE a.tenant_id = $tenant_id "
        "RETURN a.namespace AS namespace, a.trigger_ids AS ids, a.selected_at AS at ORDER BY a.selected_at",
        tenant_id=tenant, database_=store.database,
    )
    assert [(r["namespace"], sorted(r["ids"])) for r in records] == [("u1", sorted([t1, t2])), ("u1", [t1])]
    assert all(r["at"] is not None for r in records)
    # the audit trail is not memory: the triggers stay pending
    assert len(await layer.get_pending(scope)) == 2


async def test_audit_sink_failure_does_not_break_the_turn(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await ProspectiveLayer(store).set_trigger(scope, condition="x", task="Do it.")

    closed_store = GraphMemoryStore(store.driver, database="no-such-database")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(store), lambda c, q: True, scope,
                                       sink=Neo4jSelectionAuditSink(closed_store))
    [c] = await cap.contribute(req(""))
    assert c.content.endswith("- Do it.")


async def test_graph_source_failure_contributes_nothing(store: GraphMemoryStore, tenant: str) -> None:
    broken = GraphMemoryStore(store.driver, database="no-such-database")
    cap = ProspectiveTriggerCapability(GraphPendingTriggers(broken), lambda c, q: True, MemoryScope(tenant))
    assert await cap.contribute(req("")) == []
