"""A trigger's lifecycle against a real Neo4j: ack, snooze, cancel, expiry; never offered once done.

Reads go through ``GraphPendingTriggers``, ``TurnMemory`` and ``MemoryMiddleware``
in a ``create_agent`` agent, and the CLI; the clock is injected.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import AuthorityError, NotFoundError, ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.triggers import GraphPendingTriggers
from tests._cli import run_cli_on
from tests._fakes import Clock, Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC).timestamp()


def always(condition: str, cue: str) -> bool:
    return True


async def _ids(store: GraphMemoryStore, scope: MemoryScope, clock: Clock) -> list[str]:
    return [t.trigger_id for t in await GraphPendingTriggers(store, clock=clock).pending(scope)]


async def test_acknowledged_and_cancelled_triggers_are_never_offered_again(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store)
    timed = await layer.set_trigger(scope, task="Call the bank.", due_at=T0)
    text = await layer.set_trigger(scope, condition="invoice", task="Say it is overdue.")
    other = await layer.set_trigger(scope, condition="refund", task="Mention the refund.", identifier="refund")
    assert await _ids(store, scope, clock) == [timed, text, other]
    assert await _ids(store, scope, clock) == [timed, text, other]  # selection is not acknowledgement

    assert await layer.ack_trigger(scope, timed) is None
    assert await layer.ack_trigger(scope, timed) is None  # twice: nothing changes
    await layer.cancel_trigger(scope, "refund")  # by identifier
    assert await layer.resolve_trigger(scope, text) is None  # the first releases' name, an alias
    for later in (0, 60, 86400, 86400 * 365):
        clock.now = T0 + later
        assert await _ids(store, scope, clock) == []
    done = {t.id: t for t in await layer.get_pending(scope)}
    assert done == {}
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {tenant_id: $tenant}) RETURN t.id AS id, t.status AS status, t.resolution AS how",
        tenant=tenant, database_=store.database)
    assert {r["id"]: (r["status"], r["how"]) for r in records} == {
        timed: ("resolved", "acknowledged"), text: ("resolved", "acknowledged"), other: ("resolved", "cancelled")}
    history = await layer.get_done(scope)  # kept as history, most recently resolved first
    assert [(t.id, t.resolution) for t in history] == [
        (text, "acknowledged"), (other, "cancelled"), (timed, "acknowledged")]
    assert await layer.get_done(MemoryScope(tenant, "u2")) == []
    await layer.ack_trigger(scope, other)  # a cancelled trigger stays cancelled
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {id: $id}) RETURN t.resolution AS how", id=other, database_=store.database)
    assert records[0]["how"] == "cancelled"


async def test_snooze_holds_a_trigger_back_until_its_time(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store)
    text = await layer.set_trigger(scope, condition="c", task="Text.", identifier="nudge")
    timed = await layer.set_trigger(scope, task="Timed.", due_at=T0 - 10)
    await layer.snooze_trigger(scope, "nudge", T0 + 100)
    await layer.snooze_trigger(scope, timed, datetime.fromtimestamp(T0 + 50, UTC))
    assert await _ids(store, scope, clock) == []
    clock.now = T0 + 50
    assert await _ids(store, scope, clock) == [timed]
    clock.now = T0 + 100
    assert await _ids(store, scope, clock) == [text, timed]
    [held] = [t for t in await layer.get_pending(scope) if t.id == text]
    assert held.snoozed_until == datetime.fromtimestamp(T0 + 100, UTC)
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {id: $id}) RETURN t.symfonic_offer_at.epochSeconds AS at", id=text,
        database_=store.database)
    assert records[0]["at"] == int(T0 + 100)  # the turn's index seek skips it until then
    await layer.ack_trigger(scope, timed)
    with pytest.raises(ValidationError, match=r"^trigger_id: .* is acknowledged; only a pending trigger"):
        await layer.snooze_trigger(scope, timed, T0 + 500)
    with pytest.raises(ValidationError, match=r"^until: must be timezone-aware"):
        await layer.snooze_trigger(scope, text, datetime(2031, 1, 1))
    # setting a trigger again (same identifier) makes it pending, unsnoozed
    await layer.set_trigger(scope, condition="c", task="Text, again.", identifier="nudge")
    clock.now = T0
    assert await _ids(store, scope, clock) == [text]


async def test_only_the_owning_scope_changes_a_trigger(store: GraphMemoryStore, tenant: str) -> None:
    layer = ProspectiveLayer(store)
    wide, u1, u2 = MemoryScope(tenant), MemoryScope(tenant, "u1"), MemoryScope(tenant, "u2")
    shared = await layer.set_trigger(wide, condition="c", task="Everyone.")
    mine = await layer.set_trigger(u1, condition="c", task="Mine.")
    for call in (lambda: layer.ack_trigger(u2, mine), lambda: layer.cancel_trigger(u2, mine),
                 lambda: layer.snooze_trigger(u2, mine, T0), lambda: layer.ack_trigger(u1, "no-such-trigger"),
                 lambda: layer.ack_trigger(MemoryScope(tenant + "x", "u1"), mine)):
        with pytest.raises(NotFoundError):
            await call()
    with pytest.raises(AuthorityError):
        await layer.cancel_trigger(u1, shared)  # u1 sees the tenant-wide trigger, it does not own it
    clock = Clock(T0)
    assert await _ids(store, u1, clock) == [shared, mine]


async def test_a_random_replay_never_offers_a_done_trigger(store: GraphMemoryStore, tenant: str) -> None:
    """600 turns over 40 triggers with acks, cancels, snoozes and expiries in between: every turn's
    offer equals the model's (due, unexpired, not snoozed, not done), and nothing done comes back."""
    rng = random.Random(36)
    scope, clock = MemoryScope(tenant, "u1"), Clock(T0)
    layer = ProspectiveLayer(store)
    model: dict[str, dict[str, Any]] = {}
    for k in range(40):
        due = T0 + rng.randrange(0, 3000) if k % 2 else None
        expires = (due or T0) + rng.randrange(1, 4000) if rng.random() < 0.4 else None
        fields: dict[str, Any] = {"task": f"Task {k}.", "expires_at": expires}
        fields |= {"due_at": due} if due is not None else {"condition": f"c{k}"}
        tid = await layer.set_trigger(scope, **fields)
        model[tid] = {"due": due, "expires": expires, "snoozed": None, "done": False}
    memory = TurnMemory(store, wall_clock=clock, max_triggers=100)
    done_offers = 0
    for _ in range(600):
        clock.now += rng.randrange(0, 12)
        roll = rng.random()
        tid = rng.choice(list(model))
        if roll < 0.03:
            await layer.ack_trigger(scope, tid)
            model[tid]["done"] = True
        elif roll < 0.05:
            await layer.cancel_trigger(scope, tid)
            model[tid]["done"] = True
        elif roll < 0.08 and not model[tid]["done"]:
            model[tid]["snoozed"] = clock.now + rng.randrange(1, 600)
            await layer.snooze_trigger(scope, tid, model[tid]["snoozed"])
        offered = {t.trigger_id for t in (await memory.begin(scope)).triggers}
        expected = {i for i, m in model.items() if not m["done"] and (m["due"] is None or m["due"] <= clock.now)
                    and (m["expires"] is None or clock.now < m["expires"])
                    and (m["snoozed"] is None or m["snoozed"] <= clock.now)}
        done_offers += len({i for i in offered if model[i]["done"]})
        assert offered == expected
    assert done_offers == 0
    assert sum(m["done"] for m in model.values()) >= 15


async def test_the_middleware_stops_offering_once_acknowledged(store: GraphMemoryStore, tenant: str) -> None:
    scope, clock = MemoryScope(tenant, "user-7"), Clock(T0)
    layer = ProspectiveLayer(store)
    timed = await layer.set_trigger(scope, task="Tell them the parcel arrived.", due_at=T0)
    text = await layer.set_trigger(scope, condition="invoice", task="Say the invoice is overdue.")
    middleware = MemoryMiddleware(TurnMemory(store, wall_clock=clock), evaluator=always)

    async def turn() -> str:
        model = Scripted(responses=[AIMessage("ok")])
        await create_agent(model, [], middleware=[middleware]).ainvoke(
            {"messages": [HumanMessage("hello")]}, context=scope)
        return str(model.seen[0][-1].content)

    assert await turn() == "## PENDING REMINDERS\n- Tell them the parcel arrived.\n- Say the invoice is overdue."
    await layer.ack_trigger(scope, timed)
    await layer.snooze_trigger(scope, text, T0 + 60)
    assert await turn() == "hello"
    clock.now = T0 + 60
    assert await turn() == "## PENDING REMINDERS\n- Say the invoice is overdue."
    await layer.cancel_trigger(scope, text)
    assert await turn() == "hello"


def test_the_cli_adds_lists_acknowledges_snoozes_and_cancels(neo4j_settings: Neo4jSettings, _schema: None,
                                                             tenant: str) -> None:
    scope = ["--tenant", tenant, "--namespace", "u1"]

    def cli(*args: str) -> Any:
        result = run_cli_on(neo4j_settings, "triggers", *args, *scope, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    timed = cli("add", "--task", "Call the bank.", "--due-at", "2020-01-01T09:00:00+01:00")["id"]
    later = cli("add", "--task", "Renew it.", "--due-in", "30d", "--identifier", "renewal")["id"]
    text = cli("add", "--task", "Say it is overdue.", "--condition", "invoice",
               "--expires-at", "2999-01-01T00:00:00Z")["id"]
    listed = cli("list")
    assert [(t["id"], t["kind"]) for t in listed] == [(timed, "time"), (later, "time"), (text, "text")]
    assert listed[0]["due_at"].startswith("2020-01-01T08:00:00")
    assert [t["id"] for t in cli("list", "--now")] == [timed, text]
    assert cli("ack", timed) == {"trigger": timed, "done": "acknowledged", "next": None}
    assert cli("snooze", text, "--for", "1h")["trigger"] == text
    assert cli("list", "--now") == []
    assert cli("cancel", "renewal")["done"] == "cancelled"
    assert [t["id"] for t in cli("list")] == [text]
    assert {t["id"]: t["resolution"] for t in cli("list", "--done")} == {
        timed: "acknowledged", later: "cancelled"}
    weekly = cli("add", "--task", "Weekly.", "--due-at", "2020-01-06T09:00:00Z", "--recurrence", "FREQ=WEEKLY")["id"]
    following = cli("ack", weekly)["next"]
    assert following and [t["id"] for t in cli("list") if t["recurrence"]] == [following]
    bad = run_cli_on(neo4j_settings, "triggers", "add", "--task", "x", "--due-at", "tomorrow", *scope)
    assert bad.returncode != 0 and "due_at: must be an ISO 8601 time" in bad.stderr
    missing = run_cli_on(neo4j_settings, "triggers", "ack", "nope", *scope)
    assert missing.returncode != 0 and "no trigger with id or identifier 'nope'" in missing.stderr
