"""Seed a file of 100,000 skills through the CLI while another tenant runs turns (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first (the dev server, never the
test one), then::

    python -m bench.seed_scale_bench                 # 100,000 skills in 50 namespaces of 2,000
    python -m bench.seed_scale_bench --skills 10000  # a quicker run

It writes the file (compact JSON, each namespace at the per-scope cap), runs
``symfonic-graph seed`` on it into a fresh tenant, and meanwhile: samples the
server's open transactions for their estimated heap use (the figure Neo4j's
transaction memory pool limits), and runs turns (``TurnMemory.begin``, a
fresh cache each time, so every turn reads the graph) for another tenant of
20 skills. Prints the seed's wall time, the CLI's peak RSS, the peak
transaction heap, and the quiet vs. during-seed median and p95 turn latency.
Both tenants are erased at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph.memory.layers.procedural import ProceduralLayer
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.shape._limits import MAX_SKILLS_PER_SCOPE


def write_file(path: Path, tenant: str, skills: int) -> int:
    """A seed file of ``skills`` skills for ``tenant``, in namespaces of at most the per-scope cap."""
    per = MAX_SKILLS_PER_SCOPE
    scopes = []
    for ns in range(0, skills, per):
        rows = [{"label": f"Skill {n}", "identifier": f"s{n}", "steps": ["act"], "source_tag": "authored:bench",
                 "action_tool": f"t{n % 50}", "precondition": [f"p{n % 7}"]} for n in range(ns, min(ns + per, skills))]
        scopes.append({"tenant": tenant, "namespace": f"ns-{ns // per}", "skills": rows})
    path.write_text(json.dumps({"tenant": tenant, "scopes": scopes}, separators=(",", ":")), encoding="utf-8")
    return path.stat().st_size


async def turn_ms(store: GraphMemoryStore, scope: MemoryScope) -> float:
    started = time.perf_counter()
    await TurnMemory(store).begin(scope)
    return (time.perf_counter() - started) * 1000


async def main(args: argparse.Namespace) -> None:
    uri, user, password = os.environ["NEO4J_URI"], os.environ["NEO4J_USER"], os.environ["NEO4J_PASSWORD"]
    bulk, quiet = f"bench-seed-{uuid.uuid4().hex[:8]}", f"bench-quiet-{uuid.uuid4().hex[:8]}"
    async with GraphMemoryStore.connect(uri, user, password, query_timeout=60) as store:
        await store.apply_schema()
        other = MemoryScope(quiet)
        layer = ProceduralLayer(store)
        for n in range(20):
            await layer.seed_authored_skill(other, label=f"Quiet {n}", steps=["go"], source_tag="authored:bench",
                                            action_tool=f"tool_{n}", precondition=["get_status"], identifier=f"q{n}")
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "seed.json"
                size = write_file(path, bulk, args.skills)
                print(f"file: {args.skills} skills in {-(-args.skills // MAX_SKILLS_PER_SCOPE)} namespaces, "
                      f"{size / 1e6:.1f} MB")
                quiet_ms = [await turn_ms(store, other) for _ in range(args.turns)]
                busy_ms: list[float] = []
                heap: list[int] = [0]
                done = anyio.Event()

                async def turns() -> None:
                    while not done.is_set():
                        busy_ms.append(await turn_ms(store, other))
                        await anyio.sleep(0.05)

                async def sample() -> None:
                    while not done.is_set():
                        records, _, _ = await store.driver.execute_query(
                            "SHOW TRANSACTIONS YIELD estimatedUsedHeapMemory RETURN max(estimatedUsedHeapMemory) AS m")
                        heap.append(int(records[0]["m"] or 0))
                        await anyio.sleep(0.5)

                async def seed() -> None:
                    started = time.perf_counter()
                    proc = await anyio.run_process(
                        [sys.executable, "-m", "symfonic_graph.cli", "seed", str(path)], check=False)
                    seconds = time.perf_counter() - started
                    done.set()
                    out = proc.stdout.decode().strip().splitlines()
                    print(f"seed: exit {proc.returncode} in {seconds:.1f} s; {len(out)} lines, last: "
                          f"{out[-1] if out else proc.stderr.decode().strip()[-300:]}")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(turns)
                    tg.start_soon(sample)
                    tg.start_soon(seed)
            peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            visible = len(await layer.query_skills(MemoryScope(bulk, "ns-0"), top_k=MAX_SKILLS_PER_SCOPE))
            print(f"peak: CLI process RSS {peak_rss:.0f} MB; largest open transaction's estimated heap "
                  f"{max(heap) / 1e6:.1f} MB")
            print(f"visible after: {visible} skills in {bulk} ns-0")

            def stats(ms: list[float]) -> str:
                p95 = sorted(ms)[int(len(ms) * 0.95) - 1] if len(ms) >= 20 else max(ms)
                return f"median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms ({len(ms)} turns)"

            print(f"turns of another tenant: quiet {stats(quiet_ms)}; during the seed {stats(busy_ms)}")
        finally:
            started = time.perf_counter()
            erased = await store.erase(MemoryScope(bulk))
            await store.erase(MemoryScope(quiet))
            print(f"erased {bulk} ({erased.get('Skill', 0)} skills) in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=100, help="quiet turns measured before the seed")
    anyio.run(main, parser.parse_args())
