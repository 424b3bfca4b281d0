"""A guarded call whose arguments cannot be read, on the real graph: it does not run, and the model is told why.

A provider may send a tool call with no arguments or with arguments that do not parse; the gate reads them as
an empty map, so a rule over the arguments cannot be evaluated and the call is blocked with the rule's error,
whether or not another call's arguments were read before it in the same decision.
"""

from __future__ import annotations

import json
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory, create_precondition_gate_node
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import create_guarded_tool_node
from tests._fakes import Scripted, assert_every_call_answered

pytestmark = pytest.mark.anyio

BLOCKED = "Not allowed: a rule could not be evaluated, so `pay` was not executed (skill: Pay): `args.amount <= 5` " \
          "could not be evaluated (no field 'amount')."


async def _seed(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    for action in ("pay", "refund"):
        await layer.seed_authored_skill(
            scope, label=action.capitalize(), steps=[action], source_tag="authored:test", action_tool=action,
            precondition=[{"check": {"where": "args.amount <= 5", "message": "At most 5."}}])


def _pay(call_id: str, arguments: str | None) -> dict[str, Any]:
    """An OpenAI-shaped call of ``pay``: no arguments at all (None) or the provider's text."""
    function = {"name": "pay"} if arguments is None else {"name": "pay", "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function}


REFUND = {"id": "r", "type": "function", "function": {"name": "refund", "arguments": json.dumps({"amount": 3})}}


@pytest.mark.parametrize("arguments", [None, "{oops", "[1, 2]", "null"])
async def test_the_gate_node_blocks_the_unreadable_call_with_its_rules_error_in_every_order(
    store: GraphMemoryStore, scope: MemoryScope, arguments: str | None
) -> None:
    await _seed(store, scope)
    memory = TurnMemory(store)
    await memory.begin(scope)
    gate = create_precondition_gate_node(memory.get_active_skills)
    for calls in ([_pay("p", arguments)], [REFUND, _pay("p", arguments)], [_pay("p", arguments), REFUND]):
        messages = [{"role": "user", "content": "pay it"}, {"role": "assistant", "content": "", "tool_calls": calls}]
        out = await gate({"memory_scope": scope, "messages": messages})
        [error] = out["messages"]  # the refund of 3 passes; only the unreadable call is answered
        assert isinstance(error, ToolMessage)
        assert (error.tool_call_id, error.name, error.status) == ("p", "pay", "error")
        assert str(error.content).startswith(BLOCKED), error.content


def _tools() -> tuple[list[StructuredTool], list[tuple[str, Any]]]:
    ran: list[tuple[str, Any]] = []

    def make(name: str) -> StructuredTool:
        def run(amount: int = 0) -> str:
            ran.append((name, amount))
            return f"{name} done"

        return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")

    return [make("pay"), make("refund")], ran


def _unreadable(pay_first: bool) -> AIMessage:
    """What an adapter that does not validate hands over for a call the provider sent without arguments."""
    calls = [{"name": "refund", "args": {"amount": 3}, "id": "r", "type": "tool_call"},
             {"name": "pay", "args": None, "id": "p", "type": "tool_call"}]
    return AIMessage.model_construct(content="", tool_calls=calls[::-1] if pay_first else calls,
                                     invalid_tool_calls=[])


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    memory_scope: MemoryScope


@pytest.mark.parametrize("pay_first", [True, False])
async def test_the_guarded_tool_node_never_runs_the_call_and_answers_it_with_the_error(
    store: GraphMemoryStore, scope: MemoryScope, pay_first: bool
) -> None:
    await _seed(store, scope)
    tools, ran = _tools()
    builder = StateGraph(_State)
    builder.add_node("tools", create_guarded_tool_node(tools, TurnMemory(store)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    out = await builder.compile().ainvoke({"messages": [HumanMessage("pay it"), _unreadable(pay_first)],
                                           "memory_scope": scope})
    assert ran == [("refund", 3)], "the call with unreadable arguments never ran"
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers["p"].status == "error" and str(answers["p"].content).startswith(BLOCKED)
    assert answers["r"].content == "refund done"


@pytest.mark.parametrize("pay_first", [True, False])
async def test_an_agent_never_runs_the_call_and_the_model_sees_the_error(
    store: GraphMemoryStore, scope: MemoryScope, pay_first: bool
) -> None:
    await _seed(store, scope)
    tools, ran = _tools()
    unreadable = _unreadable(pay_first)
    model = Scripted(responses=[unreadable, AIMessage("I could not pay.")])
    agent = create_agent(model, tools, middleware=[MemoryMiddleware(TurnMemory(store))])

    out = await agent.ainvoke({"messages": [HumanMessage("pay it")]}, context=scope)

    assert ran == [("refund", 3)], "the call with unreadable arguments never ran"
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers["p"].status == "error" and str(answers["p"].content).startswith(BLOCKED)
    assert any(isinstance(m, ToolMessage) and str(m.content).startswith(BLOCKED) for m in model.seen[1])
    assert_every_call_answered(model)
