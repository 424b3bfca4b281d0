"""Write authority: a write changes only what its own scope owns.

Regression tests for what an attacker and an operator found in the first
release: a namespace scope changing tenant-wide memory, one tenant deleting
another's precondition through a hand-seeded edge, one tenant taking over
another's skill through a copied key, a publish racing a discard, and retries
that duplicated reminders. Each checks the outcome a user sees.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    TurnMemory,
    create_precondition_gate_node,
)
from symfonic_graph.errors import AuthorityError, StoreUnavailableError
from tests._fakes import ai_calls
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

for _name in ("authority.namespace_attempts", "authority.refused", "authority.publish_discard_rounds",
              "authority.publish_discard_both"):
    FIGURES[_name] += 0


async def _rule(store: GraphMemoryStore, scope: MemoryScope, **extra: Any) -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label="Deploy", steps=["deploy"], source_tag="authored:test", action_tool="deploy",
        precondition=["run_tests"], **extra)
    return skill.id


async def _blocks(store: GraphMemoryStore, scope: MemoryScope, tool: str = "deploy") -> bool:
    gate = create_precondition_gate_node(TurnMemory(store, max_age=0).get_active_skills)
    update = await gate({"memory_scope": scope, "messages": [ai_calls((tool, "c1"))]})
    return bool(update.get("messages"))


async def _count(store: GraphMemoryStore, cypher: str, **params: Any) -> int:
    records, _, _ = await store.driver.execute_query(cypher, params, database_=store.database)
    return int(records[0][0])


async def test_a_namespace_scope_cannot_change_tenant_wide_memory(store: GraphMemoryStore, tenant: str) -> None:
    admin, user_1, user_2 = MemoryScope(tenant), MemoryScope(tenant, "user-1"), MemoryScope(tenant, "user-2")
    skills, reminders = ProceduralLayer(store), ProspectiveLayer(store)
    skill_id = await _rule(store, admin)
    trigger_id = await reminders.set_trigger(admin, condition="invoice", task="Say it is overdue.")
    staged = await skills.seed_authored_skill(admin, label="Staged", steps=["ship"], source_tag="authored:test",
                                              precondition=["review"], write_id="w-admin")
    attempts: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("retract skill", lambda: store.retract(user_1, skill_id, reason="mine now")),
        ("retract trigger", lambda: store.retract(user_1, trigger_id)),
        ("reject", lambda: skills.reject(user_1, skill_id)),
        ("approve", lambda: skills.approve(user_1, skill_id)),
        ("resolve", lambda: reminders.resolve_trigger(user_1, trigger_id)),
    ]
    for what, attempt in attempts:
        FIGURES["authority.namespace_attempts"] += 1
        with pytest.raises(AuthorityError, match=r"belongs to tenant \S+ \(tenant-wide\)") as caught:
            await attempt()
        assert "Nothing changed" in str(caught.value), what
        FIGURES["authority.refused"] += 1
    # scope-exact operations touch nothing of the tenant-wide scope
    FIGURES["authority.namespace_attempts"] += 3
    assert await store.publish(user_1, "w-admin") == 0
    assert await store.discard(user_1, "w-admin") == 0
    await store.retract(admin, trigger_id)
    with pytest.raises(AuthorityError):
        await store.restore(user_1, trigger_id)
    assert await store.prune(user_1, older_than_seconds=0) == 0
    FIGURES["authority.refused"] += 3
    await store.restore(admin, trigger_id)
    # another user of the tenant still sees the rule and the reminder
    assert await _blocks(store, user_2)
    assert [t.id for t in await reminders.get_pending(user_2)] == [trigger_id]
    assert await store.publish(admin, "w-admin") == 1
    assert staged.id in {s.id for s in await skills.query_skills(user_2)}


async def test_a_namespace_scope_still_changes_its_own_nodes(store: GraphMemoryStore, tenant: str) -> None:
    user_1 = MemoryScope(tenant, "user-1")
    skill_id = await _rule(store, user_1)
    await store.retract(user_1, skill_id)
    assert not await _blocks(store, user_1)
    assert await store.prune(user_1, older_than_seconds=0) == 1
    assert await _count(store, "MATCH (s:Skill {id: $id}) RETURN count(s)", id=skill_id) == 0


FOREIGN_EDGE = """
MATCH (b:Skill {id: $b_skill}), (p:Precondition {tenant_id: $a})<-[:REQUIRES]-(:Skill {id: $a_skill})
CREATE (b)-[:REQUIRES {position: 9}]->(p)
"""


@pytest.mark.parametrize("path", ["reseed", "retract-prune", "discard", "fold", "approve-draft"])
async def test_another_tenants_precondition_survives_every_delete_path(store: GraphMemoryStore, path: str) -> None:
    a, b = MemoryScope(f"a-{uuid.uuid4().hex}"), MemoryScope(f"b-{uuid.uuid4().hex}")
    a_skill = await _rule(store, a)
    layer = ProceduralLayer(store)
    b_skill = await _rule(store, b, identifier="deploy")

    async def edge_from(skill_id: str) -> None:
        await store.driver.execute_query(FOREIGN_EDGE, b_skill=skill_id, a=a.tenant_id, a_skill=a_skill,
                                         database_=store.database)

    if path == "reseed":
        await edge_from(b_skill)
        await _rule(store, b, identifier="deploy")
    elif path == "retract-prune":
        await edge_from(b_skill)
        await store.retract(b, b_skill)
        assert await store.prune(b, older_than_seconds=0) == 1
    elif path == "discard":
        staged = await _rule(store, b, write_id="w-1", identifier="other")
        await edge_from(staged)
        assert await store.discard(b, "w-1") == 1
    elif path == "fold":
        await edge_from(b_skill)  # the live skill a staged re-seed replaces, then folds away
        await _rule(store, b, identifier="deploy", write_id="w-2")
        assert await store.publish(b, "w-2") == 1
        assert await store.fold_published(b, settle_seconds=0) >= 1
    else:
        await edge_from(b_skill)
        draft = await layer.propose_skill(b, label="Deploy v2", steps=["deploy"], source_tag="authored:test",
                                          precondition=["lint"], identifier="deploy")
        await layer.approve(b, draft.id)
    assert await _count(store, "MATCH (p:Precondition {tenant_id: $a}) RETURN count(p)", a=a.tenant_id) == 1
    assert await _blocks(store, a)  # A's gate still enforces


async def test_a_copied_key_never_lets_one_tenant_take_over_anothers_skill(store: GraphMemoryStore) -> None:
    a, b = MemoryScope(f"a-{uuid.uuid4().hex}"), MemoryScope(f"b-{uuid.uuid4().hex}")
    b_skill = await _rule(store, b, identifier="deploy")
    a_key = json.dumps(["skill", a.tenant_id, None, "deploy"])
    await store.driver.execute_query("MATCH (s:Skill {id: $id}) SET s.symfonic_key = $key",
                                     id=b_skill, key=a_key, database_=store.database)
    with pytest.raises(AuthorityError, match=b.tenant_id):
        await _rule(store, a, identifier="deploy")
    records, _, _ = await store.driver.execute_query("MATCH (s:Skill {id: $id}) RETURN s.tenant_id AS t",
                                                     id=b_skill, database_=store.database)
    assert records[0]["t"] == b.tenant_id
    assert await _blocks(store, b) and not await _blocks(store, a)
    # the same for a reminder
    t_id = await ProspectiveLayer(store).set_trigger(b, condition="c", task="B's task", identifier="r1")
    await store.driver.execute_query("MATCH (t:Trigger {id: $id}) SET t.symfonic_key = $key", id=t_id,
                                     key=json.dumps(["trigger", a.tenant_id, None, "r1"]), database_=store.database)
    with pytest.raises(AuthorityError):
        await ProspectiveLayer(store).set_trigger(a, condition="c", task="A's task", identifier="r1")
    assert [t.task for t in await ProspectiveLayer(store).get_pending(b)] == ["B's task"]


async def test_a_key_copied_after_staging_makes_publish_refuse_and_change_nothing(
    store: GraphMemoryStore, tenant: str
) -> None:
    """A staged re-seed whose key another scope's node took meanwhile is refused at publish, naming it."""
    user, whole = MemoryScope(tenant, "n2"), MemoryScope(tenant)
    layer = ProspectiveLayer(store)
    staged = await layer.set_trigger(user, condition="c", task="staged task", identifier="deliver", write_id="w1")
    other = await layer.set_trigger(whole, condition="c", task="tenant task", identifier="other")
    await store.driver.execute_query(  # a plain-Cypher slip: the tenant-wide reminder takes n2's key
        "MATCH (t:Trigger {id: $id}) SET t.symfonic_key = $key", id=other,
        key=json.dumps(["trigger", tenant, "n2", "deliver"]), database_=store.database)
    with pytest.raises(AuthorityError, match=other):
        await store.publish(user, "w1")
    pending = await layer.get_pending(user)
    assert [t.task for t in pending] == ["tenant task"], "nothing of the refused write became visible"
    records, _, _ = await store.driver.execute_query(
        "MATCH (t:Trigger {id: $id}) RETURN t:SymfonicUnpublished AS staged", id=staged, database_=store.database)
    assert records[0]["staged"] is True


async def test_approving_a_draft_whose_key_another_scope_holds_is_refused_and_changes_nothing(
    store: GraphMemoryStore, tenant: str
) -> None:
    """A draft of an identifier takes over the live skill's key when approved; if a node of another scope
    holds that key (a plain-Cypher slip), approve refuses with AuthorityError naming it, not a constraint
    error from the server."""
    whole, user = MemoryScope(tenant), MemoryScope(tenant, "n2")
    layer = ProceduralLayer(store)
    live = await layer.seed_authored_skill(whole, label="live", steps=["x"], source_tag="authored:t",
                                           identifier="deliver")
    draft = await layer.propose_skill(whole, label="draft", steps=["x"], source_tag="mined:t", identifier="deliver")
    other = await layer.seed_authored_skill(user, label="other", steps=["x"], source_tag="authored:t",
                                            identifier="other")
    key = json.dumps(["skill", tenant, None, "deliver"])
    await store.driver.execute_query(  # by hand: the live skill deleted, its key copied onto n2's skill
        "MATCH (s:Skill {id: $live}) DETACH DELETE s WITH 1 AS done MATCH (o:Skill {id: $other}) "
        "SET o.symfonic_key = $key", live=live.id, other=other.id, key=key, database_=store.database)
    with pytest.raises(AuthorityError, match=other.id):
        await layer.approve(whole, draft.id)
    assert (await layer.get_skill(whole, draft.id)).status == "draft", "the refused approve changed nothing"
    records, _, _ = await store.driver.execute_query(
        "MATCH (o:Skill {id: $id}) RETURN o.symfonic_key AS key", id=other.id, database_=store.database)
    assert records[0]["key"] == key


async def test_publish_racing_discard_exactly_one_takes_effect(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    layer = ProceduralLayer(store)
    await _rule(store, scope, identifier="deploy")
    for round_ in range(60):
        write_id = f"w-{round_}"
        await layer.seed_authored_skill(scope, label=f"Deploy v{round_}", steps=["deploy"],
                                        source_tag="authored:test", action_tool="deploy",
                                        precondition=["run_tests"], identifier="deploy", write_id=write_id)
        results: dict[str, int] = {}

        async def run(name: str, op: Callable[[MemoryScope, str], Awaitable[int]], wid: str = write_id,
                      out: dict[str, int] = results) -> None:
            out[name] = await op(scope, wid)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "publish", store.publish)
            tg.start_soon(run, "discard", store.discard)
        FIGURES["authority.publish_discard_rounds"] += 1
        if results["publish"] and results["discard"]:
            FIGURES["authority.publish_discard_both"] += 1
        assert (results["publish"] > 0) != (results["discard"] > 0), results
        visible = await layer.query_skills(scope)
        assert len(visible) == 1, f"round {round_}: readers see {len(visible)} versions"
        await store.fold_published(scope, settle_seconds=0)
        assert len(await layer.query_skills(scope)) == 1
        assert await _blocks(store, scope)


async def test_set_trigger_with_an_identifier_replaces_never_duplicates(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "user-1")
    layer = ProspectiveLayer(store)
    first = await layer.set_trigger(scope, condition="invoice", task="v1", identifier="invoice-4711")
    again = await layer.set_trigger(scope, condition="invoice", task="v2", identifier="invoice-4711")
    assert first == again
    assert [(t.id, t.task) for t in await layer.get_pending(scope)] == [(first, "v2")]
    await layer.resolve_trigger(scope, first)
    await layer.set_trigger(scope, condition="invoice", task="v3", identifier="invoice-4711")
    assert [t.task for t in await layer.get_pending(scope)] == ["v3"]  # set again: pending again


async def test_a_write_that_times_out_says_a_retry_is_safe_and_the_retry_leaves_one(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant)
    impatient = ProspectiveLayer(GraphMemoryStore(store.driver, database=store.database, query_timeout=0.001))
    timed_out = 0
    for n in range(20):
        try:
            await impatient.set_trigger(scope, condition="c", task=f"task {n}", identifier=f"r-{n}")
        except StoreUnavailableError as exc:
            timed_out += 1
            assert "retrying it with the same identifier is safe" in str(exc)
            await ProspectiveLayer(store).set_trigger(scope, condition="c", task=f"task {n}", identifier=f"r-{n}")
    pending = await ProspectiveLayer(store).get_pending(scope)
    assert sorted(t.task for t in pending) == sorted(f"task {n}" for n in range(20))
    assert timed_out > 0  # the path under test was taken
