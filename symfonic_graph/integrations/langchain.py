"""LangChain v1 agents: ``MemoryMiddleware`` for ``langchain.agents.create_agent``.

Needs the ``langchain`` extra (``pip install 'symfonic-graph[langchain]'``);
``import symfonic_graph`` never imports this module.

Per model call, the middleware:

1. finds the turn's scope in the runtime context (``agent.ainvoke(...,
   context=...)``: a ``MemoryScope``, a mapping or object with ``tenant_id``
   and optional ``namespace``, or one holding such a value under
   ``memory_scope``), else where the ``TurnMemory`` looks (``scope_from``:
   ``config["configurable"]``, then ``state["memory_scope"]``). A missing or
   malformed scope raises ``ScopeError`` out of ``ainvoke``;
2. runs ``memory.begin(scope)`` once: the turn's one read;
3. checks the catalog against the model call's tools (``request.tools``),
   logging once per scope and catalog the rules whose action tool the agent
   lacks (DEBUG) or whose precondition tools it lacks (ERROR), see
   :mod:`symfonic_graph.rules.lint`;
4. appends the pre-flight block, without the rules whose action tool the
   agent lacks, to the system message as its **last**
   content block. The system message then depends only on your prompt, the
   tenant's catalog and the state, so it is byte-identical from call to call
   while the catalog is unchanged, and a prompt-caching middleware placed
   *after* this one caches it;
5. selects the reminders of the turn (text ones the last human message
   satisfies, with an ``evaluator``; time ones once due; event ones once the
   conversation holds their tool's successful call) and sends their
   tasks as one trailing ``HumanMessage``
   after the whole history: after every cached part, never stored in the
   agent state;
6. remembers, for each tool call the model then requests, the snapshot the
   model was shown. A call decided more than ``memory.max_age`` seconds
   later (a run resumed after a human-approval interrupt) is decided on a
   fresh read instead: no snapshot outlives ``max_age``.

Per tool call, it runs the gate (``run_gate``) on that call alone, against
that snapshot, so decisions, outage policy and telemetry are those of every
other gate path. The parallel calls of a turn share one reading of the
conversation (each message read once, the next turn reading only the
messages added since) and one resolution of the scope. A blocked call is answered with the gate's error
``ToolMessage`` instead of running. ``create_agent`` sends every call of an
AI message through the hook, so every call id of a parallel batch is
answered. Same-batch rule: only tool results *before* the AI message that
requested the call count as called, so a precondition requested in the same
batch as its action does not satisfy it.

Failure modes: during a store outage (``StoreUnavailableError``) the
``TurnMemory`` enforces the scope's last catalog for ``max_age +
outage_grace`` seconds (stale, with a WARNING). A scope without one lets the
model call proceed without the block and the reminders, with a WARNING; tool
calls then pass through, or with ``strict=True`` are answered with the gate's
``Precondition check unavailable`` error, or with ``strict="guarded"`` only
the calls of tools the scope's rules guarded when last seen (or that
``guarded_tools`` names) are, and every other call runs. A missing or malformed scope is
never an outage (``ScopeError``), nor is any other failure of the read
(``ConfigurationError`` from the gate).

Only the async hooks are implemented (the Neo4j driver is async): run the
agent with ``ainvoke``/``astream``.

Example:
    >>> from langchain.agents import create_agent
    >>> agent = create_agent(model, tools, middleware=[MemoryMiddleware(TurnMemory(store))])  # doctest: +SKIP
    >>> await agent.ainvoke({"messages": [("user", "deliver it")]}, context=MemoryScope("acme"))  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NotRequired

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        ToolCallRequest,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "symfonic_graph.langchain needs LangChain v1 agents: pip install 'symfonic-graph[langchain]'"
    ) from exc
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.types import Command

from symfonic_graph.errors import ScopeError, StoreUnavailableError
from symfonic_graph.integrations._adapters import Conversations, tool_message
from symfonic_graph.integrations._decisions import Watch, check_sink
from symfonic_graph.integrations._shared import (
    REMINDERS_MARKER_KEY,
    REMINDERS_MARKER_VALUE,
    Cue,
    earlier_siblings,
    last_human_text,
    wall_time,
)
from symfonic_graph.integrations.reminder_tools import reminder_tools
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.memory.limits import LimitLedger
from symfonic_graph.memory.triggers import CueEmbedder, ProspectiveTriggerCapability, no_text_match
from symfonic_graph.memory.turn import TurnMemory, TurnSnapshot
from symfonic_graph.memory.turn_scope import SCOPE_KEY, scope_of
from symfonic_graph.rules._messages import call_ref, messages_of
from symfonic_graph.rules.decisions import DecisionSink
from symfonic_graph.rules.gate import GateDecision, Strict, run_gate, strict_policy
from symfonic_graph.rules.lint import ToolLinter, tool_names
from symfonic_graph.rules.preflight import preflight_block
from symfonic_graph.shape.expressions import arguments
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["OFFERED_KEY", "REMINDERS_MARKER_KEY", "REMINDERS_MARKER_VALUE", "MemoryMiddleware", "MemoryState",
           "reminder_tools", "scope_in_context", "with_preflight"]

log = logging.getLogger("symfonic_graph.langchain")  # the logger's name is a contract (docs/observability.md)


Evaluator = Callable[[str, str], object]
_ABSENT: Final = object()
_MAX_REMEMBERED_CALLS = 10_000
_MAX_LINTERS = 64  # distinct tool sets (one per agent, usually)
_MAX_TURNS = 64  # tool steps whose scope is held (one per conversation running a tool step, usually)


def _member(holder: object, key: str) -> object:
    """``holder[key]`` or ``holder.key``, ``_ABSENT`` when it has none (never for plain values)."""
    if isinstance(holder, Mapping):
        return holder.get(key, _ABSENT)
    if holder is None or isinstance(holder, (str, bytes, int, float, tuple, list)):
        return _ABSENT
    return getattr(holder, key, _ABSENT)


def scope_in_context(context: object) -> MemoryScope | None:
    """The scope a runtime context names, or None when it names none.

    The context is a scope itself (a ``MemoryScope``, or a mapping or object
    with ``tenant_id``), or holds one under ``memory_scope``.

    Raises:
        ScopeError: the context names a scope, but a malformed one.

    Example:
        >>> scope_in_context({"memory_scope": {"tenant_id": "acme"}, "user_id": "u-1"})
        MemoryScope(tenant_id='acme', namespace=None)
        >>> scope_in_context({"user_id": "u-1"}) is None
        True
    """
    value, where = _member(context, SCOPE_KEY), f"runtime context[{SCOPE_KEY!r}]"
    if value is _ABSENT:
        if not isinstance(context, MemoryScope) and _member(context, "tenant_id") is _ABSENT:
            return None
        value, where = context, "runtime context"
    return scope_of(value, where=where)


def _other_fields(state: object) -> tuple[tuple[Any, Any], ...] | None:
    """The state's fields but its messages (None for a state that is no mapping: its scope is never reused)."""
    if not isinstance(state, Mapping):
        return None
    return tuple((key, value) for key, value in state.items() if key != "messages")


def _same_fields(held: tuple[tuple[Any, Any], ...], fields: tuple[tuple[Any, Any], ...]) -> bool:
    return len(held) == len(fields) and all(
        a[0] == b[0] and a[1] is b[1] for a, b in zip(held, fields, strict=True))


def with_preflight(system: SystemMessage | None, block: str) -> SystemMessage:
    """``system`` with the pre-flight ``block`` appended as its last content block.

    Without a system message the block is the whole (string) content; otherwise
    the existing content becomes content blocks, unchanged, followed by one
    text block holding ``block``.

    Example:
        >>> with_preflight(SystemMessage("You are helpful."), "## RULES").content
        [{'type': 'text', 'text': 'You are helpful.'}, {'type': 'text', 'text': '## RULES'}]
        >>> with_preflight(None, "## RULES").content
        '## RULES'
    """
    if system is None:
        return SystemMessage(content=block)
    content = system.content
    blocks: list[str | dict[Any, Any]] = list(content) if not isinstance(content, str) else (
        [{"type": "text", "text": content}] if content else [])
    if not blocks:
        return system.model_copy(update={"content": block})
    return system.model_copy(update={"content": [*blocks, {"type": "text", "text": block}]})


OFFERED_KEY: Final = "symfonic_offered_reminders"
"""The run's state key (and the reminder message's ``response_metadata`` key) holding the offered trigger ids."""


class MemoryState(AgentState[Any]):
    """The agent state ``MemoryMiddleware`` adds to: the ids of the reminders the last model call was offered."""

    symfonic_offered_reminders: NotRequired[list[str]]


class _Offered:
    """A selection sink collecting the offered trigger ids into a list."""

    def __init__(self, into: list[str]) -> None:
        self.into = into

    def selected(self, scope: MemoryScope, triggers: Sequence[Any]) -> None:
        self.into.extend(t.trigger_id for t in triggers)


class MemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Procedural and prospective memory for a ``create_agent`` agent.

    Args:
        memory: the process's ``TurnMemory`` (one per process; it caches each
            tenant's skills by catalog version).
        evaluator: synchronous ``(condition, cue) -> bool`` selecting pending
            text reminders; the cue is the text of the last human message.
            Without one, no text reminder is shown (no default matcher is
            shipped). Time reminders are shown once due, and event reminders
            once the conversation holds their tool's successful call, with
            or without it.
        strict: on a store outage with no recent catalog of the scope (see
            ``TurnMemory``'s ``outage_grace`` and ``snapshot_dir``), ``True``
            answers every tool call with the gate's ``Precondition check
            unavailable`` error, ``"guarded"`` only the calls of tools the
            scope's rules guarded when last seen (or that ``guarded_tools``
            names), letting every other tool run; ``False`` (default) passes
            every call through.
        guarded_tools: tool names ``strict="guarded"`` refuses during an
            outage even when the scope's rules were never seen.
        count_failed_calls: let a failed tool result (``status="error"``)
            satisfy a precondition, as the seeds did (default False).
        decision_sink: where every block, would-block, refusal, outage
            pass-through and stale-rules decision is kept besides its
            ``symfonic_graph.decisions`` log line and counter (e.g.
            ``symfonic_graph.decisions.Neo4jDecisionLog(store)``).
        embeddings: a LangChain ``Embeddings``: the last human message is
            embedded (once per text) and semantic reminders near it in
            meaning (``TurnMemory``'s ``similarity``) are shown too.
        reminder_ids: end the reminders block with the offered triggers'
            ids, so the model can acknowledge them (``reminder_tools``).
            Either way the ids are in the run's state under
            ``symfonic_offered_reminders`` and in the reminder message's
            ``response_metadata``.

    Put it *before* (outside) ``AnthropicPromptCachingMiddleware`` in
    ``middleware=[...]``, so the caching middleware sees the final system
    message and tags the pre-flight block as the end of the cached prefix.

    Example:
        >>> agent = create_agent(model, tools, middleware=[
        ...     MemoryMiddleware(TurnMemory(store), evaluator=my_evaluator),
        ...     AnthropicPromptCachingMiddleware(),
        ... ])  # doctest: +SKIP
    """

    state_schema = MemoryState

    def __init__(
        self, memory: TurnMemory, *, evaluator: Evaluator | None = None, strict: Strict = False,
        count_failed_calls: bool = False, guarded_tools: Iterable[str] = (),
        decision_sink: DecisionSink | None = None, reminder_ids: bool = False, embeddings: Any = None,
    ) -> None:
        super().__init__()
        self._embed = CueEmbedder(embeddings)
        self.reminder_ids = bool(reminder_ids)
        if not isinstance(memory, TurnMemory):
            raise TypeError(f"memory must be a TurnMemory, got {type(memory).__name__}")
        if evaluator is not None:
            if not callable(evaluator):
                raise TypeError(
                    f"evaluator must be a (condition, cue) -> bool callable, got {type(evaluator).__name__}")
            if inspect.iscoroutinefunction(evaluator):
                raise TypeError("evaluator must be synchronous: (condition, cue) -> bool, not an async function")
        self.memory = memory
        self.evaluator = evaluator
        self.strict, self.guarded_tools = strict_policy(strict, guarded_tools)
        self.count_failed_calls = bool(count_failed_calls)
        self.decision_sink = check_sink(decision_sink)
        self._shown: OrderedDict[tuple[MemoryScope, str], TurnSnapshot] = OrderedDict()
        self._linters: dict[frozenset[str], ToolLinter] = {}
        self._conversations = Conversations()
        self._limits = LimitLedger(memory.store, memory.wall_clock)
        self._turn_scopes: OrderedDict[int, tuple[Sequence[Any], object, tuple[tuple[Any, Any], ...], MemoryScope]] = (
            OrderedDict())

    # --- scope -----------------------------------------------------------------------

    def scope_for(self, context: object, state: Any) -> MemoryScope:
        """The scope of this call: the runtime context first, then the memory's ``scope_from``.

        Raises:
            ScopeError: no usable scope anywhere, or a malformed one.
        """
        found = scope_in_context(context)
        if found is not None:
            return found
        try:
            return self.memory.scope_from(state)
        except ScopeError as exc:
            raise ScopeError(
                f"MemoryMiddleware: {exc} (with create_agent: agent.ainvoke(..., context=MemoryScope(...)))"
            ) from None

    def _scope_of_step(self, context: object, state: Any, messages: Sequence[Any]) -> MemoryScope:
        """The scope of a tool call, resolved once for the parallel calls of one tool step.

        The calls of a step share the messages list, the runtime context and
        every other state value, object for object; a call that shares all
        three with an earlier one reuses its scope, any other resolves it.
        """
        fields = _other_fields(state)
        if fields is None or not messages:
            return self.scope_for(context, state)
        key = id(messages)
        held = self._turn_scopes.get(key)
        if held is not None and held[0] is messages and held[1] is context and _same_fields(held[2], fields):
            self._turn_scopes.move_to_end(key)
            return held[3]
        scope = self.scope_for(context, state)
        self._turn_scopes[key] = (messages, context, fields, scope)  # held: the list's id stays its own
        while len(self._turn_scopes) > _MAX_TURNS:
            self._turn_scopes.popitem(last=False)
        return scope

    # --- the model call --------------------------------------------------------------

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Add the pre-flight block and the reminders, call the model, remember the snapshot.

        When reminders were offered, their trigger ids go into the run's state (``OFFERED_KEY``).

        Raises:
            ScopeError: the call has no usable scope.
        """
        scope = self.scope_for(getattr(request.runtime, "context", None), request.state)
        embedding = (await self._embed(last_human_text(request.messages)) if self._embed.embeddings is not None
                     else None)  # no messages scanned without a model
        try:
            snapshot = await self.memory.begin(scope, embedding=embedding)
        except StoreUnavailableError as exc:
            log.warning("memory read failed for tenant %r (%r); the model runs without the pre-flight block "
                        "and reminders", scope.tenant_id, exc)
            return await handler(request)
        offered: list[str] = []
        response = await handler(await self._prepared(request, scope, snapshot, offered))
        self._remember(scope, snapshot, response)
        held = _member(request.state, OFFERED_KEY)
        if not offered and (held is _ABSENT or not held):
            return response  # nothing offered now, nor by an earlier call of the run: the state stays as it is
        return ExtendedModelResponse(model_response=response, command=Command(update={OFFERED_KEY: offered}))

    async def _prepared(
        self, request: ModelRequest[Any], scope: MemoryScope, snapshot: TurnSnapshot, offered: list[str]
    ) -> ModelRequest[Any]:
        linter = self._linter(request.tools)
        linter.check(snapshot.skills)  # logged once per scope and catalog
        block = preflight_block(linter.for_preflight(snapshot.skills), request.state,
                                include_negative=snapshot.include_negative)
        system = with_preflight(request.system_message, block.content) if block is not None else request.system_message
        messages: list[AnyMessage] = list(request.messages)
        reminders = await self._reminders(request.messages, scope, snapshot, offered)
        if reminders is not None:
            messages.append(reminders)
        return request.override(system_message=system, messages=messages)

    async def _reminders(
        self, messages: Sequence[AnyMessage], scope: MemoryScope, snapshot: TurnSnapshot, offered: list[str]
    ) -> HumanMessage | None:
        """The reminders block (or None); the offered triggers' ids are appended to ``offered``."""
        if not snapshot.triggers:
            return None
        capability = ProspectiveTriggerCapability(snapshot, self.evaluator or no_text_match, scope,
                                                  events_from=lambda _: self._conversations.read(messages).results,
                                                  claim=ProspectiveLayer(self.memory.store).claim_once,
                                                  sink=_Offered(offered))
        contributions = await capability.contribute(Cue(last_human_text(messages)))
        if not contributions:
            return None
        text = "\n\n".join(c.content for c in contributions)
        if self.reminder_ids and offered:
            text += "\n(reminder ids, in this order: " + ", ".join(offered) + ")"
        return HumanMessage(content=text, response_metadata={REMINDERS_MARKER_KEY: REMINDERS_MARKER_VALUE,
                                                             OFFERED_KEY: list(offered)})

    def _remember(self, scope: MemoryScope, snapshot: TurnSnapshot, response: ModelResponse[Any]) -> None:
        for message in getattr(response, "result", None) or ():
            if not isinstance(message, AIMessage):
                continue
            for call in message.tool_calls:
                call_id = call.get("id")
                if isinstance(call_id, str):
                    key = (scope, call_id)
                    self._shown[key] = snapshot
                    self._shown.move_to_end(key)
        while len(self._shown) > _MAX_REMEMBERED_CALLS:
            self._shown.popitem(last=False)

    def _linter(self, tools: Sequence[Any]) -> ToolLinter:
        names = tool_names(tools)
        linter = self._linters.get(names)
        if linter is None:
            linter = self._linters[names] = ToolLinter(names)
            while len(self._linters) > _MAX_LINTERS:
                self._linters.pop(next(iter(self._linters)))
        return linter

    # --- the tool call ---------------------------------------------------------------

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the call, or answer it with the gate's error when a precondition is missing.

        Raises:
            ScopeError: the call has no usable scope.
        """
        decision, scope = await self._decide(request)
        answer = tool_message(decision)
        if answer is None:
            result = await handler(request)
            if isinstance(result, ToolMessage) and result.status == "error":  # a failed call frees its limit slots
                await self._limits.release(scope, decision.call_id)
            return result
        log.debug("gate answered %s (%s) instead of running it: %s",
                  decision.tool_name, decision.call_id, decision.verdict)
        return answer

    async def decide(self, request: ToolCallRequest) -> GateDecision:
        """The gate's decision for one tool call, against the snapshot its model call was shown.

        The call goes through the gate's ``run_gate`` as the only call of its
        AI message, after the history that preceded that message: the same
        decision, outage policy and telemetry as every other gate path. The
        history comes from the conversation's reading shared by the calls of
        the turn (each message read once).

        Raises:
            ScopeError: the call has no usable scope.
        """
        decision, _ = await self._decide(request)
        return decision

    async def _decide(self, request: ToolCallRequest) -> tuple[GateDecision, MemoryScope]:
        """``decide``, and the scope the call was decided in (its limit slots are held under it)."""
        call = request.tool_call
        name, call_id = str(call.get("name") or ""), call.get("id")
        state = request.state
        messages = messages_of(state)
        scope = self._scope_of_step(getattr(request.runtime, "context", None), state, messages)
        shown = self._shown.get((scope, call_id)) if isinstance(call_id, str) else None
        watch = Watch(scope)

        async def skills(_: object) -> Sequence[Any]:
            # Read now when this middleware did not see the call requested (a run resumed elsewhere),
            # or when the snapshot is older than max_age (a run resumed after a human approval).
            fresh = shown is not None and self.memory.clock() - shown.taken_at < self.memory.max_age
            snapshot = shown if shown is not None and fresh else await self.memory.begin(scope)
            watch.stale = snapshot.stale
            return snapshot.skills

        ref = call_ref({"name": name, "args": dict(arguments(call.get("args"))), "id": call_id})
        if ref is None:  # no tool named: nothing to decide
            return GateDecision(name, call_id, "allowed"), scope
        conversation = self._conversations.read(messages).conversation
        history = conversation.history_before(call_id)
        gate_state = state if isinstance(state, Mapping) else {"messages": messages}
        decisions = await run_gate(gate_state, watch.wrap(skills), strict=self.strict,
                                   count_failed_calls=self.count_failed_calls, turn=(history, [ref]),
                                   guarded_tools=self.guarded_tools, now=wall_time(self.memory),
                                   in_flight=earlier_siblings(conversation, call_id))
        decisions = await self._limits.reserve(scope, decisions)
        await watch.emit(decisions, sink=self.decision_sink, strict=self.strict, calls=[(name, call_id)],
                         config=getattr(request.runtime, "config", None))
        return (decisions[0] if decisions else GateDecision(name, call_id, "allowed")), scope
