"""Time triggers and expiry against a real Neo4j: offered on the first turn at or after the due time.

Every read is through the library's own paths (``GraphPendingTriggers``,
``TurnMemory``, ``MemoryMiddleware`` in a ``create_agent`` agent), with an
injected wall clock; the graph underneath is real.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph._store.cypher import query
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.shape._embedding import meaning
from symfonic_graph.triggers import GraphPendingTriggers, PendingTrigger, ProspectiveTriggerCapability
from tests._fakes import Clock, Scripted

pytestmark = pytest.mark.anyio

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC).timestamp()


def never(condition: str, cue: str) -> bool:
    return False


async def _offered(store: GraphMemoryStore, scope: MemoryScope, clock: Clock, **kw: Any) -> list[PendingTrigger]:
    return await GraphPendingTriggers(store, clock=clock, **kw).pending(scope)


async def test_a_time_trigger_is_offered_from_its_due_time_on(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    at = await layer.set_trigger(scope, task="Call the bank.", due_at=datetime.fromtimestamp(T0 + 60, UTC))
    within = await layer.set_trigger(scope, task="Water the plants.", due_in=timedelta(minutes=5))
    text = await layer.set_trigger(scope, condition="invoice", task="Say it is overdue.")

    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [text]
    clock.now = T0 + 59.999
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [text]
    clock.now = T0 + 60  # the first turn at its due time
    offered = await _offered(store, scope, clock)
    assert offered == [PendingTrigger(at, "", "Call the bank.", "time"), PendingTrigger(text, "invoice",
                                                                                        "Say it is overdue.")]
    clock.now = T0 + 300  # due_in resolved when written, from the layer's clock
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [at, within, text]
    clock.now = T0 + 86400 * 30  # and on every later turn, until acknowledged
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [at, within, text]
    # the layer lists every pending trigger, due or not, with its kind and due time
    pending = await layer.get_pending(scope)
    assert [(t.kind, t.due_at) for t in pending] == [
        ("time", datetime.fromtimestamp(T0 + 60, UTC)), ("time", datetime.fromtimestamp(T0 + 300, UTC)),
        ("text", None)]


async def test_a_due_trigger_is_selected_without_the_evaluator(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant), Clock(T0)
    await ProspectiveLayer(store).set_trigger(scope, task="Ask how the move went.", due_at=T0)
    await ProspectiveLayer(store).set_trigger(scope, condition="move", task="Never: the evaluator says no.")
    capability = ProspectiveTriggerCapability(GraphPendingTriggers(store, clock=clock), never, scope)
    [contribution] = await capability.contribute({"prompt": "hello"})
    assert contribution.content == "## PENDING REMINDERS\n- Ask how the move went."
    clock.now = T0 - 1
    assert await capability.contribute({"prompt": "hello"}) == []


async def test_expired_and_unknown_kinds_are_never_offered(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant), Clock(T0)
    layer = ProspectiveLayer(store)
    text = await layer.set_trigger(scope, condition="c", task="Until noon.", expires_at=T0 + 100)
    timed = await layer.set_trigger(scope, task="Due, then gone.", due_at=T0 + 10, expires_at=T0 + 20)
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [text]
    clock.now = T0 + 10
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [text, timed]
    clock.now = T0 + 20  # at its expiry: never again
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [text]
    clock.now = T0 + 100
    assert await _offered(store, scope, clock) == []
    assert [t.id for t in await layer.get_pending(scope)] == [text, timed]  # still pending, never offered
    # hand-seeded: a kind this release does not know, a time trigger without a due time, a naive due time
    for props in ({"kind": "telepathy"}, {"kind": "time"}, {"kind": "time", "due_at": "2020-01-01T00:00:00"}):
        await store.driver.execute_query(
            "CREATE (t:Trigger {id: $id, tenant_id: $tenant, condition: 'c', task: 'x', status: 'pending', "
            "created_at: datetime()}) SET t += $props", id=f"seed-{uuid.uuid4().hex}", tenant=tenant,
            props=props, database_=store.database)
    assert await _offered(store, scope, clock) == []


async def test_plain_cypher_time_triggers_are_offered_before_and_after_stamping(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    tid = f"seed-{uuid.uuid4().hex}"
    await store.driver.execute_query(
        "CREATE (t:Trigger {id: $id, tenant_id: $tenant, namespace: 'u1', kind: 'time', condition: '', "
        "task: 'Renew the passport.', status: 'pending', created_at: datetime(), "
        "due_at: datetime({epochSeconds: $due})})", id=tid, tenant=tenant, due=int(T0 + 30),
        database_=store.database)
    assert await _offered(store, scope, clock) == []
    clock.now = T0 + 30
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [tid]  # unkeyed: read from the tenant
    await store.stamp_keys()
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {id: $id}) RETURN t.symfonic_offer_at.epochSeconds AS at, t:SymfonicOfferKeyed AS keyed",
        id=tid, database_=store.database)
    assert (records[0]["at"], records[0]["keyed"]) == (int(T0 + 30), True)
    assert [t.trigger_id for t in await _offered(store, scope, clock)] == [tid]
    clock.now = T0 + 29
    assert await _offered(store, scope, clock) == []


async def test_the_turn_reads_only_offerable_triggers_bounded_by_max_triggers(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store)
    future = [{"task": f"Later {k}.", "due_at": T0 + 3600 + k} for k in range(300)]
    for start in range(0, len(future), 100):
        rows = [await _row(scope, **entry) for entry in future[start:start + 100]]
        await layer.write_triggers(scope, rows)
    due = [await layer.set_trigger(scope, task=f"Now {k}.", due_at=T0 - k) for k in range(3)]

    memory = TurnMemory(store, wall_clock=clock, max_triggers=2)
    snapshot = await memory.begin(scope)
    # over the cap: the two offerable longest (due at T0 - 2 and T0 - 1), shown oldest first
    assert [t.trigger_id for t in snapshot.triggers] == [due[1], due[2]]
    assert {t.kind for t in snapshot.triggers} == {"time"}
    # PROFILE: the seek on the offer index never reads the not-yet-due reminders (the tenant fallback
    # may, while the shared test database holds triggers seeded with plain Cypher and not yet stamped)
    params = {"tenant_id": tenant, "namespace": "u1", "write_id": None, "limit": 100,
              "now": datetime.fromtimestamp(T0, UTC), **meaning(None)}
    async with store.driver.session(database=store.database) as session:
        result = await session.run("PROFILE " + query("triggers_offerable").text, params)
        [record] = [r async for r in result]
        summary = await result.consume()
    assert len(record["triggers"]) == 3
    assert summary.profile is not None
    assert _rows_out_of_seeks(summary.profile) == 3  # the 300 future ones stay in the index

    clock.now = T0 + 3600 + 299  # all due now: the turn reads at most max_triggers, in offer-key order
    snapshot = await memory.begin(scope)
    assert len(snapshot.triggers) == 2
    async with store.driver.session(database=store.database) as session:
        result = await session.run("PROFILE " + query("triggers_offerable").text,
                                   {**params, "limit": 5, "now": datetime.fromtimestamp(clock.now, UTC)})
        [record] = [r async for r in result]
        summary = await result.consume()
    assert len(record["triggers"]) == 5
    assert summary.profile is not None
    assert _rows_out_of_seeks(summary.profile) <= 2 * 5  # at most the cap per scope key, of 303 due


async def _row(scope: MemoryScope, **entry: Any) -> dict[str, Any]:
    from symfonic_graph.memory.layers.prospective import trigger_row
    return trigger_row(scope, **entry)


def _rows_out_of_seeks(plan: Any) -> int:
    details = str(plan.get("args", {}).get("Details", ""))
    own = plan["rows"] if "IndexSeek" in plan["operatorType"] and "symfonic_offer_at" in details else 0
    return own + sum(_rows_out_of_seeks(child) for child in plan.get("children") or [])


async def test_bad_time_input_names_the_field_and_writes_nothing(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    layer = ProspectiveLayer(store)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"kind": "time"}, "due_at: a time trigger needs due_at or due_in"),
        ({"due_at": datetime(2031, 1, 1)}, "due_at: must be timezone-aware"),
        ({"due_at": T0, "due_in": 60}, "due_in: give due_at or due_in, not both"),
        ({"kind": "text", "condition": "c", "due_in": 60}, "due_in: only a time trigger has a due time"),
        ({"due_in": -5}, "due_in: must be from 0"),
        ({"due_at": True}, "due_at: must be an aware datetime or epoch seconds, not a bool"),
        ({"due_at": T0, "expires_at": T0}, "expires_at: must be after due_at"),
        ({"kind": "vibes", "condition": "c"}, "kind: must be one of 'text', 'time'"),
        ({"condition": "c", "expires_at": "soon"}, "expires_at: must be an ISO 8601 time"),
    ]
    for fields, message in cases:
        with pytest.raises(ValidationError, match="^" + message):
            await layer.set_trigger(scope, task="x", **fields)
    assert await layer.get_pending(scope) == []


async def test_a_seed_file_writes_time_triggers(store: GraphMemoryStore, tenant: str, tmp_path: Any) -> None:
    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, plan_seed

    path = tmp_path / "reminders.yaml"
    path.write_text(
        "triggers:\n"
        "  - task: Send the quarterly report.\n"
        "    due_at: '2031-05-01T09:00:30+00:00'\n"
        "    expires_at: '2031-05-02T09:00:00+00:00'\n"
        "  - task: Check the backups.\n"
        "    kind: time\n"
        "    due_in: 2h\n"
        "  - {condition: invoice, task: Say it is overdue.}\n")
    scope, clock = MemoryScope(tenant), Clock(T0)
    await apply_seed(store, plan_seed(load_seed_file(path), scope))
    pending = await ProspectiveLayer(store).get_pending(scope)
    assert [(t.kind, t.expires_at) for t in pending] == [
        ("time", datetime(2031, 5, 2, 9, tzinfo=UTC)), ("time", None), ("text", None)]
    assert pending[1].due_at is not None and abs(pending[1].due_at.timestamp() - (time.time() + 7200)) < 60
    clock.now = time.time() + 7100  # due_in resolved when seeded
    assert [t.task for t in await _offered(store, scope, clock)] == ["Say it is overdue."]
    clock.now = T0 + 30
    assert [t.task for t in await _offered(store, scope, clock)] == [
        "Send the quarterly report.", "Check the backups.", "Say it is overdue."]
    path.write_text("triggers:\n  - {task: x, due_at: '2031-05-01T09:00:30'}\n")
    with pytest.raises(ValidationError, match=r"triggers\[0\]\.due_at: must be timezone-aware"):
        plan_seed(load_seed_file(path), scope)


async def test_the_middleware_offers_a_due_reminder_on_the_first_turn_at_its_time(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope, clock = MemoryScope(tenant, "user-7"), Clock(T0)
    await ProspectiveLayer(store).set_trigger(scope, task="Remind them the rent is due.", due_at=T0 + 60)
    middleware = MemoryMiddleware(TurnMemory(store, wall_clock=clock))  # no evaluator: time reminders still come

    async def turn() -> list[str]:
        model = Scripted(responses=[AIMessage("ok")])
        await create_agent(model, [], middleware=[middleware]).ainvoke(
            {"messages": [HumanMessage("hello")]}, context=scope)
        return [str(m.content) for m in model.seen[0] if isinstance(m, HumanMessage)]

    assert await turn() == ["hello"]
    clock.now = T0 + 60
    assert await turn() == ["hello", "## PENDING REMINDERS\n- Remind them the rent is due."]
    clock.now = T0 + 3600
    assert await turn() == ["hello", "## PENDING REMINDERS\n- Remind them the rent is due."]


async def test_seed_plan_counts_a_changed_due_time_as_updated(store: GraphMemoryStore, tenant: str,
                                                               tmp_path: Any) -> None:
    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, count_changes, plan_seed

    scope = MemoryScope(tenant)
    path = tmp_path / "reminders.yaml"

    async def counts(text: str) -> dict[str, int]:
        path.write_text(text)
        plan = plan_seed(load_seed_file(path), scope)
        [changes] = await count_changes(store, plan)
        await apply_seed(store, plan)
        return changes["triggers"]

    entry = "triggers:\n  - {identifier: rent, task: Rent is due., due_at: '2031-06-01T09:00:00+00:00'}\n"
    text = "  - {condition: invoice, task: Say it is overdue.}\n"
    assert await counts(entry + text) == {"created": 2, "updated": 0, "unchanged": 0}
    assert await counts(entry + text) == {"created": 0, "updated": 0, "unchanged": 2}
    moved = entry.replace("2031-06-01", "2031-06-02")
    assert await counts(moved + text) == {"created": 0, "updated": 1, "unchanged": 1}
    assert await counts(moved.replace("due_at: '2031-06-02T09:00:00+00:00'", "on_tool: pay_rent") + text) == {
        "created": 0, "updated": 1, "unchanged": 1}
