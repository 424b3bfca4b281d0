"""A misconfigured state predicate, hand-seeded in Cypher, keeps its skill blocking on the real graph.

``op: 'equals'`` (no such op) used to drop the whole skill, so ``issue_refund``
ran without its ``lookup_order`` while ``doctor`` said the predicate "fails
closed". Now the skill applies whatever the state, its action never runs, the
model is told that a misconfigured rule blocks the tool, and doctor says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory
from symfonic_graph.langgraph import build_agent_graph
from tests._cli import run_cli_on
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

# (name, the state node's properties as an operator might write them)
MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("unknown-op", {"path": "channel", "op": "equals", "value": "web"}),
    ("missing-value", {"path": "channel", "op": "eq"}),
    ("in-scalar", {"path": "channel", "op": "in", "value": "web"}),
    ("path-not-string", {"path": 7, "op": "eq", "value": "web"}),
]


async def _seed(store: GraphMemoryStore, scope: MemoryScope, state: dict[str, Any]) -> None:
    await store.driver.execute_query(
        """
        CREATE (s:Skill {id: $t + '-refunds', tenant_id: $t, label: 'Refunds', steps: ['issue_refund'],
                         action_tool: 'issue_refund', context: '', status: 'approved', active: true,
                         source: 'authored:cypher', created_at: datetime()})
        CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'lookup_order'})
        CREATE (s)-[:REQUIRES {position: 1}]->(p:Precondition {tenant_id: $t, kind: 'state'})
        SET p += $state
        MERGE (c:SymfonicCatalog {tenant_id: $t}) ON CREATE SET c.version = 0 SET c.version = c.version + 1
        """,
        t=scope.tenant_id, state=state, database_=store.database,
    )


@pytest.mark.parametrize(("name", "state"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_the_guarded_tool_of_a_misconfigured_rule_never_runs(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Neo4jSettings, name: str, state: dict[str, Any]
) -> None:
    await _seed(store, scope, state)
    tools, executed = recording_tools("lookup_order", "issue_refund")
    model = Scripted(responses=[ai_calls(("lookup_order", "c1")), ai_calls(("issue_refund", "c2")),
                                AIMessage("I will ask an operator.")])
    out = await build_agent_graph(model, tools, TurnMemory(store)).ainvoke(
        {"messages": [HumanMessage("refund order 7")]}, context=scope)
    assert executed == ["lookup_order"], name  # issue_refund never ran, although lookup_order did
    [refused] = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert refused.tool_call_id == "c2"
    assert "a misconfigured rule blocks this tool; ask an operator" in str(refused.content)
    assert_every_call_answered(model)

    if name == "unknown-op":  # doctor tells the operator what happens, truthfully
        doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
        [finding] = [f for f in json.loads(doctor.stdout) if f["node"] == f"{scope.tenant_id}-refunds"]
        assert finding["problem"].startswith("precondition[1].op: unknown op 'equals': a misconfigured state")
        assert "blocks its action" in finding["problem"] and "never holds" not in finding["problem"]
