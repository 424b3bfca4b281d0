"""Attack round 4: the coalescer, the catalog cache and semantic reminders against the invariants.

Each test asserts what the user sees (the guarded tool ran or not, a rule is
enforced or not). Each was a break found in this round (marked
``xfail(strict=True)`` until its mechanism was fixed).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.memory import _coalesce
from tests._fakes import ai_calls

pytestmark = pytest.mark.anyio


async def _rule(store: GraphMemoryStore, tenant: str, tool: str, before: str, label: str) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        MemoryScope(tenant), label=label, steps=[tool], source_tag="authored:attack", action_tool=tool,
        precondition=[before], identifier=label.lower().replace(" ", "-"))


async def _gate(memory: TurnMemory, scope: MemoryScope, tool: str) -> str | None:
    """The gate's error text for a call of ``tool`` in a fresh conversation, or None when the tool would run."""
    update = await create_precondition_gate_node(memory.get_active_skills)(
        {"memory_scope": scope, "messages": [ai_calls((tool, "c1"))]})
    messages = update.get("messages") if isinstance(update, dict) else None
    return messages[0].content if messages else None


# --- 1. a slow neighbour's batch spends the caller's whole query_timeout -----------------------------------


class _SlowWithNeighbour(GraphMemoryStore):
    """The real store (same driver); a turn read whose batch holds ``slow`` is held ``hold`` s before it is sent.

    Stands for a neighbour whose part of a shared query takes long (a big first read, a stalled page): the
    batch then fails by its own query_timeout, as a real one would.
    """

    def __init__(self, store: GraphMemoryStore, slow: str, hold: float, query_timeout: float) -> None:
        super().__init__(store.driver, database=store.database, query_timeout=query_timeout)
        self.slow, self.hold = slow, hold

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        scopes = params.get("scopes") or []
        if name.startswith("turn_snapshot") and any(s.get("tenant_id") == self.slow for s in scopes):
            await anyio.sleep(self.hold)
        return await super().read(name, **params)


async def test_a_slow_neighbour_never_opens_a_gate_under_a_short_query_timeout(
    store: GraphMemoryStore, tenant: str
) -> None:
    victim, neighbour = f"{tenant}-v", f"{tenant}-slow"
    await _rule(store, victim, "deploy", "run_tests", "Deploy")
    await _rule(store, neighbour, "deploy", "run_tests", "Deploy")
    # a valid query_timeout: the victim's own read takes a few ms, well within it
    slow = _SlowWithNeighbour(store, neighbour, hold=1.5, query_timeout=1.0)
    alone = await _gate(TurnMemory(slow, coalesce_window=None), MemoryScope(victim), "deploy")
    assert alone is not None and alone.startswith("Missing precondition: call run_tests before deploy")
    memory = TurnMemory(slow)  # coalescing on (the default)
    results: dict[str, str | None] = {}

    async def gate(t: str) -> None:
        results[t] = await _gate(memory, MemoryScope(t), "deploy")

    async with anyio.create_task_group() as tg:  # two first turns at once: one batch
        tg.start_soon(gate, victim)
        tg.start_soon(gate, neighbour)
    # the victim's store answered its own read in milliseconds: the guarded call must stay blocked
    outcome = results[victim]
    assert outcome is not None and outcome.startswith("Missing precondition: call run_tests")


# --- 2. an older read lands after a newer one and becomes the scope's snapshot -------------------------------


class _LateWithNeighbour(GraphMemoryStore):
    """The real store; a turn read whose batch holds ``slow`` is read at once but delivered later.

    Stands for a neighbour whose rows take long to ship: the scope's rows were read (a snapshot of the
    graph at that moment) and reach the caller only when the whole batch does, within the hedge: held
    until ``release`` is set, or ``hold`` s after the read began.
    """

    def __init__(self, store: GraphMemoryStore, slow: str, hold: float) -> None:
        super().__init__(store.driver, database=store.database)
        self.slow, self.hold = slow, hold
        self.read_done, self.release = anyio.Event(), anyio.Event()

    async def read(self, name: str, **params: Any) -> list[dict[str, Any]]:
        started = time.monotonic()
        rows = await super().read(name, **params)
        scopes = params.get("scopes") or []
        if name.startswith("turn_snapshot") and len(scopes) > 1 and any(s.get("tenant_id") == self.slow
                                                                          for s in scopes):
            self.read_done.set()
            with anyio.move_on_after(max(0.0, self.hold - (time.monotonic() - started))):
                await self.release.wait()
        return rows


async def test_an_older_read_never_replaces_the_rules_a_later_turn_was_shown(
    store: GraphMemoryStore, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race fits in the real 1 s hedge (a batch delivered 0.3 s late, a publish and a read meanwhile);
    # a wider hedge only keeps a loaded test machine from hedging first (the first turn then reads alone).
    monkeypatch.setattr(_coalesce, "MAX_HEDGE", 5.0)
    scope, neighbour = MemoryScope(tenant), f"{tenant}-slow"
    await _rule(store, tenant, "archive", "lookup", "Archive")  # v1: nothing guards deploy
    await _rule(store, neighbour, "deploy", "run_tests", "Deploy")
    late = _LateWithNeighbour(store, neighbour, hold=4.0)  # under the hedge: delivered late, not abandoned
    memory = TurnMemory(late)
    earlier: list[Any] = []

    async def first_turn() -> None:  # a turn of the scope, coalesced with the slow neighbour's
        earlier.append(await memory.begin(scope))

    async with anyio.create_task_group() as tg:
        tg.start_soon(first_turn)
        tg.start_soon(memory.begin, MemoryScope(neighbour))
        await late.read_done.wait()  # the first turn's rows are read (version 1); they arrive later
        await _rule(store, tenant, "deploy", "run_tests", "Deploy")  # v2: deploy now needs run_tests
        later = await memory.begin(scope)  # a second conversation's turn, in a batch of its own, sees version 2
        late.release.set()  # now the first turn's batch is delivered
        block = later.preflight()
        assert block is not None and "run_tests" in block.content  # the model of this turn is shown the rule
    assert memory._coalescer is not None
    if memory._coalescer.hedged:  # this machine was too slow: the first turn read alone after the write
        pytest.skip("the held batch was not delivered within the hedge on this machine")
    assert earlier and earlier[0].version < later.version  # the older read landed last
    # the later turn's model was shown "call run_tests before deploy"; its gate must enforce it
    error = await _gate(memory, scope, "deploy")
    assert error is not None and error.startswith("Missing precondition: call run_tests before deploy")


# --- 3. a hand-seeded integer embedding whose squared norm overflows a 64-bit integer -----------------------


D = 7


async def _hostile_integer_trigger(driver: neo4j.AsyncDriver, tenant: str, components: int) -> str:
    """A tenant-wide semantic trigger whose embedding is integers of the turn's length (as a JavaScript or
    plain-Cypher client may store them; the cosine function itself takes them)."""
    ident = f"{tenant}-int"
    await driver.execute_query(
        "CREATE (t:Trigger {id: $id, tenant_id: $tenant, kind: 'semantic', condition: 'c', task: 'hostile', "
        "status: 'pending', created_at: datetime()}) SET t.embedding = $embedding",
        {"id": ident, "tenant": tenant, "embedding": [components] * D})
    return ident


async def _drop(driver: neo4j.AsyncDriver, ident: str) -> None:
    """Delete the hostile node at once: a database-wide doctor run on the shared server would fail on it."""
    await driver.execute_query("MATCH (t:Trigger {id: $id}) DETACH DELETE t", {"id": ident})


@pytest.mark.schema_change  # alone on the shared server: another worker's database-wide doctor would meet it
@pytest.mark.parametrize(("components", "usable"), [
    pytest.param(4_294_967_296, True, id="squares past the 64-bit integers"),
    pytest.param(9_223_372_036_854_775_807, False, id="the largest integer: past float32 squared"),
])
async def test_a_hand_seeded_integer_embedding_that_overflows_never_breaks_the_turn(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, components: int, usable: bool
) -> None:
    """Was: embedding_norm_usable summed x * x in integers, and the scope's whole turn read failed. The read now
    decides such a vector as the library's own check does (offered when usable and similar, else never)."""
    from symfonic_graph.errors import ValidationError
    from symfonic_graph.shape._embedding import vector

    try:
        vector("embedding", [components] * D)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted is usable
    scope = MemoryScope(tenant, "u1")
    await _rule(store, tenant, "deploy", "run_tests", "Deploy")
    ident = await _hostile_integer_trigger(driver, tenant, components)
    try:
        snapshot = await TurnMemory(store, coalesce_window=None).begin(scope, embedding=[1.0] * D)
    finally:
        await _drop(driver, ident)
    assert [s.label for s in snapshot.skills] == ["Deploy"]
    assert [t.task for t in snapshot.triggers] == (["hostile"] if usable else [])


@pytest.mark.schema_change
async def test_doctor_names_an_integer_embedding_that_overflows(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str
) -> None:
    """Was: doctor's trigger check includes the same fragment and raised QueryError, for every tenant."""
    from symfonic_graph.ops.doctor import diagnose

    ident = await _hostile_integer_trigger(driver, tenant, 9_223_372_036_854_775_807)
    try:
        findings = await diagnose(store, tenant)
        everyone = await diagnose(store, None)
    finally:
        await _drop(driver, ident)
    assert any("embedding" in str(f) for f in findings)
    assert any("embedding" in str(f) and tenant in str(f) for f in everyone)
