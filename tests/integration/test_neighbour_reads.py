"""No scope's data or read time costs another scope its guard.

Small scopes' turns are coalesced with neighbours whose reads fail, stall until their deadline, or ship a
huge catalog (one at the budget, built through the API; two seeded by hand far beyond it: 40 MB of skills,
20 MB of pending reminders), cold and then warm after an emergency rule was acknowledged in every small
tenant. Every small scope's gate still blocks the guarded tool and applies the newest rule, never from a
stale catalog, and its turn never waits for a timeout. The figures (a small scope's read alone, and its
turn among such neighbours) are printed.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory, create_precondition_gate_node
from symfonic_graph.errors import QueryError
from tests._fakes import ai_calls

pytestmark = pytest.mark.anyio

TIMEOUT = 6.0  # query_timeout of the store under test when a neighbour stalls until it (s); a loaded CI
# machine took over 3 s for a small scope's own warm read and re-read together
CALM_TIMEOUT = 10.0  # without a stalling neighbour: the default, so a loaded machine cannot fail a small read
SMALL = 16  # small tenants, each read as one of its end users' scopes
HAND_SKILLS = 2000  # hand-seeded skills of the huge catalog, HAND_SKILL_BYTES each
HAND_SKILL_BYTES = 20_000
HAND_TRIGGERS = 100  # hand-seeded pending reminders of the huge end user, HAND_TRIGGER_BYTES each
HAND_TRIGGER_BYTES = 200_000


class Neighbours(GraphMemoryStore):
    """The real store; a read naming the ``failing`` tenant fails, one naming ``stalled`` hangs until its deadline."""

    failing = ""
    stalled = ""

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        tenants = {s.get("tenant_id") for s in params.get("scopes", [])}
        if self.stalled in tenants:  # a silent server: the call's own deadline ends it (StoreUnavailableError)
            await self._within_timeout(lambda: anyio.sleep(3600), f"query {name}")
        if self.failing in tenants:
            raise QueryError(f"query {name}", "Neo.ClientError.Statement.ArgumentError", "failing for the test")
        return await super().read(name, **params)


async def _hand_seed(driver: neo4j.AsyncDriver, skills_tenant: str, triggers_scope: MemoryScope) -> None:
    """Far beyond the budget, as only plain Cypher can write it: no write path of the library accepts it."""
    for start in range(0, HAND_SKILLS, 250):
        await driver.execute_query(
            "UNWIND range($start, $end - 1) AS i "
            "CREATE (:Skill {id: randomUUID(), tenant_id: $t, label: 'hand ' + i, steps: [$blob], "
            "action_tool: 'deploy', status: 'approved', active: true, source: 'authored:hand', "
            "created_at: datetime(), symfonic_key: $t + '/' + i})",
            {"t": skills_tenant, "start": start, "end": min(HAND_SKILLS, start + 250), "blob": "h" * HAND_SKILL_BYTES})
    await driver.execute_query(
        "UNWIND range(1, $n) AS i "
        "CREATE (t:Trigger:SymfonicScoped {id: randomUUID(), tenant_id: $t, namespace: $ns, condition: 'c' + i, "
        "task: $blob, status: 'pending', created_at: datetime(), symfonic_key: $t + '/t/' + i, "
        "symfonic_scope: $t + '\u001F' + $ns})",
        {"t": triggers_scope.tenant_id, "ns": triggers_scope.namespace, "n": HAND_TRIGGERS,
         "blob": "r" * HAND_TRIGGER_BYTES})


async def _at_budget(store: GraphMemoryStore, scope: MemoryScope) -> int:
    """Fill a scope through the API until the budget refuses more (4 KB skills): its catalog is as big as allowed."""
    layer = ProceduralLayer(store)
    written = 0
    try:
        for start in range(0, 2000, 250):
            await layer.seed_skills(scope, [
                {"label": f"b{n}", "steps": ["s" * 100] * 10, "context": "c" * 3000, "identifier": f"b{n}",
                 "source_tag": "authored:t", "action_tool": "deploy", "precondition": ["run_tests"]}
                for n in range(start, start + 250)])
            written += 250
    except Exception:  # the budget: the scope is as full as a write can make it
        pass
    return written


@pytest.mark.parametrize("kinds", [("stall",), ("fail",), ("budget", "hand", "reminders"),
                                   ("stall", "fail", "budget", "hand", "reminders")],
                         ids=["stalling", "failing", "huge", "all"])
async def test_neighbours_that_fail_stall_or_ship_huge_catalogs_never_cost_a_small_scope_its_guard(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, forget: list[str], kinds: tuple[str, ...]
) -> None:
    small = [MemoryScope(f"{tenant}-s{n}", "user-1") for n in range(SMALL)]
    failing, stalled = MemoryScope(f"{tenant}-fail", "u"), MemoryScope(f"{tenant}-stall", "u")
    budget, hand_skills = MemoryScope(f"{tenant}-budget", "u"), MemoryScope(f"{tenant}-hand", "u")
    hand_triggers = MemoryScope(f"{tenant}-reminders", "u")
    bad = [scope for scope in [stalled, failing, budget, hand_skills, hand_triggers]
           if scope.tenant_id.rsplit("-", 1)[1] in kinds]  # the first of them opens the batch
    forget.extend(s.tenant_id for s in [*small, *bad])
    layer = ProceduralLayer(store)
    for scope in [*small, failing, stalled, hand_triggers]:
        await layer.seed_authored_skill(MemoryScope(scope.tenant_id), label="Test before deploying",
                                        steps=["run_tests", "deploy"], source_tag="authored:t",
                                        action_tool="deploy", precondition=["run_tests"])
    if budget in bad:
        assert await _at_budget(store, MemoryScope(budget.tenant_id)) >= 1000
    if hand_skills in bad:
        await _hand_seed(driver, hand_skills.tenant_id, hand_triggers)

    timeout = TIMEOUT if "stall" in kinds else CALM_TIMEOUT
    neighbours = Neighbours(driver, database=store.database, query_timeout=timeout)
    neighbours.failing, neighbours.stalled = failing.tenant_id, stalled.tenant_id
    alone_memory = TurnMemory(neighbours, coalesce_window=None)
    # Plan the turn queries once at the default timeout: a cold server's first plan of the turn query is
    # no neighbour's cost, and on a loaded machine it alone can take longer than the stall's deadline.
    await TurnMemory(store, coalesce_window=None).begin(MemoryScope(f"{tenant}-warm-up"))
    alone = []
    for scope in small:  # a small scope's turn read on its own, cold: the reference
        started = time.monotonic()
        await alone_memory.begin(scope)
        alone.append(time.monotonic() - started)

    memory = TurnMemory(neighbours, max_age=60)
    gate = create_precondition_gate_node(memory.get_active_skills)
    figures: dict[str, list[float]] = {}

    async def round_of_turns(name: str, tool: str, required: str) -> None:
        took: dict[MemoryScope, float] = {}
        outcomes: list[str] = []
        decisions: dict[MemoryScope, Any] = {}

        async def turn(scope: MemoryScope) -> None:
            started = time.monotonic()
            try:
                snapshot = await memory.begin(scope)
            except Exception as exc:
                if scope in small:
                    raise
                outcomes.append(f"{scope.tenant_id.rsplit('-', 1)[1]}: {type(exc).__name__} "
                                f"after {time.monotonic() - started:.2f}s")
                return
            took[scope] = time.monotonic() - started
            if scope not in small:
                outcomes.append(f"{scope.tenant_id.rsplit('-', 1)[1]}: read in {took[scope]:.2f}s")
            if scope in small:
                assert not snapshot.stale, f"{scope} fell back to its last catalog"
                update = await gate({"memory_scope": scope, "messages": [ai_calls((tool, "c1"))]})
                decisions[scope] = update.get("messages", [None])[0]

        async with anyio.create_task_group() as tg:
            for scope in [*bad, *small]:  # a bad neighbour opens the batch: its deadline was the first
                tg.start_soon(turn, scope)
        for scope in small:
            message = decisions[scope]
            assert message is not None, f"{name}: {tool} ran in {scope} without {required}"
            assert message.content.startswith(f"Missing precondition: call {required} before {tool}"), message.content
        figures[name] = [took[s] for s in small]
        print(f"\n{name}: neighbours {sorted(outcomes)}")
        assert max(figures[name]) < timeout * 0.9, f"{name}: a small scope waited for a timeout: {figures[name]}"

    await round_of_turns("cold", "deploy", "run_tests")
    for scope in small:  # an emergency rule, acknowledged in every small tenant
        await layer.seed_authored_skill(MemoryScope(scope.tenant_id), label="Never drop without approval",
                                        steps=["get_approval", "drop_db"], source_tag="authored:t",
                                        action_tool="drop_db", precondition=["get_approval"])
    await round_of_turns("warm", "drop_db", "get_approval")
    await round_of_turns("warm again", "deploy", "run_tests")

    coalescer = memory._coalescer
    assert coalescer is not None
    print(f"\nsmall scope read alone, cold: median {statistics.median(alone) * 1000:.0f} ms, "
          f"max {max(alone) * 1000:.0f} ms")
    for name, values in figures.items():
        print(f"small scope turn among failing, stalled and huge neighbours ({name}): "
              f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms")
    hedged = getattr(coalescer, "hedged", None)
    print(f"queries {coalescer.queries}, callers that stopped waiting for a batch {hedged}, "
          f"scopes read alone {sorted(k[0].rsplit('-', 1)[1] for k in coalescer._solo)}")
    # the neighbours that fail, stall or ship a big row are now read outside every batch
    assert {(s.tenant_id, s.namespace) for s in (failing, stalled, hand_triggers) if s in bad} <= coalescer._solo.keys()
