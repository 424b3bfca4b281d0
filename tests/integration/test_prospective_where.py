"""Event triggers' ``where`` through a real Neo4j: a CEL expression over the call's ``result`` and ``call``.

"When the refund for order A-17 is issued (not merely requested), tell the
user when it lands": the expression is compiled when written (a bad one is
refused naming ``where`` on every path), stored on the node, read by the turn,
evaluated over the matching call, and shown by ``MemoryMiddleware`` in a real
``create_agent`` agent (only the chat model is scripted).
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.ops.doctor import diagnose
from symfonic_graph.rules.events import CallResult
from symfonic_graph.triggers import GraphPendingTriggers, ProspectiveTriggerCapability
from tests._cli import run_cli_on
from tests._fakes import Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

TASK = "Tell the user the refund for order A-17 lands in 3 to 5 business days."
ISSUED = 'result.status == "issued" && call.order_id == "A-17"'


def never(condition: str, cue: str) -> bool:
    return False


def refund(order: str, status: object) -> CallResult:
    return CallResult("issue_refund", {"order_id": order}, False, 1, json.dumps({"status": status}))


async def test_where_is_stored_read_and_evaluated_over_result_and_call(
    store: GraphMemoryStore, tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    tid = await layer.set_trigger(scope, task=TASK, on_tool="issue_refund", where=ISSUED)
    [stored] = await layer.get_pending(scope)
    assert (stored.kind, stored.on_tool, stored.where) == ("event", "issue_refund", ISSUED)

    calls: list[CallResult] = []
    capability = ProspectiveTriggerCapability(GraphPendingTriggers(store), never, scope, events_from=lambda _: calls)
    calls[:] = [refund("A-17", "requested"), refund("B-2", "issued")]
    assert await capability.contribute({"prompt": ""}) == []  # neither satisfies the expression
    calls[:] = [refund("B-2", "issued"), refund("A-17", "issued")]
    [block] = await capability.contribute({"prompt": ""})
    assert block.content == f"## PENDING REMINDERS\n- {TASK}"

    # an evaluation error (the result has no status) is no offer on that call, and a WARNING names the trigger
    calls[:] = [CallResult("issue_refund", {"order_id": "A-17"}, False, 1, "refund queued")]
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.triggers"):
        assert await capability.contribute({"prompt": ""}) == []
    assert any(tid in r.getMessage() and "where" in r.getMessage() for r in caplog.records)
    # ... while another call of the same conversation that satisfies it still fires it
    calls.append(refund("A-17", "issued"))
    assert len(await capability.contribute({"prompt": ""})) == 1


async def test_a_bad_where_is_refused_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    layer, scope = ProspectiveLayer(store), MemoryScope(tenant)
    for fields, message in [
        ({"on_tool": "issue_refund", "where": "result.status =="}, "where: does not compile as CEL"),
        ({"on_tool": "issue_refund", "where": ""}, "where: is empty"),
        ({"on_tool": "issue_refund", "where": 3}, "where: must be a CEL expression"),
        ({"condition": "c", "where": "true"}, "where: needs on_tool"),
        ({"due_in": 60, "where": "true"}, "where: needs on_tool"),
    ]:
        with pytest.raises(ValidationError, match="^" + message):
            await layer.set_trigger(scope, task="x", **fields)
    assert await layer.get_pending(scope) == []


async def test_a_seed_file_writes_where_and_refuses_a_bad_one(
    store: GraphMemoryStore, tenant: str, tmp_path: Path
) -> None:
    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, count_changes, plan_seed

    scope = MemoryScope(tenant)
    path = tmp_path / "events.yaml"
    path.write_text(f"triggers:\n  - task: {TASK}\n    on_tool: issue_refund\n    where: '{ISSUED}'\n")
    await apply_seed(store, plan_seed(load_seed_file(path), scope))
    [trigger] = await ProspectiveLayer(store).get_pending(scope)
    assert (trigger.on_tool, trigger.where) == ("issue_refund", ISSUED)
    [counts] = await count_changes(store, plan_seed(load_seed_file(path), scope))
    assert counts["triggers"].get("unchanged") == 1

    bad = tmp_path / "bad.yaml"
    bad.write_text("triggers:\n  - task: x\n    on_tool: issue_refund\n    where: 'result.status =='\n")
    with pytest.raises(ValidationError, match=r"triggers\[0\]\.where: does not compile as CEL"):
        plan_seed(load_seed_file(bad), scope)


def _issue_refund(order_id: str) -> str:
    return json.dumps({"status": "issued" if order_id == "A-17" else "requested", "order_id": order_id})


async def test_the_middleware_offers_it_only_after_a_call_whose_result_satisfies_where(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant, "user-7")
    await ProspectiveLayer(store).set_trigger(scope, task=TASK, on_tool="issue_refund",
                                              where='result.status == "issued"')
    tool = StructuredTool.from_function(_issue_refund, name="issue_refund", description="Issue a refund.")
    model = Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": "B-2"}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": "A-17"}, "id": "c2"}]),
        AIMessage("Done."),
    ])
    agent = create_agent(model, [tool], middleware=[MemoryMiddleware(TurnMemory(store))])
    await agent.ainvoke({"messages": [HumanMessage("refund B-2 and A-17")]}, context=scope)

    shown = [str(call[-1].content) for call in model.seen]
    assert "PENDING REMINDERS" not in shown[1]  # B-2's refund was only requested
    assert shown[2] == f"## PENDING REMINDERS\n- {TASK}"


async def test_doctor_reports_a_stored_where_that_does_not_compile(store: GraphMemoryStore, tenant: str) -> None:
    good = await ProspectiveLayer(store).set_trigger(MemoryScope(tenant), task="x", on_tool="t", where="true")
    bad = f"seed-{uuid.uuid4().hex}"
    await store.driver.execute_query(
        "CREATE (:Trigger {id: $id, tenant_id: $tenant, condition: '', task: 'x', status: 'pending', kind: 'event', "
        "on_tool: 't', where: 'result.x ==', created_at: datetime()})", id=bad, tenant=tenant,
        database_=store.database)
    findings = await diagnose(store, tenant)
    assert any(f.node == bad and f.problem.startswith("where does not compile as CEL") for f in findings), findings
    assert not [f for f in findings if f.node == good]


def test_the_cli_adds_a_where(neo4j_settings: Neo4jSettings, _schema: None, tenant: str) -> None:
    scope = ["--tenant", tenant, "--namespace", "u1"]

    def cli(*args: str) -> Any:
        result = run_cli_on(neo4j_settings, "triggers", *args, *scope, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    tid = cli("add", "--task", TASK, "--on-tool", "issue_refund", "--where", ISSUED)["id"]
    assert [(t["id"], t["where"]) for t in cli("list")] == [(tid, ISSUED)]
    bad = run_cli_on(neo4j_settings, "triggers", "add", "--task", "x", "--on-tool", "t", "--where", "a ==", *scope)
    assert bad.returncode != 0 and "where: does not compile as CEL" in bad.stderr
