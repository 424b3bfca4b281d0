"""The recommended LangGraph wiring: a guarded tool node that answers every call.

Providers reject an AI message whose tool calls are not all answered, and
models often request a precondition and its action in one parallel batch. The
guarded tool node runs the gate on the terminal AI message, then:

* every blocked call is answered by the gate's error ``ToolMessage``;
* the allowed calls are executed by LangGraph's ``ToolNode``, which receives
  the state with a reduced copy of the AI message (allowed calls only);
* the answers are returned in the original call order, so every tool call id
  is answered exactly once before the model runs again.

Same-batch rule: a precondition requested in the same AI message as its action
does **not** count as called for that action. The action's result would
otherwise be computed before (or concurrently with) its precondition's. So in
a batch ``[get_status, post_message]`` the precondition runs, the action is
answered with the recovery error, and the model retries the action on its
next turn, when ``get_status``'s result is in the history.

Other decisions:
    * Tools reading ``InjectedState`` see the state with the reduced AI message.
    * Tools returning ``Command`` keep working: their commands are returned
      after the node's ``{"messages": [...]}`` update, as ``ToolNode`` does.
    * Tool execution errors follow the ``ToolNode``'s ``handle_tool_errors``
      policy; the gate itself never raises.

Example:
    >>> graph = build_agent_graph(model, tools, get_active_skills)  # doctest: +SKIP
    >>> await graph.ainvoke({"messages": [("user", "post the weekly update")]})  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Checkpointer, Command

from symfonic_graph._messages import messages_of, terminal_ai_message
from symfonic_graph.errors import ScopeError
from symfonic_graph.gate import SkillLookup, run_gate
from symfonic_graph.preflight import build_preflight_contribution
from symfonic_graph.turn import TurnMemory

__all__ = ["GuardedNode", "build_agent_graph", "create_guarded_tool_node"]

log = logging.getLogger(__name__)

ToolsArg = ToolNode | Sequence[BaseTool | Callable[..., Any]]
Memory = TurnMemory | SkillLookup
"""A ``TurnMemory`` (recommended: one read per turn), or any ``async (state) -> skills``."""


class GuardedNode(Protocol):
    """The node built by :func:`create_guarded_tool_node`."""

    def __call__(self, state: Any, config: RunnableConfig) -> Awaitable[Any]: ...


def _as_tool_node(tools: ToolsArg) -> ToolNode:
    return tools if isinstance(tools, ToolNode) else ToolNode(list(tools))


def _with_messages(state: Any, key: str, messages: list[Any]) -> Any:
    if isinstance(state, Mapping):
        return {**state, key: messages}
    return messages  # ToolNode's list input


def _collect(output: Any, key: str) -> tuple[list[ToolMessage], list[Any]]:
    """Split a ``ToolNode`` output into its ToolMessages and its other updates."""
    items = output if isinstance(output, list) else [output]
    messages: list[ToolMessage] = []
    others: list[Any] = []
    for item in items:
        if isinstance(item, ToolMessage):
            messages.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get(key), list):
            messages.extend(m for m in item[key] if isinstance(m, ToolMessage))
        elif isinstance(item, (Command, Mapping)):
            others.append(item)
    return messages, others


def _in_call_order(
    calls: Sequence[Mapping[str, Any]], blocked: Mapping[int, ToolMessage], executed: list[ToolMessage]
) -> list[ToolMessage]:
    by_id: dict[str, list[ToolMessage]] = {}
    for message in executed:
        by_id.setdefault(message.tool_call_id, []).append(message)
    ordered: list[ToolMessage] = []
    for index, call in enumerate(calls):
        if index in blocked:
            ordered.append(blocked[index])
        else:
            ordered.extend(by_id.pop(str(call.get("id")), []))
    ordered.extend(m for rest in by_id.values() for m in rest)
    return ordered


def _lookup_of(memory: Memory) -> SkillLookup:
    return memory.get_active_skills if isinstance(memory, TurnMemory) else memory


def create_guarded_tool_node(
    tools: ToolsArg,
    memory: Memory,
    *,
    strict: bool = False,
    messages_key: str = "messages",
) -> GuardedNode:
    """Build a tool node that enforces preconditions and answers every tool call.

    Args:
        tools: the tools (or a configured ``ToolNode``) executing allowed calls.
        memory: a ``TurnMemory`` (it finds the scope in the runtime context,
            ``config["configurable"]`` or ``state["memory_scope"]``), or any
            ``async (state) -> skills``.
        strict: block every call when the skill lookup fails (a store outage).
        messages_key: the state key holding the messages.

    Raises:
        ScopeError: from the node, when the turn has no usable scope.

    Returns:
        An async node ``(state, config) -> update`` answering each call of the
        terminal AI message exactly once, in call order.

    Example:
        >>> node = create_guarded_tool_node([get_status, post_message], skills)  # doctest: +SKIP
        >>> builder.add_node("tools", node)  # doctest: +SKIP
    """
    tool_node = _as_tool_node(tools)
    get_active_skills = _lookup_of(memory)

    async def guarded_tools(state: Any, config: RunnableConfig) -> Any:
        messages = list(messages_of(state, messages_key))
        ai = terminal_ai_message(messages)
        if ai is None:
            return {}
        decisions = await run_gate(_gate_state(state, [*messages[:-1], ai]), get_active_skills, strict=strict)
        blocked = {i: m for i, d in enumerate(decisions) if (m := d.to_tool_message()) is not None}
        allowed = [call for i, call in enumerate(ai.tool_calls) if i not in blocked]
        executed: list[ToolMessage] = []
        others: list[Any] = []
        if allowed:
            reduced = ai.model_copy(update={"tool_calls": allowed})
            tool_input = _with_messages(state, messages_key, [*messages[:-1], reduced])
            executed, others = _collect(await tool_node.ainvoke(tool_input, config), messages_key)
        update = {messages_key: _in_call_order(ai.tool_calls, blocked, executed)}
        return [update, *others] if others else update

    return guarded_tools


def _gate_state(state: Any, history: list[Any]) -> Any:
    """The state the gate sees: the caller's state with normalized messages."""
    if isinstance(state, Mapping):
        return {**state, "messages": history}
    if list(messages_of(state)) == history:
        return state  # an object state whose messages are already normalized
    fields = dict(vars(state)) if hasattr(state, "__dict__") else {}
    return {**fields, "messages": history}


async def _preflight_messages(memory: Memory, state: Any) -> list[BaseMessage]:
    """The pre-flight block as a system message; one ``begin()`` per model call with a TurnMemory."""
    try:
        if isinstance(memory, TurnMemory):
            block = (await memory.begin(memory.scope_from(state))).preflight(state)
        else:
            block = build_preflight_contribution(list(await memory(state) or ()), state)
    except ScopeError:
        raise  # a programming error: fail loud
    except Exception as exc:
        log.warning("pre-flight block skipped: skill lookup failed (%r)", exc)
        return []
    return [SystemMessage(content=block.content)] if block is not None else []


def build_agent_graph(
    model: BaseChatModel,
    tools: ToolsArg,
    memory: Memory,
    *,
    strict: bool = False,
    preflight: bool = True,
    checkpointer: Checkpointer = None,
    context_schema: type[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled agent loop: ``agent -> guarded tools -> agent``, END without tool calls.

    Args:
        model: a chat model supporting ``bind_tools``.
        tools: the tools, or a configured ``ToolNode``.
        memory: a ``TurnMemory`` (recommended: one ``begin()`` per model call
            serves the pre-flight block and the gate), or ``async (state) -> skills``.
        strict: block every call when the skill lookup fails (a store outage).
        preflight: prepend the pre-flight block as a system message each turn
            (not stored in the state).
        checkpointer: optional LangGraph checkpointer.
        context_schema: the runtime context type, if you declare one.

    The scope of a turn comes from the runtime context (or
    ``config["configurable"]``), so a plain ``MessagesState`` agent enforces;
    a turn without a usable scope raises ``ScopeError``.

    Example:
        >>> graph = build_agent_graph(model, [get_status, post_message], TurnMemory(store))  # doctest: +SKIP
        >>> await graph.ainvoke({"messages": [("user", "go")]}, context=MemoryScope("acme"))  # doctest: +SKIP
    """
    tool_node = _as_tool_node(tools)
    bound = model.bind_tools(list(tool_node.tools_by_name.values()))

    async def agent(state: MessagesState) -> dict[str, Any]:
        prefix = await _preflight_messages(memory, state) if preflight else []
        response = await bound.ainvoke([*prefix, *state["messages"]])
        return {"messages": [response]}

    builder: StateGraph[MessagesState, Any, MessagesState, MessagesState] = StateGraph(
        MessagesState, context_schema=context_schema
    )
    builder.add_node("agent", agent)
    builder.add_node("tools", create_guarded_tool_node(tool_node, memory, strict=strict))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)
