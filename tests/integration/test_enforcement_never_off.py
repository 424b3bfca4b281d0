"""The gate never silently turns off, proven by what a user sees: the tool ran or not.

Each test stands for one way the first release switched enforcement off:
the library's own agent factory on a plain ``MessagesState``, a malformed or
missing scope, stale rules, odd catalog versions, and a pre-flight block that
vanished with the store-backed lookup.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.errors import ScopeError
from symfonic_graph.langgraph import build_agent_graph, create_guarded_tool_node
from symfonic_graph.memory.turn import DEFAULT_MAX_AGE
from symfonic_graph.skill_source import StoreSkillGetter
from tests._cli import run_cli_on
from tests._fakes import Scripted, ai_calls, assert_every_call_answered, recording_tools
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
MISSING = "Missing precondition: call get_status before deliver (skill: Deliver)."


async def _seed(store: GraphMemoryStore, scope: MemoryScope, **extra: Any) -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deliver", steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_status"], **extra,
    )
    return skill.id


def _script() -> Scripted:
    return Scripted(responses=[ai_calls(("deliver", "c1")), AIMessage("done")])


def _lookups(store: GraphMemoryStore) -> dict[str, Any]:
    memory = TurnMemory(store)
    return {"TurnMemory": memory, "get_active_skills": memory.get_active_skills,
            "StoreSkillGetter": StoreSkillGetter(store)}


@pytest.mark.parametrize("lookup", ["TurnMemory", "get_active_skills", "StoreSkillGetter"])
@pytest.mark.parametrize("where", ["context", "configurable"])
async def test_build_agent_graph_on_messages_state_enforces(
    store: GraphMemoryStore, scope: MemoryScope, lookup: str, where: str
) -> None:
    await _seed(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = _script()
    graph = build_agent_graph(model, tools, _lookups(store)[lookup])
    run: dict[str, Any] = ({"context": scope} if where == "context"
                           else {"config": {"configurable": {"memory_scope": scope}}})
    out = await graph.ainvoke({"messages": [HumanMessage("deliver it")]}, **run)
    assert executed == []  # the guarded tool did not run
    [blocked] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert blocked.status == "error" and blocked.content.startswith(MISSING)
    assert_every_call_answered(model)
    # the pre-flight block reached the model on every call, whichever lookup was given
    for shown in model.seen:
        assert isinstance(shown[0], SystemMessage) and "`get_status` BEFORE calling `deliver`" in shown[0].content


async def test_guarded_tool_node_in_a_hand_built_messages_state_graph(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    model = Scripted(responses=[ai_calls(("get_status", "c1"), ("deliver", "c2")), ai_calls(("deliver", "c3")),
                                AIMessage("done")])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", create_guarded_tool_node(tools, TurnMemory(store)))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    out = await builder.compile().ainvoke({"messages": [HumanMessage("go")]}, context={"tenant_id": scope.tenant_id})
    # same batch: the precondition ran, the action was refused; next turn it ran
    assert executed == ["get_status", "deliver"]
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.tool_call_id for m in errors] == ["c2"]
    assert_every_call_answered(model)


BAD_SCOPES = [
    pytest.param({}, id="missing"),
    pytest.param({"memory_scope": "acme"}, id="string"),
    pytest.param({"memory_scope": ("acme", None)}, id="tuple"),
    pytest.param({"memory_scope": {"tenant_id": 42}}, id="int-tenant"),
    pytest.param({"memory_scope": {"tenant_id": "acme", "namespace": ""}}, id="empty-namespace"),
    pytest.param({"memory_scope": {"namespace": "u-1"}}, id="no-tenant"),
    pytest.param({"memory_scope": None}, id="none"),
]


@pytest.mark.parametrize("bad", BAD_SCOPES)
@pytest.mark.parametrize("strict", [False, True])
async def test_a_bad_scope_raises_out_of_the_gate(store: GraphMemoryStore, bad: dict[str, Any], strict: bool) -> None:
    state = {**bad, "messages": [ai_calls(("deliver", "c1"))]}
    for name, lookup in _lookups(store).items():
        getter = lookup.get_active_skills if isinstance(lookup, TurnMemory) else lookup
        with pytest.raises(ScopeError):
            await create_precondition_gate_node(getter, strict=strict)(state)
        with pytest.raises(ScopeError):
            await create_guarded_tool_node(recording_tools("deliver")[0], lookup, strict=strict)(state, {})
        assert name


@pytest.mark.parametrize("context", [None, "acme", ("acme",), {"tenant_id": ""}, {"tenant_id": 7}])
async def test_the_agent_factory_raises_on_a_missing_or_bad_runtime_scope(
    store: GraphMemoryStore, scope: MemoryScope, context: Any
) -> None:
    await _seed(store, scope)
    tools, executed = recording_tools("get_status", "deliver")
    graph = build_agent_graph(_script(), tools, TurnMemory(store))
    with pytest.raises(ScopeError):
        await graph.ainvoke({"messages": [HumanMessage("deliver it")]}, context=context)
    assert executed == []


async def test_a_store_outage_still_takes_the_pass_through_path(scope: MemoryScope) -> None:
    import neo4j

    dead = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:1", auth=("neo4j", "x"))
    try:
        memory = TurnMemory(GraphMemoryStore(dead, query_timeout=2.0))
        state = {"memory_scope": scope, "messages": [ai_calls(("deliver", "c1"))]}
        assert await create_precondition_gate_node(memory.get_active_skills)(state) == {}
        strict = await create_precondition_gate_node(memory.get_active_skills, strict=True)(state)
        assert strict["messages"][0].content.startswith("Precondition check unavailable")
    finally:
        await dead.close()


def test_one_staleness_bound_with_the_documented_default() -> None:
    assert DEFAULT_MAX_AGE == 10.0
    import inspect

    params = inspect.signature(TurnMemory).parameters
    assert params["max_age"].default == DEFAULT_MAX_AGE and "snapshot_ttl" not in params


async def test_gate_only_wiring_follows_a_retraction_and_a_new_rule_within_max_age(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    skill_id = await _seed(store, scope)
    now = [0.0]
    memory = TurnMemory(store, max_age=0.5, recheck_every=2.0, clock=lambda: now[0])
    gate = create_precondition_gate_node(memory.get_active_skills)
    state = {"memory_scope": scope, "messages": [ai_calls(("deliver", "c1"))]}
    assert (await gate(state))["messages"][0].content.startswith(MISSING)
    await store.retract(scope, skill_id, reason="outdated")
    assert (await gate(state))["messages"][0].content.startswith(MISSING)  # within max_age: the snapshot
    now[0] += 0.6
    assert await gate(state) == {}  # the retracted rule no longer blocks
    now[0] += 0.6
    assert await gate(state) == {}  # past max_age: the new version read again, once, to confirm it
    # a rule added with plain Cypher, without bumping the catalog version
    await store.driver.execute_query(
        "CREATE (s:Skill {id: $t + '-new', tenant_id: $t, label: 'Ship', steps: ['ship'], status: 'approved'})"
        "-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: $t, kind: 'tool', tool: 'review'})",
        t=scope.tenant_id, database_=store.database,
    )
    ship = {"memory_scope": scope, "messages": [ai_calls(("ship", "c2"))]}
    assert await gate(ship) == {}  # within max_age of the last read
    now[0] += 0.6
    assert await gate(ship) == {}  # past max_age: the version did not move, the catalog is kept
    now[0] += 2.0
    # recheck_every after the last ship: the skills are shipped again and the un-bumped rule is enforced
    assert (await gate(ship))["messages"][0].content.startswith("Missing precondition: call review before ship")


async def test_begin_per_turn_sees_a_library_write_on_the_next_turn(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    memory = TurnMemory(store, max_age=3600)
    assert (await memory.begin(scope)).skills == ()
    skill_id = await _seed(store, scope)
    assert [s.id for s in (await memory.begin(scope)).skills] == [skill_id]
    await store.retract(scope, skill_id)
    assert (await memory.begin(scope)).skills == ()


ODD_VERSIONS = [
    pytest.param("-1", id="negative"),
    pytest.param("null", id="null"),
    pytest.param("'v1'", id="string"),
    pytest.param("[1, 2]", id="list"),
    pytest.param("2.5", id="float"),
]


@pytest.mark.parametrize("version", ODD_VERSIONS)
async def test_odd_catalog_versions_never_stop_skills_from_being_read(
    store: GraphMemoryStore, scope: MemoryScope, neo4j_settings: Neo4jSettings, version: str
) -> None:
    first = await _seed(store, scope)
    await store.driver.execute_query(
        f"MATCH (c:SymfonicCatalog {{tenant_id: $t}}) SET c.version = {version}",
        t=scope.tenant_id, database_=store.database,
    )
    memory = TurnMemory(store, max_age=3600)
    assert [s.id for s in (await memory.begin(scope)).skills] == [first]
    doctor = run_cli_on(neo4j_settings, "doctor", "--tenant", scope.tenant_id, "--json")
    findings = [f for f in json.loads(doctor.stdout) if f["check"] == "catalogs"]
    if version != "null":  # a null property is absent in Neo4j: reported only when the catalog exists
        assert findings and "not a non-negative integer" in findings[0]["problem"]
    # a later library write is seen on the next turn, and repairs the version
    second = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Ship", steps=["ship"], source_tag="authored:test", precondition=["review"])
    assert [s.id for s in (await memory.begin(scope)).skills] == [first, second.id]
    assert isinstance(await store.catalog_version(scope), int)
    third = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Third", steps=["third"], source_tag="authored:test")
    assert [s.id for s in (await memory.begin(scope)).skills] == [first, second.id, third.id]


async def test_a_catalog_version_that_cannot_grow_never_fails_a_write(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    """The largest integer, set by hand: the next library write restarts the version instead of overflowing."""
    first = await _seed(store, scope)
    await store.driver.execute_query("MATCH (c:SymfonicCatalog {tenant_id: $t}) SET c.version = 9223372036854775807",
                                     t=scope.tenant_id, database_=store.database)
    memory = TurnMemory(store, max_age=3600)
    assert [s.id for s in (await memory.begin(scope)).skills] == [first]
    second = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Ship", steps=["ship"], source_tag="authored:test", precondition=["review"])
    assert [s.id for s in (await memory.begin(scope)).skills] == [first, second.id]
    assert 0 <= await store.catalog_version(scope) < 9223372036854775807
