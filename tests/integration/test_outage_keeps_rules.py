"""An outage keeps the last rules, proven by cutting the connection under a running agent.

The driver of each agent connects through a TCP proxy (``tests._proxy``) in
front of the real test server; the proxy is closed mid-conversation. Only the
chat model is scripted. The guarded ``deliver`` must not run afterwards: the
last catalog the process read is enforced for ``max_age + outage_grace``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.gate import create_precondition_gate_node
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from symfonic_graph.memory.turn import DEFAULT_OUTAGE_GRACE
from tests._fakes import Clock, Scripted, ai_calls, recording_tools
from tests._otel import recording_spans
from tests._proxy import TcpProxy, proxied_store
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

MISSING = "Missing precondition: call get_status before deliver (skill: Deliver)."


@pytest.fixture
async def proxied(neo4j_settings: Neo4jSettings, _schema: None) -> AsyncIterator[tuple[GraphMemoryStore, TcpProxy]]:
    """A store whose driver reaches the test server through a proxy the test can cut."""
    async with proxied_store(neo4j_settings, query_timeout=10.0) as pair:
        yield pair


async def _seed(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:test",
        action_tool="deliver", precondition=["get_status"],
    )


def _answers(out: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)}


async def test_middleware_agent_keeps_enforcing_the_last_rules_when_the_connection_is_cut(
    store: GraphMemoryStore, scope: MemoryScope, proxied: tuple[GraphMemoryStore, TcpProxy],
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _seed(store, scope)
    through, proxy = proxied
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[AIMessage("hello"), ai_calls(("deliver", "c1")), AIMessage("sorry")])
    agent = create_agent(model, tools, middleware=[MemoryMiddleware(TurnMemory(through))])

    await agent.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)
    assert "BEFORE calling `deliver`" in str(model.seen[0][0].content)  # the catalog was read
    await proxy.cut()
    with caplog.at_level(logging.WARNING, logger="symfonic_graph"):
        out = await agent.ainvoke({"messages": [HumanMessage("deliver the report")]}, context=scope)

    assert executed == []  # the guarded tool did not run
    assert _answers(out)["c1"].startswith(MISSING)
    assert "enforcing the last rules read" in caplog.text
    assert "YOU MUST call `get_status` BEFORE calling `deliver`" in str(model.seen[1][0].content)


async def test_agent_graph_keeps_enforcing_the_last_rules_when_the_connection_is_cut(
    store: GraphMemoryStore, scope: MemoryScope, proxied: tuple[GraphMemoryStore, TcpProxy],
) -> None:
    await _seed(store, scope)
    through, proxy = proxied
    clock = Clock()
    memory = TurnMemory(through, max_age=10, clock=clock)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[AIMessage("hello"), ai_calls(("deliver", "c1")), AIMessage("sorry")])
    graph = build_agent_graph(model, tools, memory)

    await graph.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)
    await proxy.cut()
    clock.now += 11  # past max_age: every cache would read again, and the store is gone
    out = await graph.ainvoke({"messages": [HumanMessage("deliver the report")]}, context=scope)

    assert executed == []
    assert _answers(out)["c1"].startswith(MISSING)


async def test_past_the_grace_the_outage_policy_applies_and_the_stale_rules_are_recorded(
    store: GraphMemoryStore, scope: MemoryScope, proxied: tuple[GraphMemoryStore, TcpProxy],
) -> None:
    await _seed(store, scope)
    through, proxy = proxied
    clock = Clock()
    memory = TurnMemory(through, max_age=10, outage_grace=60, clock=clock)
    gate = create_precondition_gate_node(memory.get_active_skills)
    strict = create_precondition_gate_node(memory.get_active_skills, strict=True)
    state = {"memory_scope": scope, "messages": [ai_calls(("deliver", "c1"))]}
    assert (await gate(state))["messages"][0].content.startswith(MISSING)
    await proxy.cut()

    clock.now += 10 + 60  # max_age + outage_grace: still the last rules, recorded as stale
    with recording_spans() as spans:
        assert (await gate(state))["messages"][0].content.startswith(MISSING)
    [read] = [s for s in spans.get_finished_spans() if s.name == "search_memory"]
    assert read.attributes is not None and read.attributes["symfonic_graph.rules.stale"] is True
    [event] = [e for e in read.events if e.name == "gen_ai.guardrail.result"]
    assert event.attributes is not None and event.attributes["gen_ai.guardrail.result.value"] == "stale"

    clock.now += 11  # beyond the grace: no usable catalog, the §5 policy (pass-through / strict)
    assert await gate(state) == {}
    assert (await strict(state))["messages"][0].content.startswith("Precondition check unavailable")


async def test_a_scope_never_read_gets_the_outage_policy(
    scope: MemoryScope, proxied: tuple[GraphMemoryStore, TcpProxy]
) -> None:
    through, proxy = proxied
    await proxy.cut()
    memory = TurnMemory(through)
    state = {"memory_scope": scope, "messages": [ai_calls(("deliver", "c1"))]}
    assert await create_precondition_gate_node(memory.get_active_skills)(state) == {}
    assert DEFAULT_OUTAGE_GRACE == 600.0
