"""Factories on par with the middleware: ``build_agent_graph`` with a real StateGraph and the real graph.

Only the chat model is scripted. Each test asserts what the user sees: which
tools ran, and what the model was shown.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import MessagesState

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph.langgraph import build_agent_graph
from tests._fakes import Scripted, ai_calls, recording_tools

pytestmark = pytest.mark.anyio


class SupportState(MessagesState):
    """The app's state: the channel the conversation came from."""

    channel: str


async def _web_rule(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Web closures", steps=["close_account"], source_tag="authored:t",
        action_tool="close_account",
        precondition=["verify_identity", {"state": {"path": "channel", "op": "eq", "value": "web"}}],
    )


async def test_state_schema_fields_are_what_state_predicates_see(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await _web_rule(store, scope)
    tools, executed = recording_tools("verify_identity", "close_account")
    model = Scripted(responses=[ai_calls(("close_account", "c1")), AIMessage("sorry")])
    graph = build_agent_graph(model, tools, TurnMemory(store), state_schema=SupportState)

    out = await graph.ainvoke({"messages": [HumanMessage("close my account")], "channel": "web"}, context=scope)

    assert executed == []  # the web rule applied: the state the app declared reached the gate
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert str(answer.content).startswith("Missing precondition: call verify_identity before close_account")
    assert "BEFORE calling `close_account`" in str(model.seen[0][0].content)  # and the pre-flight block


async def test_system_prompt_comes_first_and_the_block_is_its_last_part(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:t", action_tool="deliver",
        precondition=["get_status"])
    tools, _ = recording_tools("get_status", "deliver")
    model = Scripted(responses=[AIMessage("hi")])
    graph = build_agent_graph(model, tools, TurnMemory(store), system_prompt="You are the reporting assistant.")
    await graph.ainvoke({"messages": [HumanMessage("hello")]}, context=scope)
    [system] = [m for m in model.seen[0] if isinstance(m, SystemMessage)]
    assert isinstance(system.content, list) and model.seen[0][0] is system
    assert system.content[0] == {"type": "text", "text": "You are the reporting assistant."}
    assert str(system.content[-1]["text"]).startswith("## ENFORCED PRE-FLIGHT RULES")  # type: ignore[index]


async def test_the_evaluator_shows_reminders_after_the_history_never_stored(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await ProspectiveLayer(store).set_trigger(scope, condition="invoice", task="Tell the user invoice 4711 is due.")
    model = Scripted(responses=[AIMessage("noted")])
    tools, _ = recording_tools("get_status")

    def contains(condition: str, cue: str) -> bool:
        return condition in cue

    graph = build_agent_graph(model, tools, TurnMemory(store), evaluator=contains)
    out = await graph.ainvoke({"messages": [HumanMessage("about my invoice")]}, context=scope)
    shown = model.seen[0]
    assert isinstance(shown[-1], HumanMessage) and "invoice 4711" in str(shown[-1].content)
    assert not any("invoice 4711" in str(m.content) for m in out["messages"])  # not in the state


async def test_strict_blocks_when_the_store_is_down_and_no_catalog_is_held(scope: MemoryScope) -> None:
    import neo4j

    dead = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))
    try:
        tools, executed = recording_tools("deliver")
        model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("later")])
        graph = build_agent_graph(model, tools, TurnMemory(GraphMemoryStore(dead, query_timeout=2.0)), strict=True)
        out = await graph.ainvoke({"messages": [HumanMessage("deliver")]}, context=scope)
    finally:
        await dead.close()
    assert executed == []
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert str(answer.content).startswith("Precondition check unavailable")


def test_the_factory_takes_every_option_of_the_middleware() -> None:
    import inspect

    params = inspect.signature(build_agent_graph).parameters
    for name in ("system_prompt", "evaluator", "state_schema", "strict", "count_failed_calls"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    assert params["count_failed_calls"].default is False


def test_an_evaluator_needs_a_turn_memory() -> None:
    async def lookup(state: Any) -> list[Any]:
        return []

    with pytest.raises(TypeError, match="TurnMemory"):
        build_agent_graph(Scripted(responses=[]), [], lookup, evaluator=lambda c, q: True)
