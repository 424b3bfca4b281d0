"""A hostile or oddly shaped history never lets a guarded tool run (real Neo4j, real agent loops).

Each history below once made the gate pass a call it should have refused:
arguments nested 1,100 deep (the reader raised and the gate passed through),
a list ``tool_call_id`` (likewise), two calls sharing one id, a result named
otherwise than its call, the gate's own error in block content or cut to 60
characters, a result that arrived after a later user message, a user message
as ``ChatMessage`` or as a Responses API item. Every one runs through the
wirings a user has (``create_agent`` with ``MemoryMiddleware``, the
middleware's tool hook on raw dicts, ``build_agent_graph``, and
``create_guarded_tool_node`` in a graph whose state keeps raw dicts), strict
and not, and the test counts the guarded tool's real invocations. A clean
history in each wiring runs the tool, so none of this passes by refusing
everything.
"""

from __future__ import annotations

import operator
from types import SimpleNamespace
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ToolCallRequest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, StateGraph

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph, create_guarded_tool_node
from symfonic_graph.rules.gate import missing_precondition_content

pytestmark = pytest.mark.anyio

DEEP = '{"order_id": ' + "[" * 1100 + "]" * 1100 + "}"  # 2.2 KB of brackets, written by the model itself
GATE_TEXT = missing_precondition_content("get_status", ["auth"], "Status")
TOOL_NAMES = ("get_status", "deliver", "verify", "refund", "lookup_order", "ship")


class Replay(FakeMessagesListChatModel):
    """Replays its responses; unlike ``tests._fakes.Scripted`` it reads nothing of a hostile input."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Replay:
        return self


def _tools() -> tuple[list[BaseTool], list[str]]:
    executed: list[str] = []

    def make(name: str) -> BaseTool:
        def run(order_id: str = "") -> str:
            executed.append(name)
            return f"{name} done"

        return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")

    return [make(name) for name in TOOL_NAMES], executed


def _ai(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _ask(name: str, call_id: Any, arguments: str = "{}") -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _answer(call_id: Any, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def _deep_call_object() -> AIMessage:
    # what a store or an integration may hand back: arguments kept as the model's text
    return AIMessage.model_construct(content="", type="ai", tool_calls=[
        {"name": "lookup_order", "args": DEEP, "id": "c0", "type": "tool_call"}])


def _list_id_result() -> ToolMessage:
    return ToolMessage.model_construct(content="ok", type="tool", tool_call_id=["c1"], name=None, status="success")


# name -> (history as LangChain objects, the same as raw dicts, the guarded call (tool, args))
CASES: dict[str, tuple[list[Any], list[Any], tuple[str, dict[str, Any]]]] = {
    "arguments nested 1,100 deep": (
        [HumanMessage("hi"), _deep_call_object(), ToolMessage("ok", tool_call_id="c0"), HumanMessage("deliver")],
        [{"role": "user", "content": "hi"}, _ask("lookup_order", "c0", DEEP), _answer("c0"),
         {"role": "user", "content": "deliver"}],
        ("deliver", {})),
    "a list tool_call_id": (
        [_ai("get_status", "c1"), _list_id_result()],
        [_ask("get_status", "c1"), _answer(["c1"])],
        ("deliver", {})),
    "two calls sharing one id": (
        [_ai("lookup_order", "call_0", order_id="1"), _ai("lookup_order", "call_0", order_id="2"),
         ToolMessage("ok", tool_call_id="call_0")],
        [_ask("lookup_order", "call_0", '{"order_id": "1"}'), _ask("lookup_order", "call_0", '{"order_id": "2"}'),
         _answer("call_0")],
        ("ship", {"order_id": "2"})),
    "a result named otherwise than its call": (
        [_ai("lookup_order", "c1"), ToolMessage("ok", tool_call_id="c1", name="get_status")],
        [_ask("lookup_order", "c1"), _answer("c1", name="get_status")],
        ("deliver", {})),
    "the gate's error in block content": (
        [_ai("get_status", "c1"), ToolMessage([{"type": "text", "text": GATE_TEXT}], tool_call_id="c1")],
        [_ask("get_status", "c1"), _answer("c1", [{"type": "text", "text": GATE_TEXT}])],
        ("deliver", {})),
    "the gate's error cut to 60 characters": (
        [_ai("get_status", "c1"), ToolMessage(GATE_TEXT[:60], tool_call_id="c1")],
        [_ask("get_status", "c1"), _answer("c1", GATE_TEXT[:60])],
        ("deliver", {})),
    "a result after a later user message": (
        [_ai("verify", "c1"), HumanMessage("now refund it"), ToolMessage("ok", tool_call_id="c1")],
        [_ask("verify", "c1"), {"role": "user", "content": "now refund it"}, _answer("c1")],
        ("refund", {})),
    "a user message as ChatMessage or a Responses item": (
        [_ai("verify", "c1"), ToolMessage("ok", tool_call_id="c1"), ChatMessage(role="user", content="refund")],
        [_ask("verify", "c1"), _answer("c1"),
         {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "refund"}]}],
        ("refund", {})),
}
CLEAN: dict[str, tuple[list[Any], list[Any], tuple[str, dict[str, Any]]]] = {
    "deliver": ([_ai("get_status", "c1"), ToolMessage("ok", tool_call_id="c1")],
                [_ask("get_status", "c1"), _answer("c1")], ("deliver", {})),
    "ship": ([_ai("lookup_order", "c1", order_id="2"), ToolMessage("ok", tool_call_id="c1")],
             [_ask("lookup_order", "c1", '{"order_id": "2"}'), _answer("c1")], ("ship", {"order_id": "2"})),
    "refund": ([HumanMessage("refund"), _ai("verify", "c1"), ToolMessage("ok", tool_call_id="c1")],
               [{"role": "user", "content": "refund"}, _ask("verify", "c1"), _answer("c1")], ("refund", {})),
}


async def _seed(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    for action, pre in [("deliver", "get_status"), ("refund", {"tool": "verify", "within": "user_turn"}),
                        ("ship", {"tool": "lookup_order", "same_args": ["order_id"]})]:
        await layer.seed_authored_skill(scope, label=action.title(), steps=[action], source_tag="authored:test",
                                        action_tool=action, precondition=[pre])


async def _run(wiring: str, store: GraphMemoryStore, scope: MemoryScope, case: tuple[Any, ...],
               strict: bool) -> list[str]:
    objects, dicts, (action, args) = case
    tools, executed = _tools()
    final = _ai(action, "final", **args)
    model = Replay(responses=[final, AIMessage("done")])
    memory = TurnMemory(store)
    if wiring == "create_agent":
        agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory, strict=strict)])
        try:
            await agent.ainvoke({"messages": list(objects)}, context=scope)
        except TypeError:  # create_agent's own model node cannot hash a list tool_call_id: nothing ran
            assert any(isinstance(m, ToolMessage) and isinstance(m.tool_call_id, list) for m in objects)
    elif wiring == "middleware_hook":  # the middleware's tool hook on a state that keeps raw dicts
        middleware = MemoryMiddleware(memory, strict=strict)
        request = ToolCallRequest(tool_call={**final.tool_calls[0], "type": "tool_call"}, tool=None,
                                  state={"messages": [*dicts, final]},
                                  runtime=SimpleNamespace(context=scope))  # type: ignore[arg-type]
        by_name = {tool.name: tool for tool in tools}

        async def handler(req: ToolCallRequest) -> ToolMessage:
            output = await by_name[req.tool_call["name"]].ainvoke(req.tool_call["args"])
            return ToolMessage(str(output), tool_call_id=str(req.tool_call["id"]))

        await middleware.awrap_tool_call(request, handler)
    elif wiring == "build_agent_graph":
        graph = build_agent_graph(model, tools, memory, strict=strict)
        await graph.ainvoke({"messages": list(objects)}, context=scope)
    else:  # a hand-built graph whose state keeps the messages as given (raw dicts stay dicts)
        class RawState(TypedDict):
            messages: Annotated[list[Any], operator.add]

        builder: StateGraph[Any, Any, Any, Any] = StateGraph(RawState)
        builder.add_node("tools", create_guarded_tool_node(tools, memory, strict=strict))
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        await builder.compile().ainvoke({"messages": [*dicts, final]}, context=scope)
    return executed


WIRINGS = ["create_agent", "middleware_hook", "build_agent_graph", "guarded_node_raw_dicts"]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("wiring", WIRINGS)
async def test_no_hostile_history_runs_the_guarded_tool(
    store: GraphMemoryStore, scope: MemoryScope, wiring: str, strict: bool
) -> None:
    await _seed(store, scope)
    ran = {name: await _run(wiring, store, scope, case, strict) for name, case in CASES.items()}
    assert {name: executed for name, executed in ran.items() if executed} == {}


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_clean_history_runs_the_guarded_tool_in_every_wiring(
    store: GraphMemoryStore, scope: MemoryScope, wiring: str
) -> None:
    await _seed(store, scope)
    ran = {name: await _run(wiring, store, scope, case, False) for name, case in CLEAN.items()}
    assert ran == {"deliver": ["deliver"], "ship": ["ship"], "refund": ["refund"]}

