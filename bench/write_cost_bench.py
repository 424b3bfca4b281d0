"""What one write costs, and how much of it is the full-text indexes.

    python -m bench.write_cost_bench        # against the server in NEO4J_URI (e.g. the dev server)

Each figure is the median of ``ROUNDS`` calls, one after another, and its
ratio to the floor (``RETURN 1`` as an auto-commit query) measured in the
same run. A node of a label no index covers, and a ``:Fact`` node written
by hand, show what the full-text indexes add to a commit; the library's
writes follow. When the server is the local one (``symfonic-graph server
start``), the Neo4j process's CPU time per call is printed too. Nodes are
written under a fresh tenant and erased afterwards.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import neo4j

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.server import LocalNeo4j

ROUNDS = 60
WARMUP = 10
PROBE_LABEL = "SymfonicBenchProbe"  # no index covers it


def _server_cpu() -> Callable[[], float] | None:
    """Seconds of CPU the local Neo4j has used so far, when NEO4J_URI is the local server."""
    state = LocalNeo4j().recorded()
    if state is None or not os.environ.get("NEO4J_URI", "").endswith(f":{state.port}"):
        return None
    stat = Path(f"/proc/{state.pid}/stat")
    if not stat.exists():
        return None
    ticks = os.sysconf("SC_CLK_TCK")

    def used() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    return used


async def _measure(call: Callable[[int], Awaitable[Any]], cpu: Callable[[], float] | None) -> tuple[float, float]:
    for i in range(WARMUP):
        await call(-1 - i)
    durations = []
    cpu_before = cpu() if cpu else 0.0
    for i in range(ROUNDS):
        started = time.perf_counter()
        await call(i)
        durations.append(time.perf_counter() - started)
    cpu_per_call = (cpu() - cpu_before) / ROUNDS if cpu else float("nan")
    return statistics.median(durations), cpu_per_call


async def main() -> None:
    driver = neo4j.AsyncGraphDatabase.driver(
        os.environ["NEO4J_URI"], auth=(os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"]))
    store = GraphMemoryStore(driver, query_timeout=120)
    scope = MemoryScope(f"bench-write-{uuid.uuid4().hex[:8]}")
    cpu = _server_cpu()

    async def auto_commit(query: str, **params: Any) -> None:
        async with driver.session(database=store.database) as session:
            await (await session.run(query, params)).consume()

    text = "the customer asked for a refund of the last invoice"
    calls: dict[str, Callable[[int], Awaitable[Any]]] = {
        "floor: RETURN 1": lambda i: auto_commit("RETURN 1"),
        f"CREATE a :{PROBE_LABEL} node (no index)": lambda i: auto_commit(
            f"CREATE (:{PROBE_LABEL} {{tenant_id: $t, text: $text}})", t=scope.tenant_id, text=text),
        "CREATE a :Fact node by hand": lambda i: auto_commit(
            "CREATE (:Fact {tenant_id: $t, id: randomUUID(), text: $text})", t=scope.tenant_id, text=text),
        "SemanticLayer.add_fact": lambda i: SemanticLayer(store).add_fact(scope, f"{text} {i}"),
        "ProspectiveLayer.set_trigger": lambda i: ProspectiveLayer(store).set_trigger(
            scope, condition="refund", task=f"{text} {i}"),
        "ProceduralLayer.seed_authored_skill": lambda i: ProceduralLayer(store).seed_authored_skill(
            scope, label=f"Refund {i}", steps=["verify", "refund"], source_tag="authored:bench",
            action_tool="refund", precondition=["verify"], identifier=f"refund-{i}"),
    }
    try:
        records, _, _ = await driver.execute_query(
            "SHOW FULLTEXT INDEXES YIELD name, labelsOrTypes WHERE 'Fact' IN labelsOrTypes RETURN name ORDER BY name",
            database_=store.database)
        print(f"full-text indexes over :Fact: {', '.join(r['name'] for r in records) or 'none'}")
        floor = None
        for name, call in calls.items():
            median, cpu_per_call = await _measure(call, cpu)
            floor = floor or median
            server = f", Neo4j CPU {cpu_per_call * 1000:6.1f} ms" if cpu else ""
            print(f"{name:44s} p50 {median * 1000:6.2f} ms ({median / floor:5.2f}x the floor){server}")
    finally:
        await auto_commit(f"MATCH (n:{PROBE_LABEL} {{tenant_id: $t}}) DELETE n", t=scope.tenant_id)
        await store.erase(scope)
        await driver.close()


if __name__ == "__main__":
    asyncio.run(main())
