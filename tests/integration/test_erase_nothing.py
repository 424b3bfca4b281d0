"""Erasing a scope that holds nothing reports 0 nodes and leaves nothing behind, in code and on the CLI."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio


async def _nodes_of(store: GraphMemoryStore, tenant: str) -> int:
    records, _, _ = await store.driver.execute_query("MATCH (n {tenant_id: $t}) RETURN count(n) AS n", {"t": tenant})
    return int(records[0]["n"])


async def test_erasing_scopes_that_hold_nothing_counts_zero_and_creates_nothing(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    await ProceduralLayer(store).seed_authored_skill(MemoryScope(tenant), label="W", steps=["w"],
                                                     source_tag="authored:x")
    version = await store.catalog_version(MemoryScope(tenant))
    rng = random.Random(7)
    for _ in range(12):
        empty = f"{tenant}-none-{uuid.uuid4().hex[:6]}"
        forget.append(empty)
        scope = rng.choice([MemoryScope(empty), MemoryScope(empty, f"u{rng.randrange(9)}"),
                            MemoryScope(tenant, f"nobody-{rng.randrange(9)}")])  # an empty namespace of a live tenant
        counts = await store.erase(scope, batch_size=rng.choice([1, 2, 1000]))
        assert sum(counts.values()) == 0, (scope, counts)
        if scope.tenant_id == empty:
            assert await _nodes_of(store, empty) == 0  # no catalog node created by the erase
    assert await store.catalog_version(MemoryScope(tenant)) == version  # nothing erased, nothing bumped
    assert [s.label for s in await ProceduralLayer(store).query_skills(MemoryScope(tenant))] == ["W"]


async def test_tenants_erase_of_a_tenant_that_does_not_exist_says_nothing_was_erased(
    neo4j_settings: Neo4jSettings, store: GraphMemoryStore, tenant: str
) -> None:
    nope = f"{tenant}-nope"
    text = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", nope, "--yes")
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip() == f"nothing to erase: tenant {nope} (whole) holds no node (0 nodes erased)"
    assert f"notice: tenant {nope!r} holds nothing" in text.stderr
    as_json = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", nope, "--namespace", "u1", "--yes", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert sum(json.loads(as_json.stdout)["counts"].values()) == 0
    whole = run_cli_on(neo4j_settings, "tenants", "erase", "--tenant", nope, "--yes", "--json")
    assert json.loads(whole.stdout)["counts"] == {"Skill": 0, "Precondition": 0, "Trigger": 0, "Fact": 0,
                                                  "SymfonicTriggerSelection": 0, "SymfonicCatalog": 0}
    assert await _nodes_of(store, nope) == 0
