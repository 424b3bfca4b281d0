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

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Checkpointer, Command

from symfonic_graph.errors import StoreUnavailableError
from symfonic_graph.integrations._adapters import Conversations, terminal_ai_message, tool_message
from symfonic_graph.integrations._decisions import Watch, check_sink
from symfonic_graph.integrations._shared import Cue, last_human_text, wall_time
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.memory.limits import LimitLedger, uncounted
from symfonic_graph.memory.triggers import CueEmbedder, ProspectiveTriggerCapability, no_text_match
from symfonic_graph.memory.turn import TurnMemory
from symfonic_graph.rules._messages import messages_of, terminal_tool_calls
from symfonic_graph.rules.decisions import DecisionSink
from symfonic_graph.rules.gate import SkillLookup, Strict, run_gate, strict_policy
from symfonic_graph.rules.gate import _lookup as checked_lookup
from symfonic_graph.rules.lint import ToolLinter
from symfonic_graph.rules.preflight import preflight_block
from symfonic_graph.rules.ruleset import RuleSet

__all__ = ["GuardedNode", "build_agent_graph", "create_guarded_tool_node"]

log = logging.getLogger("symfonic_graph.langgraph")  # the logger's name is a contract (docs/observability.md)

ToolsArg = ToolNode | Sequence[BaseTool | Callable[..., Any]]
Memory = TurnMemory | SkillLookup
"""A ``TurnMemory`` (recommended: one read per turn), or any ``async (state) -> skills``."""
Evaluator = Callable[[str, str], object]
"""``(condition, cue) -> bool``: whether a pending reminder's condition holds for the cue."""


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
    strict: Strict = False,
    messages_key: str = "messages",
    count_failed_calls: bool = False,
    guarded_tools: Iterable[str] = (),
    decision_sink: DecisionSink | None = None,
) -> GuardedNode:
    """Build a tool node that enforces preconditions and answers every tool call.

    Args:
        tools: the tools (or a configured ``ToolNode``) executing allowed calls.
        memory: a ``TurnMemory`` (it finds the scope in the runtime context,
            ``config["configurable"]`` or ``state["memory_scope"]``), or any
            ``async (state) -> skills``.
        strict: when the store is unavailable and no recent catalog of the
            scope is held (see ``TurnMemory``'s ``outage_grace`` and
            ``snapshot_dir``): ``True`` blocks every call, ``"guarded"`` only
            the calls of tools the scope's rules guarded when last seen (or
            that ``guarded_tools`` names) and runs the others, ``False``
            (default) passes every call through.
        guarded_tools: tool names ``strict="guarded"`` blocks during an
            outage even when the scope's rules were never seen.
        decision_sink: where every block, would-block, refusal, outage
            pass-through and stale-rules decision is kept besides its
            ``symfonic_graph.decisions`` log line and counter (e.g.
            ``Neo4jDecisionLog(store)``); records need a ``TurnMemory`` to
            name their tenant.
        messages_key: the state key holding the messages.
        count_failed_calls: let a failed tool result satisfy a precondition
            (the seeds' behaviour; default False).

    The node checks the rules against ``tools`` and logs, once per scope and
    catalog, rules whose action tool it lacks (DEBUG) or whose precondition
    tools it lacks (ERROR); see :mod:`symfonic_graph.rules.lint`.

    Raises:
        ScopeError: from the node, when the turn has no usable scope.
        ConfigurationError: from the node, when the skill lookup is broken.

    Returns:
        An async node ``(state, config) -> update`` answering each call of the
        terminal AI message exactly once, in call order.

    Example:
        >>> node = create_guarded_tool_node([get_status, post_message], skills)  # doctest: +SKIP
        >>> builder.add_node("tools", node)  # doctest: +SKIP
    """
    policy = strict_policy(strict, guarded_tools)
    tool_node = _as_tool_node(tools)
    return _guarded_node(tool_node, memory, ToolLinter(tool_node.tools_by_name), policy=policy,
                         messages_key=messages_key, count_failed_calls=count_failed_calls,
                         sink=check_sink(decision_sink))


def _guarded_node(
    tool_node: ToolNode, memory: Memory, linter: ToolLinter, *, policy: tuple[Strict, frozenset[str]],
    messages_key: str, count_failed_calls: bool, sink: DecisionSink | None = None,
    conversations: Conversations | None = None,
) -> GuardedNode:
    strict, guarded = policy
    lookup = _lookup_of(memory)
    if conversations is None:  # each message read once; a turn reads only what the last one did not
        conversations = Conversations()
    limits = LimitLedger(memory.store, memory.wall_clock) if isinstance(memory, TurnMemory) else None

    async def get_active_skills(state: Any, watch: Watch) -> Any:
        skills: Any
        if isinstance(memory, TurnMemory):
            watch.scope = memory.scope_from(state)
            snapshot = await memory.gate_snapshot(watch.scope)
            watch.stale, skills = snapshot.stale, snapshot.skills
        else:
            skills = lookup(state)
            if inspect.isawaitable(skills):
                skills = await skills
        if isinstance(skills, Iterable) and not isinstance(skills, (str, bytes, Mapping)):
            skills = skills if isinstance(skills, RuleSet) else list(skills)
            linter.check(skills)  # a broken lookup result is left for the gate to report
        return skills

    async def guarded_tools(state: Any, config: RunnableConfig) -> Any:
        messages = list(messages_of(state, messages_key))
        ai = terminal_ai_message(messages)
        if ai is None:
            return {}
        history, calls = conversations.read(messages).turn()  # the terminal message read as the last one
        turn = (history, calls if ai is messages[-1] else terminal_tool_calls([ai]))  # else its converted calls
        watch = Watch()
        decisions = await run_gate(_gate_state(state, [*messages[:-1], ai]),
                                   watch.wrap(functools.partial(get_active_skills, watch=watch)), strict=strict,
                                   count_failed_calls=count_failed_calls, turn=turn, guarded_tools=guarded,
                                   now=wall_time(memory))
        decisions = await limits.reserve(watch.scope, decisions) if limits is not None else uncounted(decisions)
        await watch.emit(decisions, sink=sink, strict=strict, calls=[(c.name, c.id) for c in turn[1]], config=config)
        blocked = {i: m for i, d in enumerate(decisions) if (m := tool_message(d)) is not None}
        allowed = [call for i, call in enumerate(ai.tool_calls) if i not in blocked]
        executed: list[ToolMessage] = []
        others: list[Any] = []
        if allowed:
            reduced = ai.model_copy(update={"tool_calls": allowed})
            tool_input = _with_messages(state, messages_key, [*messages[:-1], reduced])
            executed, others = _collect(await tool_node.ainvoke(tool_input, config), messages_key)
            if limits is not None:  # a failed call frees its limit slots
                for message in executed:
                    if isinstance(message, ToolMessage) and message.status == "error":
                        await limits.release(watch.scope, message.tool_call_id)
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


def _system_message(system_prompt: str | SystemMessage | None, block: str | None) -> list[BaseMessage]:
    """The system message: the prompt, then the pre-flight block as its last content block."""
    prompt = SystemMessage(content=system_prompt) if isinstance(system_prompt, str) else system_prompt
    if block is None:
        return [prompt] if prompt is not None else []
    if prompt is None:
        return [SystemMessage(content=block)]
    content = prompt.content
    blocks: list[str | dict[Any, Any]] = list(content) if not isinstance(content, str) else (
        [{"type": "text", "text": content}] if content else [])
    return [prompt.model_copy(update={"content": [*blocks, {"type": "text", "text": block}]})]


async def _turn_messages(
    memory: Memory, state: Any, linter: ToolLinter, *, preflight: bool, evaluator: Evaluator | None,
    conversations: Conversations, embed: CueEmbedder,
) -> tuple[str | None, list[BaseMessage]]:
    """The turn's one read: the pre-flight block and the reminders message (never stored in the state)."""
    try:
        if isinstance(memory, TurnMemory):
            scope = memory.scope_from(state)
            embedding = await embed(last_human_text(messages_of(state))) if embed.embeddings is not None else None
            snapshot = await memory.begin(scope, embedding=embedding)
            skills: Any = snapshot.skills
        else:
            scope, snapshot = None, None
            skills = await checked_lookup(memory, state)  # ConfigurationError for a broken lookup
    except StoreUnavailableError as exc:  # no recent catalog either (TurnMemory keeps it for outage_grace)
        log.warning("pre-flight block and reminders skipped: the store is unavailable (%s)", exc)
        return None, []
    if isinstance(skills, Iterable) and not isinstance(skills, (str, bytes, Mapping)):
        skills = skills if isinstance(skills, RuleSet) else list(skills)
        linter.check(skills)
    else:
        skills = ()  # the gate reports the broken lookup (ConfigurationError)
    block = None
    if preflight:
        include_negative = snapshot.include_negative if snapshot is not None else False
        contribution = preflight_block(linter.for_preflight(skills), state, include_negative=include_negative)
        block = contribution.content if contribution is not None else None
    reminders: list[BaseMessage] = []
    if snapshot is not None and scope is not None and snapshot.triggers and isinstance(memory, TurnMemory):
        messages = messages_of(state)
        capability = ProspectiveTriggerCapability(snapshot, evaluator or no_text_match, scope,
                                                  events_from=lambda _: conversations.read(messages).results,
                                                  claim=ProspectiveLayer(memory.store).claim_once)
        contributions = await capability.contribute(Cue(last_human_text(messages)))
        if contributions:
            reminders.append(HumanMessage(content="\n\n".join(c.content for c in contributions)))
    return block, reminders


def build_agent_graph(
    model: BaseChatModel,
    tools: ToolsArg,
    memory: Memory,
    *,
    system_prompt: str | SystemMessage | None = None,
    evaluator: Evaluator | None = None,
    state_schema: type[Any] | None = None,
    strict: Strict = False,
    count_failed_calls: bool = False,
    preflight: bool = True,
    checkpointer: Checkpointer = None,
    context_schema: type[Any] | None = None,
    guarded_tools: Iterable[str] = (),
    decision_sink: DecisionSink | None = None,
    embeddings: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled agent loop: ``agent -> guarded tools -> agent``, END without tool calls.

    On par with ``MemoryMiddleware``: the same pre-flight block,
    reminders, outage policy and tool check.

    Args:
        model: a chat model supporting ``bind_tools``.
        tools: the tools, or a configured ``ToolNode``.
        memory: a ``TurnMemory`` (recommended: one ``begin()`` per model call
            serves the pre-flight block, the reminders and the gate), or
            ``async (state) -> skills``.
        system_prompt: your system prompt; the pre-flight block is appended
            to it as its last content block.
        evaluator: synchronous ``(condition, cue) -> bool`` selecting pending
            text reminders (needs a ``TurnMemory``); time reminders are
            selected once due and event reminders once the conversation
            holds their tool's successful call, with or without it. Their tasks are sent as
            one trailing ``HumanMessage`` after the history, never stored.
        state_schema: the graph's state type (default ``MessagesState``); it
            must have ``messages`` with the ``add_messages`` reducer. Its other
            fields are what state predicates see.
        strict: when the store is unavailable and no recent catalog of the
            scope is held (see ``TurnMemory``'s ``outage_grace`` and
            ``snapshot_dir``): ``True`` blocks every call, ``"guarded"`` only
            the calls of tools the scope's rules guarded when last seen (or
            that ``guarded_tools`` names) and runs the others, ``False``
            (default) passes every call through.
        guarded_tools: tool names ``strict="guarded"`` blocks during an
            outage even when the scope's rules were never seen.
        decision_sink: where every block, would-block, refusal, outage
            pass-through and stale-rules decision is kept besides its
            ``symfonic_graph.decisions`` log line and counter (e.g.
            ``Neo4jDecisionLog(store)``); records need a ``TurnMemory`` to
            name their tenant.
        count_failed_calls: let a failed tool result satisfy a precondition
            (the seeds' behaviour; default False).
        preflight: show the pre-flight block each turn (not stored in the state).
        embeddings: a LangChain ``Embeddings`` (needs a ``TurnMemory``): the
            last user message is embedded once and semantic reminders near
            it in meaning (``TurnMemory``'s ``similarity``) are shown too.
        checkpointer: optional LangGraph checkpointer.
        context_schema: the runtime context type, if you declare one.

    The scope of a turn comes from the runtime context (or
    ``config["configurable"]``), so a plain ``MessagesState`` agent enforces;
    a turn without a usable scope raises ``ScopeError``, a broken lookup
    ``ConfigurationError``. Rules that do not fit ``tools`` are logged once per
    scope and catalog, and the block leaves out rules whose action tool the
    agent lacks (see :mod:`symfonic_graph.rules.lint`).

    Raises:
        TypeError: ``evaluator`` without a ``TurnMemory``, or not a synchronous callable.
        ValidationError: ``strict`` is not True, False or ``"guarded"``, or ``guarded_tools`` names no tools.

    Example:
        >>> graph = build_agent_graph(model, [get_status, post_message], TurnMemory(store))  # doctest: +SKIP
        >>> await graph.ainvoke({"messages": [("user", "go")]}, context=MemoryScope("acme"))  # doctest: +SKIP
    """
    if evaluator is not None:
        if not callable(evaluator) or inspect.iscoroutinefunction(evaluator):
            raise TypeError("evaluator must be a synchronous (condition, cue) -> bool callable")
        if not isinstance(memory, TurnMemory):
            raise TypeError("evaluator needs memory=TurnMemory(store): reminders come from the turn's read")
    if embeddings is not None and not isinstance(memory, TurnMemory):
        raise TypeError("embeddings needs memory=TurnMemory(store): semantic reminders come from the turn's read")
    embed = CueEmbedder(embeddings)
    policy = strict_policy(strict, guarded_tools)
    sink = check_sink(decision_sink)
    tool_node = _as_tool_node(tools)
    bound = model.bind_tools(list(tool_node.tools_by_name.values()))
    linter = ToolLinter(tool_node.tools_by_name)
    schema: type[Any] = state_schema if state_schema is not None else MessagesState
    conversations = Conversations()  # one reading per conversation, shared by the reminders and the gate

    async def agent(state: Any) -> dict[str, Any]:
        block, reminders = await _turn_messages(memory, state, linter, preflight=preflight, evaluator=evaluator,
                                                conversations=conversations, embed=embed)
        response = await bound.ainvoke([*_system_message(system_prompt, block), *messages_of(state), *reminders])
        return {"messages": [response]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(schema, context_schema=context_schema)
    builder.add_node("agent", agent)
    builder.add_node("tools", _guarded_node(tool_node, memory, linter, policy=policy, messages_key="messages",
                                            count_failed_calls=count_failed_calls, sink=sink,
                                            conversations=conversations))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)
