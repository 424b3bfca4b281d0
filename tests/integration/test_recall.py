"""Generic recall against a real Neo4j: layers, policy, visibility."""

from __future__ import annotations

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, SemanticLayer
from symfonic_graph.recall import MemoryLayer, RetrievalPolicy, recall, recall_policy_for
from symfonic_graph.triggers import GraphPendingTriggers, prospective_trigger_capabilities

pytestmark = pytest.mark.anyio


async def lines(store: GraphMemoryStore, scope: MemoryScope, query: str,
                policy: RetrievalPolicy | None = None, **kw: object) -> list[str]:
    return sorted(str(h) for h in await recall(store, scope, query, policy, **kw))  # type: ignore[arg-type]


async def seed(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProspectiveLayer(store).set_trigger(scope, condition="user mentions the zanzibar invoice",
                                              task="Tell them the zanzibar invoice is overdue.")
    await SemanticLayer(store).add_fact(scope, "Zanzibar invoices are due on the 5th.")
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Send the zanzibar invoice", steps=["send_invoice"], source_tag="authored:billing")


async def test_default_policy_surfaces_every_layer(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    await seed(store, scope)
    assert await lines(store, scope, "zanzibar") == [
        "[procedural] Send the zanzibar invoice",
        "[prospective] user mentions the zanzibar invoice -> Tell them the zanzibar invoice is overdue.",
        "[semantic] Zanzibar invoices are due on the 5th.",
    ]


async def test_policy_for_trigger_capability_hides_the_reminder(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    await seed(store, scope)
    capabilities = prospective_trigger_capabilities(GraphPendingTriggers(store), lambda c, q: False, scope)
    policy = recall_policy_for(capabilities)
    got = await lines(store, scope, "zanzibar invoice", policy)
    assert got == ["[procedural] Send the zanzibar invoice", "[semantic] Zanzibar invoices are due on the 5th."]
    assert not any(line.startswith("[prospective]") for line in got)
    # without the capability nothing changes
    assert recall_policy_for([]) is None
    assert len(await lines(store, scope, "zanzibar", recall_policy_for([]))) == 3


async def test_policy_limits_layers(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await seed(store, scope)
    only_facts = RetrievalPolicy(frozenset({MemoryLayer.SEMANTIC}))
    assert await lines(store, scope, "zanzibar", only_facts) == ["[semantic] Zanzibar invoices are due on the 5th."]
    no_backing = RetrievalPolicy(frozenset({MemoryLayer.EPISODIC, MemoryLayer.WORKING}))
    assert await recall(store, scope, "zanzibar", no_backing) == []


async def test_recall_never_leaks_other_tenants_or_namespaces(store: GraphMemoryStore, tenant: str) -> None:
    await seed(store, MemoryScope(tenant + "-other"))
    await seed(store, MemoryScope(tenant[:-2]))
    await seed(store, MemoryScope(tenant, "u2"))
    await SemanticLayer(store).add_fact(MemoryScope(tenant), "Tenant-wide zanzibar fact.")
    assert await lines(store, MemoryScope(tenant, "u1"), "zanzibar") == ["[semantic] Tenant-wide zanzibar fact."]
    assert await lines(store, MemoryScope(tenant), "zanzibar") == ["[semantic] Tenant-wide zanzibar fact."]
    assert len(await lines(store, MemoryScope(tenant, "u2"), "zanzibar")) == 4


async def test_recall_respects_markers_status_and_staging(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    prospective, procedural = ProspectiveLayer(store), ProceduralLayer(store)
    resolved = await prospective.set_trigger(scope, condition="quokka", task="resolved quokka task")
    await prospective.resolve_trigger(scope, resolved)
    retracted = await SemanticLayer(store).add_fact(scope, "Retracted quokka fact.")
    await store.retract(scope, retracted, reason="wrong")
    await procedural.propose_skill(scope, label="Draft quokka skill", steps=["x"], source_tag="proposed:test")
    await SemanticLayer(store).add_fact(scope, "Staged quokka fact.", write_id="w1")
    assert await recall(store, scope, "quokka") == []
    assert await lines(store, scope, "quokka", write_id="w1") == ["[semantic] Staged quokka fact."]
    await store.publish(scope, "w1")
    assert await lines(store, scope, "quokka") == ["[semantic] Staged quokka fact."]


async def test_hostile_query_text_is_literal(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await SemanticLayer(store).add_fact(scope, "The wombat (v2) costs $5?")
    for text in ['wombat" OR tenant_id:*', "wombat) AND (", "*", "NOT wombat", "wombat~", "\\", "[a TO z]",
                 "wombat' }) MATCH (n) DETACH DELETE n //", "   "]:
        hits = await recall(store, scope, text)
        assert all(h.layer is MemoryLayer.SEMANTIC for h in hits)
    assert await lines(store, scope, "NOT wombat") == ["[semantic] The wombat (v2) costs $5?"]
    assert await recall(store, scope, "") == []


async def test_limit_and_order(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    for i in range(5):
        await SemanticLayer(store).add_fact(scope, f"capybara fact {i}" + " capybara" * i)
    hits = await recall(store, scope, "capybara", limit=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with pytest.raises(ValueError, match="limit"):
        await recall(store, scope, "capybara", limit=0)
