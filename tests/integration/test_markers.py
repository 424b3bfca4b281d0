"""Markers: retraction, staged writes and publication, and drafts."""

from __future__ import annotations

import uuid

import anyio
import neo4j
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    NotFoundError,
    ProceduralLayer,
    ProspectiveLayer,
    Skill,
    ValidationError,
)
from symfonic_graph.layers import SemanticLayer

pytestmark = pytest.mark.anyio


async def _skill(store: GraphMemoryStore, scope: MemoryScope, label: str, **kw: object) -> Skill:
    return await ProceduralLayer(store).seed_authored_skill(
        scope, label=label, steps=["deliver"], source_tag="authored:test", action_tool="deliver",
        precondition=["get_integration_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}],
        **kw,  # type: ignore[arg-type]
    )


async def _labels(store: GraphMemoryStore, scope: MemoryScope, **kw: object) -> list[str]:
    return [s.label for s in await ProceduralLayer(store).query_skills(scope, **kw)]  # type: ignore[arg-type]


async def _count(driver: neo4j.AsyncDriver, cypher: str, **params: object) -> int:
    records, _, _ = await driver.execute_query(cypher, params)
    return int(records[0][0])


# -- retraction -------------------------------------------------------------


async def test_retract_hides_skill_and_preconditions_restore_brings_them_back(
    store: GraphMemoryStore, scope: MemoryScope
) -> None:
    layer = ProceduralLayer(store)
    skill = await _skill(store, scope, "deliver")
    await store.retract(scope, skill.id, reason="outdated")
    assert await layer.query_skills(scope) == []
    assert await layer.query_skills(scope, action_tool="deliver") == []
    [audit] = await layer.query_skills(scope, include_retracted=True)
    assert audit.retracted and audit.precondition == skill.precondition
    await store.restore(scope, skill.id)
    [back] = await layer.query_skills(scope)
    assert not back.retracted and back.precondition == skill.precondition


async def test_retract_hides_triggers_and_facts(store: GraphMemoryStore, scope: MemoryScope) -> None:
    triggers, facts = ProspectiveLayer(store), SemanticLayer(store)
    tid = await triggers.set_trigger(scope, condition="c", task="t")
    fid = await facts.add_fact(scope, "f")
    await store.retract(scope, tid)
    await store.retract(scope, fid)
    assert await triggers.get_pending(scope) == [] and await facts.list_facts(scope) == []
    await store.restore(scope, tid)
    await store.restore(scope, fid)
    assert [t.id for t in await triggers.get_pending(scope)] == [tid]
    assert [f.id for f in await facts.list_facts(scope)] == [fid]


async def test_markers_refuse_another_tenants_node(store: GraphMemoryStore, scope: MemoryScope) -> None:
    other = MemoryScope(scope.tenant_id + "2")
    skill = await _skill(store, other, "theirs")
    tid = await ProspectiveLayer(store).set_trigger(MemoryScope(other.tenant_id, "u1"), condition="c", task="t")
    for node_id in (skill.id, tid, "no-such-id"):
        with pytest.raises(NotFoundError):
            await store.retract(scope, node_id)
        with pytest.raises(NotFoundError):
            await store.restore(scope, node_id)
    with pytest.raises(NotFoundError):  # the right tenant, but another namespace
        await store.retract(MemoryScope(other.tenant_id, "u2"), tid)
    assert await _labels(store, other) == ["theirs"]


async def test_prune_deletes_only_old_retracted_nodes_of_the_scope(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    other = MemoryScope(scope.tenant_id + "2")
    old, fresh, _live = [await _skill(store, scope, n) for n in ("old", "fresh", "live")]
    foreign = await _skill(store, other, "foreign")
    for s, sc in ((old, scope), (fresh, scope), (foreign, other)):
        await store.retract(sc, s.id)
    await driver.execute_query(  # backdate two retractions instead of sleeping
        "MATCH (s:Skill) WHERE s.id IN $ids SET s.symfonic_retracted_at = datetime() - duration('P2D')",
        {"ids": [old.id, foreign.id]},
    )
    assert await store.prune(scope, older_than_seconds=86400) == 1
    remaining = await ProceduralLayer(store).query_skills(scope, include_retracted=True)
    assert sorted(s.label for s in remaining) == ["fresh", "live"]
    assert await _count(driver, "MATCH (p:Precondition {tenant_id: $t}) RETURN count(p)", t=scope.tenant_id) == 4
    assert await _labels(store, other, include_retracted=True) == ["foreign"]
    assert await store.prune(scope, older_than_seconds=86400) == 0


# -- staged writes and publication -------------------------------------------


async def test_staged_writes_are_seen_only_with_their_write_id(store: GraphMemoryStore, scope: MemoryScope) -> None:
    wid = f"w-{uuid.uuid4().hex}"
    triggers = ProspectiveLayer(store)
    await _skill(store, scope, "staged", write_id=wid)
    await triggers.set_trigger(scope, condition="c", task="staged", write_id=wid)
    assert await _labels(store, scope) == []
    assert await _labels(store, scope, write_id="other") == []
    assert await _labels(store, scope, write_id=wid) == ["staged"]
    assert await triggers.get_pending(scope) == []
    assert [t.task for t in await triggers.get_pending(scope, write_id=wid)] == ["staged"]
    assert await _labels(store, MemoryScope(scope.tenant_id + "2"), write_id=wid) == []

    assert await store.publish(scope, wid) == 2
    assert await _labels(store, scope) == ["staged"]
    assert [t.task for t in await triggers.get_pending(scope)] == ["staged"]


async def test_discard_deletes_the_staged_write(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    wid = f"w-{uuid.uuid4().hex}"
    await _skill(store, scope, "staged", write_id=wid)
    await ProspectiveLayer(store).set_trigger(scope, condition="c", task="t", write_id=wid)
    await _skill(store, scope, "live")
    assert await store.discard(scope, wid) == 2
    assert await _labels(store, scope, write_id=wid) == ["live"]
    assert await _count(driver, "MATCH (p:Precondition {tenant_id: $t}) RETURN count(p)", t=scope.tenant_id) == 2
    assert await store.publish(scope, wid) == 0


async def test_staged_reseed_replaces_the_live_skill_on_publish(store: GraphMemoryStore, scope: MemoryScope) -> None:
    wid = f"w-{uuid.uuid4().hex}"
    live = await _skill(store, scope, "v1", identifier="deliver")
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="v2", steps=["deliver"], source_tag="authored:test", identifier="deliver",
        precondition=["get_status"], write_id=wid,
    )
    assert await _labels(store, scope) == ["v1"]  # the live one serves until publish
    await store.publish(scope, wid)
    [skill] = await ProceduralLayer(store).query_skills(scope)
    assert (skill.label, skill.precondition) == ("v2", ("get_status",))
    assert skill.id != live.id
    await _skill(store, scope, "v3", identifier="deliver")  # the published skill owns the key now
    assert await _labels(store, scope) == ["v3"]


async def test_publish_is_atomic_for_a_concurrent_reader(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    batch = [{"label": f"s{i}", "steps": ["deliver"], "source_tag": "authored:bulk"} for i in range(50)]
    for _ in range(30):
        sc = MemoryScope(scope.tenant_id, uuid.uuid4().hex)
        wid = f"w-{uuid.uuid4().hex}"
        await layer.seed_skills(sc, batch, write_id=wid)
        seen: set[int] = set()
        done = anyio.Event()

        async def reader(sc: MemoryScope = sc, seen: set[int] = seen, done: anyio.Event = done) -> None:
            while not done.is_set():
                seen.add(len(await layer.query_skills(sc)))
            seen.add(len(await layer.query_skills(sc)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await store.publish(sc, wid)
            done.set()
        assert seen <= {0, 50} and 50 in seen, seen


# -- drafts --------------------------------------------------------------------


async def test_drafts_are_hidden_until_approved(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    draft = await layer.propose_skill(scope, label="draft", steps=["deliver"], source_tag="learned:x")
    assert draft.status == "draft"
    assert await _labels(store, scope) == []
    assert await _labels(store, scope, include_drafts=True) == ["draft"]
    await layer.approve(scope, draft.id)
    assert await _labels(store, scope) == ["draft"]
    await layer.reject(scope, draft.id)
    assert await _labels(store, scope) == []
    assert await _labels(store, scope, include_drafts=True) == []  # rejected is neither
    with pytest.raises(NotFoundError):
        await layer.approve(MemoryScope(scope.tenant_id + "2"), draft.id)


async def test_a_published_write_id_cannot_be_staged_again(store: GraphMemoryStore, scope: MemoryScope) -> None:
    wid = f"w-{uuid.uuid4().hex}"
    await _skill(store, scope, "first", write_id=wid)
    assert await store.publish(scope, wid) == 1
    assert await store.publish(scope, wid) == 0  # publishing twice is a no-op
    with pytest.raises(ValidationError, match="write_id"):
        await ProspectiveLayer(store).set_trigger(scope, condition="c", task="t", write_id=wid)
    assert await ProspectiveLayer(store).get_pending(scope) == []


async def test_fold_removes_the_label_without_changing_what_readers_see(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    wid = f"w-{uuid.uuid4().hex}"
    await _skill(store, scope, "staged", write_id=wid)
    await store.publish(scope, wid)
    [before] = await ProceduralLayer(store).query_skills(scope)
    assert before.staged  # still labelled: visible through the catalog's published list
    assert await store.fold_published(scope, settle_seconds=0) == 1
    [after] = await ProceduralLayer(store).query_skills(scope)
    assert not after.staged and after.id == before.id
    records, _, _ = await driver.execute_query(
        "MATCH (c:SymfonicCatalog {tenant_id: $t}) RETURN c.published_writes AS w", {"t": scope.tenant_id}
    )
    assert records[0]["w"] == []
    await _skill(store, scope, "reused", write_id=wid)  # folded: the id may be staged again, hidden as usual
    assert await _labels(store, scope) == ["staged"]
