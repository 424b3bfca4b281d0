"""A tool named as providers allow (``issue-refund``) is guarded on the real graph, however it was seeded.

Seeded through the library and hand-seeded in plain Cypher, a live agent
(``build_agent_graph``, scripted model, real tools) is refused ``issue-refund``
until ``verify-identity`` has run, then runs it. ``rules lint`` reads the same
names; a hand-seeded ``action_tool`` that is no tool name is an ERROR for lint
and a finding for doctor, never silently unguarded.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langgraph import build_agent_graph
from tests._cli import run_cli_on
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
MISSING = "Missing precondition: call verify-identity before issue-refund (skill: Refunds)."


async def _seed_with_layer(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Refunds", steps=["issue-refund"], source_tag="authored:t", action_tool="issue-refund",
        precondition=["verify-identity"])


async def _seed_with_cypher(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await store.driver.execute_query(
        """
        CREATE (s:Skill {id: $t + '-refunds', tenant_id: $t, label: 'Refunds', steps: ['issue-refund'],
                         action_tool: 'issue-refund', context: '', status: 'approved', active: true,
                         source: 'authored:cypher', created_at: datetime()})
        CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'verify-identity'})
        MERGE (c:SymfonicCatalog {tenant_id: $t}) ON CREATE SET c.version = 0 SET c.version = c.version + 1
        """,
        t=scope.tenant_id, database_=store.database,
    )


@pytest.fixture(params=["layer", "cypher"])
async def seeded(request: pytest.FixtureRequest, store: GraphMemoryStore, scope: MemoryScope) -> MemoryScope:
    await (_seed_with_layer if request.param == "layer" else _seed_with_cypher)(store, scope)
    return scope


async def test_a_live_agent_is_refused_issue_refund_until_verify_identity_ran(
    store: GraphMemoryStore, seeded: MemoryScope
) -> None:
    tools, executed = recording_tools("issue-refund", "verify-identity")
    model = Scripted(responses=[ai_calls(("issue-refund", "c1")), ai_calls(("verify-identity", "c2")),
                                ai_calls(("issue-refund", "c3")), AIMessage("done")])
    out = await build_agent_graph(model, tools, TurnMemory(store)).ainvoke(
        {"messages": [HumanMessage("refund order 7")]}, context=seeded)
    assert executed == ["verify-identity", "issue-refund"]  # the first call never ran
    [refused] = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert refused.tool_call_id == "c1" and str(refused.content).startswith(MISSING)
    system = str(model.seen[0][0].content)
    assert "- YOU MUST call `verify-identity` BEFORE calling `issue-refund` (skill: Refunds)." in system
    assert_every_call_answered(model)


async def test_a_name_no_provider_accepts_is_refused_on_write(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    for action, precondition, field in [("issue refund", ["verify-identity"], "action_tool"),
                                        ("issue-refund", [{"tool": "verify identity"}], "precondition[0].tool"),
                                        ("issue-refund", ["Verify."], "precondition[0]"),
                                        ("x" * 129, None, "action_tool")]:
        with pytest.raises(ValidationError) as info:
            await layer.seed_authored_skill(scope, label="Refunds", steps=["refund"], source_tag="authored:t",
                                            action_tool=action, precondition=precondition)
        assert info.value.field == field
    assert await layer.query_skills(scope) == []  # nothing was written


async def test_rules_lint_reads_the_names_providers_accept(
    store: GraphMemoryStore, seeded: MemoryScope, neo4j_settings: Neo4jSettings
) -> None:
    t = seeded.tenant_id
    fits = run_cli_on(neo4j_settings, "rules", "lint", "--tenant", t, "--tools", "issue-refund,verify-identity,lookup")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert fits.stdout.startswith("no problems found")
    lacks = run_cli_on(neo4j_settings, "rules", "lint", "--tenant", t, "--tools", "issue-refund,lookup")
    assert lacks.returncode == 1
    assert lacks.stdout.startswith("ERROR Refunds: precondition tool `verify-identity` is not among the agent's tools")


async def test_an_unguardable_hand_seeded_action_tool_is_a_lint_error_and_a_doctor_finding(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Neo4jSettings
) -> None:
    await store.driver.execute_query(
        """
        CREATE (s:Skill {id: $t + '-spaced', tenant_id: $t, label: 'Spaced', steps: ['Refund the order'],
                         action_tool: 'issue refund', context: '', status: 'approved', active: true,
                         source: 'authored:cypher', created_at: datetime()})
        CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'verify-identity'})
        """,
        t=scope.tenant_id, database_=store.database,
    )
    lint = run_cli_on(neo4j_settings, "rules", "lint", "--tenant", scope.tenant_id, "--json", "--tools",
                "issue refund,issue-refund,issue_refund,verify-identity")
    assert lint.returncode == 1, lint.stdout + lint.stderr
    [finding] = json.loads(lint.stdout)
    assert finding["level"] == "ERROR" and finding["code"] == "action_tool_not_a_tool_name"
    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
    problems = [f["problem"] for f in json.loads(doctor.stdout) if f["node"] == f"{scope.tenant_id}-spaced"]
    assert any(p.startswith("action_tool: 'issue refund' is not a tool name") for p in problems), problems
    assert any("the gate ignores this skill" in p for p in problems), problems  # and it guards nothing
