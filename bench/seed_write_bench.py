"""Bulk writes at scale: ``seed_skills`` throughput with concurrent writers, and where a batch's time goes.

Run against a server of its own (never the shared test one)::

    python -m bench.seed_write_bench                     # 20,000 skills, batches of 1,000, 1 and 4 writers
    python -m bench.seed_write_bench --rounds 3 --profile

Each round measures the floor (``RETURN 1`` auto-commit, median of 50)
and then seeds ``--skills`` skills with ``seed_skills`` in ``--batch``-sized
calls, once with one writer and once with ``--writers`` (one tenant per
writer, a namespace per 2,000 skills: the per-scope cap), printing skills/s
and the CPU each skill cost the client and (when NEO4J_URI is the local
server of SYMFONIC_GRAPH_HOME) the Neo4j process. The client's share (validating and building the rows) is timed apart.
``--profile`` then times each statement of one batch's transaction on the
server (the steps ``seed_skills`` runs, one by one in one transaction,
rolled back) into a scope already holding 1,000 skills. Tenants are erased
at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import neo4j

from bench.turn_bench import limited, skill_specs
from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store.cypher import query
from symfonic_graph._store.steps import as_step, catalog_first
from symfonic_graph.memory.layers import procedural
from symfonic_graph.memory.layers.procedural import ProceduralLayer
from symfonic_graph.server import LocalNeo4j
from symfonic_graph.shape._limits import MAX_SKILLS_PER_SCOPE


async def floor_ms(driver: neo4j.AsyncDriver, database: str, n: int = 50) -> float:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        async with driver.session(database=database) as session:
            await (await session.run("RETURN 1")).consume()
        out.append(time.perf_counter() - started)
    return statistics.median(out) * 1000


def server_cpu() -> Callable[[], float]:
    """Seconds of CPU the local Neo4j (``symfonic-graph server start``) has used so far; 0 when not local."""
    state = LocalNeo4j().recorded()
    stat = Path(f"/proc/{state.pid}/stat") if state is not None else None
    if stat is None or not stat.exists() or not os.environ.get("NEO4J_URI", "").endswith(f":{state.port}"):
        return lambda: 0.0
    ticks = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    return used


async def bulk(store: GraphMemoryStore, prefix: str, n: int, batch: int, writers: int) -> tuple[float, float, float]:
    """(seconds, client CPU seconds, server CPU seconds) to seed ``n`` skills over ``writers`` tenants at once."""
    layer, per = ProceduralLayer(store), n // writers
    specs = [s.model_copy(update={"identifier": f"bulk-{i}"}) for i, s in enumerate(skill_specs(random.Random(1), per))]

    async def writer(w: int) -> None:
        for i in range(0, per, batch):
            scope = MemoryScope(f"{prefix}-w{writers}-{w}", f"ns-{i // MAX_SKILLS_PER_SCOPE}")
            await layer.seed_skills(scope, specs[i:i + batch])

    cpu = server_cpu()
    started, client, server = time.perf_counter(), time.process_time(), cpu()
    await limited(writers, writers, writer)
    return time.perf_counter() - started, time.process_time() - client, cpu() - server


def client_ms(batch: int) -> float:
    """Milliseconds of client CPU to validate and build one batch's rows."""
    specs = skill_specs(random.Random(2), batch)
    scope = MemoryScope("bench-client")
    started = time.perf_counter()
    procedural._approved_rows(scope, specs, None)
    return (time.perf_counter() - started) * 1000


async def profile(store: GraphMemoryStore, prefix: str, batch: int) -> None:
    """Time each statement of one ``seed_skills`` batch on the server, in one transaction rolled back."""
    layer = ProceduralLayer(store)
    scope = MemoryScope(f"{prefix}-profile", "ns-0")
    specs = [s.model_copy(update={"identifier": f"p-{i}"})
             for i, s in enumerate(skill_specs(random.Random(3), 2 * batch))]
    await layer.seed_skills(scope, specs[:batch])
    rows = procedural._approved_rows(scope, specs[batch:], None)
    captured: list[Any] = []

    async def capture(steps: Any) -> Any:
        captured.extend(catalog_first([as_step(s) for s in steps]))
        raise _Captured

    real = store.write_staged
    store.write_staged = lambda scope, wid, steps: capture(steps)  # type: ignore[method-assign,assignment,misc]
    try:
        await layer._write(rows, scope, None)
    except _Captured:
        pass
    finally:
        store.write_staged = real  # type: ignore[method-assign]
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        tx = await session.begin_transaction()
        try:
            for step in captured:
                started = time.perf_counter()
                await (await tx.run(query(step.query).text, dict(step.params))).consume()
                print(f"  {step.name:28s} {(time.perf_counter() - started) * 1000:8.1f} ms")
        finally:
            await tx.rollback()


class _Captured(Exception):
    pass


async def main(args: argparse.Namespace) -> None:
    uri, user, password = os.environ["NEO4J_URI"], os.environ["NEO4J_USER"], os.environ["NEO4J_PASSWORD"]
    prefix = f"bench-bulk-{uuid.uuid4().hex[:8]}"
    print(f"client: validate and build {args.batch} rows: {client_ms(args.batch):.1f} ms")
    async with GraphMemoryStore.connect(uri, user, password, query_timeout=120) as store:
        await store.apply_schema()
        try:
            for r in range(args.rounds):
                floor = await floor_ms(store.driver, store.database)
                line = [f"round {r}: floor {floor:.2f} ms"]
                for writers in (1, args.writers):
                    seconds, client, server = await bulk(store, f"{prefix}-r{r}", args.skills, args.batch, writers)
                    line.append(f"{writers} writer(s) {args.skills / seconds:,.0f} skills/s ({seconds:.1f} s; CPU per "
                                f"skill: client {client / args.skills * 1e6:.0f} us, Neo4j "
                                f"{server / args.skills * 1e6:.0f} us)")
                print("; ".join(line), flush=True)
            if args.profile:
                print(f"one batch of {args.batch} into a scope of {args.batch} (server, statement by statement):")
                await profile(store, prefix, args.batch)
        finally:
            found = await store.driver.execute_query(
                "MATCH (s:Skill) WHERE s.tenant_id STARTS WITH $p RETURN DISTINCT s.tenant_id AS t",
                p=prefix, database_=store.database)
            tenants = [r["t"] for r in found.records]
            for tenant in tenants:
                await store.erase(MemoryScope(tenant))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    anyio.run(main, parser.parse_args())
