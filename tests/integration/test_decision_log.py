"""Decisions are records, through a real Neo4j and a live agent (only the chat model is scripted).

A live agent, through ``MemoryMiddleware`` and through ``build_agent_graph``,
with a ``Neo4jDecisionLog``: an enforced block, a shadow would-block and an
allowed call on a store that answers; then a strict refusal during an outage
(a new process whose connection is cut). After ``flush()`` the
``:SymfonicDecision`` nodes are there with their fields and tenant, none for
the allowed call; the turn never waits for the log (its writes are held until
the agent has answered); the ``symfonic_graph.decisions`` lines and the
``symfonic_graph.gate.decisions`` counter say the same; ``rules report``
aggregates them, ``decisions prune`` deletes old ones only and the scope's
erase removes them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory, telemetry
from symfonic_graph.decisions import Neo4jDecisionLog
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from symfonic_graph.memory.decision_log import prune_decisions
from tests._cli import run_cli_on
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests._proxy import TcpProxy, proxied_store
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

GUARDED, SHADOWED, LOOKUP = "cancel_reservation", "refund_reservation", "get_reservation"
ASK = {"messages": [HumanMessage("cancel and refund my reservation")]}


class HeldStore(GraphMemoryStore):
    """The real store, whose writes wait for ``release`` (and count): proves the turn never waits for them."""

    def __init__(self, store: GraphMemoryStore) -> None:
        super().__init__(store.driver, database=store.database)
        self.release = asyncio.Event()
        self.writes = 0

    async def write(self, steps: Any) -> Any:
        await self.release.wait()
        self.writes += 1
        return await super().write(steps)


Agent = Callable[..., Awaitable[dict[str, Any]]]


async def _middleware(memory: TurnMemory, scope: MemoryScope, model: Scripted, tools: list[Any],
                      **options: Any) -> dict[str, Any]:
    agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory, **options)])
    return await agent.ainvoke(ASK, config={"configurable": {"thread_id": "thread-1"}}, context=scope)


async def _graph(memory: TurnMemory, scope: MemoryScope, model: Scripted, tools: list[Any],
                 **options: Any) -> dict[str, Any]:
    graph = build_agent_graph(model, tools, memory, **options)
    return await graph.ainvoke(ASK, config={"configurable": {"thread_id": "thread-1"}}, context=scope)


@pytest.fixture
async def proxied(neo4j_settings: Neo4jSettings, _schema: None) -> AsyncIterator[tuple[TcpProxy, GraphMemoryStore]]:
    """A new process's store, through a proxy the test can cut."""
    async with proxied_store(neo4j_settings, query_timeout=2.0) as (store, proxy):
        yield proxy, store


async def _nodes(store: GraphMemoryStore, tenant: str) -> list[dict[str, Any]]:
    records, _, _ = await store.driver.execute_query(
        "MATCH (d:SymfonicDecision {tenant_id: $t}) RETURN properties(d) AS d ORDER BY d.at", {"t": tenant},
        database_=store.database)
    return [dict(r["d"]) for r in records]


@pytest.mark.parametrize("agent", [_middleware, _graph], ids=["middleware", "agent_graph"])
async def test_block_would_block_and_refusal_are_kept_and_allowed_calls_are_not(
    agent: Agent, store: GraphMemoryStore, tenant: str, proxied: tuple[TcpProxy, GraphMemoryStore],
    caplog: pytest.LogCaptureFixture, neo4j_settings: Neo4jSettings,
) -> None:
    proxy, cut_store = proxied
    scope = MemoryScope(tenant, "user-7")
    layer = ProceduralLayer(store)
    enforced = await layer.seed_authored_skill(scope, label="Cancel", steps=[GUARDED], source_tag="authored:test",
                                               action_tool=GUARDED, precondition=[LOOKUP])
    shadow = await layer.seed_authored_skill(scope, label="Refund", steps=[SHADOWED], source_tag="authored:test",
                                             action_tool=SHADOWED, precondition=[LOOKUP], enforcement="shadow")
    held = HeldStore(store)
    sink = Neo4jDecisionLog(held)
    reader = InMemoryMetricReader()
    telemetry.set_meter_provider(MeterProvider(metric_readers=[reader]))
    try:
        tools, executed = recording_tools(GUARDED, SHADOWED, LOOKUP)
        model = Scripted(responses=[ai_calls((GUARDED, "c1"), (SHADOWED, "c2")), ai_calls((LOOKUP, "c3")),
                                    AIMessage("done")])
        with caplog.at_level(logging.INFO, logger="symfonic_graph.decisions"):
            # bounded: a sink that waited for its write would hold the turn until release
            await asyncio.wait_for(agent(TurnMemory(store), scope, model, tools, decision_sink=sink), 30)
            assert_every_call_answered(model)
            assert sorted(executed) == [LOOKUP, SHADOWED]  # the block held, the shadow rule only reported
            assert held.writes == 0  # the agent answered while every write of the log was held
            # An outage: a process that read the rules enforces them, stale; a new process with strict=True
            # refuses the lookup, with strict=False runs it unchecked; each is kept.
            stale_memory = TurnMemory(cut_store, max_age=0.0)
            await stale_memory.begin(scope)
            await proxy.cut()
            tools, executed = recording_tools(GUARDED)
            model = Scripted(responses=[ai_calls((GUARDED, "c7")), AIMessage("done")])
            await agent(stale_memory, scope, model, tools, decision_sink=sink)
            assert executed == []  # the stale rules still block
            tools, executed = recording_tools(LOOKUP)
            model = Scripted(responses=[ai_calls((LOOKUP, "c8")), AIMessage("done")])
            await agent(TurnMemory(cut_store), scope, model, tools, decision_sink=sink)
            assert executed == [LOOKUP]
            tools, executed = recording_tools(LOOKUP)
            model = Scripted(responses=[ai_calls((LOOKUP, "c9")), AIMessage("done")])
            await agent(TurnMemory(cut_store), scope, model, tools, decision_sink=sink, strict=True)
            assert executed == []
        held.release.set()
        await sink.flush()
        assert sink.dropped == 0 and sink.failed == 0
        nodes = await _nodes(store, tenant)
        got = {(n["decision"], n["tool"], n["call_id"], tuple(n["rule_ids"]), n["namespace"]) for n in nodes}
        assert got == {("block", GUARDED, "c1", (enforced.id,), "user-7"),
                       ("would_block", SHADOWED, "c2", (shadow.id,), "user-7"),
                       ("block", GUARDED, "c7", (enforced.id,), "user-7"),
                       ("stale_rules", GUARDED, "c7", (), "user-7"),
                       ("pass_through", LOOKUP, "c8", (), "user-7"),
                       ("refused", LOOKUP, "c9", (), "user-7")}
        assert all(n["conversation"] == "thread-1" and abs(n["at"] - time.time()) < 120 for n in nodes)
        assert {n["mode"] for n in nodes} == {"enforce", "shadow", "stale", "lenient", "strict"}

        lines = [r for r in caplog.records if r.name == "symfonic_graph.decisions"]
        levels = {r.decision["decision"]: r.levelname for r in lines}  # type: ignore[attr-defined]
        assert levels == {"block": "WARNING", "would_block": "INFO", "refused": "WARNING",
                          "pass_through": "WARNING", "stale_rules": "INFO"}
        for r in lines:
            text = r.getMessage()
            assert f"tenant={tenant}" in text and "namespace=user-7" in text and "call_id=c" in text
            assert all(f"{k}=" in text for k in ("tool", "rule_ids", "mode", "reason"))

        points = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics[0]
        assert points.name == "symfonic_graph.gate.decisions"
        counts = {p.attributes["decision"]: p.value for p in points.data.data_points}
        assert counts == {"block": 2, "would_block": 1, "refused": 1, "pass_through": 1, "stale_rules": 1}

        # rules report counts the same decisions: per rule its blocks and would-blocks, and every kind in total
        ran = run_cli_on(neo4j_settings, "rules", "report", "--tenant", tenant, "--since", "1h", "--json")
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        assert report["decisions"] == {"block": 2, "would_block": 1, "refused": 1, "pass_through": 1,
                                       "stale_rules": 1}
        assert [(r["rule_id"], r["blocks"], r["would_blocks"], r["conversations"]) for r in report["rules"]] == [
            (enforced.id, 2, 0, 1), (shadow.id, 0, 1, 1)]
        assert {e["call_id"] for e in report["rules"][0]["examples"]} == {"c1", "c7"}
        text = run_cli_on(neo4j_settings, "rules", "report", "--tenant", tenant, "--namespace", "user-7").stdout
        assert text.startswith(f"decisions of tenant {tenant} since 7d: 2 block, 1 would_block, 1 refused, "
                               "1 pass_through, 1 stale_rules\n"), text

        # erase removes the scope's decisions (and nothing of another namespace)
        other = MemoryScope(tenant, "user-8")
        await Neo4jDecisionLog(store).record([_decision(other)])
        await _flushed(store, tenant, 7)
        counts_erased = await store.erase(scope)
        assert counts_erased.get("SymfonicDecision") == 6
        assert [n["namespace"] for n in await _nodes(store, tenant)] == ["user-8"]
        await store.erase(MemoryScope(tenant))
        assert await _nodes(store, tenant) == []
    finally:
        telemetry.set_meter_provider(None)
        held.release.set()
        await sink.aclose()


@pytest.mark.parametrize("trouble", ["queue_full", "neo4j_down"])
@pytest.mark.parametrize("agent", [_middleware, _graph], ids=["middleware", "agent_graph"])
async def test_a_full_queue_or_a_log_whose_neo4j_is_down_never_holds_or_breaks_a_turn(
    agent: Agent, trouble: str, store: GraphMemoryStore, tenant: str, proxied: tuple[TcpProxy, GraphMemoryStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy, sink_store = proxied
    scope = MemoryScope(tenant, "user-7")
    await ProceduralLayer(store).seed_authored_skill(scope, label="Cancel", steps=[GUARDED],
                                                     source_tag="authored:test", action_tool=GUARDED,
                                                     precondition=[LOOKUP])
    if trouble == "queue_full":  # room for one record; its write is held until the end
        held = HeldStore(store)
        sink = Neo4jDecisionLog(held, max_queue=1)
    else:  # the log's own connection to Neo4j stalls (every byte held), then is cut
        patient = GraphMemoryStore(sink_store.driver, database=sink_store.database, query_timeout=120.0)
        held, sink = None, Neo4jDecisionLog(patient)  # a stalled write waits up to 120 s, past the turn's bound
        proxy.pause()
    try:
        with caplog.at_level(logging.INFO, logger="symfonic_graph.decisions"):
            for turn in range(2):  # the second turn meets the log as the first left it
                tools, executed = recording_tools(GUARDED, LOOKUP)
                model = Scripted(responses=[ai_calls((GUARDED, "c1"), (GUARDED, "c2"), (GUARDED, "c3")),
                                            ai_calls((LOOKUP, "c4")), ai_calls((GUARDED, "c5")), AIMessage("done")])
                # bounded: a turn that waited for the log would wait for a held write or a stalled server
                await asyncio.wait_for(agent(TurnMemory(store), scope, model, tools, decision_sink=sink), 30)
                assert_every_call_answered(model)
                assert executed == [LOOKUP, GUARDED], turn  # three blocks held, then the cancel ran after the read
        blocks = [r for r in caplog.records if r.name == "symfonic_graph.decisions" and r.getMessage()
                  .startswith("block ")]
        assert len(blocks) == 6  # the log lines are there whatever the sink does
        if held is not None:
            assert sink.dropped >= 4 and any("queue full" in r.getMessage() for r in caplog.records)
            held.release.set()
            await asyncio.wait_for(sink.flush(), 30)
            assert sink.written + sink.dropped == 6 and sink.failed == 0
            assert len(await _nodes(store, tenant)) == sink.written
        else:
            assert sink.written == 0
            await proxy.cut()
            await asyncio.wait_for(sink.flush(), 120)  # every batch fails, none is retried forever
            assert sink.written == 0 and sink.failed + sink.dropped == 6 and sink.failed >= 1
            assert any(r.levelname == "ERROR" and "not written" in r.getMessage() for r in caplog.records)
            assert await _nodes(store, tenant) == []
    finally:
        if held is not None:
            held.release.set()
        proxy.resume()
        await sink.aclose()
        await store.erase(MemoryScope(tenant))


def _decision(scope: MemoryScope, at: float | None = None, decision: str = "block",
              rules: tuple[str, ...] = ("r1",), conversation: str | None = None, call: str = "x") -> Any:
    from symfonic_graph.decisions import Decision

    return Decision(scope.tenant_id, scope.namespace, "deploy", call, rules, decision,  # type: ignore[arg-type]
                    "enforce", "test", time.time() if at is None else at, conversation)


async def _flushed(store: GraphMemoryStore, tenant: str, count: int) -> None:
    for _ in range(100):
        if len(await _nodes(store, tenant)) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("decisions not written")


async def test_report_aggregates_and_prune_deletes_old_decisions_only(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings,
) -> None:
    scope, now = MemoryScope(tenant, "ns"), time.time()
    day = 24 * 3600
    old = [_decision(scope, now - 40 * day, call=f"o{i}") for i in range(3)]
    recent = [_decision(scope, now - 3600, rules=("r1",), conversation="t1", call="a"),
              _decision(scope, now - 3600, rules=("r1",), conversation="t1", call="b"),
              _decision(scope, now - 7200, "would_block", rules=("r1", "r2"), call="c"),
              _decision(scope, now - 60, "refused", rules=(), call="d")]
    log = Neo4jDecisionLog(store, batch_size=2)
    try:
        await log.record(old + recent)
        await log.flush()
        assert log.written == 7
        ran = run_cli_on(neo4j_settings, "rules", "report", "--tenant", tenant, "--since", "7d", "--json")
        assert ran.returncode == 0, ran.stderr
        out = json.loads(ran.stdout)
        rules = {r["rule_id"]: r for r in out["rules"]}
        assert rules["r1"]["blocks"] == 2 and rules["r1"]["would_blocks"] == 1
        assert rules["r1"]["conversations"] == 2  # thread t1 (twice) and call c (no thread)
        assert rules["r2"] == {**rules["r2"], "blocks": 0, "would_blocks": 1, "conversations": 1}
        assert set(out["rules"][0]) == {"rule_id", "identifier", "blocks", "would_blocks", "conversations",
                                        "examples"}
        ran = run_cli_on(neo4j_settings, "decisions", "prune", "--older-than", "30d", "--tenant", tenant, "--json")
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["pruned"] == 3
        assert sorted(n["call_id"] for n in await _nodes(store, tenant)) == ["a", "b", "c", "d"]
        assert await prune_decisions(store, tenant, older_than_seconds=30 * day) == 0
    finally:
        await log.aclose()
        await store.erase(MemoryScope(tenant))
