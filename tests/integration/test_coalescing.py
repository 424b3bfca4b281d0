"""Coalesced turn reads: many concurrent begin() calls, one round trip, nothing crosses scopes."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.errors import QueryError, StoreUnavailableError, ValidationError
from tests._counting import CountingStore
from tests._fakes import ai_calls

pytestmark = pytest.mark.anyio
TENANTS = 12


async def _seed(store: GraphMemoryStore, prefix: str) -> list[MemoryScope]:
    scopes = []
    for n in range(TENANTS):
        scope = MemoryScope(f"{prefix}-{n}", "user-1")
        await ProceduralLayer(store).seed_authored_skill(
            MemoryScope(scope.tenant_id), label=f"Rule {n}", steps=["deploy"], source_tag="authored:t",
            action_tool="deploy", precondition=[f"check_{n}"])
        await ProspectiveLayer(store).set_trigger(scope, condition="c", task=f"task of {n}")
        scopes.append(scope)
    return scopes


def _view(snapshot: Any) -> tuple[Any, ...]:
    return (snapshot.scope, snapshot.version, [s.metadata for s in snapshot.skills],
            [(t.trigger_id, t.task) for t in snapshot.triggers])


async def test_concurrent_turns_share_queries_and_each_gets_its_own_scope(
    store: GraphMemoryStore, tenant: str
) -> None:
    scopes = await _seed(store, tenant)
    expected = {scope: _view(await TurnMemory(store).begin(scope)) for scope in scopes}
    memory = TurnMemory(store, coalesce_window=0.002)
    turns = [random.Random(n).choice(scopes) for n in range(96)]
    seen: list[tuple[MemoryScope, Any]] = []

    async def turn(scope: MemoryScope) -> None:
        seen.append((scope, _view(await memory.begin(scope))))

    async with anyio.create_task_group() as tg:
        for scope in turns:
            tg.start_soon(turn, scope)
    assert len(seen) == len(turns)
    for scope, view in seen:
        assert view == expected[scope]  # exactly its own skills and reminders, nothing of another tenant
    coalescer = memory._coalescer
    assert coalescer is not None
    # Batches formed: a caller that stopped waiting for a slow batch (a loaded machine: over 1 s) reads its
    # scope alone by design, so those reads are not counted against sharing.
    assert coalescer.queries - coalescer.hedged < len(turns) / 4, (coalescer.queries, coalescer.hedged)


async def test_coalescing_is_on_by_default_and_none_turns_it_off(store: GraphMemoryStore, tenant: str) -> None:
    scopes = await _seed(store, tenant)

    async def concurrent_turns(memory: TurnMemory) -> dict[MemoryScope, Any]:
        views: dict[MemoryScope, Any] = {}

        async def turn(scope: MemoryScope) -> None:
            views[scope] = _view(await memory.begin(scope))

        async with anyio.create_task_group() as tg:
            for scope in scopes:
                tg.start_soon(turn, scope)
        return views

    default, off = CountingStore(store), CountingStore(store)
    by_default = await concurrent_turns(TurnMemory(default))
    one_each = await concurrent_turns(TurnMemory(off, coalesce_window=None))
    assert by_default == one_each and len(by_default) == TENANTS  # the same snapshots either way
    assert len(off.reads) == TENANTS
    assert len(default.reads) == 1  # begun in the same event-loop iteration: one round trip for all
    await TurnMemory(default).begin(scopes[0])  # a lone turn: one query, no wait
    assert len(default.reads) == 2


async def test_the_gate_enforces_per_tenant_with_coalescing_on(store: GraphMemoryStore, tenant: str) -> None:
    scopes = await _seed(store, tenant)
    memory = TurnMemory(store, coalesce_window=0.0, max_age=0)
    results: dict[MemoryScope, str] = {}

    async def gate(scope: MemoryScope) -> None:
        update = await create_precondition_gate_node(memory.get_active_skills)(
            {"memory_scope": scope, "messages": [ai_calls(("deploy", "c1"))]})
        results[scope] = update["messages"][0].content

    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(gate, scope)
    for n, scope in enumerate(scopes):
        assert results[scope].startswith(f"Missing precondition: call check_{n} before deploy (skill: Rule {n}).")


class OneBadScope(GraphMemoryStore):
    """The real store, except that any read naming the poisoned tenant fails like a refused query."""

    poisoned = ""

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        if any(s.get("tenant_id") == self.poisoned for s in params.get("scopes", [])):
            raise QueryError(f"query {name}", "Neo.ClientError.Statement.ArgumentError", "poisoned for the test")
        return await super().read(name, **params)


async def test_one_failing_scope_never_fails_the_others(store: GraphMemoryStore, tenant: str) -> None:
    scopes = await _seed(store, tenant)
    faulty = OneBadScope(store.driver, database=store.database)
    faulty.poisoned = scopes[3].tenant_id
    memory = TurnMemory(faulty, coalesce_window=0.005)
    outcomes: dict[MemoryScope, Any] = {}

    async def turn(scope: MemoryScope) -> None:
        try:
            outcomes[scope] = _view(await memory.begin(scope))
        except QueryError as exc:
            outcomes[scope] = exc

    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(turn, scope)
    assert isinstance(outcomes[scopes[3]], QueryError)
    for scope in scopes[:3] + scopes[4:]:
        assert outcomes[scope] == _view(await TurnMemory(store).begin(scope))


async def test_an_outage_fails_every_caller_typed(scope: MemoryScope) -> None:
    import neo4j

    dead = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))
    try:
        memory = TurnMemory(GraphMemoryStore(dead, query_timeout=2.0), coalesce_window=0.001)
        errors: list[BaseException] = []

        async def turn(n: int) -> None:
            try:
                await memory.begin(MemoryScope(f"{scope.tenant_id}-{n}"))
            except StoreUnavailableError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(turn, n)
        assert len(errors) == 8
    finally:
        await dead.close()


@pytest.mark.parametrize("bad", [-0.1, 2, True, "0.001"])
async def test_the_window_is_validated(store: GraphMemoryStore, bad: object) -> None:
    with pytest.raises(ValidationError, match="coalesce_window"):
        TurnMemory(store, coalesce_window=bad)  # type: ignore[arg-type]


class OneSlowScope(GraphMemoryStore):
    """The real store, except that a read naming the slow tenant fails as its timeout would."""

    slow = ""

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        if any(s.get("tenant_id") == self.slow for s in params.get("scopes", [])):
            raise StoreUnavailableError(f"query {name}: Neo4j did not answer within 10.0s (test)")
        return await super().read(name, **params)


async def test_a_neighbour_whose_read_times_out_never_opens_the_other_tenants_gates(
    store: GraphMemoryStore, tenant: str
) -> None:
    scopes = await _seed(store, tenant)
    slow = OneSlowScope(store.driver, database=store.database)
    slow.slow = scopes[3].tenant_id
    memory = TurnMemory(slow, coalesce_window=0.005, max_age=0)
    results: dict[MemoryScope, Any] = {}

    async def gate(scope: MemoryScope) -> None:
        update = await create_precondition_gate_node(memory.get_active_skills)(
            {"memory_scope": scope, "messages": [ai_calls(("deploy", "c1"))]})
        results[scope] = update.get("messages", [None])[0]

    for _ in range(2):  # the second round: the slow scope is read alone, outside the batch
        async with anyio.create_task_group() as tg:
            for scope in scopes:
                tg.start_soon(gate, scope)
        for n, scope in enumerate(scopes):
            if n == 3:
                assert results[scope] is None  # its own outage: pass-through (no catalog yet)
            else:  # every neighbour's guarded call is still blocked
                assert results[scope].content.startswith(f"Missing precondition: call check_{n} before deploy")
    assert memory._coalescer is not None and memory._coalescer._solo.keys() == {(scopes[3].tenant_id, "user-1")}


class RecordingScopes(GraphMemoryStore):
    """The real store, recording the tenants of each turn read it sends."""

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.batches: list[set[str]] = []

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        if "scopes" in params:
            self.batches.append({s["tenant_id"] for s in params["scopes"]})
        return await super().read(name, **params)


async def _all_at_once(memory: TurnMemory, scopes: list[MemoryScope]) -> None:
    """One turn of each scope, all begun together (one batch when they coalesce)."""
    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(memory.begin, scope)


async def test_a_big_catalog_is_shipped_in_a_query_of_its_own(store: GraphMemoryStore, tenant: str) -> None:
    from symfonic_graph.memory.turn import BIG_CATALOG

    small = await _seed(store, tenant)
    big = MemoryScope(f"{tenant}-big")
    await ProceduralLayer(store).seed_skills(big, [
        {"label": f"r{i}", "steps": ["deploy"], "source_tag": "authored:t", "identifier": f"r{i}",
         "action_tool": "deploy", "precondition": ["check"]} for i in range(BIG_CATALOG)])
    recording = RecordingScopes(store)
    memory = TurnMemory(recording)
    await _all_at_once(memory, [*small, big])  # the first read of each scope: the big one's size is not known yet
    memory.invalidate()  # every catalog must be shipped again
    recording.batches.clear()
    await _all_at_once(memory, [*small, big])
    assert {big.tenant_id} in recording.batches  # alone
    assert all(big.tenant_id not in batch for batch in recording.batches if len(batch) > 1)
    assert len((await memory.begin(big)).skills) == BIG_CATALOG



async def test_a_scope_whose_reminders_ship_a_lot_is_read_alone_too(store: GraphMemoryStore, tenant: str) -> None:
    """The reminders a warm turn ships count toward a row's weight as the skills do (each turn re-reads them)."""
    from symfonic_graph.memory._coalesce import SOLO_CHARS

    small = await _seed(store, tenant)
    loud = MemoryScope(f"{tenant}-loud", "user-1")
    for i in range(SOLO_CHARS // 7_000 + 2):
        await ProspectiveLayer(store).set_trigger(loud, condition=f"c{i}", task=f"{i} " + "x" * 7_000)
    recording = RecordingScopes(store)
    memory = TurnMemory(recording)
    await _all_at_once(memory, [*small, loud])  # warm from here on: only the reminders ship
    recording.batches.clear()
    await _all_at_once(memory, [*small, loud])
    assert {loud.tenant_id} in recording.batches  # alone
    assert all(loud.tenant_id not in batch for batch in recording.batches if len(batch) > 1)
    assert len((await memory.begin(loud)).triggers) == SOLO_CHARS // 7_000 + 2

class _HeldFirstRead(GraphMemoryStore):
    """The real store on the same driver; its first turn read is held a while (a slow batch), then sent."""

    def __init__(self, store: GraphMemoryStore, hold: float) -> None:
        super().__init__(store.driver, database=store.database)
        self.hold, self.reads, self.cancelled, self.finished = hold, 0, 0, 0

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        if not name.startswith("turn_snapshot"):
            return await super().read(name, **params)
        self.reads += 1
        first = self.reads == 1
        try:
            if first:
                await anyio.sleep(self.hold)
            rows = await super().read(name, **params)
        except BaseException:
            self.cancelled += first
            raise
        self.finished += first
        return rows


async def test_a_sent_batch_whose_callers_stopped_waiting_runs_to_its_end(
    store: GraphMemoryStore, tenant: str
) -> None:
    """A caller that stops waiting reads alone; the batch already sent is not cancelled mid-read.

    Cancelling a query on the wire breaks its connection, and the reconnections slowed every later read:
    32 concurrent warm turns ran at 480 turns/s instead of 10,000.
    """
    [scope, *_] = await _seed(store, tenant)
    held = _HeldFirstRead(store, hold=1.5)  # longer than a caller waits for a batch never timed (1 s)
    memory = TurnMemory(held)
    snapshot = await memory.begin(scope)  # the caller hedged after 1 s and read its scope alone
    assert [s.label for s in snapshot.skills] == ["Rule 0"]
    assert memory._coalescer is not None and memory._coalescer.hedged == 1
    with anyio.fail_after(10):
        while held.finished + held.cancelled == 0:
            await anyio.sleep(0.05)
    assert (held.finished, held.cancelled) == (1, 0)


class _Neighbour(GraphMemoryStore):
    """The real store (same driver); a batch that holds ``neighbour`` with other scopes misbehaves.

    ``slow``: held ``1.5 * query_timeout`` before it is sent (its own deadline then fails it, as a real
    stall would); ``fails late``: fails as its timeout would, after ``query_timeout``; ``fails at once``.
    The neighbour's reads alone are served as they are.
    """

    def __init__(self, store: GraphMemoryStore, neighbour: str, behaviour: str, query_timeout: float) -> None:
        super().__init__(store.driver, database=store.database, query_timeout=query_timeout)
        self.neighbour, self.behaviour = neighbour, behaviour

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        scopes = params.get("scopes") or []
        if len(scopes) > 1 and any(s.get("tenant_id") == self.neighbour for s in scopes):
            if self.behaviour == "slow":
                await anyio.sleep(1.5 * self.query_timeout)
            else:
                await anyio.sleep(self.query_timeout if self.behaviour == "fails late" else 0)
                raise StoreUnavailableError(f"query {name}: Neo4j did not answer within {self.query_timeout}s (test)")
        return await super().read(name, **params)


@pytest.mark.parametrize("behaviour", ["slow", "fails late", "fails at once"])
@pytest.mark.parametrize("query_timeout", [0.5, 1.0, 2.0])
async def test_a_neighbours_batch_never_spends_the_budget_of_a_callers_own_read(
    store: GraphMemoryStore, tenant: str, query_timeout: float, behaviour: str
) -> None:
    """Whatever query_timeout is, a first turn batched with a slow or failing neighbour is read, and its gate holds.

    The caller stops waiting for the batch within ``BATCH_SHARE`` of its budget and reads alone with the
    time it waited given back: only its own store outage could fail it.
    """
    from symfonic_graph._store.transport import _DEADLINE

    victim, neighbour = MemoryScope(f"{tenant}-v"), MemoryScope(f"{tenant}-n")
    for scope in (victim, neighbour):
        await ProceduralLayer(store).seed_authored_skill(
            scope, label="Deploy", steps=["deploy"], source_tag="authored:t", action_tool="deploy",
            precondition=["run_tests"])
    memory = TurnMemory(_Neighbour(store, neighbour.tenant_id, behaviour, query_timeout))  # coalescing on
    results: dict[MemoryScope, Any] = {}

    async def gate(scope: MemoryScope) -> None:
        update = await create_precondition_gate_node(memory.get_active_skills)(
            {"memory_scope": scope, "messages": [ai_calls(("deploy", "c1"))]})
        results[scope] = update.get("messages", [None])[0]

    async with anyio.create_task_group() as tg:  # two first turns at once: one batch
        tg.start_soon(gate, victim)
        tg.start_soon(gate, neighbour)
    assert results[victim] is not None, "the victim's guarded call passed through"
    assert results[victim].content.startswith("Missing precondition: call run_tests before deploy")
    assert memory._coalescer is not None and memory._coalescer.queries >= 2  # the batch, then reads alone
    assert _DEADLINE.get() is None  # the deadline given back ends with the turn
