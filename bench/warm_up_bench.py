"""The first turns after Neo4j forgot its plans, with and without ``TurnMemory.warm_up`` (a script, not a test).

Run against a Neo4j of its own (it empties the server's query cache, which
costs every other client a re-plan), after ``eval "$(symfonic-graph server
start)"``::

    python -m bench.warm_up_bench --rounds 3

Each round empties the query cache (what a Neo4j restart does to plans),
then times, in a new process's ``TurnMemory``: a first read and a warm read
of one tenant (20 skills, 3 reminders), without warm-up; and again after
emptying the cache, ``warm_up()`` itself and the same two turns after it.
The floor (``RETURN 1``, auto-commit) is timed in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid

import anyio

from bench.turn_bench import skill_specs
from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory


async def _clear(store: GraphMemoryStore) -> None:
    await store.driver.execute_query("CALL db.clearQueryCaches()", database_=store.database)


async def _ms(work: object) -> float:
    started = time.perf_counter()
    await work  # type: ignore[misc]
    return (time.perf_counter() - started) * 1000


async def main(args: argparse.Namespace) -> None:
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None) as store:
        scope = MemoryScope(f"bench-warm-{uuid.uuid4().hex[:8]}", "user-1")
        await ProceduralLayer(store).seed_skills(MemoryScope(scope.tenant_id), skill_specs(random.Random(0), 20))
        for k in range(3):
            await ProspectiveLayer(store).set_trigger(scope, condition=f"topic {k}", task=f"Remind {k}.")
        figures: dict[str, list[float]] = {}
        try:
            for _ in range(args.rounds):
                await _clear(store)
                cold = TurnMemory(store, coalesce_window=None)
                figures.setdefault("no warm-up: first turn (a first read)", []).append(await _ms(cold.begin(scope)))
                figures.setdefault("no warm-up: second turn (a warm read)", []).append(await _ms(cold.begin(scope)))
                await _clear(store)
                warmed = TurnMemory(store, coalesce_window=None)
                figures.setdefault("warm_up() itself", []).append(await _ms(warmed.warm_up()))
                figures.setdefault("after warm-up: first turn", []).append(await _ms(warmed.begin(scope)))
                figures.setdefault("after warm-up: second turn", []).append(await _ms(warmed.begin(scope)))
                floor = []
                for _ in range(50):
                    floor.append(await _ms(store.driver.execute_query("RETURN 1", database_=store.database)))
                figures.setdefault("floor (RETURN 1, median of 50)", []).append(statistics.median(floor))
        finally:
            await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n",
                                             t=scope.tenant_id, database_=store.database)
    print(f"`python -m bench.warm_up_bench --rounds {args.rounds}`, load average {os.getloadavg()[0]:.1f}; "
          "median (min-max) over the rounds, ms:\n")
    print("| what | ms |\n|---|---|")
    for name, values in figures.items():
        print(f"| {name} | {statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f}) |")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.warm_up_bench", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds (each empties the query cache twice)")
    return p.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse())
