"""Publishing a staged re-seed never leaves a concurrent reader without the skill.

Neo4j applies a commit's records one by one, so a reader racing the publish
commit may, for an instant, see both the old and the new version (both rule
sets enforced: the strict side). It must never see neither (no rule at all).
"""

from __future__ import annotations

import anyio
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory

pytestmark = pytest.mark.anyio
ROUNDS = 60
READERS = 4


async def test_reader_never_loses_the_skill_through_a_publish(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="v0", steps=["x"], source_tag="authored:t", identifier="k")
    counts: list[int] = []
    done = False

    async def reader() -> None:
        memory = TurnMemory(store, max_age=0.0)
        while not done:
            counts.append(len(await layer.query_skills(scope)))
            counts.append(len((await memory.begin(scope)).skills))

    async with anyio.create_task_group() as tg:
        for _ in range(READERS):
            tg.start_soon(reader)
        for i in range(1, ROUNDS + 1):
            await layer.seed_authored_skill(
                scope, label=f"v{i}", steps=["x"], source_tag="authored:t", identifier="k", write_id=f"w{i}")
            await store.publish(scope, f"w{i}")
        done = True

    assert counts and 0 not in counts, "a reader saw no version of the skill during a publish"
    assert set(counts) <= {1, 2}
    assert counts.count(1) > counts.count(2)
    assert [s.label for s in await layer.query_skills(scope)] == [f"v{ROUNDS}"]

    await store.fold_published(scope, settle_seconds=0)
    records, _, _ = await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t}) OPTIONAL MATCH (s)-[:REQUIRES]->(p) RETURN count(DISTINCT s) AS skills",
        t=scope.tenant_id)
    assert records[0]["skills"] == 1, "fold deletes the replaced versions"
    assert [s.label for s in await layer.query_skills(scope)] == [f"v{ROUNDS}"]
