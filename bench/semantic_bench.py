"""What semantic reminders add to a turn (a script, not a test).

Run against a real Neo4j (``eval "$(symfonic-graph server start)"`` first)::

    python -m bench.semantic_bench            # 300 turns per case
    python -m bench.semantic_bench --quick    # a smoke run

One end user's scope holds N semantic triggers (random unit embeddings of
``--dims`` numbers, written by the library's ``triggers_write``), and
``TurnMemory.begin`` reads it with the catalog cached, the turn's embedding
near exactly one of them:

* ``none``: the turn sends no embedding (what a wiring without
  ``embeddings`` pays);
* ``index``: the vector index answers and the hits are filtered;
* ``crowded``: another tenant holds 300 triggers nearer to the sentence than
  the floor, so every index answer is full and the scope is scored exactly.

The floor is a bare ``RETURN 1`` on the same driver, interleaved. Prints p50
and p95 per case and the p50 over the floor's; the embedding model's own
time is not counted (the wiring embeds once per user message).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time
import uuid
from collections.abc import Sequence

import anyio

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store import Step
from symfonic_graph.memory.layers.prospective import trigger_row
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.shape import _embedding

SIZES = (3, 1_000)


def _unit(rng: random.Random, dims: int) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def _near(v: Sequence[float], rng: random.Random, noise: float = 0.05) -> list[float]:
    w = [x + rng.gauss(0.0, noise / math.sqrt(len(v))) for x in v]
    norm = math.sqrt(sum(x * x for x in w))
    return [x / norm for x in w]


async def _write(store: GraphMemoryStore, scope: MemoryScope, vectors: list[list[float]]) -> None:
    rows = [trigger_row(scope, kind="semantic", condition=f"topic {k}", task=f"Remind about topic {k}.",
                        embedding=v) for k, v in enumerate(vectors)]
    for start in range(0, len(rows), 200):
        await store.write([Step("triggers_write", {"rows": rows[start:start + 200]})])


async def main(args: argparse.Namespace) -> None:
    uri = os.environ.get("NEO4J_URI", "bolt://localhost:7687")
    user, pw = os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", "")
    turns = 30 if args.quick else args.turns
    if args.candidates is not None:
        _embedding.SEMANTIC_CANDIDATES = args.candidates
    rng = random.Random(7)
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120) as store:
        await store.apply_schema()
        run = uuid.uuid4().hex[:8]
        scopes = {n: MemoryScope(f"bench-semantic-{run}-{n}", "u1") for n in SIZES}
        neighbour = MemoryScope(f"bench-semantic-{run}-neighbour", "u1")
        cues: dict[int, list[float]] = {}
        try:
            for n, scope in scopes.items():
                vectors = [_unit(rng, args.dims) for _ in range(n)]
                await _write(store, scope, vectors)
                cues[n] = _near(vectors[0], rng)
            memory = TurnMemory(store, max_age=3600, coalesce_window=None)
            cases: dict[str, tuple[MemoryScope, list[float] | None]] = {}
            for n, scope in scopes.items():
                cases[f"none N={n}"] = (scope, None)
                cases[f"index N={n}"] = (scope, cues[n])
            times: dict[str, list[float]] = {key: [] for key in cases} | {"floor": []}
            offered: dict[str, int] = {}

            async def measure(keys: Sequence[str]) -> None:
                for key in keys:  # warm: catalogs cached, plans compiled
                    scope, cue = cases[key]
                    for _ in range(5):
                        offered[key] = len((await memory.begin(scope, embedding=cue)).triggers)
                for _ in range(turns):
                    for key in keys:
                        scope, cue = cases[key]
                        start = time.perf_counter()
                        await memory.begin(scope, embedding=cue)
                        times[key].append(time.perf_counter() - start)
                        start = time.perf_counter()
                        await store.driver.execute_query("RETURN 1", database_=store.database)
                        times["floor"].append(time.perf_counter() - start)

            await measure(list(cases))
            # the neighbour's 300 triggers all near the biggest scope's cue: every index answer comes back full
            big = SIZES[-1]
            await _write(store, neighbour, [_near(cues[big], rng, 0.01) for _ in range(300)])
            cases[f"crowded N={big}"] = (scopes[big], cues[big])
            times[f"crowded N={big}"] = []
            await measure([f"crowded N={big}"])
        finally:
            for scope in [*scopes.values(), neighbour]:
                await store.driver.execute_query("MATCH (t:Trigger {tenant_id: $tenant}) DETACH DELETE t",
                                                 tenant=scope.tenant_id, database_=store.database)

    def ms(values: Sequence[float], q: int) -> float:
        return statistics.quantiles(values, n=100)[q - 1] * 1000 if q != 50 else statistics.median(values) * 1000

    floor = ms(times["floor"], 50)
    print(f"dims {args.dims}; index candidates {_embedding.SEMANTIC_CANDIDATES}, exact up to "
          f"{_embedding.SEMANTIC_EXACT}; turns per case: {turns}; floor (RETURN 1) p50 {floor:.2f} ms")
    print(f"{'case':<16} {'offered':>8} {'p50 ms':>8} {'p95 ms':>8} {'p50/floor':>9}")
    for key in cases:
        p50, p95 = ms(times[key], 50), ms(times[key], 95)
        print(f"{key:<16} {offered[key]:>8} {p50:>8.2f} {p95:>8.2f} {p50 / floor:>9.2f}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.semantic_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run (30 turns per case)")
    p.add_argument("--turns", type=int, default=300, help="turns per case (default 300)")
    p.add_argument("--dims", type=int, default=1536, help="embedding length (default 1536)")
    p.add_argument("--candidates", type=int, default=None,
                   help="nearest embeddings asked of the index (default: the library's)")
    return p.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse())
