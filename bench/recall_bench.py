"""Recall under a noisy neighbour: tenant A's recall latency while tenant B grows (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.recall_bench              # B = 1,000,000 matching facts
    python -m bench.recall_bench --n 100000   # a smaller neighbour
    python -m bench.recall_bench --quick      # a smoke run in seconds (B = 20,000)

Tenant A holds a few facts; tenant B is seeded with ``--n`` facts that all
match A's query, through ``SemanticLayer.add_facts`` (one batched ``UNWIND``
write of ``--batch`` facts per transaction). A's ``recall`` p50 is measured
with B empty and with B full, and compared with the query recall used before
it searched with a tenant clause (the same search without the tenant clause, filtered by tenant
afterwards in Cypher; it ran on the first release's index, dropped by
migration 0005, and runs on recall's index here: the same terms match the
same nodes). PROFILE counts how many rows the full-text procedure hands
to Cypher in each case. B is then deleted and A measured once more ("B
deleted"): on a shared machine, load from other processes moves the
figures more than B does, and this third phase shows by how much. Both
tenants (``bench-recall-<hex>-a``/``-b``) are deleted at the end, also when
the run fails (``--keep`` keeps them and skips the third phase).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import neo4j

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store.cypher import query
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.memory.layers.semantic import MAX_FACTS_PER_WRITE
from symfonic_graph.recall import RECALL_INDEX, recall, recall_search

QUESTION = "which invoice is overdue"
# The recall query before the tenant clause: search every tenant, filter by tenant afterwards (for comparison only).
POST_FILTER = """
CALL db.index.fulltext.queryNodes($index, $search) YIELD node, score
WITH node, score WHERE node.tenant_id = $tenant_id AND (node.namespace IS NULL OR node.namespace = $namespace)
RETURN node.id AS id, score ORDER BY score DESC, id LIMIT 10
"""
FORGET = ("MATCH (n:Fact) WHERE n.tenant_id = $tenant_id "
          "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")
FORGET_CATALOG = "MATCH (c:SymfonicCatalog {tenant_id: $tenant_id}) DETACH DELETE c"


def p50_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def interleaved(
    n: int, call: Callable[[], Awaitable[object]], floor: Callable[[], Awaitable[object]]
) -> tuple[list[float], list[float]]:
    """Time ``call`` and ``floor`` alternately, so load from other processes hits both alike."""
    calls, floors = [], []
    for _ in range(n):
        calls += await timed(1, call)
        floors += await timed(1, floor)
    return calls, floors


def floor_of(store: GraphMemoryStore) -> Callable[[], Awaitable[object]]:
    """A bare ``RETURN 1`` managed read in a fresh session: the round trip every recall pays."""
    async def tx(t: neo4j.AsyncManagedTransaction) -> None:
        await (await t.run("RETURN 1")).consume()

    async def floor() -> None:
        async with store.driver.session(database=store.database) as session:
            await session.execute_read(tx)

    return floor


def procedure_rows(plan: dict[str, Any]) -> int:
    here = 0
    if plan["operatorType"].startswith("ProcedureCall"):
        here = int(plan.get("rows", plan["args"].get("Rows", 0)))
    return here + sum(procedure_rows(child) for child in plan.get("children") or [])


async def profiled_rows(store: GraphMemoryStore, text: str, params: dict[str, Any]) -> int:
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        summary = await (await session.run("PROFILE " + text, params)).consume()
    return procedure_rows(summary.profile or {"operatorType": "", "args": {}})


@dataclass
class Phase:
    """The figures of one phase (B empty or B full)."""

    name: str
    recall_p50: float = 0.0
    floor_p50: float = 0.0
    recall_rows: int = 0
    old_p50: float | None = None
    old_rows: int | None = None


async def measure(store: GraphMemoryStore, a: MemoryScope, args: argparse.Namespace, name: str, old: bool) -> Phase:
    phase = Phase(name)
    search = recall_search(a.tenant_id, QUESTION)
    hits = await recall(store, a, QUESTION)
    assert hits and all(h.node_id for h in hits), "tenant A must recall its own facts"
    await timed(args.warmup, lambda: recall(store, a, QUESTION))
    calls, floors = await interleaved(args.samples, lambda: recall(store, a, QUESTION), floor_of(store))
    phase.recall_p50, phase.floor_p50 = p50_ms(calls), p50_ms(floors)
    params = {**a.params(), "write_id": None, "search": search, "labels": ["Fact", "Skill", "Trigger"], "limit": 10,
              "search_unstamped": recall_search(a.tenant_id, QUESTION, unstamped=True)}
    phase.recall_rows = await profiled_rows(store, query("memory_recall").text, params)
    if old:
        old_params = {**a.params(), "index": RECALL_INDEX, "search": search.split(" +", 1)[1]}

        async def post_filter() -> None:
            await store.driver.execute_query(POST_FILTER, old_params, database_=store.database,
                                             routing_=neo4j.RoutingControl.READ)

        await timed(2, post_filter)
        phase.old_p50 = p50_ms(await timed(args.old_samples, post_filter))
        phase.old_rows = await profiled_rows(store, POST_FILTER, old_params)
    print(f"{name}: recall p50 {phase.recall_p50:.2f} ms (floor {phase.floor_p50:.2f} ms), "
          f"{phase.recall_rows} rows from the index"
          + ("" if phase.old_p50 is None else
             f"; post-filter query p50 {phase.old_p50:.2f} ms, {phase.old_rows} rows from the index"), flush=True)
    return phase


async def seed_neighbour(store: GraphMemoryStore, b: MemoryScope, n: int, batch: int, workers: int) -> float:
    """Write ``n`` matching facts into ``b`` in batched transactions; return the seconds it took."""
    facts = SemanticLayer(store)
    starts = iter(range(0, n, batch))
    done = 0
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal done
        for start in starts:
            size = min(batch, n - start)
            await facts.add_facts(b, [f"Invoice {start + i} is overdue; remind the customer." for i in range(size)])
            done += size
            if done % (batch * 20) == 0 or done == n:
                print(f"  seeded {done:,}/{n:,} ({done / (time.perf_counter() - started):,.0f} facts/s)", flush=True)

    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    return time.perf_counter() - started


async def forget(store: GraphMemoryStore, *tenants: str) -> float:
    started = time.perf_counter()
    for tenant_id in tenants:
        async with store.driver.session(database=store.database) as session:
            await (await session.run(FORGET, tenant_id=tenant_id)).consume()
            await (await session.run(FORGET_CATALOG, tenant_id=tenant_id)).consume()
    return time.perf_counter() - started


async def main(args: argparse.Namespace) -> None:
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    run = f"bench-recall-{uuid.uuid4().hex[:8]}"
    a, b = MemoryScope(run + "-a"), MemoryScope(run + "-b")
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120.0) as store:
        await store.apply_schema()
        await store.driver.execute_query("CALL db.awaitIndex($name, 600)", {"name": RECALL_INDEX},
                                         database_=store.database)
        old = not args.no_post_filter
        server = await store.server_info()
        print(f"run {run}; Neo4j {server['version']} {server['edition']}; {os.cpu_count()} CPUs; "
              f"B = {args.n:,} facts in batches of {args.batch:,}", flush=True)
        phases: list[tuple[Phase, str]] = []
        try:
            await SemanticLayer(store).add_facts(a, [
                f"Invoice A-{i} is overdue since March." if i % 2 else f"Note {i}: the customer prefers email."
                for i in range(args.a_facts)])
            phases.append((await measure(store, a, args, "B empty", old), "0 facts"))
            seed_secs = await seed_neighbour(store, b, args.n, args.batch, args.workers)
            print(f"seeded B: {args.n:,} facts in {seed_secs:.1f} s ({args.n / seed_secs:,.0f} facts/s); "
                  f"settling {args.settle:g} s", flush=True)
            await anyio.sleep(args.settle)  # let the server finish flushing after the bulk write
            phases.append((await measure(store, a, args, f"B = {args.n:,}", old), f"{args.n:,} facts"))
            if not args.keep:
                print(f"deleted B in {await forget(store, b.tenant_id):.1f} s", flush=True)
                # the same machine load a minute later, B gone again: separates B's effect from the noise
                phases.append((await measure(store, a, args, "B deleted", old), "0 (deleted)"))
        finally:
            if not args.keep:
                await forget(store, a.tenant_id, b.tenant_id)

    print()
    print("| tenant B | recall p50 (tenant clause inside the search) | floor p50 | rows from the index | "
          "post-filter p50 (before the tenant clause) | rows from the index |")
    print("|---|---|---|---|---|---|")
    for phase, size in phases:
        old_cells = ("n/a", "n/a") if phase.old_p50 is None else (f"{phase.old_p50:.2f} ms", f"{phase.old_rows:,}")
        print(f"| {size} | {phase.recall_p50:.2f} ms | {phase.floor_p50:.2f} ms | {phase.recall_rows:,} | "
              f"{old_cells[0]} | {old_cells[1]} |")
    print()
    empty, full = phases[0][0], phases[1][0]
    print(f"recall p50 ratio, B full / B empty: {full.recall_p50 / empty.recall_p50:.2f}x"
          + (f"; B full / B deleted: {full.recall_p50 / phases[2][0].recall_p50:.2f}x" if len(phases) > 2 else ""))
    if empty.old_p50 is not None and full.old_p50 is not None:
        print(f"post-filter p50 ratio, B full / B empty: {full.old_p50 / empty.old_p50:.2f}x")
    print(f"seeding: {args.n:,} facts in {seed_secs:.1f} s ({args.n / seed_secs:,.0f} facts/s, "
          f"{args.workers} concurrent writers)")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.recall_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: B = 20,000 facts, few samples")
    p.add_argument("--n", type=int, default=None, help="facts seeded into tenant B (default 1,000,000)")
    p.add_argument("--batch", type=int, default=MAX_FACTS_PER_WRITE, help="facts per write transaction")
    p.add_argument("--workers", type=int, default=2, help="concurrent seeding transactions")
    p.add_argument("--a-facts", type=int, default=20, help="facts of tenant A (half of them match)")
    p.add_argument("--samples", type=int, default=None, help="timed recalls per phase (default 300)")
    p.add_argument("--warmup", type=int, default=30, help="untimed recalls before each phase")
    p.add_argument("--settle", type=float, default=None, help="seconds to wait after seeding (default 15)")
    p.add_argument("--old-samples", type=int, default=None, help="timed post-filter queries per phase (default 10)")
    p.add_argument("--no-post-filter", action="store_true", help="skip the pre-issue-12 comparison query")
    p.add_argument("--keep", action="store_true", help="keep both tenants (default: delete them at the end)")
    a = p.parse_args(argv)
    a.n = a.n if a.n is not None else (20_000 if a.quick else 1_000_000)
    a.samples = a.samples or (50 if a.quick else 300)
    a.old_samples = a.old_samples or (5 if a.quick else 10)
    a.settle = a.settle if a.settle is not None else (1.0 if a.quick else 15.0)
    if not 1 <= a.batch <= MAX_FACTS_PER_WRITE:
        p.error(f"--batch must be from 1 to {MAX_FACTS_PER_WRITE}")
    return a


if __name__ == "__main__":
    anyio.run(main, parse())
