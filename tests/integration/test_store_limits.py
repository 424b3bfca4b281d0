"""Limits counted in Neo4j: exact under concurrency across processes, a failed call frees its slot, scopes apart.

What is asserted is how many times the guarded tool actually ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool, ToolException

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from tests._counting import CountingStore
from tests._fakes import Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
REFUNDS = "At most 3 refunds per customer a day."


async def _seed(store: GraphMemoryStore, tenant: str, per: str = "namespace") -> None:
    await ProceduralLayer(store).seed_authored_skill(
        MemoryScope(tenant), label="Refunds", steps=["issue_refund"], source_tag="authored:t", identifier="refunds",
        action_tool="issue_refund",
        precondition=[{"limit": {"max_calls": 3, "per": per, "window": "24h", "message": REFUNDS}}])


def _refund_tool(ran: list[str], *, fail: bool = False) -> StructuredTool:
    def issue_refund(order_id: str) -> str:
        if fail:
            raise ToolException("the payment provider refused the refund")
        ran.append(order_id)
        return json.dumps({"refunded": order_id})

    return StructuredTool.from_function(issue_refund, description="Refund an order.", handle_tool_error=True)


def _one_refund(order: str) -> Scripted:
    return Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": order}, "id": f"r-{order}"}]),
        AIMessage("done")])


async def _conversations(store: GraphMemoryStore, scope: MemoryScope, n: int, ran: list[str], *,
                         wiring: str = "middleware", fail: bool = False) -> None:
    memory = TurnMemory(store)

    async def one(i: int) -> None:
        model, tools = _one_refund(f"o{i}"), [_refund_tool(ran, fail=fail)]
        agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory)]) if wiring == "middleware" \
            else build_agent_graph(model, tools, memory)
        await agent.ainvoke({"messages": [HumanMessage("refund please")]}, context=scope)

    await asyncio.gather(*(one(i) for i in range(n)))


CHILD = textwrap.dedent("""
    import asyncio, json, sys
    import neo4j
    from symfonic_graph import GraphMemoryStore, MemoryScope
    from tests.integration.test_store_limits import _conversations

    async def main():
        uri, user, password, database, tenant, namespace, n = sys.argv[1:8]
        driver = neo4j.AsyncGraphDatabase.driver(uri, auth=(user, password))
        ran = []
        try:
            await _conversations(GraphMemoryStore(driver, database=database or None), MemoryScope(tenant, namespace),
                                 int(n), ran)
        finally:
            await driver.close()
        print(json.dumps(ran))

    asyncio.run(main())
""")


async def test_32_concurrent_refunds_from_two_processes_run_exactly_3_times(
    store: GraphMemoryStore, tenant: str, neo4j_settings: Neo4jSettings
) -> None:
    await _seed(store, tenant)
    s = neo4j_settings
    args = [s.uri, s.user, s.password, s.database or "", tenant, "user-1", "16"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, *args, cwd=ROOT, env=env,
                                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(2)]
    outputs = [await child.communicate() for child in children]
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()[-2000:]
    ran = [order for out, _ in outputs for order in json.loads(out.decode().strip().splitlines()[-1])]
    assert len(ran) == 3, ran

    # another end user of the tenant has a window of their own; this one's stays full
    other: list[str] = []
    await _conversations(store, MemoryScope(tenant, "user-2"), 4, other)
    assert len(other) == 3
    again: list[str] = []
    await _conversations(store, MemoryScope(tenant, "user-1"), 2, again, wiring="graph")
    assert again == []


async def test_a_failed_refund_frees_its_slot_and_a_tenant_limit_counts_every_end_user(
    store: GraphMemoryStore, tenant: str
) -> None:
    await _seed(store, tenant)
    failed: list[str] = []
    await _conversations(store, MemoryScope(tenant, "user-1"), 5, failed, fail=True)
    assert failed == []  # every call ran and failed: no slot kept
    ran: list[str] = []
    await _conversations(store, MemoryScope(tenant, "user-1"), 5, ran, wiring="graph")
    assert len(ran) == 3

    other = f"{tenant}-b"
    try:
        await _seed(store, other, per="tenant")
        across: list[str] = []
        for user in ("a", "b", "c", "d"):
            await _conversations(store, MemoryScope(other, user), 1, across)
        assert len(across) == 3
    finally:
        await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n", t=other,
                                         database_=store.database)


async def test_a_lookup_that_is_no_turn_memory_cannot_count_so_it_blocks(store: GraphMemoryStore, tenant: str) -> None:
    await _seed(store, tenant)
    scope = MemoryScope(tenant, "user-1")
    skills = await TurnMemory(store).get_active_skills({"memory_scope": scope})

    async def lookup(state: Any) -> Any:
        return skills

    ran: list[str] = []
    agent = build_agent_graph(_one_refund("o1"), [_refund_tool(ran)], lookup)
    out = await agent.ainvoke({"messages": [HumanMessage("refund")]})
    assert ran == []
    assert "is counted in the store" in str(out["messages"][2].content)


async def test_a_limit_costs_one_round_trip_when_its_action_is_called_and_none_otherwise(
    store: GraphMemoryStore, tenant: str
) -> None:
    await _seed(store, tenant)
    recording = CountingStore(store)
    memory = TurnMemory(recording)
    scope = MemoryScope(tenant, "user-1")
    ran: list[str] = []

    def lookup_order(order_id: str) -> str:
        return json.dumps({"order_id": order_id})

    tools = [StructuredTool.from_function(lookup_order, description="Read an order."), _refund_tool(ran)]
    read_only = Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "lookup_order", "args": {"order_id": "o1"}, "id": "l1"}]),
        AIMessage("done")])
    await create_agent(read_only, tools, middleware=[MemoryMiddleware(memory)]).ainvoke(
        {"messages": [HumanMessage("where is my order")]}, context=scope)
    assert "limit_reserve" not in recording.sent and "write" not in recording.sent

    recording.sent.clear()
    await create_agent(_one_refund("o1"), tools, middleware=[MemoryMiddleware(memory)]).ainvoke(
        {"messages": [HumanMessage("refund")]}, context=scope)
    assert ran == ["o1"]
    assert recording.sent.count("limit_reserve") == 1 and "write" not in recording.sent, recording.sent


class _SilentOnReserve(GraphMemoryStore):
    """The real store, except that a limit's reservation meets a silent server: its own deadline ends it."""

    async def write_once(self, name: str, **params: Any) -> list[dict[str, Any]]:
        if name == "limit_reserve":
            await self._within_timeout(lambda: anyio.sleep(3600), f"query {name}")
        return await super().write_once(name, **params)


@pytest.mark.parametrize("wiring", ["middleware", "graph"])
async def test_a_reservation_the_store_cannot_answer_refuses_the_call(
    store: GraphMemoryStore, tenant: str, wiring: str
) -> None:
    await _seed(store, tenant)
    silent = _SilentOnReserve(store.driver, database=store.database, query_timeout=1.0)
    memory, ran = TurnMemory(silent), []
    model, tools = _one_refund("o1"), [_refund_tool(ran)]
    agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory)]) if wiring == "middleware" \
        else build_agent_graph(model, tools, memory)
    out = await agent.ainvoke({"messages": [HumanMessage("refund")]}, context=MemoryScope(tenant, "user-1"))
    assert ran == []  # a limit that cannot be counted never lets its call run, and the run goes on
    [answer] = [m for m in out["messages"] if getattr(m, "tool_call_id", None) == "r-o1"]
    assert str(answer.content).startswith("Precondition check unavailable: ")
