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


class _PublishRightAfterAWrite(GraphMemoryStore):
    """A store that publishes ``write_id`` the moment its next write commits: another process's
    publish landing between a write and anything its writer does next."""

    def __init__(self, store: GraphMemoryStore, scope: MemoryScope, write_id: str) -> None:
        super().__init__(store.driver, database=store.database)
        self._after: tuple[MemoryScope, str] | None = (scope, write_id)

    async def write(self, steps):  # type: ignore[no-untyped-def]
        written = await super().write(steps)
        if self._after is not None:
            scope, write_id = self._after
            self._after = None
            assert await GraphMemoryStore(self.driver, database=self.database).publish(scope, write_id) == 1
        return written


@pytest.mark.parametrize("propose", [False, True], ids=["seed", "propose"])
async def test_a_write_returns_what_it_wrote_though_a_publish_lands_right_after_it(
    store: GraphMemoryStore, scope: MemoryScope, propose: bool
) -> None:
    """A live write of an identifier, then (before its writer reads anything) another writer publishes a
    staged version of it: the write still returns the skill it wrote, not NotFoundError for a write that
    landed. It was read back by a second query, after the publish had replaced it."""
    layer = ProceduralLayer(store)
    live = await layer.seed_authored_skill(scope, label="v0", steps=["x"], source_tag="authored:t", identifier="k")
    await layer.seed_authored_skill(
        scope, label="staged", steps=["x"], source_tag="authored:t", identifier="k", write_id="w1")

    racing = ProceduralLayer(_PublishRightAfterAWrite(store, scope, "w1"))
    if propose:
        wrote = await racing.propose_skill(scope, label="draft", steps=["x"], source_tag="mined:t", identifier="k")
        assert (wrote.label, wrote.status, wrote.identifier) == ("draft", "draft", "k")
    else:
        wrote = await racing.seed_authored_skill(
            scope, label="v1", steps=["x"], source_tag="authored:t", identifier="k", precondition=["check"])
        assert (wrote.id, wrote.label, wrote.precondition) == (live.id, "v1", ("check",))
    assert [s.label for s in await layer.query_skills(scope)] == ["staged"]  # the publish came after
