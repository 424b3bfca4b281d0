"""A turn with 100,000 pending triggers in its scope: what the max_triggers bound costs.

    eval "$(.venv/bin/symfonic-graph server start)"
    .venv/bin/python -m bench.bounds_bench [--triggers 100000]

Seeds the triggers (batched UNWIND) in a fresh tenant, times ``TurnMemory.begin``
and ``GraphPendingTriggers.pending`` beside the ``RETURN 1`` floor, prints the
figures, and deletes what it seeded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import neo4j

from symfonic_graph import GraphMemoryStore, GraphPendingTriggers, MemoryScope, TurnMemory

ROUNDS = 30


async def _p50(work: object, rounds: int = ROUNDS) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        await work()  # type: ignore[operator]
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


async def main(count: int) -> None:
    driver = neo4j.AsyncGraphDatabase.driver(
        os.environ["NEO4J_URI"], auth=(os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"]))
    store = GraphMemoryStore(driver, query_timeout=120)
    tenant = f"bench-bounds-{uuid.uuid4().hex[:8]}"
    scope = MemoryScope(tenant, "user-1")
    try:
        await store.apply_schema()
        t0 = time.perf_counter()
        for start in range(0, count, 10_000):
            await driver.execute_query(
                "UNWIND range($a, $b) AS i CREATE (:Trigger {id: $t + '-' + i, tenant_id: $t, namespace: 'user-1', "
                "condition: 'c' + i, task: 't' + i, status: 'pending', "
                "created_at: datetime() + duration({seconds: i})})",
                a=start, b=min(start + 10_000, count) - 1, t=tenant)
        seeded = time.perf_counter() - t0
        memory = TurnMemory(store)
        source = GraphPendingTriggers(store)

        async def floor() -> None:
            async with driver.session() as session:
                await (await session.run("RETURN 1")).consume()

        snapshot = await memory.begin(scope)
        assert len(snapshot.triggers) == memory.max_triggers
        assert snapshot.triggers[0].trigger_id == f"{tenant}-0"  # oldest first
        figures = {
            "floor RETURN 1 (ms)": await _p50(floor),
            "TurnMemory.begin (ms)": await _p50(lambda: memory.begin(scope)),
            "GraphPendingTriggers.pending (ms)": await _p50(lambda: source.pending(scope)),
        }
        print(f"pending triggers in the scope: {count:,} (seeded in {seeded:.1f} s); a turn reads "
              f"{memory.max_triggers}")
        for name, value in figures.items():
            print(f"{name}: p50 {value:.1f}  ({value / figures['floor RETURN 1 (ms)']:.1f}x floor)")
    finally:
        while True:
            records, _, _ = await driver.execute_query(
                "MATCH (t:Trigger {tenant_id: $t}) WITH t LIMIT 20000 DETACH DELETE t RETURN count(*) AS n", t=tenant)
            if records[0]["n"] == 0:
                break
        await driver.execute_query("MATCH (c:SymfonicCatalog {tenant_id: $t}) DELETE c", t=tenant)
        await driver.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=100_000)
    asyncio.run(main(parser.parse_args().triggers))
