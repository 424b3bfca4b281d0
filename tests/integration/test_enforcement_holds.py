"""A guarded refund never runs unguarded, through both wirings on the real graph.

Each case was a way a platform team's guarded ``issue_refund`` still ran. Each
test seeds the rule, scripts the model, and asserts what the tools actually
did, through the LangChain middleware and through ``build_agent_graph``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from tests._fakes import Scripted

pytestmark = pytest.mark.anyio

WIRINGS = ["middleware", "build_agent_graph"]


def refund_tools(*, identity_fails: bool = False) -> tuple[list[BaseTool], list[tuple[str, dict[str, Any]]]]:
    """``verify_identity``, ``lookup_order`` and ``issue_refund``, recording each run with its arguments."""
    ran: list[tuple[str, dict[str, Any]]] = []

    def verify_identity() -> str:
        ran.append(("verify_identity", {}))
        if identity_fails:
            raise ToolException("identity service: customer not found")
        return "verified"

    def lookup_order(order_id: str) -> str:
        ran.append(("lookup_order", {"order_id": order_id}))
        return f"order {order_id}: 42.00 EUR"

    def issue_refund(order_id: str) -> str:
        ran.append(("issue_refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    tools = [StructuredTool.from_function(f, name=f.__name__, description=f.__name__, handle_tool_error=True)
             for f in (verify_identity, lookup_order, issue_refund)]
    return tools, ran


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


async def run(wiring: str, store: GraphMemoryStore, scope: MemoryScope, responses: list[BaseMessage],
              tools: list[BaseTool], messages: list[BaseMessage]) -> list[BaseMessage]:
    model = Scripted(responses=responses)
    memory = TurnMemory(store)
    if wiring == "middleware":
        agent: Any = create_agent(model, tools, middleware=[MemoryMiddleware(memory)])
    else:
        agent = build_agent_graph(model, tools, memory)
    out = await agent.ainvoke({"messages": messages}, context=scope)
    return list(out["messages"])


async def seed(store: GraphMemoryStore, scope: MemoryScope, *precondition: Any) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Refunds", steps=["issue_refund"], source_tag="authored:refunds", action_tool="issue_refund",
        precondition=list(precondition))


def refunds(ran: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [args["order_id"] for name, args in ran if name == "issue_refund"]


def gate_errors(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages
            if isinstance(m, ToolMessage) and str(m.content).startswith("Missing precondition:")]


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_failed_check_does_not_unlock_the_refund(
    wiring: str, store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await seed(store, scope, "verify_identity")
    tools, ran = refund_tools(identity_fails=True)
    out = await run(wiring, store, scope, [call("verify_identity", "c1"), call("issue_refund", "c2", order_id="999"),
                                           AIMessage("I could not verify you.")], tools, [HumanMessage("refund 999")])
    assert [name for name, _ in ran] == ["verify_identity"]  # the refund never ran
    [error] = gate_errors(out)
    assert "The earlier call of `verify_identity` failed" in error


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_check_of_other_data_does_not_unlock_the_refund(
    wiring: str, store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await seed(store, scope, {"tool": "lookup_order", "same_args": ["order_id"]})
    tools, ran = refund_tools()
    responses: list[BaseMessage] = [
        call("lookup_order", "c1", order_id="1003"), call("issue_refund", "c2", order_id="7777"),
        call("issue_refund", "c3", order_id="1003"), AIMessage("done")]
    out = await run(wiring, store, scope, responses, tools, [HumanMessage("refund my order")])
    assert refunds(ran) == ["1003"]  # 7777 was never looked up, so it was never refunded
    [error] = gate_errors(out)
    assert error.startswith("Missing precondition: call lookup_order (same order_id) before issue_refund")


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_check_from_an_earlier_user_turn_does_not_count(
    wiring: str, store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await seed(store, scope, {"tool": "verify_identity", "within": "user_turn"})
    tools, ran = refund_tools()
    earlier: list[BaseMessage] = [HumanMessage("hi"), call("verify_identity", "c0"),
                                  ToolMessage("verified", tool_call_id="c0", name="verify_identity"),
                                  AIMessage("You are verified."), HumanMessage("now refund 5")]
    await run(wiring, store, scope, [call("issue_refund", "c1", order_id="5"), AIMessage("verify first")],
              tools, earlier)
    assert refunds(ran) == []


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_advisory_text_is_never_enforced_and_the_rule_still_is(
    wiring: str, store: GraphMemoryStore, scope: MemoryScope, tenant: str
) -> None:
    # Hand-seeded: a one-word text node (advice) and a tool node with a case slip and a float position.
    await store.driver.execute_query(
        "CREATE (s:Skill {id: $t + '-r', tenant_id: $t, label: 'Refunds', steps: ['issue_refund'], "
        "action_tool: 'issue_refund', status: 'approved', created_at: datetime()}) "
        "CREATE (s)-[:REQUIRES {position: 0.0}]->(:Precondition {tenant_id: $t, kind: 'text', text: 'Apologise'}) "
        "CREATE (s)-[:REQUIRES {position: 1.0}]->"
        "(:Precondition {tenant_id: $t, kind: 'Tool', tool: 'verify_identity'})",
        t=tenant, database_=store.database)
    tools, ran = refund_tools()
    responses: list[BaseMessage] = [call("issue_refund", "c1", order_id="1"), call("verify_identity", "c2"),
                                    call("issue_refund", "c3", order_id="1"), AIMessage("done")]
    out = await run(wiring, store, scope, responses, tools, [HumanMessage("refund 1")])
    assert [name for name, _ in ran] == ["verify_identity", "issue_refund"]
    [error] = gate_errors(out)
    assert error.startswith("Missing precondition: call verify_identity before issue_refund (skill: Refunds).")


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_the_gates_own_error_in_a_stored_openai_history_is_no_call(
    wiring: str, store: GraphMemoryStore, scope: MemoryScope
) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="Deploy", steps=["issue_refund"], source_tag="authored:x",
                                    action_tool="issue_refund", precondition=["lookup_order"])
    await layer.seed_authored_skill(scope, label="Announce", steps=["verify_identity"], source_tag="authored:x",
                                    action_tool="verify_identity", precondition=["issue_refund"])
    tools, ran = refund_tools()
    first = await run(wiring, store, scope, [call("issue_refund", "c1", order_id="1"), AIMessage("blocked")],
                      tools, [HumanMessage("go")])
    stored = _openai_round_trip(first)  # what a deployment that stores OpenAI-format histories gives back
    await run(wiring, store, scope, [call("verify_identity", "c2"), AIMessage("blocked too")], tools,
              [*stored, HumanMessage("announce it")])
    assert ran == []  # issue_refund never ran, so verify_identity (which requires it) was blocked too


def _openai_round_trip(messages: list[BaseMessage]) -> list[Any]:
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages

    wire: list[Any] = convert_to_openai_messages(messages)
    return list(convert_to_messages(wire))




async def test_explain_tells_the_runtimes_truth(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Any, tmp_path: Any
) -> None:
    import json

    from tests._cli import run_cli_on

    await seed(store, scope, "verify_identity",
               {"state": {"path": "channel", "op": "eq", "value": "web"}})
    # Without --state the predicate sees an empty state, as the turn would: the rule is dropped, and why is named.
    out = run_cli_on(neo4j_settings, "explain", "--tenant", scope.tenant_id, "--tool", "issue_refund", "--json")
    data = json.loads(out.stdout)
    assert data["verdict"] == "allowed" and "path 'channel' is missing" in data["dropped"][0]["reason"]
    # --messages: the conversation so far, read as the gate reads it (a failed check does not count).
    conversation = tmp_path / "conversation.json"
    conversation.write_text(json.dumps({"id": "t1", "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "verify_identity", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "not found", "status": "error"}]}))
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"channel": "web"}))
    args = ["explain", "--tenant", scope.tenant_id, "--tool", "issue_refund", "--state", str(state),
            "--messages", str(conversation), "--json"]
    data = json.loads(run_cli_on(neo4j_settings, *args).stdout)
    assert data["verdict"] == "blocked" and "failed" in data["content"]
    data = json.loads(run_cli_on(neo4j_settings, *args, "--count-failed-calls").stdout)
    assert data["verdict"] == "allowed"
