"""TurnMemory: one read per turn, a byte-stable pre-flight block, and the gate on the same snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    ProspectiveTriggerCapability,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.gate import explain_tool_call
from tests._counting import CountingStore

pytestmark = pytest.mark.anyio

PREDICATE = {"state": {"path": "channel", "op": "eq", "value": "slack"}}


async def _seed(store: GraphMemoryStore, scope: MemoryScope, label: str = "Deliver", pre: str = "get_status") -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label=label, steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=[pre, PREDICATE], identifier=label.lower(),
    )
    return skill.id


async def test_preflight_block_is_byte_stable_for_100_turns_and_changes_after_a_seed(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed(store, scope)
    memory = TurnMemory(store)
    state = {"channel": "slack"}
    blocks = set()
    for _ in range(100):
        block = (await memory.begin(scope)).preflight(state)
        assert block is not None
        blocks.add(block.content.encode())
    assert len(blocks) == 1
    assert blocks.pop().decode().startswith("## ENFORCED PRE-FLIGHT RULES\n- YOU MUST call `get_status` BEFORE")

    await _seed(store, scope, label="Archive", pre="get_archive_status")
    after = (await memory.begin(scope)).preflight(state)
    assert after is not None and "get_archive_status" in after.content


async def test_one_read_per_turn_and_skills_only_when_the_catalog_moves(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    await _seed(store, scope)
    counting = CountingStore(store)
    memory = TurnMemory(counting)
    first = await memory.begin(scope)
    second = await memory.begin(scope)
    # The first turn ships the skills; the next one holds the version and runs the smaller warm query.
    assert counting.reads == ["turn_snapshot", "turn_snapshot_warm"]
    assert second.skills == first.skills and len(first.skills) == 1

    # A plain-Cypher edit that does not bump the catalog is not seen until max_age...
    await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t}) SET s.label = 'renamed without bump'", t=scope.tenant_id
    )
    assert (await memory.begin(scope)).skills[0].label == "Deliver"
    # ...but a library write bumps the version and the next turn rereads.
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Other", steps=["other"], source_tag="authored:test"
    )
    counting.reads.clear()
    labels = sorted(s.label for s in (await memory.begin(scope)).skills)
    assert labels == ["Other", "renamed without bump"]
    assert counting.reads == ["turn_snapshot_warm", "turn_snapshot"]  # the catalog moved: read again with skills
    stale_ok = TurnMemory(store, max_age=0.0)
    await store.driver.execute_query(
        "MATCH (s:Skill {tenant_id: $t, label: 'Other'}) SET s.label = 'seen at once'", t=scope.tenant_id
    )
    assert "seen at once" in [s.label for s in (await stale_ok.begin(scope)).skills]


async def test_invalidate_makes_the_next_turn_see_an_unbumped_edit_of_that_scope_only(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    other = MemoryScope(scope.tenant_id + "-other")
    await _seed(store, scope)
    await _seed(store, other)
    memory = TurnMemory(store)
    await memory.begin(scope)
    await memory.begin(other)
    for tenant in (scope.tenant_id, other.tenant_id):  # an edit that does not bump the catalog
        await store.driver.execute_query("MATCH (s:Skill {tenant_id: $t}) SET s.label = 'edited'", t=tenant)
    memory.invalidate(scope)
    assert [s.label for s in (await memory.begin(scope)).skills] == ["edited"]
    assert [s.label for s in (await memory.begin(other)).skills] == ["Deliver"]  # still cached
    memory.invalidate()
    assert [s.label for s in (await memory.begin(other)).skills] == ["edited"]

    # A tenant-wide scope marks the tenant's namespaced scopes too (they see its skills); a namespace only itself.
    user, user2 = MemoryScope(scope.tenant_id, "user-1"), MemoryScope(scope.tenant_id, "user-2")
    for s in (user, user2, other):
        await memory.begin(s)
    await store.driver.execute_query("MATCH (s:Skill) WHERE s.tenant_id IN [$t, $o] SET s.label = 'again'",
                                     t=scope.tenant_id, o=other.tenant_id)
    memory.invalidate(user2)
    assert [s.label for s in (await memory.begin(user)).skills] == ["edited"]
    assert [s.label for s in (await memory.begin(user2)).skills] == ["again"]
    memory.invalidate(scope)
    assert [s.label for s in (await memory.begin(user)).skills] == ["again"]
    assert [s.label for s in (await memory.begin(other)).skills] == ["edited"]  # another tenant: still cached
    await store.driver.execute_query("MATCH (n) WHERE n.tenant_id = $t DETACH DELETE n", t=other.tenant_id)


async def test_gate_enforces_the_snapshot_the_model_was_shown(store: GraphMemoryStore, scope: MemoryScope) -> None:
    await _seed(store, scope)
    counting = CountingStore(store)
    memory = TurnMemory(counting)
    await memory.begin(scope)
    gate = create_precondition_gate_node(memory.get_active_skills)
    call = {"name": "deliver", "args": {}, "id": "c1"}
    state = {"memory_scope": scope, "channel": "slack", "messages": [AIMessage("", tool_calls=[call])]}
    out = await gate(state)
    [error] = out["messages"]
    assert str(error.content).startswith("Missing precondition: call get_status before deliver (skill: Deliver).")
    assert counting.reads == ["turn_snapshot"], "the gate reused the turn's snapshot"
    assert await gate({**state, "channel": "email"}) == {}


async def test_snapshot_triggers_feed_the_capability_and_stay_in_scope(
    store: GraphMemoryStore, tenant: str
) -> None:
    user, other = MemoryScope(tenant, "u1"), MemoryScope(tenant, "u2")
    prospective = ProspectiveLayer(store)
    await prospective.set_trigger(user, condition="invoice", task="Say it is overdue.")
    await prospective.set_trigger(MemoryScope(tenant), condition="invoice", task="Tenant-wide note.")
    await prospective.set_trigger(other, condition="invoice", task="Not for u1.")
    await prospective.set_trigger(MemoryScope(tenant + "x", "u1"), condition="invoice", task="Other tenant.")
    snapshot = await TurnMemory(store).begin(user)
    assert sorted(t.task for t in snapshot.triggers) == ["Say it is overdue.", "Tenant-wide note."]
    assert await snapshot.pending(other) == [], "a snapshot serves only its own scope"

    class Request:
        prompt = "where is my invoice?"

    capability = ProspectiveTriggerCapability(snapshot, lambda condition, cue: condition in cue, user)
    [contribution] = await capability.contribute(Request())
    assert "Say it is overdue." in contribution.content and "Not for u1." not in contribution.content


async def test_a_stale_read_of_identical_skills_reuses_the_compiled_rules(
    store: GraphMemoryStore, scope: MemoryScope, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _seed(store, scope)
    from symfonic_graph.memory import _catalog

    decoded: list[int] = []
    real = _catalog.read_skills

    def counting(rows: Any) -> Any:
        decoded.append(len(rows))
        return real(rows)

    monkeypatch.setattr(_catalog, "read_skills", counting)
    memory = TurnMemory(store)
    await memory.begin(scope)
    memory.invalidate(scope)  # as if max_age had passed: the skills are shipped again...
    again = await memory.begin(scope)
    assert decoded == [1]  # identical rows: the compiled rules of the first read are reused
    memory.invalidate(scope)
    third = await memory.begin(scope)
    assert decoded == [1] and third.skills is again.skills  # identical: not decoded again

    # The same value with another type is another catalog: JSON keeps 1, 1.0 and true apart.
    for value in (1, 1.0, True):
        await store.driver.execute_query(
            "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition {kind: 'state'}) SET p.value = $v",
            t=scope.tenant_id, v=value)
        memory.invalidate(scope)
        skills = (await memory.begin(scope)).skills
        [predicate] = [item["state"] for item in skills[0].precondition or () if isinstance(item, dict)]
        assert predicate["value"] == value and type(predicate["value"]) is type(value)
    assert decoded == [1, 1, 1, 1]

    # A value that is not plain JSON (a date seeded by hand) is never reused: decoded on every shipped read.
    await store.driver.execute_query(
        "MATCH (:Skill {tenant_id: $t})-[:REQUIRES]->(p:Precondition {kind: 'state'}) SET p.value = date()",
        t=scope.tenant_id)
    for _ in range(2):
        memory.invalidate(scope)
        await memory.begin(scope)
    assert decoded == [1, 1, 1, 1, 1, 1]


async def test_end_users_of_a_tenant_share_its_compiled_rules_and_keep_their_own_in_catalog_order(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    """One compiled copy of the tenant-wide catalog per process, whatever the number of end users."""
    await _seed(store, scope, label="First", pre="auth_a")
    mine = MemoryScope(scope.tenant_id, "u-own")
    await _seed(store, mine, label="Mine", pre="auth_mine")  # created between the two tenant-wide skills
    await _seed(store, scope, label="Last", pre="auth_b")
    memory = TurnMemory(store)
    tenant = await memory.begin(scope)
    plain = [await memory.begin(MemoryScope(scope.tenant_id, f"u{i}")) for i in range(3)]
    own = await memory.begin(mine)

    assert [s.label for s in tenant.skills] == ["First", "Last"]
    assert all(p.skills is tenant.skills for p in plain), "end users without skills of their own share the tenant's"
    assert [s.label for s in own.skills] == ["First", "Mine", "Last"]  # the order every other read path gives
    assert own.skills.rules[0] is tenant.skills.rules[0] and own.skills.rules[2] is tenant.skills.rules[1]
    listed = await ProceduralLayer(store).query_skills(mine)
    assert [s.label for s in listed] == [s.label for s in own.skills]
    assert list(own.skills) == listed, "a packed skill is rebuilt equal to the one every read path returns"
    memory.invalidate(mine)  # as if max_age had passed: identical rows keep the merged rules themselves
    assert (await memory.begin(mine)).skills is own.skills

    # The gate enforces the merged rules: the end user's own rule blocks, the tenant's too.
    for tool_pre, label in (("auth_mine", "Mine"), ("auth_a", "First")):
        decision = explain_tool_call(own.skills, "deliver", state={"channel": "slack"}, called=[])
        assert any(check.label == label and tool_pre in check.missing for check in decision.matched)
