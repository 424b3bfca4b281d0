"""Delivery without a user turn: ProspectiveLayer.due and TriggerDispatcher against a real Neo4j.

Two dispatchers on separate drivers (two connection pools, as two processes
would hold) race over the same due reminders; each occurrence reaches
``deliver`` exactly once.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TriggerDispatcher
from symfonic_graph._store.cypher import query
from symfonic_graph.errors import ValidationError
from symfonic_graph.shape.models import Trigger
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC).timestamp()


def clock() -> float:
    return T0


async def test_two_dispatchers_on_separate_drivers_deliver_each_of_50_once(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings, forget: list[str]
) -> None:
    layer = ProspectiveLayer(store, clock=clock)
    ids = {await layer.set_trigger(MemoryScope(tenant, f"u{i % 7}"), task=f"Reminder {i}.", due_at=T0 - 60 - i)
           for i in range(50)}
    await layer.set_trigger(MemoryScope(tenant, "u1"), task="Later.", due_at=T0 + 3600)
    await layer.set_trigger(MemoryScope(tenant, "u1"), condition="invoice", task="A text trigger.")
    assert {t.id for t in await layer.due(tenant=tenant)} == ids

    seen: list[tuple[int, str]] = []
    other = neo4j.AsyncGraphDatabase.driver(neo4j_settings.uri, auth=(neo4j_settings.user, neo4j_settings.password))
    try:
        # The new driver connects before the race: under load its first connection could take longer than the
        # other dispatcher needs to claim all 50, and "both took part" would fail with nothing wrong.
        await other.verify_connectivity()
        stores = [store, GraphMemoryStore(other, database=neo4j_settings.database)]

        def deliverer(n: int) -> Any:
            async def deliver(trigger: Trigger) -> None:
                seen.append((n, trigger.id))
                await anyio.sleep(0)  # let the other dispatcher interleave
            return deliver

        dispatchers = [TriggerDispatcher(s, deliverer(n), tenants=[tenant], batch=7, clock=clock)
                       for n, s in enumerate(stores)]
        for _ in range(10):  # rounds of 7 each, racing
            async with anyio.create_task_group() as tg:
                for d in dispatchers:
                    tg.start_soon(d.run_once)
    finally:
        await other.close()
    counts = Counter(tid for _, tid in seen)
    assert set(counts) == ids and set(counts.values()) == {1}, counts.most_common(3)
    assert {n for n, _ in seen} == {0, 1}  # both took part
    # a delivered occurrence is not handed out again, and stays pending (selection is not acknowledgement)
    assert await layer.due(tenant=tenant) == []
    assert await dispatchers[0].run_once() == []
    assert len(await layer.get_pending(MemoryScope(tenant, "u1"))) > 1


async def test_a_failing_delivery_releases_the_claim_and_a_snooze_makes_a_new_occurrence(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store, clock=clock)
    tid = await layer.set_trigger(scope, task="Call the bank.", due_at=T0 - 1)
    calls: list[str] = []

    def failing(trigger: Trigger) -> None:
        calls.append(trigger.id)
        raise RuntimeError("push service down")

    assert await TriggerDispatcher(store, failing, tenants=[tenant], clock=clock).run_once() == []
    assert [t.id for t in await layer.due(tenant=tenant)] == [tid]  # released: deliverable again
    ok = TriggerDispatcher(store, lambda t: calls.append(t.id), tenants=[tenant], clock=clock)
    assert [t.id for t in await ok.run_once()] == [tid]
    assert await ok.run_once() == [] and calls == [tid, tid]
    # snoozed, it is a new occurrence at the snooze's end
    await layer.snooze_trigger(scope, tid, T0 + 600)
    assert await ok.run_once() == []
    later = TriggerDispatcher(store, lambda t: calls.append(t.id), tenants=[tenant], clock=lambda: T0 + 600)
    assert [t.id for t in await later.run_once()] == [tid]
    assert calls == [tid, tid, tid]


async def test_a_dead_dispatchers_claim_is_taken_over_after_its_lease(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProspectiveLayer(store, clock=clock)
    tid = await layer.set_trigger(MemoryScope(tenant), task="Tenant-wide notice.", due_at=T0 - 1)
    dead = TriggerDispatcher(store, print, tenants=[tenant], lease=60, clock=clock)
    assert [t.id for t in await dead.claim(tenant)] == [tid]  # claimed, then never delivered
    got: list[str] = []
    assert await TriggerDispatcher(store, lambda t: got.append(t.id), tenants=[tenant], clock=clock).run_once() == []
    after = TriggerDispatcher(store, lambda t: got.append(t.id), tenants=[tenant], clock=lambda: T0 + 60)
    assert [t.id for t in await after.run_once()] == [tid] and got == [tid]
    assert await dead.delivered(tenant, [tid]) == []  # its claim is gone: it records nothing


async def test_acknowledge_on_delivery_makes_the_next_occurrence(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store, clock=clock)
    monday = datetime(2031, 4, 28, 9, tzinfo=UTC)  # a Monday before T0
    tid = await layer.set_trigger(scope, task="Weekly report.", due_at=monday, recurrence="FREQ=WEEKLY;BYDAY=MO")
    got: list[Trigger] = []
    d = TriggerDispatcher(store, got.append, tenants=[tenant], acknowledge=True, clock=clock)
    assert [t.id for t in await d.run_once()] == [tid]
    [following] = await layer.get_pending(scope)
    assert following.id != tid and following.due_at == datetime(2031, 5, 5, 9, tzinfo=UTC)
    assert await layer.due(tenant=tenant) == []
    assert [t.id for t in await layer.due(tenant=tenant, now=datetime(2031, 5, 5, 9, tzinfo=UTC))] == [following.id]


async def test_due_is_isolated_by_tenant_and_scope(store: GraphMemoryStore, tenant: str, forget: list[str]) -> None:
    neighbour = tenant + "-n"
    forget.append(neighbour)
    layer = ProspectiveLayer(store, clock=clock)
    mine = await layer.set_trigger(MemoryScope(tenant, "u1"), task="Mine.", due_at=T0 - 10)
    wide = await layer.set_trigger(MemoryScope(tenant), task="Everyone's.", due_at=T0 - 5)
    theirs = await layer.set_trigger(MemoryScope(neighbour, "u1"), task="Theirs.", due_at=T0 - 20)
    other_user = await layer.set_trigger(MemoryScope(tenant, "u2"), task="u2's.", due_at=T0 - 30)
    assert [t.id for t in await layer.due(tenant=tenant)] == [other_user, mine, wide]
    assert [t.id for t in await layer.due(MemoryScope(tenant, "u1"))] == [mine, wide]
    assert [t.id for t in await layer.due(tenant=neighbour)] == [theirs]
    assert [t.id for t in await layer.due(tenant=tenant, limit=1)] == [other_user]
    got: list[str] = []
    await TriggerDispatcher(store, lambda t: got.append(t.tenant_id), tenants=[neighbour], clock=clock).run_once()
    assert got == [neighbour]
    assert len(await layer.due(tenant=tenant)) == 3  # the neighbour's dispatcher touched none of ours
    # a claim names the tenant: another tenant's dispatcher cannot claim our trigger by id
    stranger = TriggerDispatcher(store, print, tenants=[neighbour], clock=clock)
    rows = await store.write_once("triggers_claim", tenant_id=neighbour, ids=[mine], token=stranger.token,
                                  now=datetime.fromtimestamp(T0, UTC),
                                  until=datetime.fromtimestamp(T0, UTC) + timedelta(minutes=5))
    assert rows == []
    with pytest.raises(ValidationError, match="tenant"):
        await layer.due()


async def test_the_tenant_wide_due_query_seeks_the_due_index(store: GraphMemoryStore) -> None:
    params = {"tenant_id": "t-plan", "namespace": None, "all_namespaces": True,
              "now": datetime(2031, 5, 1, tzinfo=UTC), "limit": 100}
    async with store.driver.session(database=store.database, notifications_min_severity="OFF") as session:
        result = await session.run("EXPLAIN " + query("triggers_due").text, params)
        summary = await result.consume()
    assert summary.plan is not None

    def walk(plan: dict[str, Any]) -> list[tuple[str, str]]:
        here = (plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")))
        return [here] + [op for child in plan.get("children") or [] for op in walk(child)]

    operators = walk(summary.plan)
    assert not [op for op, _ in operators if "Scan" in op], operators
    assert any(op == "NodeIndexSeek" and "(tenant_id, status, kind, symfonic_offer_at)" in details
               for op, details in operators), operators


async def test_concurrent_claims_of_the_same_occurrences_have_one_winner_each(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    layer = ProspectiveLayer(store, clock=clock)
    for i in range(50):
        await layer.set_trigger(MemoryScope(tenant, f"u{i % 5}"), task=f"Reminder {i}.", due_at=T0 - 1 - i)
    other = neo4j.AsyncGraphDatabase.driver(neo4j_settings.uri, auth=(neo4j_settings.user, neo4j_settings.password))
    try:
        # The new driver connects before the race: under load its first connection could take longer than the
        # other dispatcher needs to claim all 50, and "both took part" would fail with nothing wrong.
        await other.verify_connectivity()
        stores = [store, GraphMemoryStore(other, database=neo4j_settings.database)]
        dispatchers = [TriggerDispatcher(stores[n % 2], print, tenants=[tenant], clock=clock) for n in range(8)]
        won: list[list[Trigger]] = [[] for _ in dispatchers]

        async def claim(n: int) -> None:
            won[n] = await dispatchers[n].claim(tenant, limit=50)

        async with anyio.create_task_group() as tg:  # all list the same 50, then claim them at once
            for n in range(len(dispatchers)):
                tg.start_soon(claim, n)
    finally:
        await other.close()
    counts = Counter(t.id for ts in won for t in ts)
    assert len(counts) == 50 and set(counts.values()) == {1}, counts.most_common(3)


async def test_a_claim_waiting_on_an_uncommitted_claim_loses_once_it_commits(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    tid = await ProspectiveLayer(store, clock=clock).set_trigger(MemoryScope(tenant, "u1"), task="Once.",
                                                                  due_at=T0 - 1)
    now = datetime.fromtimestamp(T0, UTC)
    params = {"tenant_id": tenant, "ids": [tid], "token": "first", "now": now, "until": now + timedelta(minutes=5)}
    second = TriggerDispatcher(store, print, tenants=[tenant], clock=clock)
    async with store.driver.session(database=store.database) as session:
        tx = await session.begin_transaction()
        first = await (await tx.run(query("triggers_claim").text, params)).data()
        assert first == [{"id": tid, "claimed": True}]  # held, not committed yet
        result: list[list[Trigger]] = []

        async def claim() -> None:
            result.append(await second.claim(tenant))

        async with anyio.create_task_group() as tg:
            tg.start_soon(claim)
            await anyio.sleep(1.0)  # the second claim now waits on the first's lock
            assert result == []
            await tx.commit()
    assert result == [[]]  # it read the committed claim after the lock: not its occurrence


async def test_cli_due_lists_without_claiming_and_claims_with_claim(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    layer = ProspectiveLayer(store)
    first = await layer.set_trigger(MemoryScope(tenant, "u1"), task="Call the bank.", due_at=1_600_000_000)
    second = await layer.set_trigger(MemoryScope(tenant, "u2"), task="Water the plants.", due_at=1_600_000_100)
    await layer.set_trigger(MemoryScope(tenant, "u2"), task="Not yet.", due_in=timedelta(days=1))

    def due(*args: str) -> Any:
        result = run_cli_on(neo4j_settings, "triggers", "due", "--tenant", tenant, "--json", *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert [(t["id"], t["namespace"]) for t in due()] == [(first, "u1"), (second, "u2")]
    assert [t["id"] for t in due()] == [first, second]  # listing claims nothing
    assert [t["id"] for t in due("--namespace", "u2")] == [second]
    assert [t["id"] for t in due("--claim", "--limit", "1")] == [first]
    assert [t["id"] for t in due()] == [second]
    assert [t["id"] for t in due("--claim")] == [second]
    assert due("--claim") == [] and due() == []
