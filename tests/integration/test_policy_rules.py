"""Rules over results, arguments and counts, end to end: written three ways, read back, enforced by both wirings.

Only the chat model is scripted; the tools are real functions returning JSON,
and each test asserts what the user sees: whether ``cancel_reservation`` ran.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.langgraph import build_agent_graph
from tests._cli import run_cli_on
from tests._fakes import Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

NOW = datetime(2024, 5, 15, 15, 0, tzinfo=UTC)
RESERVATIONS = {
    "NEW01": {"reservation_id": "NEW01", "cabin": "economy", "insurance": "no", "created_at": "2024-05-15T09:00:00"},
    "BIZ02": {"reservation_id": "BIZ02", "cabin": "business", "insurance": "no", "created_at": "2024-05-01T09:00:00"},
    "OLD03": {"reservation_id": "OLD03", "cabin": "economy", "insurance": "no", "created_at": "2024-05-01T09:00:00"},
}
WITHIN_24H = "Only reservations booked within 24 hours, business, or insured can be cancelled."
REASONS = "The reason must be change of plan or airline cancelled."
PRECONDITION: list[Any] = [
    {"any": [
        {"fact": {"tool": "get_reservation_details", "same_args": ["reservation_id"],
                  "where": 'timestamp(result.created_at) > now - duration("24h")', "message": WITHIN_24H}},
        {"fact": {"tool": "get_reservation_details", "same_args": ["reservation_id"],
                  "where": 'result.cabin == "business" || result.insurance == "yes"', "message": WITHIN_24H}},
    ]},
    {"check": {"where": 'args.reason in ["change_of_plan", "airline_cancelled"]', "message": REASONS}},
    {"limit": {"max_calls": 1, "message": "One cancellation per conversation."}},
]
SEED_YAML = """
tenant: {tenant}
skills:
  - identifier: cancellations
    label: Cancellations
    steps: [cancel_reservation]
    action_tool: cancel_reservation
    source_tag: authored:t
    precondition: {precondition}
"""


def _tools() -> tuple[list[StructuredTool], list[str]]:
    cancelled: list[str] = []

    def get_reservation_details(reservation_id: str) -> str:
        return json.dumps(RESERVATIONS.get(reservation_id, {}))

    def cancel_reservation(reservation_id: str, reason: str) -> str:
        cancelled.append(reservation_id)
        return json.dumps({"reservation_id": reservation_id, "status": "cancelled"})

    return [StructuredTool.from_function(get_reservation_details, description="Read a reservation."),
            StructuredTool.from_function(cancel_reservation, description="Cancel a reservation.")], cancelled


def _call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def _script(reservation: str, reason: str = "change_of_plan", *, read: bool = True, twice: bool = False) -> Scripted:
    cancel = [_call("cancel_reservation", "c2", reservation_id=reservation, reason=reason)]
    if twice:
        cancel.append(_call("cancel_reservation", "c3", reservation_id=reservation, reason=reason))
    steps = [AIMessage("", tool_calls=[_call("get_reservation_details", "c1", reservation_id=reservation)])] if read \
        else []
    return Scripted(responses=[*steps, AIMessage("", tool_calls=cancel), AIMessage("done")])


async def _seed(how: str, store: GraphMemoryStore, scope: MemoryScope, settings: Neo4jSettings, tmp: Path) -> None:
    if how == "api":
        await ProceduralLayer(store).seed_authored_skill(
            scope, label="Cancellations", steps=["cancel_reservation"], source_tag="authored:t",
            action_tool="cancel_reservation", precondition=PRECONDITION, identifier="cancellations")
    elif how == "seed-file":
        path = tmp / "policy.yaml"
        path.write_text(SEED_YAML.format(tenant=scope.tenant_id, precondition=json.dumps(PRECONDITION)), "utf-8")
        done = run_cli_on(settings, "seed", str(path))
        assert done.returncode == 0, done.stderr
    else:  # plain Cypher, as graph-model.md documents the native properties
        [any_of, check, limit] = PRECONDITION
        await store.driver.execute_query(
            "CREATE (s:Skill {id: $t + '-cancel', tenant_id: $t, label: 'Cancellations', steps: ['cancel_reservation'],"
            " action_tool: 'cancel_reservation', status: 'approved', created_at: datetime()}) "
            "CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'any', tools: [],"
            "  alternatives: $alternatives}) "
            "CREATE (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: $t, kind: 'check', where: $where,"
            "  message: $reasons}) "
            "CREATE (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: $t, kind: 'limit', max_calls: 1,"
            "  message: $once}) "
            "MERGE (c:SymfonicCatalog {tenant_id: $t}) SET c.version = coalesce(c.version, 0) + 1",
            t=scope.tenant_id, alternatives=json.dumps(any_of["any"]), where=check["check"]["where"],
            reasons=REASONS, once=limit["limit"]["message"], database_=store.database)


def _wiring(kind: str, model: Scripted, tools: list[Any], memory: TurnMemory) -> Any:
    if kind == "middleware":
        return create_agent(model, tools, middleware=[MemoryMiddleware(memory)])
    return build_agent_graph(model, tools, memory)


def _answers(out: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("how", ["api", "seed-file", "cypher"])
@pytest.mark.parametrize("wiring", ["middleware", "agent-graph"])
async def test_a_policy_written_any_way_lets_the_eligible_cancel_run_and_refuses_the_rest(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Neo4jSettings, tmp_path: Path, how: str,
    wiring: str,
) -> None:
    await _seed(how, store, scope, neo4j_settings, tmp_path)
    memory = TurnMemory(store, wall_clock=NOW.timestamp)
    cases = [  # (script, cancelled, the answer to c2 starts with)
        (_script("NEW01"), ["NEW01"], None),  # booked 6 h ago
        (_script("BIZ02"), ["BIZ02"], None),  # business
        (_script("OLD03"), [], f"Not allowed: {WITHIN_24H}"),  # old economy: no further call helps
        (_script("NEW01", "found_cheaper"), [], f"Not allowed: {REASONS}"),  # the action's own argument
        (_script("NEW01", read=False), [], "Missing precondition: call get_reservation_details (same reservation_id)"),
        (_script("NEW01", twice=True), ["NEW01"], None),  # two cancels in one batch: the limit lets one run
    ]
    for model, expected, refusal in cases:
        tools, cancelled = _tools()
        out = await _wiring(wiring, model, tools, memory).ainvoke(
            {"messages": [HumanMessage("cancel my trip")]}, context=scope)
        assert cancelled == expected, (how, wiring, expected)
        answers = _answers(out)
        if refusal is None:
            assert answers["c2"].status != "error", answers["c2"].content
        else:
            assert answers["c2"].status == "error" and str(answers["c2"].content).startswith(refusal), \
                answers["c2"].content
        if "c3" in answers:
            assert str(answers["c3"].content).startswith("Not allowed: One cancellation per conversation.")


async def test_the_clock_the_rules_read_is_the_turn_memory_wall_clock(store: GraphMemoryStore,
                                                                       scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Cancellations", steps=["cancel_reservation"], source_tag="authored:t",
        action_tool="cancel_reservation", precondition=PRECONDITION[:1])
    for clock, expected in ((NOW.timestamp, ["NEW01"]), (lambda: NOW.timestamp() + 86_400, [])):
        tools, cancelled = _tools()
        memory = TurnMemory(store, wall_clock=clock)
        agent = create_agent(_script("NEW01"), tools, middleware=[MemoryMiddleware(memory)])
        await agent.ainvoke({"messages": [HumanMessage("cancel")]}, context=scope)
        assert cancelled == expected
    assert time.time() > NOW.timestamp()  # the default clock is today's: NEW01 is long past 24 h


async def test_a_rule_whose_expression_does_not_compile_is_refused_on_write_and_blocks_when_hand_seeded(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Neo4jSettings
) -> None:
    with pytest.raises(ValidationError, match=r"precondition\[0\]\.check\.where: does not compile as CEL"):
        await ProceduralLayer(store).seed_authored_skill(
            scope, label="Broken", steps=["cancel_reservation"], source_tag="authored:t",
            action_tool="cancel_reservation", precondition=[{"check": {"where": "args.reason in ["}}])
    records, _, _ = await store.driver.execute_query("MATCH (n {tenant_id: $t}) RETURN count(n) AS n",
                                                     t=scope.tenant_id, database_=store.database)
    assert records[0]["n"] == 0  # nothing written

    await store.driver.execute_query(
        "CREATE (s:Skill {id: $t + '-broken', tenant_id: $t, label: 'Broken', steps: ['cancel_reservation'],"
        " action_tool: 'cancel_reservation', status: 'approved', created_at: datetime()}) "
        "CREATE (s)-[:REQUIRES {position: 0}]->"
        "(:Precondition {tenant_id: $t, kind: 'check', where: 'args.reason in ['})",
        t=scope.tenant_id, database_=store.database)
    tools, cancelled = _tools()
    agent = create_agent(_script("NEW01"), tools, middleware=[MemoryMiddleware(TurnMemory(store))])
    out = await agent.ainvoke({"messages": [HumanMessage("cancel")]}, context=scope)
    assert cancelled == [] and _answers(out)["c2"].status == "error"
    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
    findings = [f for f in json.loads(doctor.stdout) if f.get("node") == f"{scope.tenant_id}-broken"]
    assert findings and "does not compile as CEL" in json.dumps(findings), doctor.stdout
