"""``MemoryMiddleware`` in a real ``create_agent`` agent on the real graph.

Only the chat model is scripted (``tests._fakes.Scripted``); Neo4j, the Cypher,
LangChain's agent loop and its tool node are real. Each test asserts what a
user sees: which tools actually ran, and what the model was shown.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import neo4j
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ScopeError
from symfonic_graph.langchain import REMINDERS_MARKER_KEY, MemoryMiddleware
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools

pytestmark = pytest.mark.anyio

PROMPT = "You are the reporting assistant."
RULE = "- YOU MUST call `get_status` BEFORE calling `deliver` (skill: Deliver)."
MISSING = "Missing precondition: call get_status before deliver (skill: Deliver)."
UNAVAILABLE = "Precondition check unavailable: "
TASK = "Tell the user that invoice 4711 is overdue."


def contains(condition: str, cue: str) -> bool:
    return condition.lower() in cue.lower()


async def _seed_rule(store: GraphMemoryStore, scope: MemoryScope, *, action: str = "deliver",
                     pre: str = "get_status", label: str = "Deliver") -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label=label, steps=[action], source_tag="authored:test", action_tool=action, precondition=[pre],
    )


def _agent(model: Scripted, tools: list[Any], middleware: list[AgentMiddleware[Any, Any, Any]], **kw: Any) -> Any:
    return create_agent(model, tools, system_prompt=PROMPT, middleware=middleware, **kw)


def _system(shown: list[BaseMessage]) -> str:
    """The system message the model was shown, as the exact bytes a provider would get."""
    assert isinstance(shown[0], SystemMessage)
    return json.dumps(shown[0].content, sort_keys=True)


def _system_text(shown: list[BaseMessage]) -> str:
    return str(shown[0].text) if isinstance(shown[0], SystemMessage) else ""


def _answers(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


async def test_a_parallel_batch_runs_the_precondition_refuses_the_action_and_recovers(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("get_status", "c1"), ("deliver", "c2")), ai_calls(("deliver", "c3")),
                                AIMessage("delivered")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store))])

    out = await agent.ainvoke({"messages": [HumanMessage("deliver the weekly report")]}, context=scope)

    # same batch: the precondition ran, the action was answered with the error; retried, it ran
    assert executed == ["get_status", "deliver"]
    answers = _answers(out)
    assert set(answers) == {"c1", "c2", "c3"}
    assert answers["c1"].content == "get_status done"
    assert answers["c2"].status == "error" and str(answers["c2"].content).startswith(MISSING)
    assert answers["c3"].content == "deliver done" and answers["c3"].status != "error"
    assert len([m for m in out["messages"] if isinstance(m, ToolMessage)]) == 3  # each id answered once
    assert_every_call_answered(model)
    # the model was shown the rule on every call, as the last block of the system message
    assert len(model.seen) == 3
    for shown in model.seen:
        content = shown[0].content
        assert isinstance(content, list) and content[0] == {"type": "text", "text": PROMPT}
        assert content[-1]["text"].endswith(RULE)
    # and saw the gate's error before it retried
    assert any(isinstance(m, ToolMessage) and str(m.content).startswith(MISSING) for m in model.seen[1])


async def test_the_blocked_action_runs_on_the_next_turn_after_its_precondition(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[
        ai_calls(("deliver", "t1-a")), AIMessage("I need the status first."),  # turn 1
        ai_calls(("get_status", "t2-a")), ai_calls(("deliver", "t2-b")), AIMessage("delivered"),  # turn 2
    ])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store))], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": uuid.uuid4().hex}}

    first = await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, config=thread, context=scope)
    assert executed == []
    assert str(_answers(first)["t1-a"].content).startswith(MISSING)

    second = await agent.ainvoke({"messages": [HumanMessage("try again")]}, config=thread, context=scope)
    assert executed == ["get_status", "deliver"]
    assert _answers(second)["t2-b"].content == "deliver done"
    assert_every_call_answered(model)


class _AnswersStatusItself(AgentMiddleware[AgentState[Any], Any, Any]):
    """Answers get_status calls right after the model (as a result cache or a human edit might)."""

    async def aafter_model(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        answers = [ToolMessage("status from cache", tool_call_id=c["id"], name=c["name"])
                   for c in calls if c["name"] == "get_status"]
        return {"messages": answers} if answers else None


async def test_a_same_batch_precondition_answered_first_still_does_not_count(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("get_status", "c1"), ("deliver", "c2")), ai_calls(("deliver", "c3")),
                                AIMessage("delivered")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store)), _AnswersStatusItself()])

    out = await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, context=scope)

    # c1's answer was in the state when c2 reached the gate, but it came from c2's own batch
    answers = _answers(out)
    assert str(answers["c2"].content).startswith(MISSING)
    assert answers["c3"].content == "deliver done"
    assert executed == ["deliver"]
    assert_every_call_answered(model)


class _SeedsARuleAfterTheFirstModelCall(AgentMiddleware[AgentState[Any], Any, Any]):
    """Seeds the rule between the model's answer and the tool calls it requested."""

    def __init__(self, store: GraphMemoryStore, scope: MemoryScope) -> None:
        self.store, self.scope, self.done = store, scope, False

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        response = await handler(request)
        if not self.done:
            self.done = True
            await _seed_rule(self.store, self.scope)
        return response


async def test_the_gate_enforces_what_the_model_was_shown_and_new_rules_from_the_next_call(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c1")), ai_calls(("deliver", "c2")), AIMessage("done")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store)), _SeedsARuleAfterTheFirstModelCall(store, scope)])

    out = await agent.ainvoke({"messages": [HumanMessage("deliver it twice")]}, context=scope)

    assert model.seen[0][0].content == PROMPT  # shown no rule: its call ran
    assert RULE in _system_text(model.seen[1])  # the next call was shown the new rule, and it was enforced
    assert executed == ["deliver"]
    assert str(_answers(out)["c2"].content).startswith(MISSING)


async def test_two_tenants_share_the_middleware_but_not_their_memory(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    acme, globex = MemoryScope(scope.tenant_id, "user-7"), MemoryScope(f"t-{uuid.uuid4().hex}")
    await _seed_rule(store, scope)
    await ProspectiveLayer(store).set_trigger(acme, condition="invoice", task=TASK)
    middleware = MemoryMiddleware(TurnMemory(store), evaluator=contains)  # one per process, shared

    acme_tools, acme_ran = recording_tools("get_status", "deliver")
    acme_model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("ok")])
    await _agent(acme_model, acme_tools, [middleware]).ainvoke(
        {"messages": [HumanMessage("deliver it, and the invoice?")]}, context=acme)
    assert acme_ran == []
    assert RULE in _system_text(acme_model.seen[0])
    assert TASK in str(acme_model.seen[0][-1].content)

    globex_tools, globex_ran = recording_tools("get_status", "deliver")
    globex_model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("ok")])
    out = await _agent(globex_model, globex_tools, [middleware]).ainvoke(
        {"messages": [HumanMessage("deliver it, and the invoice?")]}, context={"tenant_id": globex.tenant_id})
    assert globex_ran == ["deliver"]  # acme's rule does not bind globex, even for a reused call id
    assert _answers(out)["c1"].content == "deliver done"
    for shown in globex_model.seen:
        seen_text = "\n".join(str(m.text) for m in shown)
        assert "get_status" not in seen_text and "PRE-FLIGHT" not in seen_text
        assert TASK not in seen_text and "PENDING REMINDERS" not in seen_text
        assert shown[0].content == PROMPT  # the system prompt is passed through untouched


async def test_the_system_message_is_byte_identical_until_the_catalog_changes(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed_rule(store, scope)
    memory = TurnMemory(store)
    tools, _ = recording_tools("get_status", "deliver", "refund", "verify")
    model = Scripted(responses=[AIMessage("one"), AIMessage("two"), AIMessage("three")])
    agent = _agent(model, tools, [MemoryMiddleware(memory)])

    await agent.ainvoke({"messages": [HumanMessage("hello")]}, context=scope)
    await agent.ainvoke({"messages": [HumanMessage("something else entirely")]}, context=scope)
    first, second = _system(model.seen[0]), _system(model.seen[1])
    assert first == second

    await _seed_rule(store, scope, action="refund", pre="verify", label="Refund")
    await agent.ainvoke({"messages": [HumanMessage("hello")]}, context=scope)
    third = model.seen[2][0].content
    assert _system(model.seen[2]) != first
    assert isinstance(third, list) and third[-1]["text"].endswith(
        "- YOU MUST call `verify` BEFORE calling `refund` (skill: Refund).")
    assert third[0] == {"type": "text", "text": PROMPT}  # the static prompt before the rules is unchanged


class _Inner(AgentMiddleware[AgentState[Any], Any, Any]):
    """Stands where AnthropicPromptCachingMiddleware goes: after MemoryMiddleware; records the request."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest[Any]] = []

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        self.requests.append(request)
        return await handler(request)


async def test_a_selected_reminder_follows_the_cached_prefix_and_the_history(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    user = MemoryScope(scope.tenant_id, "user-7")
    await _seed_rule(store, scope)
    await ProspectiveLayer(store).set_trigger(user, condition="invoice", task=TASK)
    inner = _Inner()
    tools, _ = recording_tools("get_status", "deliver")
    model = Scripted(responses=[AIMessage("nothing due"), ai_calls(("get_status", "c1")), AIMessage("overdue!")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store), evaluator=contains), inner])

    await agent.ainvoke({"messages": [HumanMessage("good morning")]}, context=user)
    out = await agent.ainvoke({"messages": [HumanMessage("Anything about my invoice?")]}, context=user)

    # no cue, no reminder; a matching cue: the task, after the whole history, on every call of the turn
    assert not any(isinstance(m, HumanMessage) and TASK in str(m.content) for m in model.seen[0])
    for shown in model.seen[1:]:
        last = shown[-1]
        assert isinstance(last, HumanMessage) and last.content == f"## PENDING REMINDERS\n- {TASK}"
        assert last.response_metadata.get(REMINDERS_MARKER_KEY) == "reminders"
        assert TASK not in _system_text(shown)  # never inside the cached system message
    assert isinstance(model.seen[2][-2], ToolMessage)  # the reminder trails the tool result too
    # the system message did not move because of the reminder
    assert _system(model.seen[0]) == _system(model.seen[1]) == _system(model.seen[2])
    # an inner middleware (where prompt caching goes) sees the block last in the system message
    for request in inner.requests:
        assert request.system_message is not None
        assert request.system_message.content[-1]["text"].endswith(RULE)  # type: ignore[index]
    # the reminder is shown, never stored: the agent's state holds no trace of it
    assert not any(TASK in str(m.content) for m in out["messages"])
    # selection is not acknowledgement: the trigger is still pending
    assert [t.task for t in await ProspectiveLayer(store).get_pending(user)] == [TASK]


@pytest.mark.parametrize("context", [None, "acme", ("acme",), {"tenant_id": ""}, {"tenant_id": 7},
                                     {"memory_scope": "acme"}, {"user_id": "u-1"}])
async def test_a_missing_or_malformed_scope_raises(
    store: GraphMemoryStore, scope: MemoryScope, context: Any
) -> None:
    await _seed_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("done")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store), strict=True)])
    with pytest.raises(ScopeError):
        await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, context=context)
    assert executed == [] and model.seen == []


@pytest.mark.parametrize("where", ["holder", "object", "configurable"])
async def test_the_scope_may_be_held_in_the_context_or_configurable(
    store: GraphMemoryStore, scope: MemoryScope, where: str
) -> None:
    from types import SimpleNamespace

    await _seed_rule(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("done")])
    agent = _agent(model, tools, [MemoryMiddleware(TurnMemory(store))])
    run: dict[str, Any] = {
        "holder": {"context": {"memory_scope": scope, "user_id": "u-1"}},
        "object": {"context": SimpleNamespace(tenant_id=scope.tenant_id, namespace=None)},
        "configurable": {"config": {"configurable": {"memory_scope": scope}}},
    }[where]
    out = await agent.ainvoke({"messages": [HumanMessage("deliver it")]}, **run)
    assert executed == []
    assert str(_answers(out)["c1"].content).startswith(MISSING)


@pytest.mark.parametrize("strict", [False, True])
async def test_a_dead_store_passes_through_or_blocks_in_strict_mode(scope: MemoryScope, strict: bool) -> None:
    dead = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))
    try:
        memory = TurnMemory(GraphMemoryStore(dead, query_timeout=1.0))
        tools, executed = recording_tools("get_status", "deliver")
        model = Scripted(responses=[ai_calls(("get_status", "c1"), ("deliver", "c2")), AIMessage("done")])
        agent = _agent(model, tools, [MemoryMiddleware(memory, evaluator=contains, strict=strict)])
        out = await agent.ainvoke({"messages": [HumanMessage("deliver the invoice")]}, context=scope)
    finally:
        await dead.close()
    # the model ran, without the block and the reminders
    assert [shown[0].content for shown in model.seen] == [PROMPT, PROMPT]
    assert_every_call_answered(model)
    answers = _answers(out)
    if strict:
        assert executed == []
        assert all(m.status == "error" and str(m.content).startswith(UNAVAILABLE) for m in answers.values())
        assert set(answers) == {"c1", "c2"}
    else:
        assert sorted(executed) == ["deliver", "get_status"]  # one parallel batch: either may finish first
        assert [answers["c1"].content, answers["c2"].content] == ["get_status done", "deliver done"]


async def test_the_demo_runs_on_the_middleware_path(store: GraphMemoryStore) -> None:
    from symfonic_graph.ops.demo import run_demo

    lines: list[str] = []
    await run_demo(store, out=lines.append, agent="middleware")
    out = "\n".join(lines)
    assert "## ENFORCED PRE-FLIGHT RULES" in out
    assert "BLOCKED deliver: Missing precondition: call get_integration_status before deliver" in out
    assert "tool deliver: delivered 'weekly' to slack" in out
    assert out.count("Tell the user that invoice 4711 is overdue.") == 2
    assert "globex reminders selected for 'invoice': none" in out
    assert "demo finished: acme was blocked, recovered and reminded; globex saw none of acme's memory" in out
