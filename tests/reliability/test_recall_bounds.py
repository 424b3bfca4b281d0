"""Recall under hostile input and a noisy neighbour, against a real Neo4j.

* Hostile text, arguments and tenant ids through ``recall``: the only
  acceptable outcomes are hits of the caller's own scope, or a typed error
  (``ValidationError``/``ScopeError``, both ``ValueError``s) naming the field.
  Never a raw driver, encoding or overflow exception.
* The tenant clause is inside the full-text search: however many matching
  nodes another tenant holds, the procedure hands Cypher only the caller's
  rows (counted with PROFILE, no timings).

Every test works in fresh tenant ids and deletes their nodes afterwards.
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
    ScopeError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph._store.cypher import query
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.recall import MAX_TERMS, RetrievalPolicy, recall, recall_search
from tests._recall import word, yielded

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

# -- hostile text ---------------------------------------------------------------

LUCENE = [
    "*", "?", "*:*", "tenant_id:*", "+tenant_id:x", "-tenant_id:x", "text:/.*/", "/regex/", "a~", "a~2", "a^10",
    "a^-1", "[a TO z]", "{a TO z}", "\"unterminated", "unbalanced)", "((((", "))))", "a && b || !c", "NOT", "AND",
    "OR", "TO", "\\", "\\\\", "\\\"", "\"\\", "a:b:c", ":", "a*b?c", "\"a b\"~5", "_exists_:text", "+", "-", "!",
    "^", "~", "&&", "||", "^0", "\"\"", "\"\" \"\"", "tenant_id:\"t\"^0 +(text:(x))",
]
INJECTION = [
    "x' }) MATCH (n) DETACH DELETE n //", 'x"}) MATCH (n) DETACH DELETE n //', "$tenant_id", "${search}",
    "') YIELD node RETURN node //", "CALL db.index.fulltext.queryNodes('symfonic_memory_text', '*')",
]
UNICODE = [
    "é", "e\u0301", "日本語のテキスト", "🙂🧠", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u202eevil", "\u200b",
    "\ufeff", "\U0010ffff", "\ufffd", "ǅ", "İ", "ß", "ﬃ", "\u0301", "צה\"ל", "\u3000", "\u00a0", "٣٤٥",
]
CONTROL = ["\x00", "a\x00b", "\x1b[31mred\x1b[0m", "\x7f", "\x85", "\x0c", "line1\nline2\r\n"]
BLANK = ["", " ", "   ", "\n\t", "\u3000"]


def _large(term: str) -> list[str]:
    words = " ".join(f"w{i}" for i in range(100_000))
    return [
        json.dumps({"role": "user", "content": f"{term} " + " ".join(f"word{i}" for i in range(400))}),  # ~3 KB
        json.dumps([{"id": i, "note": f"line {i} of a pasted log"} for i in range(2_000)]),  # ~80 KB, minified
        f"{term} " + words,  # 100,000 distinct words
        "a" * 1_000_000,  # one 1 MB word
        f"{term} " + "-" * 1_000_000,  # 1 MB of a Lucene operator
        f"{term} " + ("x' OR 1=1 // " * 80_000),
    ]


SURROGATES = ["\ud800", "a\udfffb", "🧠\udbff", "x" * 5000 + "\ud800"]


async def test_hostile_text_gives_own_hits_or_a_typed_error(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    scope, victim = MemoryScope(tenant, "u1"), MemoryScope(f"t-{uuid.uuid4().hex}")
    forget.append(victim.tenant_id)
    term = word(tenant)
    own = {
        await SemanticLayer(store).add_fact(scope, f"The {term} is a forest giraffe (*:* NOT) [a TO z]."),
        await ProspectiveLayer(store).set_trigger(scope, condition=f"{term} is mentioned", task="Say it is shy."),
        (await ProceduralLayer(store).seed_authored_skill(
            MemoryScope(tenant), label=f"Feed the {term}", steps=["feed"], source_tag="authored:zoo")).id,
    }
    for text in [term, *LUCENE, *UNICODE, *BLANK]:
        await SemanticLayer(store).add_fact(victim, f"victim {term} {text}".strip())

    values = [*LUCENE, *INJECTION, *UNICODE, *CONTROL, *BLANK, *_large(term)]
    values += [f"{term} {v}" for v in [*LUCENE, *INJECTION, *UNICODE, *CONTROL]]
    outcomes = {"hits": 0, "empty": 0}
    for text in values:
        hits = await recall(store, scope, text, limit=1000)
        assert {h.node_id for h in hits} <= own, repr(text[:80])
        outcomes["hits" if hits else "empty"] += 1
        if text.startswith(term + " ") and len(text.split()) <= MAX_TERMS:
            assert len(hits) == 3, repr(text[:80])  # the tenant's own matches are never lost
    assert outcomes["hits"] >= len(LUCENE) + len(INJECTION)

    for text in SURROGATES:
        with pytest.raises(ValidationError) as caught:
            await recall(store, scope, text)
        assert caught.value.field == "query" and "surrogate" in str(caught.value)


async def test_random_text_never_breaks_the_lucene_query(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    """Random text over an alphabet of Lucene syntax, punctuation and unicode: results, never an error."""
    rng = random.Random(tenant)
    alphabet = list("+-&|!(){}[]^\"~*?:\\/ \t\n.,;'`@#$%=<>_") + list("aZ09éß日🧠İ\u0301\u200b\u05d0") + ["AND", "OR"]
    scope = MemoryScope(tenant)
    await SemanticLayer(store).add_fact(scope, "a Z 09 é ß 日 🧠 and or")
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000)))
        for hit in await recall(store, scope, text):
            assert hit.content == "a Z 09 é ß 日 🧠 and or"


# -- hostile arguments ------------------------------------------------------------

BAD_LIMITS: list[Any] = [0, -1, 1001, 2**63, 2**63 - 1, -(2**63), 2**1000, 1.0, 1.5, float("nan"), float("inf"),
                         True, False, None, "10", b"10", [10], {"limit": 10}]
BAD_QUERIES: list[Any] = [None, 0, 2**63, 1.5, b"bytes", bytearray(b"x"), ["x"], {"q": "x"}, object()]
BAD_POLICIES: list[Any] = ["semantic", ["semantic"], {"semantic"}, 1, object(), {}]
BAD_WRITE_IDS: list[Any] = ["", "\ud800", "w" * 257, 2**63, 1.5, b"w", ["w"]]
BAD_SCOPES: list[Any] = [None, "acme", {"tenant_id": "acme"}, ("acme", None), 2**63]


async def test_hostile_arguments_raise_typed_errors_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    cases: list[tuple[dict[str, Any], str]] = [
        *(({"query": "x", "limit": bad}, "limit") for bad in BAD_LIMITS),
        *(({"query": bad}, "query") for bad in BAD_QUERIES),
        *(({"query": "x", "policy": bad}, "policy") for bad in BAD_POLICIES),
        *(({"query": "x", "write_id": bad}, "write_id") for bad in BAD_WRITE_IDS),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as caught:
            await recall(store, scope, **kwargs)
        assert caught.value.field == field, kwargs
        assert isinstance(caught.value, ValueError)
    for bad_scope in BAD_SCOPES:
        with pytest.raises(ScopeError):
            await recall(store, bad_scope, "x")
    for good in (1, 1000):
        assert await recall(store, scope, "x", limit=good) == []
    assert await recall(store, scope, "x", RetrievalPolicy(), write_id="w" * 256) == []


# -- the noisy neighbour ----------------------------------------------------------


def _procedure_rows(plan: dict[str, Any]) -> list[int]:
    here = []
    if plan["operatorType"].startswith("ProcedureCall"):
        here.append(int(plan.get("rows", plan["args"].get("Rows", 0))))
    return here + [n for child in plan.get("children") or [] for n in _procedure_rows(child)]


async def _rows_handed_to_cypher(store: GraphMemoryStore, tenant: str, term: str) -> list[int]:
    params = {"tenant_id": tenant, "namespace": None, "write_id": None, "search": recall_search(tenant, term),
              "search_unstamped": recall_search(tenant, term, unstamped=True),
              "labels": ["Fact", "Skill", "Trigger"], "limit": 10}
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        summary = await (await session.run("PROFILE " + query("memory_recall").text, params)).consume()
    assert summary.profile is not None
    return _procedure_rows(summary.profile)


async def test_recall_work_does_not_grow_with_a_noisy_neighbour(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    quiet, noisy = MemoryScope(tenant), MemoryScope(f"t-{uuid.uuid4().hex}")
    forget.append(noisy.tenant_id)
    term = word(tenant)
    await SemanticLayer(store).add_facts(quiet, [f"{term} quiet fact {i}" for i in range(3)])
    terms_only = recall_search(tenant, term).split(" +", 1)[1]  # the search without the tenant clause
    seeded = 0
    for size in (0, 1_000, 5_000):
        while seeded < size:
            batch = min(size - seeded, 2_500)
            await SemanticLayer(store).add_facts(noisy, [f"{term} noisy fact {seeded + i}" for i in range(batch)])
            seeded += batch
        assert await _rows_handed_to_cypher(store, tenant, term) == [3], size
        assert len(await recall(store, quiet, term)) == 3
        assert len(await yielded(driver, terms_only)) == 3 + size  # what a post-filter would have scanned
    assert len(await recall(store, noisy, term, limit=1000)) == 1000


# -- tenant ids of every shape ----------------------------------------------------

_ID_ALPHABET = list("abcXYZ0189-_.:@/\\\"' +*?~()[]{}^!&|#$%=,;<>") + list("éßİǅ日本🧠\u0301\u200b\u05d0\u05d1٣")


async def test_the_tenant_clause_never_drops_the_tenants_own_rows(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str]
) -> None:
    """Random tenant ids (punctuation, unicode, Lucene syntax): each recalls exactly its own fact."""
    rng = random.Random(tenant)
    ids = {"".join(rng.choice(_ID_ALPHABET) for _ in range(rng.randint(8, 40))) for _ in range(60)}
    ids |= {tenant + suffix for suffix in ("", "-eu", ".eu", " eu", "\"", "\\")} | {tenant.upper(), "acme-" + tenant}
    forget.extend(ids - {tenant})
    term = word(tenant)
    for tid in sorted(ids):
        await SemanticLayer(store).add_fact(MemoryScope(tid), f"{term} of {tid}")
    for tid in sorted(ids):
        assert tid in await yielded(driver, recall_search(tid, term)), repr(tid)
        hits = await recall(store, MemoryScope(tid), term, limit=1000)
        assert [h.content for h in hits] == [" ".join(f"{term} of {tid}".split())], repr(tid)


async def test_store_errors_stay_typed(store: GraphMemoryStore, tenant: str) -> None:
    """A closed driver: recall raises a SymfonicGraphError, never a raw driver exception."""
    driver = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"),
                                             connection_acquisition_timeout=1, connection_timeout=1)
    try:
        with pytest.raises(SymfonicGraphError):
            await recall(GraphMemoryStore(driver, query_timeout=2), MemoryScope(tenant), "anything")
    finally:
        await driver.close()
