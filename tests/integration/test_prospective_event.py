"""Event triggers against a real Neo4j: offered once the conversation holds a matching successful call.

"When a refund is issued for order A-17, tell the user when it lands": stored
with ``set_trigger``, read through the graph, selected by the capability over
the conversation's calls, and shown by ``MemoryMiddleware`` in a real
``create_agent`` agent (only the chat model is scripted).
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.rules.events import CallResult
from symfonic_graph.triggers import GraphPendingTriggers, ProspectiveTriggerCapability
from tests._fakes import Scripted

pytestmark = pytest.mark.anyio

TASK = "Tell the user the refund for order A-17 lands in 3 to 5 business days."


def never(condition: str, cue: str) -> bool:
    return False


def refund(order: str, *, failed: bool = False, amount: object = 20) -> CallResult:
    return CallResult("issue_refund", {"order_id": order, "amount": amount}, failed, 1, "ok")


async def test_an_event_trigger_is_offered_on_its_matching_successful_call(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    tid = await layer.set_trigger(scope, task=TASK, on_tool="issue_refund", same_args={"order_id": "A-17"})
    anyone = await layer.set_trigger(scope, task="Ask whether the refund flow was clear.", on_tool="issue_refund")
    [stored, _] = await layer.get_pending(scope)
    assert (stored.kind, stored.on_tool, stored.same_args) == ("event", "issue_refund", '{"order_id": "A-17"}')

    calls: list[CallResult] = []
    capability = ProspectiveTriggerCapability(GraphPendingTriggers(store), never, scope, events_from=lambda _: calls)
    assert await capability.contribute({"prompt": "refund please"}) == []
    calls[:] = [refund("A-17", failed=True), CallResult("lookup_order", {"order_id": "A-17"}, False, 1)]
    assert await capability.contribute({"prompt": ""}) == []  # failed, or another tool: nothing
    calls[:] = [refund("B-2")]
    [only_any] = await capability.contribute({"prompt": ""})
    assert only_any.content == "## PENDING REMINDERS\n- Ask whether the refund flow was clear."
    calls[:] = [refund("B-2"), refund("A-17")]
    [both] = await capability.contribute({"prompt": ""})
    assert both.content == f"## PENDING REMINDERS\n- {TASK}\n- Ask whether the refund flow was clear."
    # selection is not acknowledgement; acknowledged, it is never offered again
    assert len(await capability.contribute({"prompt": ""})) == 1
    await layer.ack_trigger(scope, tid)
    await layer.cancel_trigger(scope, anyone)
    assert await capability.contribute({"prompt": ""}) == []
    # without events_from, an event trigger is never selected
    await layer.set_trigger(scope, task=TASK, on_tool="issue_refund")
    blind = ProspectiveTriggerCapability(GraphPendingTriggers(store), never, scope)
    assert await blind.contribute({"prompt": ""}) == []


async def test_bad_event_input_names_the_field(store: GraphMemoryStore, tenant: str) -> None:
    layer, scope = ProspectiveLayer(store), MemoryScope(tenant)
    for fields, message in [
        ({"kind": "event"}, "on_tool: an event trigger needs the tool"),
        ({"on_tool": "issue refund now"}, "on_tool: must be a tool name"),
        ({"on_tool": "issue_refund", "same_args": {"order_id": ["A-17"]}}, "same_args.order_id: must be a string"),
        ({"on_tool": "issue_refund", "same_args": {}}, "same_args: must be a non-empty mapping"),
        ({"condition": "c", "same_args": {"a": 1}}, "same_args: needs on_tool"),
        ({"condition": "c", "kind": "text", "on_tool": "x"}, "on_tool: only an event trigger has a tool"),
    ]:
        with pytest.raises(ValidationError, match="^" + message):
            await layer.set_trigger(scope, task="x", **fields)
    assert await layer.get_pending(scope) == []


def _issue_refund(order_id: str) -> str:
    return f"refund issued for {order_id}"


async def test_the_middleware_offers_the_reminder_after_the_call_in_the_same_run(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant, "user-7")
    await ProspectiveLayer(store).set_trigger(scope, task=TASK, on_tool="issue_refund",
                                              same_args={"order_id": "A-17"})
    tool = StructuredTool.from_function(_issue_refund, name="issue_refund", description="Issue a refund.")
    model = Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": "B-2"}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": "A-17"}, "id": "c2"}]),
        AIMessage("Both refunds are issued."),
    ])
    agent = create_agent(model, [tool], middleware=[MemoryMiddleware(TurnMemory(store))])  # no evaluator needed
    await agent.ainvoke({"messages": [HumanMessage("refund B-2 and A-17")]}, context=scope)

    shown = [str(call[-1].content) for call in model.seen]
    assert shown[0] == "refund B-2 and A-17"
    assert "PENDING REMINDERS" not in shown[1]  # B-2's refund is not the one
    assert shown[2] == f"## PENDING REMINDERS\n- {TASK}"  # right after A-17's result, in the same run


async def test_a_seed_file_writes_event_triggers(store: GraphMemoryStore, tenant: str, tmp_path: object) -> None:
    from pathlib import Path

    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, plan_seed

    path = Path(str(tmp_path)) / "events.yaml"
    path.write_text(f"triggers:\n  - task: {TASK}\n    on_tool: issue_refund\n    same_args: {{order_id: A-17}}\n")
    scope = MemoryScope(tenant)
    await apply_seed(store, plan_seed(load_seed_file(path), scope))
    await apply_seed(store, plan_seed(load_seed_file(path), scope))  # keyed by content: seeded again, replaced
    [trigger] = await ProspectiveLayer(store).get_pending(scope)
    assert (trigger.kind, trigger.on_tool, trigger.same_args) == ("event", "issue_refund", '{"order_id": "A-17"}')


async def test_build_agent_graph_offers_due_and_event_reminders_without_an_evaluator(
    store: GraphMemoryStore, tenant: str
) -> None:
    from symfonic_graph.langgraph import build_agent_graph

    scope = MemoryScope(tenant, "user-7")
    layer = ProspectiveLayer(store)
    await layer.set_trigger(scope, task="Remind them the rent is due.", due_at=1_000_000)  # long due
    await layer.set_trigger(scope, task=TASK, on_tool="issue_refund", same_args={"order_id": "A-17"})
    tool = StructuredTool.from_function(_issue_refund, name="issue_refund", description="Issue a refund.")
    model = Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": "A-17"}, "id": "c1"}]),
        AIMessage("Done."),
    ])
    graph = build_agent_graph(model, [tool], TurnMemory(store))
    out = await graph.ainvoke({"messages": [HumanMessage("refund A-17")]}, context=scope)
    assert str(model.seen[0][-1].content) == "## PENDING REMINDERS\n- Remind them the rent is due."
    assert str(model.seen[1][-1].content) == f"## PENDING REMINDERS\n- Remind them the rent is due.\n- {TASK}"
    assert not any("PENDING REMINDERS" in str(m.content) for m in out["messages"])  # never in the state
