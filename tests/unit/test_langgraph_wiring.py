"""The recommended wiring, proven with a real StateGraph, ToolNode and a scripted model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from symfonic_graph.errors import StoreUnavailableError
from symfonic_graph.langgraph import build_agent_graph, create_guarded_tool_node
from tests._fakes import Scripted, assert_calls_answered, scripted
from tests._skills import ai, skill


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


EXECUTED: list[str] = []


@tool
def get_status(channel: str = "general") -> str:
    """Read the channel status."""
    EXECUTED.append("get_status")
    return f"{channel}: ok"


@tool
def post_message(text: str = "hi") -> str:
    """Post a message."""
    EXECUTED.append("post_message")
    return "posted"


@tool
def lookup(q: str = "") -> str:
    """An unguarded tool."""
    EXECUTED.append("lookup")
    return "found"


TOOLS = [get_status, post_message, lookup]
SKILLS = [skill("post_message", ["get_status"], label="Post update", id="sk-1")]
MISSING = "Missing precondition: call get_status before post_message (skill: Post update)."


@pytest.fixture(autouse=True)
def _reset() -> None:
    EXECUTED.clear()


async def active_skills(state: Any) -> list[Any]:
    return list(SKILLS)


async def broken_lookup(state: Any) -> list[Any]:
    raise StoreUnavailableError("neo4j down")


def explicit_graph(model: Scripted, lookup_fn: Any = active_skills, *, strict: bool = False) -> Any:
    """The wiring spelled out by hand: agent -> guarded ToolNode -> agent."""

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", create_guarded_tool_node(ToolNode(TOOLS), lookup_fn, strict=strict))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder.compile()


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def start(text: str = "post the update") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


@pytest.mark.anyio
async def test_single_call_blocked_then_recovered() -> None:
    model = scripted(
        ai(("c1", "post_message")),
        ai(("c2", "get_status")),
        ai(("c3", "post_message")),
        AIMessage(content="done"),
    )
    out = await explicit_graph(model).ainvoke(start())
    results = tool_messages(out["messages"])
    assert [m.tool_call_id for m in results] == ["c1", "c2", "c3"]
    assert results[0].status == "error" and str(results[0].content).startswith(MISSING)
    assert results[0].name == "post_message"
    assert results[1].status == "success" and results[2].content == "posted"
    assert EXECUTED == ["get_status", "post_message"]
    assert_calls_answered(out["messages"])
    assert out["messages"][-1].content == "done"


@pytest.mark.anyio
async def test_parallel_batch_blocks_action_runs_precondition_then_recovers() -> None:
    model = scripted(
        ai(("c1", "post_message"), ("c2", "get_status"), ("c3", "lookup")),
        ai(("c4", "post_message")),
        AIMessage(content="done"),
    )
    out = await explicit_graph(model).ainvoke(start())
    first_batch = tool_messages(out["messages"])[:3]
    assert [m.tool_call_id for m in first_batch] == ["c1", "c2", "c3"]  # original call order
    assert str(first_batch[0].content).startswith(MISSING)
    assert [m.status for m in first_batch] == ["error", "success", "success"]
    assert sorted(EXECUTED) == ["get_status", "lookup", "post_message"]
    assert EXECUTED[-1] == "post_message"  # only after the retry
    assert tool_messages(out["messages"])[-1].content == "posted"
    assert_calls_answered(out["messages"])
    assert len(model.seen) == 3


@pytest.mark.anyio
async def test_turn_without_tool_calls_ends() -> None:
    model = scripted(AIMessage(content="hello"))
    out = await explicit_graph(model).ainvoke(start("hi"))
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage]
    assert EXECUTED == []


@pytest.mark.anyio
async def test_precondition_from_an_earlier_turn_satisfies_the_action() -> None:
    model = scripted(ai(("c2", "post_message")), AIMessage(content="done"))
    history = [HumanMessage("go"), ai(("c1", "get_status")), ToolMessage("ok", tool_call_id="c1", name="get_status")]
    out = await explicit_graph(model).ainvoke({"messages": history})
    assert EXECUTED == ["post_message"]
    assert_calls_answered(out["messages"])


@pytest.mark.anyio
async def test_lookup_failure_passes_through_by_default(caplog: pytest.LogCaptureFixture) -> None:
    model = scripted(ai(("c1", "post_message")), AIMessage(content="done"))
    out = await explicit_graph(model, broken_lookup).ainvoke(start())
    assert EXECUTED == ["post_message"]
    assert_calls_answered(out["messages"])
    assert any(r.levelname == "WARNING" for r in caplog.records)


@pytest.mark.anyio
async def test_lookup_failure_in_strict_mode_answers_every_call_with_an_error() -> None:
    model = scripted(ai(("c1", "post_message"), ("c2", "lookup")), AIMessage(content="done"))
    out = await explicit_graph(model, broken_lookup, strict=True).ainvoke(start())
    results = tool_messages(out["messages"])
    assert [m.tool_call_id for m in results] == ["c1", "c2"]
    assert all(m.status == "error" and "store could not be read" in str(m.content) for m in results)
    assert EXECUTED == []


@pytest.mark.anyio
async def test_build_agent_graph_loop_and_preflight_prompt() -> None:
    model = scripted(
        ai(("c1", "get_status"), ("c2", "post_message")),
        ai(("c3", "post_message")),
        AIMessage(content="done"),
    )
    out = await build_agent_graph(model, TOOLS, active_skills).ainvoke(start())
    assert_calls_answered(out["messages"])
    assert EXECUTED == ["get_status", "post_message"]
    system = model.seen[0][0]
    assert isinstance(system, SystemMessage)
    assert "- YOU MUST call `get_status` BEFORE calling `post_message` (skill: Post update)." in str(system.content)
    assert not any(isinstance(m, SystemMessage) for m in out["messages"])  # not stored in the state


@pytest.mark.anyio
async def test_guarded_node_is_a_no_op_without_terminal_tool_calls() -> None:
    node = create_guarded_tool_node(TOOLS, active_skills)
    assert await node({"messages": [HumanMessage("x")]}, {}) == {}
    assert await node({"messages": []}, {}) == {}
    assert await node({"messages": [ai(("c1", "post_message")), ToolMessage("x", tool_call_id="c1")]}, {}) == {}


@pytest.mark.anyio
async def test_guarded_node_answers_all_blocked_batch_without_running_tools() -> None:
    node = create_guarded_tool_node(TOOLS, active_skills)
    update = await node({"messages": [HumanMessage("x"), ai(("c1", "post_message"), ("c2", "post_message"))]}, {})
    assert [m.tool_call_id for m in update["messages"]] == ["c1", "c2"]
    assert all(str(m.content).startswith(MISSING) for m in update["messages"])
    assert EXECUTED == []
