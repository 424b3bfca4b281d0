"""Each precondition kind, hand-seeded in its odd forms: gate, pre-flight, explain and doctor agree.

The node's ``kind`` decides how it is read: a one-word ``text`` node is advice,
never a tool; a case variant of ``kind`` or an integral float ``position`` is
read as meant; a node that cannot be read, a ``tool`` node holding a sentence
and an ``any`` node without a tool name keep their skill blocking (doctor says why).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory, create_precondition_gate_node
from symfonic_graph.skill_source import StoreSkillGetter
from tests._cli import run_cli_on
from tests._fakes import ai_calls
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

# (suffix, preconditions as an operator writes them, position expression, gate prefix or None when allowed,
#  pre-flight lines, doctor reports this skill)
CASES: list[tuple[str, str, str, str | None, list[str], bool]] = [
    ("text-word", "[{kind: 'text', text: 'review'}, {kind: 'tool', tool: 'k1_pre'}]", "i",
     "call k1_pre before k1_act", ["`k1_pre`"], False),
    ("tool-sentence", "[{kind: 'tool', tool: 'Verify identity now'}]", "i",
     "call a precondition that could not be read before k2_act", [], True),
    ("kind-case-float-position", "[{kind: 'Tool', tool: 'k3_pre'}]", "toFloat(i)",
     "call k3_pre before k3_act", ["`k3_pre`"], False),
    ("unknown-kind", "[{kind: 'tol', tool: 'k4_pre'}]", "i",
     "call a precondition that could not be read before k4_act", [], True),
    ("any", "[{kind: 'any', tools: ['k5_a', 'k5_b']}]", "i",
     "call k5_a or k5_b before k5_act", ["`k5_a` or `k5_b`"], False),
    ("same-args", "[{kind: 'tool', tool: 'k6_pre', same_args: ['order_id'], within: 'user_turn'}]", "i",
     "call k6_pre (same order_id) (after the user's latest message) before k6_act",
     ["`k6_pre` (same `order_id`) (after the user's latest message)"], False),
    ("any-without-names", "[{kind: 'any', tools: ['not a name']}]", "i",
     "call a precondition that could not be read before k7_act", [], True),
]


def _action(suffix: str) -> str:
    return f"k{[c[0] for c in CASES].index(suffix) + 1}_act"


@pytest.fixture
async def seeded(store: GraphMemoryStore, tenant: str) -> MemoryScope:
    for n, (suffix, preconditions, position, *_rest) in enumerate(CASES):
        await store.driver.execute_query(
            f"CREATE (s:Skill {{id: $t + '-{suffix}', tenant_id: $t, label: $label, steps: [$action], "
            f"action_tool: $action, status: 'approved', created_at: datetime() + duration({{seconds: {n}}})}}) "
            f"WITH s UNWIND range(0, size({preconditions}) - 1) AS i "
            f"WITH s, i, {preconditions}[i] AS p "
            f"CREATE (s)-[:REQUIRES {{position: {position}}}]->(n:Precondition) SET n = p, n.tenant_id = $t",
            t=tenant, label=suffix, action=_action(suffix), database_=store.database,
        )
    return MemoryScope(tenant)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_gate_preflight_explain_and_doctor_agree(
    store: GraphMemoryStore, seeded: MemoryScope, neo4j_settings: Neo4jSettings, case: tuple[Any, ...]
) -> None:
    suffix, _, _, gate_prefix, lines, reported = case
    action, scope = _action(suffix), seeded
    state = {"memory_scope": scope, "messages": [ai_calls((action, "c1"))]}
    for lookup in (TurnMemory(store).get_active_skills, StoreSkillGetter(store)):
        update = await create_precondition_gate_node(lookup)(state)
        if gate_prefix is None:
            assert update == {}, suffix
        else:
            [message] = update["messages"]
            assert message.content.startswith(f"Missing precondition: {gate_prefix} (skill: {suffix})."), \
                message.content

    block = (await TurnMemory(store).begin(scope)).preflight({})
    shown = [line for line in (block.content.splitlines() if block else []) if f"calling `{action}`" in line]
    assert shown == [f"- YOU MUST call {pre} BEFORE calling `{action}` (skill: {suffix})." for pre in lines]

    explained = run_cli_on(neo4j_settings, "explain", "--tenant", scope.tenant_id, "--tool", action, "--json")
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["verdict"] == ("allowed" if gate_prefix is None else "blocked")

    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
    findings = [f for f in json.loads(doctor.stdout) if f.get("node") == f"{scope.tenant_id}-{suffix}"]
    assert bool(findings) == reported, findings
