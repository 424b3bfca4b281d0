"""TurnMemory.warm_up: Neo4j plans the turn's queries before a turn needs them, and turns reuse those plans."""

from __future__ import annotations

import re

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ValidationError

# Each test empties Neo4j's query cache and counts what is planned after: another worker's queries would count.
# (So would another client of a shared server: a count is taken up to three times, and one exact count passes.)
pytestmark = [pytest.mark.anyio, pytest.mark.schema_change]
ATTEMPTS = 3


async def _cleared(store: GraphMemoryStore) -> int:
    """Empty Neo4j's query cache; how many plans it held."""
    async with store.driver.session(database=store.database) as session:
        [record] = [r async for r in await session.run("CALL db.clearQueryCaches()")]
    if "already empty" in str(record[0]):
        return 0
    found = re.search(r"(\d+) quer", str(record[0]))
    assert found is not None, record[0]
    return int(found[1])


async def test_warm_up_plans_the_turn_queries_and_reads_nothing(store: GraphMemoryStore) -> None:
    memory = TurnMemory(store)
    counts = []
    for _ in range(ATTEMPTS):
        await _cleared(store)
        await memory.warm_up()
        counts.append(await _cleared(store))
        if counts[-1] == 4:  # turn_snapshot and turn_snapshot_warm, each with its _semantic form; nothing else
            break
    assert counts[-1] == 4, counts
    await memory.warm_up()  # leave the server planned for the other tests
    assert memory._catalogs == {} and memory._snapshots == {}  # nothing read, nothing cached


async def test_every_kind_of_turn_after_warm_up_reuses_its_plans(store: GraphMemoryStore, scope: MemoryScope) -> None:
    """First reads and warm reads, tenant-wide and namespaced, with and without an embedding, alone and coalesced:
    none plans a query of its own (the entries warm_up sends have the turn's shape)."""
    user = MemoryScope(scope.tenant_id, "user-1")
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_status"], identifier="deliver")
    await ProspectiveLayer(store).set_trigger(user, condition="mentions refunds", task="Offer the refund form.")
    await ProspectiveLayer(store).set_trigger(user, condition="talks money", task="Mention fees.", kind="semantic",
                                              embedding=[1.0, 0.0, 0.0])
    counts = []
    for _ in range(ATTEMPTS):
        memory, alone = TurnMemory(store), TurnMemory(store, coalesce_window=None)
        await _cleared(store)
        await memory.warm_up()
        for each in (memory, alone):
            first = await each.begin(user, embedding=[0.9, 0.1, 0.0])
            assert [t.task for t in first.triggers] == ["Offer the refund form.", "Mention fees."]
            assert first.skills and first.skills[0].action_tool == "deliver"
            assert len((await each.begin(user)).triggers) == 1  # warm, no embedding: the semantic one is not offered
            await each.begin(scope)
            await each.begin(scope, embedding=[0.0, 1.0, 0.0])
            each.invalidate(scope)
            await each.begin(scope)  # a re-read of a held version: the rows themselves
        counts.append(await _cleared(store))
        if counts[-1] == 4:
            break
    assert counts[-1] == 4, counts
    await memory.warm_up()


async def test_warm_up_refuses_a_timeout_that_is_not_positive_seconds(store: GraphMemoryStore) -> None:
    for bad in (0, -1.0, float("inf"), float("nan"), True, "60"):
        with pytest.raises(ValidationError, match="timeout"):
            await TurnMemory(store).warm_up(timeout=bad)  # type: ignore[arg-type]
