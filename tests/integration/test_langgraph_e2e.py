"""The recommended LangGraph wiring end to end on the real graph.

A real ``StateGraph`` with the guarded ``ToolNode`` and a scripted chat model;
skills come from Neo4j, seeded once through the layer and once with plain
Cypher, and every tool call id is answered before the model runs again.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langgraph import create_guarded_tool_node
from symfonic_graph.skill_source import StoreSkillGetter
from tests._fakes import Scripted, assert_every_call_answered

pytestmark = pytest.mark.anyio
EXECUTED: list[str] = []
MISSING = "Missing precondition: call get_integration_status before deliver (skill: Deliver)."


@tool
def get_integration_status(channel: str = "slack") -> str:
    """Check the integration."""
    EXECUTED.append("get_integration_status")
    return "connected"


@tool
def deliver(channel: str = "slack") -> str:
    """Deliver the report."""
    EXECUTED.append("deliver")
    return "delivered"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    memory_scope: MemoryScope
    channel: str


def _call(name: str, call_id: str) -> dict[str, Any]:
    return {"name": name, "args": {"channel": "slack"}, "id": call_id}


def _graph(memory: TurnMemory, model: Scripted, getter: Any) -> Any:
    async def agent(state: State) -> dict[str, Any]:
        block = (await memory.begin(state["memory_scope"])).preflight({"channel": state["channel"]})
        prefix = [SystemMessage(block.content)] if block else []
        return {"messages": [await model.ainvoke([*prefix, *state["messages"]])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", create_guarded_tool_node([get_integration_status, deliver], getter))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder.compile()


async def _seed_with_layer(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_integration_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}],
    )


async def _seed_with_cypher(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await store.driver.execute_query(
        """
        CREATE (s:Skill {id: $id, tenant_id: $t, label: 'Deliver', steps: ['deliver'], action_tool: 'deliver',
                         context: '', status: 'approved', active: true, source: 'authored:cypher',
                         created_at: datetime()})
        CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool',
                                                              tool: 'get_integration_status'})
        CREATE (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: $t, kind: 'state', path: 'channel',
                                                              op: 'eq', value: 'slack'})
        MERGE (c:SymfonicCatalog {tenant_id: $t}) ON CREATE SET c.version = 0 SET c.version = c.version + 1
        """,
        id=f"{scope.tenant_id}-deliver", t=scope.tenant_id, database_=store.database,
    )


@pytest.fixture(params=["layer", "cypher"])
async def seeded(request: pytest.FixtureRequest, store: GraphMemoryStore, scope: MemoryScope) -> MemoryScope:
    await (_seed_with_layer if request.param == "layer" else _seed_with_cypher)(store, scope)
    EXECUTED.clear()
    return scope


@pytest.mark.parametrize("getter_kind", ["turn_memory", "store_getter"])
async def test_blocked_then_recovered(store: GraphMemoryStore, seeded: MemoryScope, getter_kind: str) -> None:
    memory = TurnMemory(store)
    getter = memory.get_active_skills if getter_kind == "turn_memory" else StoreSkillGetter(store)
    model = Scripted(responses=[
        AIMessage("", tool_calls=[_call("deliver", "c1")]),
        AIMessage("", tool_calls=[_call("get_integration_status", "c2")]),
        AIMessage("", tool_calls=[_call("deliver", "c3")]),
        AIMessage("done"),
    ])
    out = await _graph(memory, model, getter).ainvoke(
        {"messages": [HumanMessage("deliver it")], "memory_scope": seeded, "channel": "slack"})
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert [str(e.content).split(" `")[0] for e in errors] == [MISSING]
    assert EXECUTED == ["get_integration_status", "deliver"]
    assert "YOU MUST call `get_integration_status` BEFORE calling `deliver`" in str(model.seen[0][0].content)
    assert_every_call_answered(model)


async def test_parallel_batch_runs_the_precondition_and_blocks_the_action(
    store: GraphMemoryStore, seeded: MemoryScope
) -> None:
    memory = TurnMemory(store)
    model = Scripted(responses=[
        AIMessage("", tool_calls=[_call("get_integration_status", "c1"), _call("deliver", "c2")]),
        AIMessage("", tool_calls=[_call("deliver", "c3")]),
        AIMessage("done"),
    ])
    out = await _graph(memory, model, memory.get_active_skills).ainvoke(
        {"messages": [HumanMessage("deliver it")], "memory_scope": seeded, "channel": "slack"})
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers["c1"].status != "error" and answers["c2"].status == "error"
    assert answers["c3"].status != "error"
    assert EXECUTED == ["get_integration_status", "deliver"]
    assert_every_call_answered(model)


async def test_no_tool_calls_and_other_channel_and_other_tenant(
    store: GraphMemoryStore, seeded: MemoryScope
) -> None:
    memory = TurnMemory(store)
    for scope, channel in ((seeded, "email"), (MemoryScope(seeded.tenant_id + "-other"), "slack")):
        model = Scripted(responses=[AIMessage("", tool_calls=[_call("deliver", "c1")]), AIMessage("done")])
        out = await _graph(memory, model, memory.get_active_skills).ainvoke(
            {"messages": [HumanMessage("go")], "memory_scope": scope, "channel": channel})
        assert not [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    quiet = Scripted(responses=[AIMessage("just text")])
    out = await _graph(memory, quiet, memory.get_active_skills).ainvoke(
        {"messages": [HumanMessage("hello")], "memory_scope": seeded, "channel": "slack"})
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage"]
