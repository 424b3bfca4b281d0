"""Generic recall against a real Neo4j: layers, policy, visibility, the tenant inside the search.

Every test works in fresh tenant ids and deletes their nodes afterwards
(``forget``), so nothing it wrote is left for other tests to see.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import neo4j
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph._store.cypher import query
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.recall import (
    MAX_TERMS,
    MemoryLayer,
    RetrievalPolicy,
    recall,
    recall_policy_for,
    recall_search,
)
from symfonic_graph.triggers import GraphPendingTriggers, prospective_trigger_capabilities
from tests._recall import word, yielded

pytestmark = pytest.mark.anyio

@pytest.fixture(autouse=True)
async def _clean(forget: list[str]) -> None:
    """Every test of this module cleans up after itself."""


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


async def test_recall_never_leaks_other_tenants_or_namespaces(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    forget += [tenant + "-other", tenant[:-2]]
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


def _procedure_rows(plan: dict[str, Any]) -> list[int]:
    """Rows produced by each ProcedureCall operator of a PROFILEd plan."""
    here = []
    if plan["operatorType"].startswith("ProcedureCall"):
        here.append(int(plan.get("rows", plan["args"].get("Rows", 0))))
    return here + [n for child in plan.get("children") or [] for n in _procedure_rows(child)]


async def test_the_tenant_clause_is_inside_the_full_text_search(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    neighbour = MemoryScope(f"t-{uuid.uuid4().hex}")  # shares no token with `tenant`
    forget.append(neighbour.tenant_id)
    term = word(tenant)
    await SemanticLayer(store).add_facts(MemoryScope(tenant), [f"{term} fact {i}" for i in range(2)])
    await SemanticLayer(store).add_facts(neighbour, [f"{term} neighbour fact {i}" for i in range(40)])

    # the Lucene query recall sends yields only the tenant's nodes, not the neighbour's 40 matches
    search = recall_search(tenant, term)
    assert sorted(await yielded(driver, search)) == [tenant, tenant]
    # the same user terms without the tenant clause (as recall searched before it filtered on the tenant)
    # yield both tenants
    terms_only = search.split(" +", 1)[1]
    assert len(await yielded(driver, terms_only)) == 42

    # PROFILE of the recall query itself: the procedure hands Cypher 2 rows, not 42
    params = {"tenant_id": tenant, "namespace": None, "write_id": None, "search": search, "search_unstamped": search,
              "labels": ["Fact", "Skill", "Trigger"], "limit": 10}
    async with driver.session(database=store.database, notifications_min_severity="OFF") as session:
        summary = await (await session.run("PROFILE " + query("memory_recall").text, params)).consume()
    assert summary.profile is not None
    assert _procedure_rows(summary.profile) == [2]
    assert len(await recall(store, MemoryScope(tenant), term)) == 2
    assert len(await recall(store, neighbour, term)) == 10  # limit


TENANT_SHAPES = [
    pytest.param("{t}", id="uuid-like"),
    pytest.param("{t}.eu", id="dotted"),
    pytest.param("{t}-eu", id="hyphen-suffix"),
    pytest.param("ACME-{t}", id="upper-case"),
    pytest.param("acme-{t}", id="lower-case-twin"),
    pytest.param("{t} ünïcødé 日本語テナント 🧠", id="unicode"),
    pytest.param('{t}"quoted\\back\\slash"', id="quote-backslash"),
    pytest.param("{t} AND tenant_id:* OR (x)^9", id="lucene-syntax"),
    pytest.param("user@{t}.example.com", id="email"),
    pytest.param("{t}" + "x" * (512 - len("t-") - 32), id="512-chars"),
]


async def test_tenant_ids_with_punctuation_never_lose_their_rows(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """Lucene tokenises tenant ids; the required clause narrows, the Cypher equality decides."""
    ids = [str(p.values[0]).format(t=tenant) for p in TENANT_SHAPES]
    forget.extend(ids)
    term = word(tenant)
    facts = SemanticLayer(store)
    for tid in ids:
        await facts.add_fact(MemoryScope(tid), f"{term} belongs to {tid}")
    for tid in ids:
        assert tid in await yielded(driver, recall_search(tid, term)), tid  # never drops its own row
        assert await lines(store, MemoryScope(tid), term) == [f"[semantic] {term} belongs to {tid}"], tid


async def test_tenant_id_without_letters_or_digits_searches_only_its_own(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """Such an id has a token like any other: the search yields its own node only."""
    punct = "".join(random.choice("!#%&*+-=?@^~.,;:") for _ in range(48))
    forget.append(punct)
    term = word(tenant)
    await SemanticLayer(store).add_fact(MemoryScope(punct), f"{term} punctuation tenant")
    await SemanticLayer(store).add_fact(MemoryScope(tenant), f"{term} plain tenant")
    assert await yielded(driver, recall_search(punct, term)) == [punct]
    assert await lines(store, MemoryScope(punct), term) == [f"[semantic] {term} punctuation tenant"]
    assert await lines(store, MemoryScope(tenant), term) == [f"[semantic] {term} plain tenant"]


def _pasted_json(term: str) -> str:
    """About 3 KB of pasted JSON with 400 distinct words: raised TooManyClauses when recall searched
    every word at once."""
    message = {"role": "user", "content": f"please check {term} " + " ".join(f"word{i}" for i in range(400))}
    return json.dumps(message)


HOSTILE_QUERIES = [
    pytest.param("json", id="3KB-json"),
    pytest.param("", id="empty"),
    pytest.param("   \n\t ", id="blank"),
    pytest.param('{term}" OR tenant_id:* OR "', id="quote-injection"),
    pytest.param("+-&&||!(){{}}[]^\"~*?:\\/", id="lucene-specials-only"),
    pytest.param("{term}~2 {term}* {term}^10 /{term}/ [a TO z] NOT AND OR", id="lucene-operators"),
    pytest.param("tenant_id:{tenant}", id="field-targeting"),
    pytest.param("{term}\x00\x1b\u202e", id="control-chars"),
]


@pytest.mark.parametrize("raw", HOSTILE_QUERIES)
async def test_hostile_query_text_gives_results_not_errors(
    store: GraphMemoryStore, tenant: str, forget: list[str], raw: str
) -> None:
    scope, term = MemoryScope(tenant), word(tenant)
    other = MemoryScope(tenant + "-victim")
    forget.append(other.tenant_id)
    await SemanticLayer(store).add_fact(scope, f"The {term} is a forest giraffe.")
    await SemanticLayer(store).add_fact(other, f"Victim {term} fact {tenant}.")
    text = _pasted_json(term) if raw == "json" else raw.format(term=term, tenant=tenant)
    got = await lines(store, scope, text)
    assert got in ([], [f"[semantic] The {term} is a forest giraffe."])
    if term in text:
        assert got, "the tenant's matching fact must be found"


async def test_hostile_arguments_raise_typed_errors_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"query": "lone \ud800 surrogate"}, "query"),
        ({"query": b"bytes"}, "query"),
        ({"query": None}, "query"),
        ({"query": "x", "limit": 2**63}, "limit"),
        ({"query": "x", "limit": -(2**63)}, "limit"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": True}, "limit"),
        ({"query": "x", "limit": 1.5}, "limit"),
        ({"query": "x", "policy": "semantic"}, "policy"),
        ({"query": "x", "write_id": "\udfff"}, "write_id"),
        ({"query": "x", "write_id": 2**63}, "write_id"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as caught:
            await recall(store, scope, **kwargs)
        assert caught.value.field == field, kwargs
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, SymfonicGraphError)


async def test_long_text_searches_its_first_terms(store: GraphMemoryStore, tenant: str) -> None:
    """Only the first MAX_TERMS distinct terms of a long text are searched (documented cap)."""
    scope, term = MemoryScope(tenant), word(tenant)
    await SemanticLayer(store).add_fact(scope, f"The {term} lives in the Congo.")
    filler = [f"filler{i}" for i in range(MAX_TERMS)]
    assert await recall(store, scope, " ".join([*filler[1:], term]))  # term number MAX_TERMS: searched
    assert await recall(store, scope, " ".join([*filler, term])) == []  # term number MAX_TERMS + 1: ignored
    assert await recall(store, scope, " ".join([term, *(f"w{i}" for i in range(20_000))]))
