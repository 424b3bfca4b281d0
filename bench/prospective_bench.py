"""What a turn's trigger read costs with 3, 1,000 and 10,000 live triggers in one scope (a script, not a test).

Run against a real Neo4j (``eval "$(symfonic-graph server start)"`` first)::

    python -m bench.prospective_bench            # 400 turns per case
    python -m bench.prospective_bench --quick    # a smoke run

Each case is one end user's scope holding N live (pending) triggers, written
by the library's own ``triggers_write`` (without the scope budget, which
refuses 10,000 pending triggers in one scope), and read by
``TurnMemory.begin`` with the catalog cached (the steady state), at a fixed
wall clock:

* ``future``: 3 due time triggers and N - 3 due next week (what a reminders
  product holds: most reminders wait);
* ``snoozed``: as ``future``, the waiting ones text triggers snoozed until
  next week;
* ``text``: N text triggers, all offerable (the turn reads at most
  ``max_triggers``, 100, oldest first).

The floor is a bare ``RETURN 1`` on the same driver, interleaved with the
turns. Prints p50 and p95 per case, and each case's p50 over its N = 3 p50.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import anyio

from symfonic_graph import GraphMemoryStore, MemoryScope
from symfonic_graph._store import Step
from symfonic_graph.memory.layers.prospective import trigger_row
from symfonic_graph.memory.turn import TurnMemory

NOW = datetime(2031, 5, 5, 9, tzinfo=UTC).timestamp()
WEEK = 7 * 86400.0
SIZES = (3, 1_000, 10_000)
CASES = ("future", "snoozed", "text")


def _rows(scope: MemoryScope, case: str, n: int) -> list[dict[str, object]]:
    rows = [trigger_row(scope, task=f"Due {k}.", due_at=NOW - 60 - k) for k in range(min(3, n))]
    for k in range(n - len(rows)):
        if case == "future":
            rows.append(trigger_row(scope, task=f"Later {k}.", due_at=NOW + WEEK + k))
        else:
            rows.append(trigger_row(scope, condition=f"mentions topic {k}", task=f"Remind about topic {k}."))
    return rows


async def _seed(store: GraphMemoryStore, scope: MemoryScope, case: str, n: int) -> None:
    rows = _rows(scope, case, n)
    for start in range(0, len(rows), 500):
        await store.write([Step("triggers_write", {"rows": rows[start:start + 500]})])
    if case == "snoozed":
        await store.driver.execute_query(
            "MATCH (t:Trigger {tenant_id: $tenant}) WHERE t.kind = 'text' "
            "SET t.snoozed_until = datetime({epochSeconds: $until}), t.symfonic_offer_at = t.snoozed_until",
            tenant=scope.tenant_id, until=int(NOW + WEEK), database_=store.database)


async def main(args: argparse.Namespace) -> None:
    uri = os.environ.get("NEO4J_URI", "bolt://localhost:7687")
    user, pw = os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", "")
    turns = 40 if args.quick else args.turns
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120) as store:
        await store.apply_schema()
        scopes = {(case, n): MemoryScope(f"bench-prospective-{uuid.uuid4().hex}", "u1")
                  for case in CASES for n in SIZES}
        try:
            for (case, n), scope in scopes.items():
                await _seed(store, scope, case, n)
            memory = TurnMemory(store, wall_clock=lambda: NOW, max_age=3600, coalesce_window=None)
            times: dict[tuple[str, int] | str, list[float]] = {key: [] for key in scopes} | {"floor": []}
            for scope in scopes.values():  # warm: catalogs cached, plans compiled
                for _ in range(5):
                    await memory.begin(scope)
            offered = {key: len((await memory.begin(scope)).triggers) for key, scope in scopes.items()}
            for _ in range(turns):
                for key, scope in scopes.items():
                    start = time.perf_counter()
                    await memory.begin(scope)
                    times[key].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    await store.driver.execute_query("RETURN 1", database_=store.database)
                    times["floor"].append(time.perf_counter() - start)
        finally:
            for scope in scopes.values():
                await store.driver.execute_query("MATCH (t:Trigger {tenant_id: $tenant}) DETACH DELETE t",
                                                 tenant=scope.tenant_id, database_=store.database)

    def ms(values: Sequence[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if q != 50 else statistics.median(values) * 1000

    floor = ms(times["floor"], 50)
    print(f"turns per case: {turns}; floor (RETURN 1) p50 {floor:.2f} ms")
    print(f"{'case':<8} {'N':>7} {'offered':>8} {'p50 ms':>8} {'p95 ms':>8} {'p50/N=3':>8} {'p50/floor':>9}")
    for case in CASES:
        base = ms(times[(case, SIZES[0])], 50)
        for n in SIZES:
            p50, p95 = ms(times[(case, n)], 50), ms(times[(case, n)], 95)
            print(f"{case:<8} {n:>7,} {offered[(case, n)]:>8} {p50:>8.2f} {p95:>8.2f} {p50 / base:>8.2f} "
                  f"{p50 / floor:>9.2f}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.prospective_bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run (40 turns per case)")
    p.add_argument("--turns", type=int, default=400, help="turns per case (default 400)")
    return p.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse())
