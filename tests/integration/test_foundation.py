"""The foundation: a real Neo4j 5 over Bolt, and the versioned schema."""

from __future__ import annotations

import re

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore
from symfonic_graph._store.schema import migrations as _migrations
from symfonic_graph.recall import RECALL_INDEX

pytestmark = pytest.mark.anyio


async def test_fixture_reaches_neo4j_5_over_bolt(driver: neo4j.AsyncDriver) -> None:
    records, _, _ = await driver.execute_query("CALL dbms.components() YIELD name, versions RETURN name, versions")
    assert records[0]["name"] == "Neo4j Kernel"
    # 5.26 LTS, or a calendar release (2025.01 on) when CI runs the second Neo4j version
    assert re.match(r"5\.|20[2-9]\d\.", records[0]["versions"][0])
    assert driver.get_server_info  # a Bolt driver, not a stand-in
    info = await driver.get_server_info()
    assert info.protocol_version[0] >= 5


async def test_apply_schema_is_idempotent_and_recorded(store: GraphMemoryStore) -> None:
    assert await store.apply_schema() == []  # the session fixture applied it already
    rows = await store.read("migrations_applied")
    assert [r["version"] for r in rows] == [m.version for m in _migrations()]
    records, _, _ = await store.driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")
    before = sorted(records[0]["names"])
    assert await store.apply_schema() == []
    records, _, _ = await store.driver.execute_query("SHOW CONSTRAINTS YIELD name RETURN collect(name) AS names")
    assert sorted(records[0]["names"]) == before
    assert {"skill_id_per_tenant", "skill_symfonic_key", "trigger_id_per_tenant"} <= set(before)
    assert "skill_id" not in before  # ids are per tenant (migration 0006)


async def test_the_legacy_full_text_index_is_dropped_and_recall_keeps_its_own(store: GraphMemoryStore) -> None:
    """Migration 0005: every write paid for the first release's index; recall's index stays."""
    records, _, _ = await store.driver.execute_query("SHOW FULLTEXT INDEXES YIELD name RETURN collect(name) AS names")
    assert "symfonic_memory_text" not in records[0]["names"]
    assert RECALL_INDEX in records[0]["names"]


async def test_schema_statements_race_safely(store: GraphMemoryStore) -> None:
    """Concurrent runs of every schema statement all succeed.

    A constraint or index a later migration drops is left out: creating it again
    would judge today's data by a rule the schema no longer has (0001's global
    ids refuse the per-tenant ids that 0006 allows).
    """
    statements = [q for m in _migrations() for q in m.statements]
    dropped = {m[1] for q in statements if (m := re.match(r"DROP (?:CONSTRAINT|INDEX) (\w+)", q.text))}
    statements = [q for q in statements
                  if not (m := re.match(r"CREATE (?:\w+ )?(?:CONSTRAINT|INDEX) (\w+)", q.text)) or m[1] not in dropped]

    async def run_all() -> None:
        for q in statements:
            await store._schema_statement(q)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(run_all)
    assert await store.apply_schema() == []
