"""Benchmark a fleet: many end-user scopes, turns arriving at a rate, several processes, one Neo4j.

Run it against a Neo4j of its own (it writes many tenants and loads the server)::

    eval "$(SYMFONIC_GRAPH_HOME=/tmp/benchhome SYMFONIC_NEO4J_PORT=7720 \\
            symfonic-graph server start --port-variable SYMFONIC_NEO4J_PORT)"
    python -m bench.fleet_bench --server-home /tmp/benchhome          # 10,000 scopes, 100 tenants
    python -m bench.fleet_bench --scopes 1000 --tenants 10 --seconds 5  # a smaller fleet

The fleet: ``--tenants`` tenants of ``--skills`` tenant-wide skills each (the
generator of ``bench.turn_bench``), 3 pending reminders each, and
``--scopes`` end users spread over them (one namespace each; 5% hold one
skill of their own). ``--procs`` worker processes each own a shard of the end
users (a sticky load balancer) and one ``TurnMemory`` with the defaults, the
way a deployment runs it.

Turns arrive open loop (Poisson) at a given total rate, spread over the
processes; an end user is picked uniformly in the shard, so how often a turn
finds its cached catalog older than ``max_age`` follows from the rate and the
number of end users, as in a fleet. One turn is ``begin`` + the pre-flight
block + the gate for one tool call; ``--first-reads`` of the turns (default
1%) find the process without the end user's catalog (a user new to that
process); ``--writes`` library writes a second (a re-seed of one tenant's
skill, which bumps its catalog) run in the first process meanwhile. A
turn's latency counts from its arrival, queueing included.

Before the first step each process reads every end user of its shard once and
then spreads the age of each cached catalog uniformly over the period after
which ``TurnMemory`` ships an unchanged catalog again (the steady state of a
fleet that has run for a while; before the recheck period existed that period
was ``max_age``).

The rate climbs by ``--step`` (x1.25) from ``--start-rate``; a step holds for
``--seconds``. The sustained rate is the highest step whose p99 stays under
``--p99-ms`` (50) with at least 97% of its turns done within the step (a
step that fails runs twice more before the ladder stops). The
floor, ``RETURN 1`` as an auto-commit query from the same processes, climbs
the same ladder, step by step after the turns' step, so drift hits both. The
server's CPU (utime + stime of the Neo4j process tree, from /proc, less what
the idle server spends, measured for 5 s before the ladder) is divided by the
turns of the step. Then, without a latency bound, ``--closed`` (32) turns per
process run back to back for a step, alternated twice with the floor: the
most the fleet gets through, and the server's CPU per turn at that load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import random
import time
import uuid
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.turn_bench import TOOLS, skill_specs
from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.memory.layers.procedural import ProceduralLayer, _skill_row
from symfonic_graph.memory.layers.prospective import trigger_row
from symfonic_graph.memory.turn import TurnMemory

Scope = tuple[str, str]


class ShipCountingStore(GraphMemoryStore):
    """The real store on the same driver, counting what the server returned: turn rows, those that shipped skills."""

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.rows = 0
        self.shipped = 0
        self.queries = 0

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        rows = await super().read(name, **params)
        if name.startswith("turn_snapshot"):
            self.queries += 1
            self.rows += len(rows)
            self.shipped += sum(1 for row in rows if row.get("skills_fresh"))
        return rows


def _connect_args() -> tuple[str, str, str, str | None]:
    return (os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687"), os.environ.get("NEO4J_USER", "neo4j"),
            os.environ.get("NEO4J_PASSWORD", ""), os.environ.get("NEO4J_DATABASE") or None)


async def seed(store: GraphMemoryStore, prefix: str, tenants: int, skills: int, scopes: int) -> list[Scope]:
    """Write the fleet's catalogs (the library's own row builder and UNWIND write); return the end users."""
    specs = [s.model_dump() for s in skill_specs(random.Random(3), skills)]
    names = [f"{prefix}-t{i}" for i in range(tenants)]
    users = [(names[i % tenants], f"user-{i}") for i in range(scopes)]
    own_spec = skill_specs(random.Random(5), 1)[0].model_copy(update={"identifier": "own", "label": "Own"})
    for i in range(0, tenants, 10):
        chunk = [MemoryScope(t) for t in names[i:i + 10]]
        rows = [_skill_row(sc, spec, "approved", None, field_prefix="") for sc in chunk for spec in specs]
        own = [_skill_row(MemoryScope(t, ns), own_spec.model_dump(), "approved", None, field_prefix="")
               for k, (t, ns) in enumerate(users) if k % 20 == 7 and t in {sc.tenant_id for sc in chunk}]
        bumps = [("catalog_bump", {"tenant_id": sc.tenant_id}) for sc in chunk]
        await store.write([("skills_write", {"rows": rows + own}), *bumps])
    rows = [trigger_row(MemoryScope(t), condition=f"mentions topic {k}", task=f"Remind about topic {k}.")
            for t in names for k in range(3)]
    for i in range(0, len(rows), 5000):
        await store.write([("triggers_write", {"rows": rows[i:i + 5000]})])
    return users


async def cleanup(store: GraphMemoryStore, prefix: str) -> None:
    for label in ("Precondition", "Skill", "Trigger", "SymfonicCatalog"):
        text = (f"MATCH (n:{label}) WHERE n.tenant_id STARTS WITH $prefix "
                "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 20000 ROWS")
        async with store.driver.session(database=store.database) as session:
            await (await session.run(text, prefix=prefix + "-")).consume()


# ---------------------------------------------------------------- worker process

class Worker:
    def __init__(self, store: ShipCountingStore, shard: list[Scope], tenants: list[str], args: dict[str, Any],
                 index: int) -> None:
        self.store = store
        self.memory = TurnMemory(store)
        self.scopes = [MemoryScope(t, ns) for t, ns in shard]
        self.tenants = tenants
        self.args = args
        self.index = index
        self.writes = 0

    async def prewarm(self) -> float:
        sem = asyncio.Semaphore(64)

        async def one(scope: MemoryScope) -> None:
            async with sem:
                await self.memory.begin(scope)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(s) for s in self.scopes))
        period = float(getattr(self.memory, "recheck_every", self.memory.max_age))
        now, rng = self.memory.clock(), random.Random(self.index)
        for catalog in self.memory._catalogs.values():  # the steady state: last shipped any time in the period
            catalog.fetched_at = now - rng.uniform(0, period)
        gc.collect()
        gc.freeze()  # the fleet's caches are long-lived: keep them out of the collector's full passes
        return time.perf_counter() - t0

    async def turn(self, rng: random.Random) -> None:
        scope = rng.choice(self.scopes)
        if rng.random() < self.args["first_reads"]:
            self.memory._catalogs.pop(scope, None)  # a user new to this process
        tool = rng.choice(TOOLS)
        state = {"memory_scope": scope, "channel": "slack",
                 "messages": [{"role": "assistant", "tool_calls": [{"name": tool, "id": "c1", "args": {}}]}]}
        snapshot = await self.memory.begin(scope)
        snapshot.preflight(state)
        skills = await self.memory.get_active_skills(state)
        explain_tool_call(skills, tool, state=state, called=["get_status"], call_id="c1")

    async def floor(self, rng: random.Random) -> None:
        async with self.store.driver.session(database=self.store.database) as session:
            await (await session.run("RETURN 1")).consume()

    async def write(self, rng: random.Random) -> None:
        tenant = rng.choice(self.tenants)
        spec = skill_specs(random.Random(3), 1)[0]
        await ProceduralLayer(self.store).seed_authored_skill(
            MemoryScope(tenant), label=f"Skill 0 v{rng.randrange(10**6)}", steps=spec.steps,
            source_tag="authored:bench", action_tool=spec.action_tool, precondition=spec.precondition,
            context=spec.context, identifier=spec.identifier)
        self.writes += 1

    async def step(self, kind: str, rate: float, seconds: float, seed: int) -> dict[str, Any]:
        """Arrivals at ``rate``/s for ``seconds`` (open loop); latencies from arrival, in seconds (inf: not done)."""
        loop = asyncio.get_running_loop()
        rng = random.Random(seed)
        work = self.turn if kind == "turn" else self.floor
        lat: list[float] = []
        tasks: set[asyncio.Task[None]] = set()

        async def one(at: float, r: random.Random) -> None:
            await work(r)
            lat.append(loop.time() - at)

        def launch(at: float, r: random.Random) -> None:
            task = loop.create_task(one(at, r))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        start = loop.time() + 0.05
        at, handles, offered = start, [], 0
        while True:
            at += rng.expovariate(rate)
            if at >= start + seconds:
                break
            handles.append(loop.call_at(at, launch, at, random.Random(rng.random())))
            offered += 1
        writer = None
        if kind == "turn" and self.index == 0 and self.args["writes"] > 0:
            writer = loop.create_task(self._writes(start, seconds, rng))
        rows0, shipped0, queries0 = self.store.rows, self.store.shipped, self.store.queries
        cpu0 = time.process_time()
        await asyncio.sleep(max(0.0, start + seconds - loop.time()))
        deadline = loop.time() + self.args["p99_ms"] / 1000 * 4 + 1.0
        while tasks and loop.time() < deadline:
            await asyncio.sleep(0.01)
        late = len(tasks)
        for task in list(tasks):
            task.cancel()
        for h in handles:
            h.cancel()
        if writer is not None:
            writer.cancel()
        await asyncio.sleep(0.2)  # let cancelled turns unwind
        return {"lat": lat, "offered": offered, "late": late, "cpu": time.process_time() - cpu0,
                "rows": self.store.rows - rows0, "shipped": self.store.shipped - shipped0,
                "queries": self.store.queries - queries0, "writes": self.writes}

    async def closed(self, kind: str, conc: int, seconds: float, seed: int) -> dict[str, Any]:
        """``conc`` loops back to back for ``seconds``: the most this process gets through (no latency bound)."""
        work = self.turn if kind == "turn" else self.floor
        rows0, shipped0 = self.store.rows, self.store.shipped
        stop = time.perf_counter() + seconds
        done = [0]

        async def loop(r: random.Random) -> None:
            while time.perf_counter() < stop:
                await work(r)
                done[0] += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(loop(random.Random(seed * 1000 + i)) for i in range(conc)))
        return {"done": done[0], "seconds": time.perf_counter() - t0, "rows": self.store.rows - rows0,
                "shipped": self.store.shipped - shipped0}

    async def _writes(self, start: float, seconds: float, rng: random.Random) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(rng.expovariate(self.args["writes"]))
            if loop.time() >= start + seconds:
                return
            try:
                await self.write(rng)
            except Exception as exc:  # a failed write is reported, the bench goes on
                print(f"write failed: {exc}", flush=True)


def worker_main(conn: Connection, index: int, shard: list[Scope], tenants: list[str], args: dict[str, Any]) -> None:
    asyncio.run(_worker(conn, index, shard, tenants, args))


async def _worker(conn: Connection, index: int, shard: list[Scope], tenants: list[str], args: dict[str, Any]) -> None:
    uri, user, pw, db = _connect_args()
    async with GraphMemoryStore.connect(uri, user, pw, database=db) as base:
        worker = Worker(ShipCountingStore(base), shard, tenants, args, index)
        conn.send(("ready", await worker.prewarm()))
        loop = asyncio.get_running_loop()
        while True:
            msg = await loop.run_in_executor(None, conn.recv)
            if msg[0] == "stop":
                return
            if msg[0] == "closed":
                _, kind, conc, seconds, seed = msg
                conn.send(await worker.closed(kind, conc, seconds, seed))
                continue
            _, kind, rate, seconds, seed = msg
            conn.send(await worker.step(kind, rate, seconds, seed))


# ---------------------------------------------------------------- parent

def server_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of the process ``pid`` and its descendants, from /proc; 0.0 without one."""
    if pid is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        tree.add(p)
        todo.extend(c for c, pp in parents.items() if pp == p and c not in tree)
    return sum(times.get(p, 0.0) for p in tree)


def pct(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000 if s else float("inf")


def run_step(conns: list[Connection], kind: str, rate: float, seconds: float, seed: int,
             pid: int | None, idle: float = 0.0) -> dict[str, Any]:
    cpu0, t0 = server_cpu(pid), time.perf_counter()
    for i, conn in enumerate(conns):
        conn.send(("step", kind, rate / len(conns), seconds, seed * 100 + i))
    parts = [conn.recv() for conn in conns]
    spent = server_cpu(pid) - cpu0 - idle * (time.perf_counter() - t0)  # less what the idle server spends
    lat = [x for p in parts for x in p["lat"]] + [float("inf")] * sum(p["late"] for p in parts)
    offered = sum(p["offered"] for p in parts)
    done = sum(len(p["lat"]) for p in parts)
    rows = sum(p["rows"] for p in parts)
    return {"kind": kind, "rate": rate, "offered": offered, "done": done,
            "p50": pct(lat, 50), "p99": pct(lat, 99), "server_cpu_us": spent / max(1, done) * 1e6,
            "client_cpu_us": sum(p["cpu"] for p in parts) / max(1, done) * 1e6,
            "shipped": sum(p["shipped"] for p in parts) / max(1, rows), "rows": rows,
            "rows_per_query": rows / max(1, sum(p["queries"] for p in parts)),
            "writes": max(p["writes"] for p in parts)}


def run_closed(conns: list[Connection], kind: str, conc: int, seconds: float, seed: int,
               pid: int | None, idle: float) -> dict[str, Any]:
    """Turns (or floor round trips) a second with ``conc`` in flight per process, and the server's CPU per one."""
    cpu0, t0 = server_cpu(pid), time.perf_counter()
    for i, conn in enumerate(conns):
        conn.send(("closed", kind, conc, seconds, seed * 100 + i))
    parts = [conn.recv() for conn in conns]
    wall = time.perf_counter() - t0
    done = sum(p["done"] for p in parts)
    spent = server_cpu(pid) - cpu0 - idle * wall
    return {"kind": kind, "per_s": done / max(p["seconds"] for p in parts), "done": done,
            "server_cpu_us": spent / max(1, done) * 1e6,
            "shipped": sum(p["shipped"] for p in parts) / max(1, sum(p["rows"] for p in parts))}


def passes(r: dict[str, Any], p99_ms: float) -> bool:
    return r["p99"] < p99_ms and r["done"] >= 0.97 * r["offered"]


def show(r: dict[str, Any]) -> None:
    extra = (f"  shipped {r['shipped']:6.1%} of {r['rows']} rows, {r['rows_per_query']:.1f} rows/query"
             if r["kind"] == "turn" else "")
    print(f"{r['kind']:5} {r['rate']:8.0f}/s  done {r['done']:6}/{r['offered']:<6} p50 {r['p50']:7.2f} ms  "
          f"p99 {r['p99']:8.2f} ms  server {r['server_cpu_us']:6.0f} us/op  client {r['client_cpu_us']:6.0f} us/op"
          f"{extra}", flush=True)


def main(args: argparse.Namespace) -> None:
    uri, user, pw, db = _connect_args()
    prefix = f"fleet-{uuid.uuid4().hex[:8]}"
    pid = None
    if args.server_home:
        pid = json.loads((Path(args.server_home) / "server.json").read_text()).get("pid")

    async def setup() -> list[Scope]:
        async with GraphMemoryStore.connect(uri, user, pw, database=db) as store:
            await store.apply_schema()
            t0 = time.perf_counter()
            users = await seed(store, prefix, args.tenants, args.skills, args.scopes)
            print(f"seeded {args.tenants} tenants x {args.skills} skills, {len(users)} end users "
                  f"({len(users) // 20} with a skill of their own) in {time.perf_counter() - t0:.1f} s", flush=True)
            return users

    users = asyncio.run(setup())
    tenants = sorted({t for t, _ in users})
    options = {"first_reads": args.first_reads, "writes": args.writes, "p99_ms": args.p99_ms}
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for i in range(args.procs):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(child, i, users[i::args.procs], tenants, options))
        proc.start()
        conns.append(parent)
        procs.append(proc)
    try:
        warm = [conn.recv()[1] for conn in conns]
        print(f"{args.procs} processes read their shards in {max(warm):.1f} s", flush=True)
        for kind in ("turn", "floor"):  # untimed: the server plans and compiles the queries, the JIT warms up
            run_step(conns, kind, args.start_rate, args.seconds, 0, pid)
        cpu0 = server_cpu(pid)
        time.sleep(5)
        idle = (server_cpu(pid) - cpu0) / 5
        print(f"idle server: {idle * 1000:.0f} ms of CPU a second (subtracted from each step)", flush=True)
        results: list[dict[str, Any]] = []
        rate, alive = args.start_rate, {"turn", "floor"}
        step_seed = 1
        while alive and rate <= args.max_rate:
            for kind in ("turn", "floor"):
                if kind in alive:
                    for _attempt in range(3):  # a failed step runs twice more: a hiccup of the box is no limit
                        r = run_step(conns, kind, rate, args.seconds, step_seed, pid, idle)
                        step_seed += 1
                        show(r)
                        results.append(r)
                        if passes(r, args.p99_ms):
                            break
                    else:
                        alive.discard(kind)
            rate *= args.step
        closed = []
        if args.closed:
            for kind in ("turn", "floor", "turn", "floor"):  # alternated, so drift hits both
                c = run_closed(conns, kind, args.closed, args.seconds, step_seed, pid, idle)
                step_seed += 1
                print(f"{kind:5} closed loop, {args.closed} in flight per process: {c['per_s']:7.0f}/s  server "
                      f"{c['server_cpu_us']:6.0f} us/op" + (f"  shipped {c['shipped']:.1%}" if kind == "turn" else ""),
                      flush=True)
                closed.append(c)
        summary(results, args)
        if closed:
            t = [c for c in closed if c["kind"] == "turn"]
            f = [c for c in closed if c["kind"] == "floor"]
            turns, floors = sum(c["done"] for c in t), sum(c["done"] for c in f)
            rate_t = sum(c["per_s"] for c in t) / len(t)
            rate_f = sum(c["per_s"] for c in f) / len(f)
            cpu_t = sum(c["server_cpu_us"] * c["done"] for c in t) / max(1, turns)
            cpu_f = sum(c["server_cpu_us"] * c["done"] for c in f) / max(1, floors)
            print(f"closed loop ({args.closed} in flight per process): {rate_t:.0f} turns/s, floor {rate_f:.0f}/s, "
                  f"ratio {rate_t / rate_f:.2f}; server CPU {cpu_t:.0f} us/turn, floor {cpu_f:.0f} us, "
                  f"ratio {cpu_t / max(1.0, cpu_f):.2f}")
    finally:
        for conn in conns:
            conn.send(("stop",))
        for proc in procs:
            proc.join(30)

        async def drop() -> None:
            async with GraphMemoryStore.connect(uri, user, pw, database=db) as store:
                await cleanup(store, prefix)

        if not args.keep:
            asyncio.run(drop())


def summary(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    def best(kind: str) -> dict[str, Any] | None:
        ok = [r for r in results if r["kind"] == kind and passes(r, args.p99_ms)]
        return max(ok, key=lambda r: r["rate"]) if ok else None

    turn, fl = best("turn"), best("floor")
    print()
    print(f"fleet: {args.scopes} end users, {args.tenants} tenants x {args.skills} skills, {args.procs} processes, "
          f"first reads {args.first_reads:.0%}, writes {args.writes}/s, steps of {args.seconds:.0f} s")
    if turn is None or fl is None:
        print("no step passed (lower --start-rate)")
        return
    print(f"sustained turns/s (p99 < {args.p99_ms:.0f} ms): {turn['rate']:.0f}   floor: {fl['rate']:.0f}   "
          f"ratio {turn['rate'] / fl['rate']:.2f}")
    print(f"at that rate: p50 {turn['p50']:.2f} ms, p99 {turn['p99']:.2f} ms, server CPU {turn['server_cpu_us']:.0f} us"
          f"/turn (floor {fl['server_cpu_us']:.0f} us/round trip, ratio "
          f"{turn['server_cpu_us'] / max(1.0, fl['server_cpu_us']):.2f}), "
          f"client CPU {turn['client_cpu_us']:.0f} us/turn, "
          f"turn rows that shipped skills {turn['shipped']:.1%}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fleet_bench", description=__doc__.split("\n")[0])
    p.add_argument("--scopes", type=int, default=10_000, help="end users (default 10,000)")
    p.add_argument("--tenants", type=int, default=100, help="tenants (default 100)")
    p.add_argument("--skills", type=int, default=20, help="tenant-wide skills per tenant (default 20)")
    p.add_argument("--procs", type=int, default=3, help="worker processes sharing the server (default 3)")
    p.add_argument("--first-reads", type=float, default=0.01, help="share of turns that are first reads (0.01)")
    p.add_argument("--writes", type=float, default=0.05, help="library writes per second in the fleet (0.05)")
    p.add_argument("--start-rate", type=float, default=100.0, help="turns/s of the first step (100)")
    p.add_argument("--max-rate", type=float, default=20_000.0, help="stop the ladder above this rate")
    p.add_argument("--step", type=float, default=1.25, help="rate factor between steps (1.25)")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds per step (10)")
    p.add_argument("--p99-ms", type=float, default=50.0, help="the p99 a sustained rate keeps under (50 ms)")
    p.add_argument("--closed", type=int, default=32,
                   help="after the ladder, turns and floor back to back with this many in flight per process "
                        "(0: skip; default 32)")
    p.add_argument("--server-home", help="SYMFONIC_GRAPH_HOME of the server, to read its CPU from /proc")
    p.add_argument("--keep", action="store_true", help="keep this run's nodes")
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse())
