"""Where a turn's time goes: the floor, the server's part of each query, the client's part (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.turn_profile          # prints the table, rewrites the profile block of docs/performance.md
    python -m bench.turn_profile --print  # prints only

One tenant is seeded like the turn benchmark's (20 skills, 3 triggers) and
deleted at the end. Each *server* row is a query run as an auto-commit read
in a fresh session, the way ``GraphMemoryStore.read`` runs one, with its
records fetched; its p50 is compared with ``RETURN 1`` timed in the same
rounds. The pieces of ``turn_snapshot`` are hand-cut variants of its text
(only here, never in the library), so the row-to-row differences show what
each part costs. Each *client* row is CPU time in this process, no I/O.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import neo4j

from bench.recall_bench import p50_ms, timed
from bench.turn_bench import skill_specs, table
from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph._store.cypher import query
from symfonic_graph._store.packed import rows_of
from symfonic_graph.memory._catalog import Compiler, fingerprint
from symfonic_graph.models import read_skills
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import unpack_skill_row

BEGIN, END = "<!-- profile:begin -->", "<!-- profile:end -->"


def server_variants(tenant: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Query texts, each with its parameters: the floor, streaming shapes and cuts of the turn queries."""
    cold = query("turn_snapshot").text
    warm = query("turn_snapshot_warm").text
    entry = {"tenant_id": tenant, "namespace": None, "known_version": None, "write_id": None,
             "include_drafts": False, "include_retracted": False}
    now = datetime.now(UTC)
    turn: dict[str, Any] = {"scopes": [entry], "max_triggers": 100, "now": now}
    held: dict[str, Any] = {"scopes": [{**entry, "known_version": 1}], "max_triggers": 100, "now": now}
    packed: dict[str, Any] = {"scopes": [{**entry, "packed": True}], "max_triggers": 100, "now": now}
    catalog_only = warm[:warm.index("  CALL (sc, published) {")] + (
        "  RETURN version, skills_fresh, [] AS skills, [] AS triggers\n}\n"
        "RETURN i, version, skills_fresh, skills, triggers\n")
    seek = {"tenant_id": tenant}
    # The first read cut inside: each skill's preconditions left out, then its whole projection (ids only).
    start = cold.index("    CALL (s) {\n      OPTIONAL MATCH (s)-[r:REQUIRES]")
    end = cold.index("    WITH s, [s.id, s.tenant_id")
    no_preconditions = cold[:start] + "    WITH s, published, [] AS packed_preconditions\n" + cold[end:]
    done = cold.index("    RETURN collect(skill_packed) AS skills")
    ids_only = cold[:start] + "    WITH s, s.id AS skill_packed\n" + cold[done:]
    skill_props = ("s {.id, .tenant_id, .namespace, .label, .identifier, .steps, .action_tool, .context, "
                   ".status, .active, .source, created_at: toStringOrNull(s.created_at)}")
    return {
        "RETURN 1 (the floor)": ("RETURN 1", {}),
        "20 rows of one integer": ("UNWIND range(1, 20) AS x RETURN x", {}),
        "1 row: a list of 20 integers": ("UNWIND range(1, 20) AS x RETURN collect(x)", {}),
        "warm: the catalog node only": (catalog_only, held),
        "warm: turn_snapshot_warm (catalog + 3 triggers)": (warm, held),
        "cold: seek the 20 skills, collect ids": ("MATCH (s:Skill {tenant_id: $tenant_id}) RETURN collect(s.id)",
                                                   seek),
        "cold: ... and their properties": (f"MATCH (s:Skill {{tenant_id: $tenant_id}}) RETURN collect({skill_props})",
                                           seek),
        "cold: turn_snapshot, each skill's id only (visibility, sort, triggers)": (ids_only, turn),
        "cold: turn_snapshot without the preconditions": (no_preconditions, turn),
        "cold: turn_snapshot (visibility, projection, preconditions, triggers)": (cold, turn),
        "cold: turn_snapshot, a first read: the skills as the text the last write packed": (cold, packed),
    }


def cpu_us(work: Callable[[], object], n: int = 2000) -> float:
    for _ in range(n // 10):
        work()
    t0 = time.perf_counter()
    for _ in range(n):
        work()
    return (time.perf_counter() - t0) / n * 1e6


async def main(args: argparse.Namespace) -> None:
    uri, user, pw = (os.environ.get(k, d) for k, d in
                     (("NEO4J_URI", "bolt://127.0.0.1:7687"), ("NEO4J_USER", "neo4j"), ("NEO4J_PASSWORD", "")))
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None) as store:
        await store.apply_schema()
        scope = MemoryScope(f"bench-profile-{uuid.uuid4().hex[:8]}")
        try:
            for i in range(0, args.skills, 500):
                await ProceduralLayer(store).seed_skills(
                    scope, [s.model_copy(update={"identifier": f"skill-{i + j}"})
                            for j, s in enumerate(skill_specs(random.Random(i), min(500, args.skills - i)))])
            for k in range(3):
                await ProspectiveLayer(store).set_trigger(scope, condition=f"mentions topic {k}",
                                                          task=f"Remind about topic {k}.")
            server, inside = await measure_server(store, scope, args.n, args.rounds)
            client, shipped = await measure_client(store, scope)
            turns = await measure_turns(store, scope, args.n)
        finally:
            await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n",
                                             t=scope.tenant_id, database_=store.database)
    floor = server["RETURN 1 (the floor)"]
    block = [
        f"`python -m bench.turn_profile` on {time.strftime('%Y-%m-%d %H:%M')}: one tenant, {args.skills} skills, "
        f"3 triggers; load average {os.getloadavg()[0]:.1f}; "
        f"p50 of {args.n} runs per row and round, median of {args.rounds} rounds.", "",
        *table(["server: query (auto-commit, records fetched)", "p50 ms", "minus the floor, ms",
                "server-reported p50 ms (available + consumed)"],
               [(name, f"{ms:.3f}", f"{ms - floor:+.3f}", f"{inside[name]:.3f}") for name, ms in server.items()]),
        "",
        *table([f"client: CPU of a cold turn ({shipped} skill rows shipped)", "us"],
               [(name, f"{us:.0f}") for name, us in client.items()]), "",
        *table(["end to end: TurnMemory.begin (coalescing off)", "p50 ms", "/ floor"],
               [(name, f"{ms:.3f}", f"{ms / floor:.2f}x") for name, ms in turns.items()]),
    ]
    print("\n".join(block))
    if not args.print:
        path = Path(args.out)
        text = path.read_text(encoding="utf-8")
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        path.write_text(head + BEGIN + "\n" + "\n".join(block) + "\n" + END + tail, encoding="utf-8")


async def measure_server(store: GraphMemoryStore, scope: MemoryScope, n: int, rounds: int
                         ) -> tuple[dict[str, float], dict[str, float]]:
    """Per row: the p50 seen by the client, and the p50 of the server's own times (available + consumed)."""
    variants = server_variants(scope.tenant_id)
    version = await store.catalog_version(scope)
    for _, params in variants.values():
        for entry in params.get("scopes", []):
            if entry["known_version"] is not None:
                entry["known_version"] = version
    results: dict[str, list[float]] = {name: [] for name in variants}
    reported: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (text, params) in variants.items():
            own: list[float] = []

            async def run(text: str = text, params: dict[str, Any] = params, own: list[float] = own) -> None:
                async with store.driver.session(database=store.database, default_access_mode=neo4j.READ_ACCESS,
                                                notifications_min_severity="OFF") as session:
                    result = await session.run(text, params)
                    [record async for record in result]
                    summary = await result.consume()
                    own.append(((summary.result_available_after or 0) + (summary.result_consumed_after or 0)) / 1000)

            results[name].append(p50_ms(await timed(n, run)))
            reported[name].append(p50_ms(own))
    return ({name: statistics.median(values) for name, values in results.items()},
            {name: statistics.median(values) for name, values in reported.items()})


async def measure_client(store: GraphMemoryStore, scope: MemoryScope) -> tuple[dict[str, float], int]:
    [row] = await store.read("turn_snapshot", scopes=[{**scope.params(), "known_version": None, "write_id": None,
                                                       "include_drafts": False, "include_retracted": False}],
                             max_triggers=100, now=datetime.now(UTC))
    rows = row["skills"]  # skill_packed lists
    [packed] = await store.read("turn_snapshot", scopes=[{**scope.params(), "known_version": None, "write_id": None,
                                                          "include_drafts": False, "include_retracted": False,
                                                          "packed": True}],
                                max_triggers=100, now=datetime.now(UTC))
    text, version = packed["packed"], packed["version"]
    assert rows_of(text, version) == rows, "the packed text reads back to the rows"

    def read() -> list[Any]:
        return read_skills([unpack_skill_row(r) for r in rows])[0]

    skills = read()
    warm = Compiler()
    warm.catalog(scope, 1, rows, None, now=0.0)  # its tenant rules die with the catalog: only content is kept
    return {
        "unpack_skill_row + read_skills: the one read model (pydantic) over the rows": cpu_us(read),
        "RuleSet: compile the gate's and pre-flight's rules": cpu_us(lambda: RuleSet(skills)),
        "Compiler.catalog in a fresh compiler (a first read: all of the above)": cpu_us(
            lambda: Compiler().catalog(scope, 1, rows, None, now=0.0), n=200),
        "Compiler.catalog, this content compiled before (another tenant or scope seeded alike)": cpu_us(
            lambda: warm.catalog(scope, 1, rows, None, now=0.0), n=200),
        "digest of the rows (a stale re-read compares it, then skips both above)": cpu_us(lambda: fingerprint(rows)),
        "rows_of: the packed text of a first read read back into the rows": cpu_us(lambda: rows_of(text, version)),
    }, len(rows)


async def first_of_scope(memory: TurnMemory, scope: MemoryScope) -> None:
    memory._catalogs.pop(scope, None)  # as if this process had never read the scope
    await memory.begin(scope)


async def measure_turns(store: GraphMemoryStore, scope: MemoryScope, n: int) -> dict[str, float]:
    held = TurnMemory(store, coalesce_window=None)
    await held.begin(scope)

    async def stale() -> None:
        held.invalidate(scope)
        await held.begin(scope)

    await stale()  # the second shipped read keeps a digest
    fresh = TurnMemory(store, coalesce_window=None)  # never invalidated: its first reads may take the packed text
    await fresh.begin(scope)
    return {
        "warm (catalog version held)": p50_ms(await timed(n, lambda: held.begin(scope))),
        "cold, stale cache (rows identical to the last read)": p50_ms(await timed(n, stale)),
        "cold, first read of the scope, content met before (packed text)": p50_ms(
            await timed(n, lambda: first_of_scope(fresh, scope))),
        "cold, first read in the process": p50_ms(
            await timed(n, lambda: TurnMemory(store, coalesce_window=None).begin(scope))),
    }


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.turn_profile", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=300, help="runs per row and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all rows (the median is reported)")
    p.add_argument("--skills", type=int, default=20, help="skills of the tenant")
    p.add_argument("--print", action="store_true", help="print only; do not rewrite docs/performance.md")
    p.add_argument("--out", default="docs/performance.md")
    return p.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse())
