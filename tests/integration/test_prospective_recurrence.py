"""Recurring triggers against a real Neo4j: an RRULE, one next occurrence per acknowledged one, under races."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.triggers import GraphPendingTriggers
from tests._fakes import Clock, Scripted

pytestmark = pytest.mark.anyio

MONDAY = datetime(2031, 5, 5, 9, 0, tzinfo=UTC)  # a Monday
T0 = MONDAY.timestamp()
DAY = 86400.0


async def _occurrences(store: GraphMemoryStore, tenant: str) -> list[dict[str, Any]]:
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $tenant}) RETURN t.id AS id, t.status AS status, t.resolution AS how, "
        "t.due_at.epochSeconds AS due ORDER BY t.due_at, t.created_at", tenant=tenant, database_=store.database)
    return [dict(r) for r in records]


async def test_acknowledging_an_occurrence_makes_the_next_one(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    first = await layer.set_trigger(scope, task="Send the weekly report.", due_at=MONDAY,
                                    recurrence="RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=4", identifier="weekly")
    source = GraphPendingTriggers(store, clock=clock)
    assert [t.trigger_id for t in await source.pending(scope)] == [first]

    second = await layer.ack_trigger(scope, first)
    assert second is not None and second != first
    assert await layer.ack_trigger(scope, first) == second  # again: the same next occurrence, no other
    assert await source.pending(scope) == []  # the next one is due next Monday
    clock.now = T0 + 7 * DAY
    [offered] = await source.pending(scope)
    assert (offered.trigger_id, offered.kind, offered.task) == (second, "time", "Send the weekly report.")

    clock.now = T0 + 16 * DAY  # acknowledged late, on a Wednesday: the missed Monday (the 19th) is skipped
    third = await layer.ack_trigger(scope, "weekly")  # the identifier names the pending occurrence
    assert third is not None
    [pending] = await layer.get_pending(scope)
    assert (pending.id, pending.due_at, pending.recurrence) == (
        third, datetime(2031, 5, 26, 9, tzinfo=UTC), "FREQ=WEEKLY;BYDAY=MO;COUNT=4")
    assert await layer.ack_trigger(scope, third) is None  # COUNT=4: the rule ended
    assert await layer.get_pending(scope) == []
    assert [(o["status"], o["how"]) for o in await _occurrences(store, tenant)] == [("resolved", "acknowledged")] * 3


async def test_cancel_ends_a_series_and_expiry_bounds_it(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    daily = await layer.set_trigger(scope, task="Daily.", due_at=T0, recurrence="FREQ=DAILY")
    await layer.cancel_trigger(scope, daily)
    assert await layer.ack_trigger(scope, daily) is None  # cancelled: no next occurrence, ever
    bounded = await layer.set_trigger(scope, task="Bounded.", due_at=T0, recurrence="FREQ=DAILY",
                                      expires_at=T0 + 1.5 * DAY)
    nxt = await layer.ack_trigger(scope, bounded)
    assert nxt is not None and await layer.ack_trigger(scope, nxt) is None  # day 3 is past expires_at
    assert await layer.get_pending(scope) == []


async def test_setting_a_series_again_starts_it_over(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    first = await layer.set_trigger(scope, task="Water.", due_at=T0, recurrence="FREQ=DAILY", identifier="water")
    second = await layer.ack_trigger(scope, first)
    again = await layer.set_trigger(scope, task="Water, twice.", due_at=T0 + DAY / 2, recurrence="FREQ=DAILY",
                                    identifier="water")
    assert again == first
    pending = await layer.get_pending(scope)
    assert [(t.id, t.task) for t in pending] == [(first, "Water, twice.")]  # the old next occurrence is retired
    third = await layer.ack_trigger(scope, "water")
    assert third not in (None, second)
    assert [t.id for t in await layer.get_pending(scope)] == [third]


async def test_bad_recurrences_are_refused_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    layer, scope = ProspectiveLayer(store), MemoryScope(tenant)
    for fields, message in [
        ({"due_at": T0, "recurrence": "FREQ=SOMETIMES"}, "recurrence: is not a valid RRULE"),
        ({"due_at": T0, "recurrence": "DTSTART:20310101T000000Z\nRRULE:FREQ=DAILY"}, "recurrence: must be one RRULE"),
        ({"condition": "c", "recurrence": "FREQ=DAILY"}, "recurrence: only a time trigger recurs"),
        ({"due_at": T0, "recurrence": ""}, "recurrence: must be an RRULE"),
    ]:
        with pytest.raises(ValidationError, match="^" + message):
            await layer.set_trigger(scope, task="x", **fields)
    assert await layer.get_pending(scope) == []


async def test_32_concurrent_acknowledgements_make_exactly_one_next_occurrence(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    current = await layer.set_trigger(scope, task="Stand-up.", due_at=T0, recurrence="FREQ=DAILY")
    for round_ in range(5):
        answers = await asyncio.gather(*(layer.ack_trigger(scope, current) for _ in range(32)))
        pending = await layer.get_pending(scope)
        assert len(pending) == 1, f"round {round_}: {len(pending)} next occurrences"
        assert set(answers) == {pending[0].id} and pending[0].id != current
        assert pending[0].due_at == datetime.fromtimestamp(T0 + (round_ + 1) * DAY, UTC)
        current = pending[0].id
        clock.now += DAY
    occurrences = await _occurrences(store, tenant)
    assert [o["how"] for o in occurrences] == ["acknowledged"] * 5 + [None]


async def test_the_middleware_offers_each_occurrence_at_its_time(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "user-7"), Clock(T0)
    layer = ProspectiveLayer(store, clock=clock)
    first = await layer.set_trigger(scope, task="Take the medicine.", due_at=T0, recurrence="FREQ=HOURLY;INTERVAL=8")
    middleware = MemoryMiddleware(TurnMemory(store, wall_clock=clock))

    async def turn() -> str:
        model = Scripted(responses=[AIMessage("ok")])
        await create_agent(model, [], middleware=[middleware]).ainvoke(
            {"messages": [HumanMessage("hi")]}, context=scope)
        return str(model.seen[0][-1].content)

    assert await turn() == "## PENDING REMINDERS\n- Take the medicine."
    await layer.ack_trigger(scope, first)
    assert await turn() == "hi"
    clock.now = T0 + 8 * 3600
    assert await turn() == "## PENDING REMINDERS\n- Take the medicine."
