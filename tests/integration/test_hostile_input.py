"""Hostile strings travel as parameters: stored and read back exactly, harming nobody."""

from __future__ import annotations

import hashlib
import unicodedata

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, SemanticLayer

pytestmark = pytest.mark.anyio

HOSTILE = [
    "x'}) MATCH (n) DETACH DELETE n //",
    'x"}) MATCH (n) DETACH DELETE n //',
    "`Skill` `; DROP CONSTRAINT skill_id; //",
    "$tenant_id ${namespace} {{braces}} {a: 1}",
    "\\' \\\" \\u0027 \\\\",
    "emoji 🧠🔥👩🏽‍💻 and RTL \u202e\u0627\u062e\u062a\u0628\u0627\u0631\u202c \u05e2\u05d1\u05e8\u05d9\u05ea",
    "NUL\x00 bell\x07 esc\x1b tab\t nl\n cr\r del\x7f",
    "// name: skills_visible\nMATCH (n) RETURN n",
    "\ufeff zero\u200bwidth",
]
BIG = "ab\x00🧠" * 262_144  # ~1.3 MB of UTF-8


async def _fingerprint(driver: neo4j.AsyncDriver, tenant: str) -> tuple[int, str]:
    records, _, _ = await driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $t WITH n ORDER BY n.id "
        "RETURN count(n) AS n, collect([n.id, n.label, n.steps, n.context, n.task, n.text, n.tool]) AS rows",
        {"t": tenant},
    )
    return records[0]["n"], hashlib.sha256(repr(records[0]["rows"]).encode()).hexdigest()


@pytest.mark.parametrize("value", [*HOSTILE, BIG], ids=[*(f"hostile{i}" for i in range(len(HOSTILE))), "1MB"])
async def test_hostile_strings_round_trip_exactly(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope, value: str
) -> None:
    bystander = MemoryScope(scope.tenant_id + "-bystander")
    await ProceduralLayer(store).seed_authored_skill(
        bystander, label="keep me", steps=["deliver"], source_tag="authored:x", precondition=["get_status"]
    )
    await ProspectiveLayer(store).set_trigger(bystander, condition="c", task="t")
    before = await _fingerprint(driver, bystander.tenant_id)

    # a hostile namespace too, minus the control characters that scopes refuse by contract
    ns = MemoryScope(scope.tenant_id, "".join(c for c in value[:200] if unicodedata.category(c) != "Cc") or "ns")
    skill = await ProceduralLayer(store).seed_authored_skill(
        ns, label=value, steps=[value, "deliver"], source_tag="authored:" + value, context=value,
        identifier=value[:200], precondition=[value, {"state": {"path": "a", "op": "eq", "value": value}}],
    )
    tid = await ProspectiveLayer(store).set_trigger(ns, condition=value, task=value)
    await SemanticLayer(store).add_fact(ns, value)

    [read] = await ProceduralLayer(store).query_skills(ns)
    assert read == skill
    assert (read.label, read.steps, read.context) == (value, (value, "deliver"), value)
    assert read.source == "authored:" + value
    assert read.identifier == value[:200]
    assert read.metadata["precondition"][1] == {"state": {"path": "a", "op": "eq", "value": value}}
    [trigger] = await ProspectiveLayer(store).get_pending(ns)
    assert (trigger.id, trigger.condition, trigger.task) == (tid, value, value)
    [fact] = await SemanticLayer(store).list_facts(ns)
    assert fact.text == value
    assert await ProceduralLayer(store).query_skills(ns, query=value[:50]) == [read]

    assert await _fingerprint(driver, bystander.tenant_id) == before
    records, _, _ = await driver.execute_query("SHOW CONSTRAINTS YIELD name WHERE name = 'skill_id_per_tenant' RETURN name")
    assert records, "schema intact"


async def test_hostile_write_id_and_tenant_ids_are_plain_values(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    for value in HOSTILE[:5]:
        tenant = MemoryScope(scope.tenant_id + value)
        await ProceduralLayer(store).seed_authored_skill(
            tenant, label="L", steps=["deliver"], source_tag="authored:x", write_id=value
        )
        assert await ProceduralLayer(store).query_skills(tenant) == []
        assert await store.publish(tenant, value) == 1
        assert [s.label for s in await ProceduralLayer(store).query_skills(tenant)] == ["L"]
    assert await ProceduralLayer(store).query_skills(scope) == []
