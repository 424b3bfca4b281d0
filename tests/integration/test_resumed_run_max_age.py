"""No cache outlives ``max_age``, a run resumed after a human approval included.

A ``create_agent`` agent with ``HumanInTheLoopMiddleware`` stops before
``deploy`` runs. Meanwhile an emergency rule is added and more than
``max_age`` passes (a fake clock); the approved, resumed call is decided on the
current rules and does not run. Within ``max_age`` the snapshot the model was
shown is kept (the same rules as shown).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from tests._fakes import Clock, Scripted, ai_calls, recording_tools

pytestmark = pytest.mark.anyio


async def _emergency_rule(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Change freeze", steps=["deploy"], source_tag="authored:test",
        action_tool="deploy", precondition=["approve_change"],
    )


async def _paused_agent(
    store: GraphMemoryStore, scope: MemoryScope, clock: Clock
) -> tuple[Any, list[str], dict[str, Any]]:
    tools, executed = recording_tools("approve_change", "deploy")
    model = Scripted(responses=[ai_calls(("deploy", "c1")), AIMessage("done")])
    agent = create_agent(model, tools, checkpointer=InMemorySaver(), middleware=[
        MemoryMiddleware(TurnMemory(store, max_age=10, clock=clock)),
        HumanInTheLoopMiddleware(interrupt_on={"deploy": True}),
    ])
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = await agent.ainvoke({"messages": [HumanMessage("deploy it")]}, config, context=scope)
    assert "__interrupt__" in paused and executed == []  # waiting for a human
    return agent, executed, config


async def test_a_call_resumed_after_max_age_is_decided_on_the_current_rules(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    clock = Clock(50.0)
    agent, executed, config = await _paused_agent(store, scope, clock)
    await _emergency_rule(store, scope)
    clock.now += 11  # the approval came after max_age

    out = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config,
                              context=scope)

    assert executed == []  # deploy did not run
    [answer] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert str(answer.content).startswith("Missing precondition: call approve_change before deploy")


async def test_a_call_resumed_within_max_age_keeps_the_snapshot_it_was_shown(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    clock = Clock(50.0)
    agent, executed, config = await _paused_agent(store, scope, clock)
    await _emergency_rule(store, scope)
    clock.now += 5

    await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config,
                        context=scope)

    assert executed == ["deploy"]  # decided on the rules the model was shown, which had no freeze
