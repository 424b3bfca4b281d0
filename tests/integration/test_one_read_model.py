"""Every documented skill shape, seeded by hand, through every read path.

One tenant holds each shape an operator may write with plain Cypher: optional
properties absent or written as null, the odd action-tool forms, extra domain
properties, no label, a state predicate, a text item, a namespaced skill.
TurnMemory, ``query_skills``, the gate lookups, ``skills list``, ``explain``
and ``doctor`` must all read the same skills, and the gate must decide the
same way on every path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.preconditions import action_tool_of
from symfonic_graph.skill_source import StoreSkillGetter
from tests._cli import run_cli_on
from tests._fakes import ai_calls
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

# (id suffix, skill properties as an operator writes them, preconditions, guarded tool, required tools)
SHAPES: list[tuple[str, str, str, str, list[str]]] = [
    ("minimal", "label: 'Minimal', steps: ['m_act'], action_tool: 'm_act', status: 'approved'",
     "[{kind: 'tool', tool: 'm_pre'}]", "m_act", ["m_pre"]),
    ("nulls", "label: 'Nulls', steps: ['n_act'], action_tool: 'n_act', status: 'approved', context: null, "
              "active: null, namespace: null, identifier: null, source: null, created_at: null",
     "[{kind: 'tool', tool: 'n_pre'}]", "n_act", ["n_pre"]),
    ("args-action", "label: 'Args', steps: ['x'], action_tool: 'a_act(env=prod)', status: 'approved', "
                    "context: 'deploys to prod', active: true",
     "[{kind: 'tool', tool: 'a_pre(id=<x>)'}]", "a_act", ["a_pre"]),
    ("free-text-action", "label: 'Free text', steps: ['f_act'], action_tool: 'Ships the release to users', "
                         "status: 'approved'",
     "[{kind: 'tool', tool: 'f_pre'}]", "f_act", ["f_pre"]),
    ("steps-only", "label: 'Steps only', steps: ['s_act(x=1)', 'then report'], status: 'approved'",
     "[{kind: 'tool', tool: 's_pre'}]", "s_act", ["s_pre"]),
    ("extra-props", "label: 'Extra', steps: ['e_act'], action_tool: 'e_act', status: 'approved', owner: 'ops', "
                    "priority: 3, tags: ['billing', 'eu']",
     "[{kind: 'tool', tool: 'e_pre'}]", "e_act", ["e_pre"]),
    ("no-label", "steps: ['u_act'], action_tool: 'u_act', status: 'approved'",
     "[{kind: 'tool', tool: 'u_pre'}]", "u_act", ["u_pre"]),
    ("state", "label: 'Slack only', steps: ['p_act'], action_tool: 'p_act', status: 'approved'",
     "[{kind: 'tool', tool: 'p_pre'}, {kind: 'state', path: 'channel', op: 'eq', value: 'slack'}]",
     "p_act", ["p_pre"]),
    ("text", "label: 'Polite', steps: ['t_act'], action_tool: 't_act', status: 'approved'",
     "[{kind: 'text', text: 'Greet the user first.'}, {kind: 'tool', tool: 't_pre'}]", "t_act", ["t_pre"]),
    ("namespaced", "label: 'Mine', steps: ['ns_act'], action_tool: 'ns_act', status: 'approved', "
                   "namespace: 'user-1'",
     "[{kind: 'tool', tool: 'ns_pre'}]", "ns_act", ["ns_pre"]),
]
STATE = {"channel": "slack"}


async def _seed_by_hand(store: GraphMemoryStore, tenant: str) -> None:
    for n, (suffix, props, preconditions, _, _) in enumerate(SHAPES):
        created = f", created_at: datetime() + duration({{seconds: {n}}})" if suffix != "nulls" else ""
        await store.driver.execute_query(
            f"CREATE (s:Skill {{id: $t + '-{suffix}', tenant_id: $t, {props}{created}}}) "
            f"WITH s UNWIND range(0, size({preconditions}) - 1) AS i "
            f"WITH s, i, {preconditions}[i] AS p "
            "CREATE (s)-[:REQUIRES {position: i}]->(n:Precondition) SET n = p, n.tenant_id = $t",
            t=tenant, database_=store.database,
        )


@pytest.fixture
async def hand_seeded(store: GraphMemoryStore, tenant: str) -> MemoryScope:
    await _seed_by_hand(store, tenant)
    return MemoryScope(tenant, "user-1")


def _summary(skills: Any) -> list[tuple[str, str | None, Any]]:
    return [(s.id, action_tool_of(s), s.metadata) for s in skills]


async def test_every_read_path_returns_the_same_skills(
    store: GraphMemoryStore, hand_seeded: MemoryScope, neo4j_settings: Neo4jSettings
) -> None:
    scope = hand_seeded
    state = {"memory_scope": scope}
    paths = {
        "TurnMemory.begin": (await TurnMemory(store).begin(scope)).skills,
        "query_skills": await ProceduralLayer(store).query_skills(scope),
        "TurnMemory.get_active_skills": await TurnMemory(store).get_active_skills(state),
        "StoreSkillGetter": await StoreSkillGetter(store)(state),
    }
    expected = _summary(paths["TurnMemory.begin"])
    # created_at orders the catalog; the shape written without it comes last
    assert [guards for _, guards, _ in expected] == [s[3] for s in SHAPES if s[0] != "nulls"] + ["n_act"]
    for name, skills in paths.items():
        assert _summary(skills) == expected, name

    listed = run_cli_on(neo4j_settings, "skills", "list", "--tenant", scope.tenant_id, "--namespace", "user-1",
                        "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["guards"], r["precondition"]) for r in rows] == [
        (i, g, m["precondition"]) for i, g, m in expected
    ]
    unnamed = next(r for r in rows if r["id"].endswith("-no-label"))
    assert unnamed["label"] == "" and unnamed["tenant_id"] == scope.tenant_id

    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
    assert doctor.returncode == 0, doctor.stderr
    skipped = [f for f in json.loads(doctor.stdout) if f["check"] in ("bad_skills", "ignored_skills")]
    # the one odd form doctor reports: an action_tool that is no tool name (the gate guards steps[0] instead)
    assert [(f["node"].rsplit("-", 3)[-3:], f["problem"].split(" is not")[0]) for f in skipped] == [
        (["free", "text", "action"], "action_tool: 'Ships the release to users'")]


@pytest.mark.parametrize(("suffix", "tool", "required"), [(s[0], s[3], s[4]) for s in SHAPES])
async def test_the_gate_decides_the_same_on_every_path(
    store: GraphMemoryStore, hand_seeded: MemoryScope, neo4j_settings: Neo4jSettings,
    suffix: str, tool: str, required: list[str],
) -> None:
    scope = hand_seeded
    state = {"memory_scope": scope, **STATE, "messages": [ai_calls((tool, "c1"))]}
    label = next(s for s in SHAPES if s[0] == suffix)[1].split("label: '")[-1].split("'")[0]
    expected = f"Missing precondition: call {', '.join(required)} before {tool}"
    for name, lookup in [("TurnMemory", TurnMemory(store).get_active_skills), ("StoreSkillGetter",
                                                                                StoreSkillGetter(store))]:
        update = await create_precondition_gate_node(lookup)(state)
        [message] = update["messages"]
        assert message.content.startswith(expected), (name, message.content)
        if "label: '" in next(s for s in SHAPES if s[0] == suffix)[1]:
            assert f"(skill: {label})" in message.content

    narrowed = await ProceduralLayer(store).query_skills(scope, action_tool=tool)
    assert [s.id for s in narrowed] == [f"{scope.tenant_id}-{suffix}"]
    assert explain_tool_call(narrowed, tool, state=STATE).missing == tuple(required)

    if suffix in ("args-action", "free-text-action", "steps-only"):  # the odd forms, through the CLI too
        explained = run_cli_on(neo4j_settings, "explain", "--tenant", scope.tenant_id, "--namespace", "user-1",
                         "--tool", tool, "--json")
        assert explained.returncode == 0, explained.stderr
        data = json.loads(explained.stdout)
        assert data["verdict"] == "blocked" and data["matched"][0]["missing"] == required


async def test_preflight_names_every_shape(store: GraphMemoryStore, hand_seeded: MemoryScope) -> None:
    block = (await TurnMemory(store).begin(hand_seeded)).preflight(STATE)
    assert block is not None
    for _, props, _, tool, required in SHAPES:
        label = props.split("label: '")[1].split("'")[0] if "label: '" in props else "<unnamed>"
        for pre in required:
            assert f"- YOU MUST call `{pre}` BEFORE calling `{tool}` (skill: {label})." in block.content


async def test_the_tenant_wide_scope_does_not_see_the_namespaced_shape(
    store: GraphMemoryStore, hand_seeded: MemoryScope
) -> None:
    tenant_wide = MemoryScope(hand_seeded.tenant_id)
    ids = {s.id for s in (await TurnMemory(store).begin(tenant_wide)).skills}
    assert ids == {s.id for s in await ProceduralLayer(store).query_skills(tenant_wide)}
    assert f"{hand_seeded.tenant_id}-namespaced" not in ids and len(ids) == len(SHAPES) - 1
