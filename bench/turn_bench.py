"""Benchmark the memory work of one agent turn against a real Neo4j (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.turn_bench            # full run: T in {10, 1000, 10000}, S = 20
    python -m bench.turn_bench --quick    # a smoke run in seconds

One turn = pre-flight block, triggers (``ProspectiveTriggerCapability.contribute``
with a trivial evaluator) and the gate for one tool call (``explain_tool_call``),
measured on every path in ``MODES``: the *separate* reads of the layer API
(3 round trips), ``query_skills`` alone, and ``TurnMemory`` (1 round trip,
shared by concurrent turns) whose cache for the tenant is empty (*cold_first*),
stale (*cold*: ``max_age`` passed, catalog unchanged) or current (*warm*), with
coalescing at its default, off, and with a 1 ms window. The
The
floor is one Bolt round trip, a bare ``RETURN 1`` auto-commit query on the same
driver, interleaved with the turns so drift hits both. Results go to docs/performance.md between the
``bench:begin`` / ``bench:end`` markers (prose outside them is kept).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import random
import resource
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import neo4j

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store.cypher import query
from symfonic_graph.gate import explain_tool_call, gate_decisions
from symfonic_graph.memory.layers.procedural import ProceduralLayer, SkillSpec, _skill_row
from symfonic_graph.memory.layers.prospective import trigger_row
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.rules.preflight import build_preflight_contribution
from symfonic_graph.shape._limits import MAX_SKILLS_PER_SCOPE
from symfonic_graph.skill_source import StoreSkillGetter
from symfonic_graph.triggers import GraphPendingTriggers, ProspectiveTriggerCapability

TOOLS = [f"tool_{i}" for i in range(8)]
PRE_TOOLS = ["get_status", "authenticate", "fetch_account(brand_id=<x>)", "list_items"]
STATE = [{"state": {"path": "channel", "op": "eq", "value": "slack"}},
         {"state": {"path": "channel", "op": "in", "value": ["email", "sms"]}}]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
Timed = Callable[[], Awaitable[object]]


@dataclass
class Env:
    store: GraphMemoryStore
    prefix: str
    skills: int
    triggers: int
    tenants: list[str] = field(default_factory=list)
    warm: TurnMemory | None = None
    shared: dict[str, TurnMemory] = field(default_factory=dict)


def skill_specs(rng: random.Random, n: int) -> list[SkillSpec]:
    out = []
    for j in range(n):
        pre: list[Any] = rng.sample(PRE_TOOLS, rng.randint(1, 3))
        if j % 4 == 0:  # a quarter of the skills carry a state predicate
            pre[-1] = STATE[j % 8 == 0]
        tool = TOOLS[j % len(TOOLS)]
        out.append(SkillSpec(label=f"Skill {j}", steps=[tool], source_tag="authored:bench", action_tool=tool,
                             precondition=pre, context=f"bench skill {j}", identifier=f"skill-{j}"))
    return out


async def limited(n: int, limit: int, work: Callable[[int], Awaitable[None]]) -> None:
    """Run ``work(0..n-1)`` with at most ``limit`` in flight (a bounded worker pool)."""
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            await work(i)

    async with anyio.create_task_group() as tg:
        for _ in range(min(limit, n)):
            tg.start_soon(worker)


async def grow(env: Env, target: int, per_tx: int) -> tuple[float, int]:
    """Seed tenants until there are ``target``; return (seconds, skills written).

    ``per_tx`` tenants share one transaction: the rows are built and validated
    exactly as ``seed_skills`` builds them and go through the same
    ``skills_write`` UNWIND statement, with one ``catalog_bump`` per tenant.
    """
    rng = random.Random(len(env.tenants))
    new = [f"{env.prefix}-t{i}" for i in range(len(env.tenants), target)]
    specs = [s.model_dump() for s in skill_specs(rng, env.skills)]
    started = time.perf_counter()
    for i in range(0, len(new), per_tx):
        chunk = [MemoryScope(t) for t in new[i:i + per_tx]]
        rows = [_skill_row(sc, spec, "approved", None, field_prefix="") for sc in chunk for spec in specs]
        bumps = [("catalog_bump", {"tenant_id": sc.tenant_id}) for sc in chunk]
        await env.store.write([("skills_write", {"rows": rows}), *bumps])
    rows = [trigger_row(MemoryScope(t), condition=f"mentions topic {k}", task=f"Remind about topic {k}.")
            for t in new for k in range(env.triggers)]
    for i in range(0, len(rows), 5000):
        await env.store.write([("triggers_write", {"rows": rows[i:i + 5000]})])
    env.tenants.extend(new)
    return time.perf_counter() - started, len(new) * env.skills


async def bulk_seed(env: Env, n: int, batch: int, writers: int) -> tuple[float, int]:
    """Seed ``n`` skills with ``seed_skills`` in ``batch``-sized calls; return (seconds, preconditions).

    ``writers`` tenants are written concurrently (one task each, n / writers
    skills per tenant, in namespaces of at most ``MAX_SKILLS_PER_SCOPE``):
    writes to different tenants take no common lock, so their transactions
    overlap on the server.
    """
    layer, per = ProceduralLayer(env.store), n // writers
    specs = [s.model_copy(update={"identifier": f"bulk-{i}"}) for i, s in enumerate(skill_specs(random.Random(1), per))]

    async def writer(w: int) -> None:
        for i in range(0, per, batch):  # a namespace per MAX_SKILLS_PER_SCOPE skills: the cap of one scope
            scope = MemoryScope(f"{env.prefix}-bulk{writers}-{w}", f"ns-{i // MAX_SKILLS_PER_SCOPE}")
            await layer.seed_skills(scope, specs[i:i + batch])

    started = time.perf_counter()
    await limited(writers, writers, writer)
    return time.perf_counter() - started, writers * sum(len(s.precondition) for s in specs)


MODES = ("separate", "query_skills", "cold_first", "cold", "warm", "warm_off", "warm_1ms")
ROUND_TRIPS = {"separate": "3", "query_skills": "1", "cold_first": "1, shared", "cold": "1, shared",
               "warm": "1, shared", "warm_off": "1", "warm_1ms": "1, shared"}
MODE_NAMES = {
    "separate": "separate reads (query_skills + GraphPendingTriggers + StoreSkillGetter)",
    "query_skills": "query_skills alone (20 skills)",
    "cold_first": "TurnMemory, cold: first read of the tenant in this process",
    "cold": "TurnMemory, cold: stale cache (max_age passed), catalog unchanged",
    "warm": "TurnMemory, warm (catalog version held)",
    "warm_off": "TurnMemory, warm, coalescing off",
    "warm_1ms": "TurnMemory, warm, coalescing window 1 ms",
}
# The TurnMemory of each mode; every mode but warm_off uses the defaults (coalescing on, window 0).
MEMORY_OPTIONS: dict[str, dict[str, Any]] = {"cold_first": {}, "cold": {}, "warm": {},
                                             "warm_off": {"coalesce_window": None},
                                             "warm_1ms": {"coalesce_window": 0.001}}


def turn_for(env: Env, tenant: str, rng: random.Random, mode: str) -> Timed:
    scope = MemoryScope(tenant)
    tool = rng.choice(TOOLS)
    state = {"memory_scope": scope, "channel": "slack",
             "messages": [{"role": "assistant", "tool_calls": [{"name": tool, "id": "c1", "args": {}}]}]}
    request = SimpleNamespace(prompt="what about topic 1?")

    async def separate() -> None:
        build_preflight_contribution(await ProceduralLayer(env.store).query_skills(scope), state)
        capability = ProspectiveTriggerCapability(GraphPendingTriggers(env.store), lambda c, cue: c in cue, scope)
        await capability.contribute(request)
        skills = await StoreSkillGetter(env.store)(state)
        explain_tool_call(skills, tool, state=state, called=["get_status"], call_id="c1")

    async def one_read() -> None:
        memory = env.shared[mode]
        if mode == "cold_first":
            memory._catalogs.pop(scope, None)  # as if this process had never read the tenant
        elif mode == "cold":
            memory.invalidate(scope)  # as if max_age had passed since this tenant's last turn
        snapshot = await memory.begin(scope)
        snapshot.preflight(state)
        await ProspectiveTriggerCapability(snapshot, lambda c, cue: c in cue, scope).contribute(request)
        skills = await memory.get_active_skills(state)
        explain_tool_call(skills, tool, state=state, called=["get_status"], call_id="c1")

    async def skills_only() -> None:
        await ProceduralLayer(env.store).query_skills(scope)

    return {"separate": separate, "query_skills": skills_only}.get(mode, one_read)


async def floor(env: Env) -> None:
    """The floor: one Bolt round trip, ``RETURN 1`` as an auto-commit query."""
    async with env.store.driver.session(database=env.store.database) as session:
        await (await session.run("RETURN 1")).consume()


def gate_cpu(snapshot: Any, rounds: int = 20_000) -> float:
    """Microseconds of pre-flight block + gate decision per turn on a cached snapshot (no I/O)."""
    state = {"channel": "slack", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"name": TOOLS[1], "id": "c1", "args": {}}]}]}
    for _ in range(500):
        snapshot.preflight(state)
        gate_decisions(state["messages"], snapshot.skills, state)
    t0 = time.perf_counter()
    for _ in range(rounds):
        snapshot.preflight(state)
        gate_decisions(state["messages"], snapshot.skills, state)
    return (time.perf_counter() - t0) / rounds * 1e6


async def scope_memory(env: Env, n: int) -> tuple[int, float]:
    """(scopes, bytes per scope) held by one TurnMemory after a turn in each of ``n`` tenants."""
    tenants = env.tenants[:n]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    memory = TurnMemory(env.store, max_scopes=len(tenants))

    async def one(i: int) -> None:
        await memory.begin(MemoryScope(tenants[i]))

    await limited(len(tenants), 16, one)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return len(tenants), held / max(1, len(tenants))


def pct(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000  # ms


async def latency(env: Env, n: int, mode: str, pool: Sequence[str]) -> tuple[list[float], list[float]]:
    """c=1: alternate one turn and one floor round trip; return their durations (s).

    The first ``n // 3`` pairs are not kept: the server's JVM warms up each
    mode's query (the first warm turns after a cold phase ran ~25% slower).
    """
    rng, turns, floors = random.Random(7), [], []
    warmup = n // 3
    for i in range(warmup + n):
        tenant = rng.choice(pool)
        turn = turn_for(env, tenant, rng, mode)
        if mode.startswith("warm"):
            await env.shared[mode].begin(MemoryScope(tenant))  # make sure this tenant's skills are cached
        t0 = time.perf_counter()
        await turn()
        t1 = time.perf_counter()
        await floor(env)
        if i >= warmup:
            turns.append(t1 - t0)
            floors.append(time.perf_counter() - t1)
    return turns, floors


async def throughput(
    env: Env, n: int, conc: int, mode: str, pool: Sequence[str], rounds: int = 4
) -> tuple[float, float]:
    """Turns/s and floor round trips/s at ``conc``, in alternating phases so drift hits both.

    One untimed round of each comes first: the server compiles the batched
    query shapes of this mode, and both paths warm up alike.
    """
    rng, spent = random.Random(11), {"turn": 0.0, "floor": 0.0}
    per = max(1, n // rounds)
    for timed in [False] + [True] * rounds:
        jobs = [turn_for(env, rng.choice(pool), rng, mode) for _ in range(per)]

        async def one_turn(i: int, jobs: list[Timed] = jobs) -> None:
            await jobs[i]()

        async def one_floor(i: int) -> None:
            await floor(env)

        for kind, work in (("turn", one_turn), ("floor", one_floor)):
            t0 = time.perf_counter()
            await limited(per, conc, work)
            spent[kind] += (time.perf_counter() - t0) if timed else 0.0
    return per * rounds / spent["turn"], per * rounds / spent["floor"]


async def profile(env: Env, tenant: str) -> dict[str, tuple[int, int, str]]:
    """Total db hits, rows and the costliest operators of each per-turn query for one tenant."""
    base = {"tenant_id": tenant, "namespace": None, "write_id": None}
    skills = {**base, "include_drafts": False, "include_retracted": False, "query": "", "limit": 2**62}
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "skills_visible": ("skills_visible", skills),
        "triggers_pending": ("triggers_pending", {**base, "limit": 100}),
        "catalog_version": ("catalog_version", {"tenant_id": tenant}),
        "turn_snapshot (cold)": ("turn_snapshot", {"scopes": [{"tenant_id": tenant, "namespace": None,
                                                               "known_version": None, "write_id": None,
                                                               "include_drafts": False, "include_retracted": False}],
                                                   "max_triggers": 100, "now": datetime.now(UTC)}),
    }
    out = {}
    async with env.store.driver.session(database=env.store.database, notifications_min_severity="OFF") as session:
        for label, (name, params) in cases.items():
            summary = await (await session.run("PROFILE " + query(name).text, params)).consume()
            ops: list[tuple[int, str]] = []

            def walk(p: dict[str, Any], ops: list[tuple[int, str]] = ops) -> None:
                ops.append((int(p.get("dbHits", 0)), p["operatorType"].split("@")[0]))
                for c in p.get("children", []):
                    walk(c)

            assert summary.profile is not None
            walk(summary.profile)
            top = ", ".join(f"{op} {hits}" for hits, op in sorted(ops, reverse=True)[:3] if hits)
            out[label] = (sum(h for h, _ in ops), int(summary.profile.get("rows", 0)), top)
    return out


async def cleanup(env: Env) -> None:
    """Delete this run's nodes (range-index prefix seeks, batched transactions)."""
    for label in ("Precondition", "Skill", "Trigger", "SymfonicCatalog"):
        text = (f"MATCH (n:{label}) WHERE n.tenant_id STARTS WITH $prefix "
                "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 20000 ROWS")
        async with env.store.driver.session(database=env.store.database) as session:
            await (await session.run(text, prefix=env.prefix + "-")).consume()


def machine(server: dict[str, Any]) -> list[tuple[str, str]]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem = next((ln.split()[1] for ln in meminfo if ln.startswith("MemTotal")), "0")
    try:
        rust = "yes, " + importlib.metadata.version("neo4j-rust-ext")
    except importlib.metadata.PackageNotFoundError:
        rust = "no"
    return [("CPUs (nproc)", str(os.cpu_count())), ("Memory", f"{int(mem) / 1024 / 1024:.1f} GiB"),
            ("Python", platform.python_version()),
            ("Neo4j", f"{server.get('name')} {server.get('version')} {server.get('edition')}"),
            ("neo4j driver", neo4j.__version__), ("neo4j-rust-ext", rust)]


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def write_doc(path: Path, block: list[str]) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else (
        "# Performance\n\nMeasured with `python -m bench.turn_bench` (see bench/turn_bench.py).\n\n"
        f"{BEGIN}\n{END}\n")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(head + BEGIN + "\n" + "\n".join(block) + "\n" + END + tail, encoding="utf-8")


async def main(args: argparse.Namespace) -> None:
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    started = time.perf_counter()
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None) as store:
        await store.apply_schema()
        env = Env(store, f"bench-{uuid.uuid4().hex[:8]}", args.skills, args.triggers)
        info = machine(await store.server_info())
        print(f"run prefix {env.prefix}; " + "; ".join(f"{k}: {v}" for k, v in info))
        env.shared = {mode: TurnMemory(store, **options) for mode, options in MEMORY_OPTIONS.items()}
        scale, seeded = [], [0.0, 0]
        for t in args.tenants:
            secs, n = await grow(env, t, args.tenants_per_tx)
            seeded[0] += secs
            seeded[1] += n
            turns, floors = await latency(env, args.turns, "cold_first", env.tenants)
            scale.append((t, pct(turns, 50), pct(turns, 99), pct(floors, 50)))
            print(f"T={t}: seeded {n} skills in {secs:.1f}s; turn p50 {scale[-1][1]:.2f} ms, "
                  f"p99 {scale[-1][2]:.2f} ms, floor p50 {scale[-1][3]:.2f} ms")
        pool = random.Random(3).sample(env.tenants, min(200, len(env.tenants)))
        async def hold(i: int, memory: TurnMemory, stale: bool) -> None:
            if stale:
                memory.invalidate(MemoryScope(pool[i]))
            await memory.begin(MemoryScope(pool[i]))

        for mode in ("cold", "warm", "warm_off", "warm_1ms"):  # the pool's catalogs held; for cold, read
            for _ in range(2):                               # twice while stale (the 2nd keeps a digest)
                await limited(len(pool), 16, lambda i, m=mode: hold(i, env.shared[m], m == "cold"))
        results: dict[str, tuple[float, float, float, float]] = {}
        for key in args.modes:
            keys = env.tenants if key in ("separate", "query_skills", "cold_first") else pool
            turns, floors = await latency(env, args.turns, key, keys)
            tps, fps = await throughput(env, args.throughput_turns, args.concurrency, key, keys)
            results[key] = (pct(turns, 50), pct(turns, 99), pct(floors, 50), tps)
            print(f"{key}: c=1 turn p50 {results[key][0]:.2f} ms p99 {results[key][1]:.2f} ms "
                  f"(floor p50 {results[key][2]:.2f} ms); c={args.concurrency} {tps:.0f} turns/s "
                  f"(floor {fps:.0f}/s)")
            results[key + "_floor_tps"] = (fps, 0, 0, 0)
        if args.modes != MODES:  # a partial run (an A/B of some paths): the ratios only, no doc
            for key in args.modes:
                print(f"{key}: p50 / floor {results[key][0] / results[key][2]:.2f}x; c={args.concurrency} turns/s / "
                      f"floor/s {results[key][3] / results[key + '_floor_tps'][0]:.2f}x")
            if not args.keep:
                await cleanup(env)
            return
        cpu_us = gate_cpu(await TurnMemory(store).begin(MemoryScope(env.tenants[-1])))
        print(f"gate + pre-flight CPU per turn on a cached snapshot: {cpu_us:.1f} us")
        scopes, per_scope = await scope_memory(env, args.memory_scopes)
        print(f"memory: {scopes} scopes cached, {per_scope:,.0f} bytes per scope")
        bulk: dict[int, tuple[float, int]] = {}
        for writers in sorted({1, args.writers}):
            bulk[writers] = await bulk_seed(env, args.bulk, args.batch, writers)
            print(f"bulk, {writers} writer(s): {args.bulk} skills (+{bulk[writers][1]} preconditions) "
                  f"in {bulk[writers][0]:.1f}s")
        prof = await profile(env, env.tenants[-1])
        total_skills = (await store.driver.execute_query("MATCH (s:Skill) RETURN count(s) AS n",
                                                         database_=store.database)).records[0]["n"]
        if not args.keep:
            await cleanup(env)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    elapsed = time.perf_counter() - started
    cold = results["cold"]
    small, big = scale[0], scale[-1]
    bulk_rate, pop_rate = args.bulk / bulk[args.writers][0], seeded[1] / seeded[0]
    sep = results["separate"]

    def ratio(mode: str) -> float:
        return results[mode][0] / results[mode][2]

    def tput(mode: str) -> float:
        return results[mode][3] / results[mode + "_floor_tps"][0]

    qs = results["query_skills"]
    targets = [
        ("TurnMemory cold (stale cache): p50 <= 1.5x floor", f"{ratio('cold'):.1f}x "
         f"(first read in the process: {ratio('cold_first'):.1f}x)", ratio("cold") <= 1.5),
        ("TurnMemory warm: p50 <= 1.2x floor", f"{ratio('warm'):.1f}x", ratio("warm") <= 1.2),
        ("separate reads: query_skills (20 skills) p50 <= 2x floor", f"{qs[0] / qs[2]:.1f}x "
         f"(all three reads: {sep[0] / sep[2]:.1f}x)", qs[0] / qs[2] <= 2),
        (f"c={args.concurrency} cold (stale cache): turns/s >= 1.0x floor/s", f"{tput('cold'):.2f}x "
         f"(first read: {tput('cold_first'):.2f}x)", tput("cold") >= 1.0),
        (f"c={args.concurrency} warm: turns/s >= 1.5x floor/s", f"{tput('warm'):.2f}x", tput("warm") >= 1.5),
        (f"gate + pre-flight CPU <= 30 us per turn ({args.skills} skills, cached snapshot)",
         f"{cpu_us:.1f} us ({cpu_us / 1000 / cold[2]:.3f}x floor)", cpu_us <= 30),
        (f"p50 at {big[0]} tenants within 1.2x of {small[0]} tenants", f"{big[1] / small[1]:.2f}x",
         big[1] / small[1] <= 1.2),
        (f">= 10,000 skills/s bulk seeding ({args.writers} writers)", f"{bulk_rate:,.0f} skills/s",
         bulk_rate >= 10000),
    ]
    block = [f"Run `{env.prefix}` on {time.strftime('%Y-%m-%d %H:%M')}, {elapsed:.0f} s wall clock, "
             f"S = {args.skills} skills/tenant (1-3 preconditions, a quarter with a state predicate), "
             f"{args.triggers} triggers/tenant; {total_skills:,} `:Skill` nodes in the database during the run.", "",
             "### Machine", "", *table(["", ""], info), "",
             "### Targets", "", *table(["target", "measured", "met"], [(n, m, "yes" if ok else "**no**")
                                                                   for n, m, ok in targets]), "",
             f"### One turn at c=1 ({args.turns} turns, T = {big[0]})", "",
             *table(["turn path", "round trips", "turn p50 ms", "turn p99 ms", "floor p50 ms", "p50 / floor"],
                    [(MODE_NAMES[k], ROUND_TRIPS[k], f"{results[k][0]:.2f}", f"{results[k][1]:.2f}",
                      f"{results[k][2]:.2f}", f"{results[k][0] / results[k][2]:.1f}x") for k in MODES]), "",
             f"### Throughput at c={args.concurrency} ({args.throughput_turns} turns)", "",
             *table(["turn path", "turns/s", "floor RETURN 1/s", "turns/s / floor/s"],
                    [(MODE_NAMES[k], f"{results[k][3]:.0f}", f"{results[k + '_floor_tps'][0]:.0f}",
                      f"{results[k][3] / results[k + '_floor_tps'][0]:.2f}") for k in MODES]), "",
             f"### Scale curve (S = {args.skills}, TurnMemory cold (first read), c=1, {args.turns} turns each)", "",
             *table(["tenants", "turn p50 ms", "turn p99 ms", "floor p50 ms", "p50 / floor"],
                    [(t, f"{a:.2f}", f"{b:.2f}", f"{f:.2f}", f"{a / f:.1f}x") for t, a, b, f in scale]), "",
             "### Seeding and memory", "",
             *table(["what", "figure"], [
                 *[(f"bulk seed_skills, {w} tenant(s) written concurrently, batches of {args.batch}",
                    f"{args.bulk / secs:,.0f} skills/s ({args.bulk} skills + {pre} preconditions in {secs:.1f} s)")
                   for w, (secs, pre) in sorted(bulk.items())],
                 (f"population: skills_write UNWIND, {args.tenants_per_tx} tenants per transaction",
                  f"{pop_rate:,.0f} skills/s ({seeded[1]:,} skills in {seeded[0]:.1f} s)"),
                 (f"TurnMemory holding {scopes:,} scopes' caches (tracemalloc)",
                  f"{per_scope:,.0f} bytes per scope ({scopes * per_scope / 2**20:,.1f} MiB)"),
                 ("peak RSS of the bench process", f"{rss:.0f} MiB")]), "",
             f"### PROFILE of the per-turn queries for one tenant ({args.skills} skills, {args.triggers} triggers)", "",
             *table(["query", "db hits", "rows", "costliest operators (db hits)"],
                    [(k, h, r, top) for k, (h, r, top) in prof.items()])]
    write_doc(Path(args.out), block)
    print("\n".join(block))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.turn_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: T in {10, 100}, few turns")
    p.add_argument("--tenants", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="comma-separated tenant counts of the scale curve (default 10,1000,10000)")
    p.add_argument("--skills", type=int, default=20, help="skills per tenant (S)")
    p.add_argument("--triggers", type=int, default=3, help="pending triggers per tenant")
    p.add_argument("--turns", type=int, default=None, help="turns per c=1 measurement (default 300)")
    p.add_argument("--throughput-turns", type=int, default=None, help="turns per c=32 measurement (default 1500)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--tenants-per-tx", type=int, default=50, help="tenants per seeding transaction")
    p.add_argument("--bulk", type=int, default=None, help="skills in the bulk seeding measurement (default 20000)")
    p.add_argument("--batch", type=int, default=1000, help="skills per seed_skills call in the bulk measurement")
    p.add_argument("--writers", type=int, default=4, help="tenants written concurrently in the bulk measurement")
    p.add_argument("--memory-scopes", type=int, default=10_000, help="scopes cached for the memory figure")
    p.add_argument("--modes", type=lambda s: tuple(m for m in MODES if m in s.split(",")), default=MODES,
                   help=f"comma-separated turn paths to measure (default all: {','.join(MODES)}); a partial run "
                        "prints the ratios and leaves the doc alone")
    p.add_argument("--out", default="docs/performance.md")
    p.add_argument("--keep", action="store_true", help="keep this run's nodes (default: delete them at the end)")
    a = p.parse_args(argv)
    a.tenants = a.tenants or ([10, 100] if a.quick else [10, 1000, 10000])
    a.turns = a.turns or (50 if a.quick else 300)
    a.throughput_turns = a.throughput_turns or (200 if a.quick else 1500)
    a.bulk = a.bulk or (2000 if a.quick else 20000)
    return a


if __name__ == "__main__":
    anyio.run(main, parse())
