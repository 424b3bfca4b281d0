"""How much one big tenant costs its neighbours' turns (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.neighbours_bench            # the biggest catalog a write allows: 2,000 skills, 8 KB labels
    python -m bench.neighbours_bench --quick    # 300 skills, 1 KB labels

31 small tenants (3 skills each) and one big tenant begin their turns
concurrently, every round, with their catalogs stale (``invalidate()``: every
turn ships its skills, the worst case). Printed: the median and p90 ``begin()``
latency of the small tenants' turns, with and without the big tenant in the
round, with coalescing on (the default) and off. The tenants are deleted at
the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

import anyio
import neo4j

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.memory.layers.procedural import SkillSpec
from symfonic_graph.shape._limits import MAX_PROPERTY_BYTES, MAX_SKILLS_PER_SCOPE

SMALL = 31


def specs(n: int, label_bytes: int) -> list[SkillSpec]:
    return [SkillSpec(label=f"{i:05d}" + "x" * (label_bytes - 5), steps=["deploy"], source_tag="authored:bench",
                      action_tool="deploy", precondition=[f"check_{i % 7}"], identifier=f"s{i}") for i in range(n)]


async def rounds(memory: TurnMemory, small: list[MemoryScope], big: MemoryScope | None, n: int) -> list[float]:
    samples: list[float] = []

    async def turn(scope: MemoryScope) -> None:
        start = time.perf_counter()
        await memory.begin(scope)
        if scope is not big:
            samples.append(time.perf_counter() - start)

    for _ in range(n):
        memory.invalidate()
        async with anyio.create_task_group() as tg:
            for scope in [*small, *([big] if big else [])]:
                tg.start_soon(turn, scope)
    return samples


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms   p90 {ordered[int(len(ordered) * 0.9)] * 1000:7.1f} ms"


async def main(quick: bool) -> None:
    skills, label_bytes, n = (300, 1024, 5) if quick else (MAX_SKILLS_PER_SCOPE, MAX_PROPERTY_BYTES, 10)
    driver = neo4j.AsyncGraphDatabase.driver(
        os.environ["NEO4J_URI"], auth=(os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"]))
    prefix = f"nb-{uuid.uuid4().hex[:8]}"
    try:
        store = GraphMemoryStore(driver, query_timeout=60)
        await store.apply_schema()
        layer = ProceduralLayer(store)
        small = [MemoryScope(f"{prefix}-s{i}") for i in range(SMALL)]
        for scope in small:
            await layer.seed_skills(scope, specs(3, 40))
        big = MemoryScope(f"{prefix}-big")
        for start in range(0, skills, 250):
            await layer.seed_skills(big, specs(skills, label_bytes)[start:start + 250])
        print(f"{SMALL} small tenants (3 skills) and one with {skills} skills of {label_bytes} B labels; "
              f"{n} rounds, every catalog shipped each round")
        for window, name in ((0.0, "coalescing on "), (None, "coalescing off")):
            memory = TurnMemory(store, coalesce_window=window)
            await rounds(memory, small, big, 1)  # warm up
            alone = await rounds(memory, small, None, n)
            beside = await rounds(memory, small, big, n)
            print(f"{name}  small tenants alone:      {figures(alone)}")
            print(f"{name}  beside the big tenant:    {figures(beside)}")
    finally:
        await driver.execute_query("MATCH (n) WHERE n.tenant_id STARTS WITH $p DETACH DELETE n", p=prefix)
        await driver.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    anyio.run(main, parser.parse_args().quick)
