"""What a busy neighbour costs a quiet one (a script, not a test): turns' trigger reads and recall.

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.neighbour_cost_bench              # neighbours of 100,000 triggers / facts
    python -m bench.neighbour_cost_bench --quick      # a smoke run (20,000)

Two figures, each a median over interleaved samples and the ratio of
"busy neighbour" to "quiet neighbour":

* **Triggers.** ``TurnMemory.begin`` of end user ``u-quiet`` of tenant T
  (a few pending triggers of its own, a few tenant-wide), while another end
  user ``u-busy`` of the same tenant holds 1, then ``--n`` pending triggers.
  PROFILE counts the db hits of the turn's read. The busy phase is measured
  twice: before ``stamp_keys`` gives the plain-Cypher triggers their scope key
  (every turn then also scans the tenant's unkeyed triggers: the cost before
  migration 0007), and after (the steady state: library writes set the key).
* **Recall.** ``recall`` in tenant ``<run>-acme`` while tenant
  ``<run>-acme-eu`` (whose id shares every token of ``acme``'s) holds 1, then
  ``--n`` matching facts. PROFILE counts the rows the full-text search hands
  to Cypher.

Every tenant the run creates (``bench-nb-<hex>-...``) is deleted at the end.
The neighbours' triggers are created with plain Cypher (the graph model of
docs/graph-model.md), in batches, then stamped as ``symfonic-graph schema apply`` does.
"""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Sequence
from typing import Any

from bench.recall_bench import forget, p50_ms, profiled_rows, seed_neighbour, timed
from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph._store.cypher import query
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.memory.layers.semantic import MAX_FACTS_PER_WRITE
from symfonic_graph.recall import RECALL_INDEX, recall, recall_search

QUESTION = "which invoice is overdue"
TRIGGERS = """
UNWIND range($start, $end - 1) AS i
CREATE (:Trigger {id: $run + '-' + toString(i), tenant_id: $tenant_id, namespace: $namespace,
                  condition: 'the user mentions invoice ' + toString(i), task: 'remind them', status: 'pending',
                  created_at: datetime() - duration({days: 1})})
"""
FORGET_TRIGGERS = ("MATCH (t:Trigger) WHERE t.tenant_id = $tenant_id "
                   "CALL (t) { DETACH DELETE t } IN TRANSACTIONS OF 10000 ROWS")


async def add_triggers(store: GraphMemoryStore, scope: MemoryScope, start: int, end: int, run: str) -> None:
    for lo in range(start, end, 10_000):
        await store.driver.execute_query(
            TRIGGERS, {"start": lo, "end": min(end, lo + 10_000), "run": run, **scope.params()},
            database_=store.database)


async def trigger_phase(store: GraphMemoryStore, quiet: MemoryScope, args: argparse.Namespace,
                        name: str) -> tuple[float, int]:
    reference = TurnMemory(store, coalesce_window=None)
    await reference.begin(quiet)  # warm caches: the warm turn is the one measured (skills cached)

    async def warm_turn() -> None:
        await reference.begin(quiet)

    await timed(args.warmup, warm_turn)
    calls = await timed(args.samples, warm_turn)
    params = {"scopes": [{**quiet.params(), "known_version": None, "write_id": None, "include_drafts": False,
                          "include_retracted": False}], "max_triggers": 100}
    rows = await db_hits(store, query("turn_snapshot").text, params)
    p50 = p50_ms(calls)
    print(f"triggers, {name}: warm turn p50 {p50:.2f} ms, {rows:,} db hits", flush=True)
    return p50, rows


async def db_hits(store: GraphMemoryStore, text: str, params: dict[str, Any]) -> int:
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        summary = await (await session.run("PROFILE " + text, params)).consume()

    def hits(plan: dict[str, Any]) -> int:
        return int(plan.get("dbHits", plan.get("args", {}).get("DbHits", 0))) + sum(
            hits(c) for c in plan.get("children") or [])

    return hits(summary.profile or {})


async def recall_phase(store: GraphMemoryStore, a: MemoryScope, args: argparse.Namespace,
                       name: str) -> tuple[float, int]:
    await timed(args.warmup, lambda: recall(store, a, QUESTION))
    calls = await timed(args.samples, lambda: recall(store, a, QUESTION))
    params = {**a.params(), "write_id": None, "search": recall_search(a.tenant_id, QUESTION),
              "search_unstamped": recall_search(a.tenant_id, QUESTION, unstamped=True),
              "labels": ["Fact", "Skill", "Trigger"], "limit": 10}
    rows = await profiled_rows(store, query("memory_recall").text, params)
    p50 = p50_ms(calls)
    print(f"recall, {name}: p50 {p50:.2f} ms, {rows:,} rows from the index", flush=True)
    return p50, rows


async def main(args: argparse.Namespace) -> None:
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    run = f"bench-nb-{uuid.uuid4().hex[:8]}"
    tenant = MemoryScope(run + "-t")
    quiet, busy = MemoryScope(tenant.tenant_id, "u-quiet"), MemoryScope(tenant.tenant_id, "u-busy")
    acme, acme_eu = MemoryScope(run + "-acme"), MemoryScope(run + "-acme-eu")
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120.0) as store:
        await store.apply_schema()
        await store.driver.execute_query("CALL db.awaitIndex($name, 600)", {"name": RECALL_INDEX},
                                         database_=store.database)
        print(f"run {run}; neighbours of {args.n:,}", flush=True)
        try:
            triggers = ProspectiveLayer(store)
            for i in range(3):
                await triggers.set_trigger(quiet, condition=f"quiet condition {i}", task="t")
                await triggers.set_trigger(tenant, condition=f"tenant-wide condition {i}", task="t")
            await add_triggers(store, busy, 0, 1, run)
            await store.stamp_keys()
            t_quiet = await trigger_phase(store, quiet, args, "neighbour holds 1")
            await add_triggers(store, busy, 1, args.n, run)
            t_unkeyed = await trigger_phase(store, quiet, args, f"neighbour holds {args.n:,}, not stamped")
            await store.stamp_keys()
            t_busy = await trigger_phase(store, quiet, args, f"neighbour holds {args.n:,}")

            await SemanticLayer(store).add_facts(acme, [f"Invoice A-{i} is overdue since March." for i in range(10)])
            await SemanticLayer(store).add_facts(acme_eu, ["Invoice EU-0 is overdue."])
            r_quiet = await recall_phase(store, acme, args, "acme-eu holds 1")
            await seed_neighbour(store, acme_eu, args.n, MAX_FACTS_PER_WRITE, 2)
            r_busy = await recall_phase(store, acme, args, f"acme-eu holds {args.n:,}")
        finally:
            async with store.driver.session(database=store.database) as session:  # IN TRANSACTIONS: implicit
                await (await session.run(FORGET_TRIGGERS, tenant_id=tenant.tenant_id)).consume()
            await forget(store, tenant.tenant_id, acme.tenant_id, acme_eu.tenant_id)
    print()
    print("| what | quiet neighbour | busy neighbour | ratio |")
    print("|---|---|---|---|")
    print(f"| turn (trigger read), p50 | {t_quiet[0]:.2f} ms | {t_busy[0]:.2f} ms | {t_busy[0] / t_quiet[0]:.2f}x |")
    print(f"| turn_snapshot db hits | {t_quiet[1]:,} | {t_busy[1]:,} | {t_busy[1] / max(t_quiet[1], 1):.1f}x |")
    print(f"| turn, busy neighbour not yet stamped, p50 | {t_quiet[0]:.2f} ms | {t_unkeyed[0]:.2f} ms "
          f"| {t_unkeyed[0] / t_quiet[0]:.2f}x |")
    print(f"| its db hits | {t_quiet[1]:,} | {t_unkeyed[1]:,} | {t_unkeyed[1] / max(t_quiet[1], 1):.1f}x |")
    print(f"| recall, p50 | {r_quiet[0]:.2f} ms | {r_busy[0]:.2f} ms | {r_busy[0] / r_quiet[0]:.2f}x |")
    print(f"| recall rows from the index | {r_quiet[1]:,} | {r_busy[1]:,} | {r_busy[1] / max(r_quiet[1], 1):.1f}x |")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.neighbour_cost_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: neighbours of 20,000, few samples")
    p.add_argument("--n", type=int, default=None, help="triggers / facts of the busy neighbour (default 100,000)")
    p.add_argument("--samples", type=int, default=None, help="timed calls per phase (default 200)")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls before each phase")
    a = p.parse_args(argv)
    a.n = a.n if a.n is not None else (20_000 if a.quick else 100_000)
    a.samples = a.samples or (40 if a.quick else 200)
    return a


if __name__ == "__main__":
    import anyio

    anyio.run(main, parse())
