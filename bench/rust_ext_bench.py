"""Does neo4j-rust-ext pay for us? A cold turn and bulk seeding, with whichever driver build is installed.

    python -m bench.rust_ext_bench          # prints one line of figures; run it in a venv with and one without

The cold turn (a fresh ``TurnMemory``: the skills are read and decoded every
turn) is where PackStream decoding costs most; seeding is where encoding does.
Each figure is a ratio to the ``RETURN 1`` floor measured in the same run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import time
import uuid

import neo4j

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.layers import SkillSpec

SKILLS, TURNS, SEEDED = 20, 300, 3000


def _specs(n: int, prefix: str) -> list[SkillSpec]:
    return [SkillSpec(label=f"Skill {i}", steps=[f"tool_{i % 8}"], source_tag="authored:bench",
                      action_tool=f"tool_{i % 8}", identifier=f"{prefix}-{i}",
                      precondition=["get_status", "authenticate", {"state": {"path": "channel", "op": "eq",
                                                                             "value": "slack"}}])
            for i in range(n)]


async def main() -> None:
    driver = neo4j.AsyncGraphDatabase.driver(
        os.environ["NEO4J_URI"], auth=(os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"]))
    store = GraphMemoryStore(driver, query_timeout=120)
    tenant = f"bench-rust-{uuid.uuid4().hex[:8]}"
    scope = MemoryScope(tenant)
    try:
        await ProceduralLayer(store).seed_skills(scope, _specs(SKILLS, "turn"))
        turns, floors = [], []
        for _ in range(TURNS):
            t0 = time.perf_counter()
            await TurnMemory(store).begin(scope)
            t1 = time.perf_counter()
            async with driver.session() as session:
                await (await session.run("RETURN 1")).consume()
            turns.append(t1 - t0)
            floors.append(time.perf_counter() - t1)
        bulk = MemoryScope(f"{tenant}-bulk")
        t0 = time.perf_counter()
        for start in range(0, SEEDED, 1000):
            await ProceduralLayer(store).seed_skills(bulk, _specs(SEEDED, "bulk")[start:start + 1000])
        seeded = SEEDED / (time.perf_counter() - t0)
        turn, floor = statistics.median(turns) * 1000, statistics.median(floors) * 1000
        rust = importlib.util.find_spec("neo4j._rust") is not None
        print(f"neo4j-rust-ext {'on ' if rust else 'off'}: cold turn p50 {turn:.2f} ms "
              f"(floor {floor:.2f} ms, {turn / floor:.2f}x); seeding {seeded:,.0f} skills/s")
    finally:
        for t in (tenant, f"{tenant}-bulk"):
            await driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n", t=t)
            await driver.execute_query("MATCH (c:SymfonicCatalog {tenant_id: $t}) DELETE c", t=t)
        await driver.close()


if __name__ == "__main__":
    asyncio.run(main())
