"""Every write that touches a tenant's catalog and its skills takes the catalog's lock first.

So publish, discard, fold, prune, re-seed (live and staged), retract, restore
and approve, run against each other from several tasks, never deadlock (the
server never reports one, not even one the store retried) and never undo one
another's acknowledged result: prune never deletes a skill that a concurrent
re-seed or restore brought back.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import neo4j
import pytest
from neo4j.exceptions import Neo4jError

from symfonic_graph import GraphMemoryStore, MemoryScope, NotFoundError, ProceduralLayer
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

WORKERS = 8
OPS_PER_WORKER = 40
IDENTIFIERS = 3
PRUNE_ROUNDS = 30
SKILLS_PER_ROUND = 4
PATIENT = 60.0  # query_timeout here: a deadlock the store retries must be counted, not turned into a timeout


def _count_deadlocks(store: GraphMemoryStore, seen: Counter[str]) -> None:
    """Wrap the store's runner of one call within query_timeout: count every deadlock the server reports."""
    within_timeout = store._within_timeout

    async def counting(work: Callable[[], Awaitable[Any]], what: str, *, writes: bool = False) -> Any:
        async def once() -> Any:
            try:
                return await work()
            except Neo4jError as exc:
                if "Deadlock" in (exc.code or ""):
                    seen[what.split(",")[0]] += 1
                raise

        return await within_timeout(once, what, writes=writes)

    store._within_timeout = counting  # type: ignore[method-assign]


def _skill(identifier: str, label: str) -> dict[str, Any]:
    return {"label": label, "steps": ["deliver"], "source_tag": "authored:race", "identifier": identifier,
            "precondition": ["get_status", {"state": {"path": "ok", "op": "eq", "value": True}}]}


async def _orphans(driver: neo4j.AsyncDriver, tenant: str) -> int:
    records, _, _ = await driver.execute_query(
        "MATCH (p:Precondition {tenant_id: $t}) WHERE NOT ()-[:REQUIRES]->(p) RETURN count(p) AS n", {"t": tenant})
    return int(records[0]["n"])


async def test_every_writer_against_every_other_never_deadlocks_or_fails(
    driver: neo4j.AsyncDriver, tenant: str, neo4j_settings: Any
) -> None:
    store = GraphMemoryStore(driver, database=neo4j_settings.database, query_timeout=PATIENT)
    deadlocks: Counter[str] = Counter()
    _count_deadlocks(store, deadlocks)
    scope = MemoryScope(tenant)
    skills = ProceduralLayer(store)
    ids = [f"x{i}" for i in range(IDENTIFIERS)]
    for ident in ids:
        await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} v0"))
    failures: list[str] = []
    done: Counter[str] = Counter()

    async def current_id(ident: str) -> str | None:
        found = [s.id for s in await skills.query_skills(scope, include_retracted=True) if s.identifier == ident]
        return found[0] if found else None

    async def op(rng: random.Random) -> str:
        ident = rng.choice(ids)
        kind = rng.choice(["publish", "live", "discard", "retract_restore", "prune", "fold", "approve"])
        if kind == "publish":
            wid = f"w-{uuid.uuid4().hex}"
            await skills.seed_skills(scope, [_skill(ident, f"{ident} staged")], write_id=wid)
            await store.publish(scope, wid)
        elif kind == "live":
            await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} live"))
        elif kind == "discard":
            wid = f"w-{uuid.uuid4().hex}"
            await skills.seed_skills(scope, [_skill(ident, f"{ident} discarded")], write_id=wid)
            await store.discard(scope, wid)
        elif kind == "retract_restore":
            node = await current_id(ident)
            if node is not None:
                await store.retract(scope, node, reason="race")
                await store.restore(scope, node)
        elif kind == "prune":
            await store.prune(scope, older_than_seconds=0)
        elif kind == "fold":
            await store.fold_published(scope, settle_seconds=0)
        else:
            draft = await skills.propose_skill(scope, label=f"{ident} draft", steps=["deliver"],
                                               source_tag="learned:race", identifier=ident)
            await skills.approve(scope, draft.id)
        return kind

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(OPS_PER_WORKER):
            try:
                done[await op(rng)] += 1
            except NotFoundError:
                done["not_found"] += 1  # a node another task pruned or replaced first: typed, and legitimate
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    async with anyio.create_task_group() as tg:
        for seed in range(WORKERS):
            tg.start_soon(worker, seed)

    FIGURES["lock_order.operations"] += sum(done.values())
    FIGURES["lock_order.deadlocks"] += sum(deadlocks.values())
    FIGURES["lock_order.failures"] += len(failures)
    assert failures == [], failures[:5]
    assert sum(deadlocks.values()) == 0, dict(deadlocks)
    # Every identifier still has exactly one visible skill (a prune may have taken a retracted one away,
    # but every retract here is followed by its restore in the same task).
    visible = Counter(s.identifier for s in await skills.query_skills(scope))
    assert all(visible[i] <= 1 for i in ids), visible
    assert await _orphans(driver, tenant) == 0


@pytest.mark.parametrize("racer", ["reseed", "restore"])
async def test_prune_never_deletes_a_skill_brought_back_concurrently(
    driver: neo4j.AsyncDriver, tenant: str, neo4j_settings: Any, racer: str
) -> None:
    store = GraphMemoryStore(driver, database=neo4j_settings.database, query_timeout=PATIENT)
    scope = MemoryScope(tenant)
    skills = ProceduralLayer(store)
    lost: list[str] = []
    for r in range(PRUNE_ROUNDS):
        idents = [f"r{r}-{i}" for i in range(SKILLS_PER_ROUND)]
        seeded = [await skills.seed_authored_skill(scope, **_skill(i, f"{i} v1")) for i in idents]
        for skill in seeded:
            await store.retract(scope, skill.id, reason="prune race")
        acknowledged: list[str] = []

        async def bring_back(ident: str, skill_id: str, acknowledged: list[str] = acknowledged) -> None:
            try:
                if racer == "reseed":
                    await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} v2"))
                else:
                    await store.restore(scope, skill_id)
            except NotFoundError:
                return  # pruned first: the restore was refused, so nothing acknowledged is lost
            acknowledged.append(ident)

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(store.prune, scope, older_than_seconds=0))
            for skill in seeded:
                tg.start_soon(bring_back, skill.identifier, skill.id)
        visible = {s.identifier: s for s in await skills.query_skills(scope)}
        lost += [i for i in acknowledged if i not in visible or len(visible[i].precondition or ()) != 2]
    orphans = await _orphans(driver, tenant)
    FIGURES[f"lock_order.prune_vs_{racer}_rounds"] += PRUNE_ROUNDS
    FIGURES[f"lock_order.prune_vs_{racer}_lost"] += len(lost)
    assert lost == [] and orphans == 0, (lost, orphans)


_OTHER_PROCESS = """
import asyncio, json, os, random, sys, uuid
from collections import Counter
import neo4j
from neo4j.exceptions import Neo4jError
from symfonic_graph import GraphMemoryStore, MemoryScope, NotFoundError, ProceduralLayer
from tests.reliability.test_write_lock_order import _count_deadlocks, _skill

async def main(tenant, ops, seed):
    driver = neo4j.AsyncGraphDatabase.driver(os.environ["NEO4J_URI"],
                                             auth=(os.environ["NEO4J_USER"], os.environ["NEO4J_PASSWORD"]))
    store = GraphMemoryStore(driver, database=os.environ.get("NEO4J_DATABASE") or None, query_timeout=60.0)
    deadlocks, failures = Counter(), []
    _count_deadlocks(store, deadlocks)
    scope, skills, rng = MemoryScope(tenant), ProceduralLayer(store), random.Random(seed)
    for _ in range(ops):
        ident = rng.choice(["x0", "x1", "x2"])
        try:
            if rng.random() < 0.5:
                wid = f"w-{uuid.uuid4().hex}"
                await skills.seed_skills(scope, [_skill(ident, ident + " other staged")], write_id=wid)
                await store.publish(scope, wid)
            else:
                await skills.seed_authored_skill(scope, **_skill(ident, ident + " other live"))
        except NotFoundError:
            pass
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    await driver.close()
    print(json.dumps({"deadlocks": sum(deadlocks.values()), "failures": failures}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


async def test_two_processes_publishing_and_reseeding_never_deadlock(
    driver: neo4j.AsyncDriver, tenant: str, neo4j_settings: Any
) -> None:
    """The lock order holds across processes: another process publishes and re-seeds the same identifiers
    while this one runs every kind of write against them."""
    import json
    import os
    import subprocess
    import sys

    store = GraphMemoryStore(driver, database=neo4j_settings.database, query_timeout=PATIENT)
    deadlocks: Counter[str] = Counter()
    _count_deadlocks(store, deadlocks)
    scope = MemoryScope(tenant)
    skills = ProceduralLayer(store)
    for ident in ("x0", "x1", "x2"):
        await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} v0"))
    env = {**os.environ, "NEO4J_URI": neo4j_settings.uri, "NEO4J_USER": neo4j_settings.user,
           "NEO4J_PASSWORD": neo4j_settings.password, "NEO4J_DATABASE": neo4j_settings.database or ""}
    other = await anyio.open_process([sys.executable, "-c", _OTHER_PROCESS, tenant, "40", "7"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    failures: list[str] = []
    rng = random.Random(3)
    for _ in range(40):
        ident = rng.choice(["x0", "x1", "x2"])
        try:
            kind = rng.choice(["publish", "live", "retract_restore", "approve"])
            if kind == "publish":
                wid = f"w-{uuid.uuid4().hex}"
                await skills.seed_skills(scope, [_skill(ident, f"{ident} staged")], write_id=wid)
                await store.publish(scope, wid)
            elif kind == "live":
                await skills.seed_authored_skill(scope, **_skill(ident, f"{ident} live"))
            elif kind == "retract_restore":
                found = [s.id for s in await skills.query_skills(scope) if s.identifier == ident]
                if found:
                    await store.retract(scope, found[0], reason="two processes")
                    await store.restore(scope, found[0])
            else:
                draft = await skills.propose_skill(scope, label=f"{ident} draft", steps=["deliver"],
                                                   source_tag="learned:race", identifier=ident)
                await skills.approve(scope, draft.id)
        except NotFoundError:
            pass
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    assert other.stdout is not None and other.stderr is not None
    with anyio.fail_after(600):
        out = (await other.stdout.receive()).decode() if await other.wait() == 0 else ""
    if not out:
        raise AssertionError("the other process failed: " + (await other.stderr.receive()).decode()[-2000:])
    theirs = json.loads(out)
    FIGURES["lock_order.two_process_deadlocks"] += sum(deadlocks.values()) + theirs["deadlocks"]
    assert failures == [] and theirs["failures"] == [], (failures[:3], theirs["failures"][:3])
    assert sum(deadlocks.values()) == 0 and theirs["deadlocks"] == 0, (dict(deadlocks), theirs["deadlocks"])
    visible = Counter(s.identifier for s in await skills.query_skills(scope))
    assert visible == Counter({"x0": 1, "x1": 1, "x2": 1}), visible
    assert await _orphans(driver, tenant) == 0
