"""The turn's packed projection reads back into exactly the ``skill_row`` every other path reads.

A turn's cold read ships each skill as one list (``skill_packed``) instead of
the ``skill_row`` map; ``unpack_skill_row`` turns it back into that map before
the one read model reads it. Seeded by hand with every shape an operator may
get wrong (absent and null properties, extra and misspelt properties on the
skill and its preconditions, a precondition of another tenant or of none, a
stamped library write), the two projections must agree value for value.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from bench.turn_bench import skill_specs
from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
from symfonic_graph.shape.models import unpack_skill_row
from tests.integration.test_one_read_model import _seed_by_hand

pytestmark = pytest.mark.anyio

_ODD = """
CREATE (s:Skill {id: $t + '-odd', tenant_id: $t, label: 'Odd', steps: ['o_act'], acton_tool: 'o_act',
                 status: 'approved', owner: 'ops', priority: 3, note: $long,
                 created_at: datetime() + duration({seconds: 60})})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'o_pre', same_arg: ['id'],
                                                      reviewer: 'x'})
CREATE (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'someone-else', kind: 'text', text: 'secret'})
CREATE (s)-[:REQUIRES {position: 2}]->(:Precondition {kind: 'tool', tool: 'no_tenant'})
CREATE (s)-[:REQUIRES {position: 3}]->(:Precondition {tenant_id: $t, namespace: 'user-1', kind: 'state',
                                                      path: 'channel', op: 'in', value: ['a', 'b'], position: 9})
CREATE (s)-[:REQUIRES {position: 2.0}]->(:Precondition {tenant_id: $t, kind: 'limit', max_calls: 2, per: 'tenant',
                                                        window: '1h', symfonic_rev: 'x/1'})
"""


async def _both(store: GraphMemoryStore, scope: MemoryScope) -> tuple[list[object], list[object]]:
    params = {**scope.params(), "write_id": None, "include_drafts": False, "include_retracted": False}
    [visible] = await store.read("skills_visible", **params, query="", limit=2**62)
    [turn] = await store.read("turn_snapshot", scopes=[{**params, "known_version": None}], max_triggers=10,
                              now=datetime.now(UTC))
    return visible["skills"], turn["skills"]


async def test_packed_rows_unpack_to_the_skill_rows(store: GraphMemoryStore, tenant: str) -> None:
    await _seed_by_hand(store, tenant)
    await store.driver.execute_query(_ODD, t=tenant, long="x" * 500, database_=store.database)
    await ProceduralLayer(store).seed_skills(MemoryScope(tenant), skill_specs(random.Random(5), 3))
    for scope in (MemoryScope(tenant, "user-1"), MemoryScope(tenant)):
        rows, packed = await _both(store, scope)
        assert len(rows) >= 12
        assert [unpack_skill_row(p) for p in packed] == rows
    odd = next(unpack_skill_row(p) for p in packed if p[0] == f"{tenant}-odd")
    kinds = [p["kind"] for p in odd["preconditions"]]
    assert kinds.count("precondition of no tenant or another tenant (its tenant_id is not this skill's)") == 2
    assert "secret" not in repr(packed) and "x" * 200 not in repr(packed)
    assert odd["preconditions"][0]["unknown"] == ["same_arg", "reviewer"] or \
        sorted(odd["preconditions"][0]["unknown"]) == ["reviewer", "same_arg"]
