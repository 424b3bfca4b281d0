"""The visibility rule over tenants x namespaces, for every layer.

A node is visible to scope ``(t, ns)`` iff ``tenant_id = t`` and its namespace
is null or ``ns``. Each test checks both directions: nothing leaks in, and
nothing the scope owns is filtered out. Tenant ids and namespaces that are
prefixes of one another must not be confused.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph.layers import SemanticLayer

pytestmark = pytest.mark.anyio

NAMESPACES: tuple[str | None, ...] = (None, "u", "u1")
Reader = Callable[[MemoryScope], Awaitable[set[str]]]


def _tenants() -> tuple[str, str]:
    base = f"acme-{uuid.uuid4().hex}"
    return base, base + "2"  # the first is a prefix of the second


def _tag(tenant: str, namespace: str | None) -> str:
    return f"{tenant}|{namespace}"


def _expected(tenant: str, namespace: str | None) -> set[str]:
    owned = {_tag(tenant, ns) for ns in NAMESPACES}
    return {_tag(tenant, None), _tag(tenant, namespace)} & owned


async def _seed_all(store: GraphMemoryStore, tenants: tuple[str, ...]) -> None:
    skills, triggers, facts = ProceduralLayer(store), ProspectiveLayer(store), SemanticLayer(store)
    for tenant in tenants:
        for ns in NAMESPACES:
            scope, tag = MemoryScope(tenant, ns), _tag(tenant, ns)
            await skills.seed_authored_skill(scope, label=tag, steps=["deliver"], source_tag="authored:iso")
            await triggers.set_trigger(scope, condition=tag, task=tag)
            await facts.add_fact(scope, tag)


def _readers(store: GraphMemoryStore) -> dict[str, Reader]:
    async def skills(scope: MemoryScope) -> set[str]:
        return {s.label for s in await ProceduralLayer(store).query_skills(scope)}

    async def triggers(scope: MemoryScope) -> set[str]:
        return {t.task for t in await ProspectiveLayer(store).get_pending(scope)}

    async def facts(scope: MemoryScope) -> set[str]:
        return {f.text for f in await SemanticLayer(store).list_facts(scope)}

    return {"skills": skills, "triggers": triggers, "facts": facts}


async def test_isolation_matrix_tenants_by_namespaces(store: GraphMemoryStore) -> None:
    tenants = _tenants()
    await _seed_all(store, tenants)
    for layer, read in _readers(store).items():
        for tenant in tenants:
            for ns in (*NAMESPACES, "u10"):  # "u10" owns nothing but sees the tenant-wide node
                got = await read(MemoryScope(tenant, ns))
                assert got == _expected(tenant, ns), (layer, tenant, ns)


async def test_tenant_wide_nodes_are_shared_and_scope_without_namespace_sees_only_them(
    store: GraphMemoryStore,
) -> None:
    tenant, _ = _tenants()
    await _seed_all(store, (tenant,))
    for layer, read in _readers(store).items():
        assert await read(MemoryScope(tenant)) == {_tag(tenant, None)}, layer
        for ns in ("u", "u1", "someone-else"):
            assert _tag(tenant, None) in await read(MemoryScope(tenant, ns)), (layer, ns)


async def test_a_tenant_with_no_data_sees_nothing(store: GraphMemoryStore) -> None:
    tenant, longer = _tenants()
    await _seed_all(store, (longer,))  # only the longer id has data; its prefix must see none of it
    for layer, read in _readers(store).items():
        for ns in NAMESPACES:
            assert await read(MemoryScope(tenant, ns)) == set(), (layer, ns)


def _shapes(tenant: str) -> dict[str, tuple[object, str]]:
    """Node tenant_id values that look like a scope's tenant id without being that string."""
    number = uuid.uuid4().int % 2**62
    return {
        "missing": (None, tenant),
        "int": (number, str(number)),
        "list": ([tenant], tenant),
        "bool": (True, "true"),
        "float": (1.5, "1.5"),
    }


@pytest.mark.parametrize("shape", ["missing", "int", "list", "bool", "float"])
async def test_nodes_without_a_string_tenant_id_are_invisible(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, shape: str
) -> None:
    value, scope_tenant = _shapes(tenant)[shape]
    marker = uuid.uuid4().hex
    await driver.execute_query(
        """
        CREATE (s:Skill {id: 'bad-skill-' + $m, label: $m, steps: ['deliver'], status: 'approved',
                         active: true, context: '', source: 'authored:seed', created_at: datetime()})
        CREATE (t:Trigger {id: 'bad-trigger-' + $m, condition: $m, task: $m, status: 'pending',
                           created_at: datetime()})
        CREATE (f:Fact {id: 'bad-fact-' + $m, text: $m, created_at: datetime()})
        FOREACH (n IN CASE WHEN $tenant IS NULL THEN [] ELSE [s, t, f] END | SET n.tenant_id = $tenant)
        """,
        {"m": marker, "tenant": value},
    )
    for layer, read in _readers(store).items():
        for ns in (None, "u1"):
            assert marker not in await read(MemoryScope(scope_tenant, ns)), (layer, shape, ns)
