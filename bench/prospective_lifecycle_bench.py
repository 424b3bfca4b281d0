"""Reminders that end, measured against a real Neo4j (a script, not a test).

Run ``eval "$(symfonic-graph server start)"`` first, then::

    python -m bench.prospective_lifecycle_bench                 # 200 rounds, 10,000 turns
    python -m bench.prospective_lifecycle_bench --rounds 20 --turns 1000

Two figures:

* **races**: one daily reminder; each round, 32 concurrent ``ack_trigger``
  calls on its pending occurrence. Counts the next occurrences each round
  made (the contract: exactly 1) and the distinct ids the 32 calls returned.
* **replay**: 10,000 turns of one end user over 60 reminders (text, time,
  expiring, recurring) at an advancing wall clock, with acknowledgements,
  cancellations and snoozes between turns. Every turn's offer is compared
  with a model of the contract; counts the offers of an acknowledged,
  cancelled or expired reminder (the contract: 0) and the turns whose offer
  differed from the model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import anyio

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory

T0 = datetime(2031, 5, 5, 9, tzinfo=UTC).timestamp()
DAY = 86400.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def races(store: GraphMemoryStore, rounds: int) -> tuple[list[int], list[int]]:
    """(next occurrences made, distinct ids returned) per round of 32 concurrent acknowledgements."""
    clock, scope = Clock(), MemoryScope(f"bench-race-{uuid.uuid4().hex}", "u1")
    layer = ProspectiveLayer(store, clock=clock)
    current = await layer.set_trigger(scope, task="Stand-up.", due_at=T0, recurrence="FREQ=DAILY")
    made, ids = [], []
    try:
        for _ in range(rounds):
            answers = await asyncio.gather(*(layer.ack_trigger(scope, current) for _ in range(32)))
            pending = await layer.get_pending(scope)
            made.append(len(pending))
            ids.append(len(set(answers)))
            if not pending:
                break
            current = pending[0].id
            clock.now += DAY
    finally:
        await _forget(store, scope)
    return made, ids


async def replay(store: GraphMemoryStore, turns: int, seed: int = 36) -> dict[str, int]:
    """Offers of done reminders, turns that differed from the model, and what happened, over ``turns`` turns."""
    rng, clock = random.Random(seed), Clock()
    scope = MemoryScope(f"bench-replay-{uuid.uuid4().hex}", "u1")
    layer = ProspectiveLayer(store, clock=clock)
    model: dict[str, dict[str, Any]] = {}

    async def add(k: int) -> None:
        due = clock.now + rng.randrange(0, 4000) if k % 3 else None
        expires = (due or clock.now) + rng.randrange(60, 6000) if rng.random() < 0.3 else None
        recurring = due is not None and rng.random() < 0.3
        fields: dict[str, Any] = {"task": f"Task {k}.", "expires_at": expires}
        fields |= {"due_at": due} if due is not None else {"condition": f"c{k}"}
        if recurring:
            fields["recurrence"] = "FREQ=HOURLY"
        tid = await layer.set_trigger(scope, **fields)
        model[tid] = {"due": due, "expires": expires, "snoozed": None, "done": False, "recurring": recurring}

    for k in range(60):
        await add(k)
    memory = TurnMemory(store, wall_clock=clock, max_triggers=1000)
    counts = {"turns": 0, "done_offers": 0, "mismatches": 0, "acks": 0, "cancels": 0, "snoozes": 0,
              "next_occurrences": 0, "offers": 0}
    try:
        for turn in range(turns):
            clock.now += rng.randrange(0, 30)
            live = [i for i, m in model.items() if not m["done"]]
            roll = rng.random()
            if live and roll < 0.02:
                tid = rng.choice(live)
                following = await layer.ack_trigger(scope, tid)
                model[tid]["done"] = True
                counts["acks"] += 1
                if following is not None:
                    old = model[tid]
                    [nxt] = [t for t in await layer.get_pending(scope) if t.id == following]
                    assert nxt.due_at is not None
                    model[following] = {**old, "due": nxt.due_at.timestamp(), "snoozed": None, "done": False}
                    counts["next_occurrences"] += 1
            elif live and roll < 0.03:
                tid = rng.choice(live)
                await layer.cancel_trigger(scope, tid)
                model[tid]["done"] = True
                counts["cancels"] += 1
            elif live and roll < 0.05:
                tid = rng.choice(live)
                model[tid]["snoozed"] = clock.now + rng.randrange(1, 900)
                await layer.snooze_trigger(scope, tid, model[tid]["snoozed"])
                counts["snoozes"] += 1
            elif roll < 0.055:
                await add(60 + turn)
            offered = {t.trigger_id for t in (await memory.begin(scope)).triggers}
            expected = {i for i, m in model.items() if not m["done"]
                        and (m["due"] is None or m["due"] <= clock.now)
                        and (m["expires"] is None or clock.now < m["expires"])
                        and (m["snoozed"] is None or m["snoozed"] <= clock.now)}
            done = {i for i in offered if i not in model or model[i]["done"]
                    or (model[i]["expires"] is not None and clock.now >= model[i]["expires"])}
            counts["done_offers"] += len(done)
            counts["mismatches"] += offered != expected
            counts["offers"] += len(offered)
            counts["turns"] += 1
    finally:
        await _forget(store, scope)
    return counts


async def _forget(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await store.driver.execute_query("MATCH (t:Trigger {tenant_id: $tenant}) DETACH DELETE t",
                                     tenant=scope.tenant_id, database_=store.database)


async def main(args: argparse.Namespace) -> None:
    uri = os.environ.get("NEO4J_URI", "bolt://localhost:7687")
    user, pw = os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", "")
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=60) as store:
        await store.apply_schema()
        start = time.perf_counter()
        made, ids = await races(store, args.rounds)
        print(f"races: {len(made)} rounds of 32 concurrent acknowledgements in {time.perf_counter() - start:.1f} s; "
              f"next occurrences per round: min {min(made)}, max {max(made)}; rounds with exactly 1: "
              f"{sum(m == 1 for m in made)}; distinct ids returned per round: max {max(ids)}")
        start = time.perf_counter()
        counts = await replay(store, args.turns)
        print(f"replay: {counts['turns']:,} turns in {time.perf_counter() - start:.1f} s; offers {counts['offers']:,}; "
              f"acks {counts['acks']}, cancels {counts['cancels']}, snoozes {counts['snoozes']}, next occurrences "
              f"{counts['next_occurrences']}; offers of a done or expired reminder: {counts['done_offers']}; "
              f"turns differing from the model: {counts['mismatches']}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.prospective_lifecycle_bench",
                                description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="rounds of 32 concurrent acknowledgements (default 200)")
    p.add_argument("--turns", type=int, default=10_000, help="turns of the replay (default 10,000)")
    return p.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse())
