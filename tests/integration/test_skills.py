"""Writing skills: identifier re-seeds, concurrency, bulk seeding and validation."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ValidationError
from symfonic_graph.layers import SkillSpec

pytestmark = pytest.mark.anyio


async def _tenant_nodes(driver: neo4j.AsyncDriver, tenant: str) -> tuple[int, int]:
    records, _, _ = await driver.execute_query(
        "RETURN COUNT { (:Skill {tenant_id: $t}) } AS s, COUNT { (:Precondition {tenant_id: $t}) } AS p",
        {"t": tenant},
    )
    return records[0]["s"], records[0]["p"]


def _spec(i: int, **kw: Any) -> dict[str, Any]:
    return {"label": f"skill {i}", "steps": [f"tool_{i}"], "source_tag": "authored:bulk",
            "precondition": [f"pre_{i}", {"state": {"path": "n", "op": "eq", "value": i}}], **kw}


async def test_reseeding_an_identifier_replaces_content_and_keeps_the_id(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    layer = ProceduralLayer(store)
    first = await layer.seed_authored_skill(
        scope, label="v1", steps=["deliver"], source_tag="authored:a", identifier="deliver",
        precondition=["old_a", "old_b"],
    )
    second = await layer.seed_authored_skill(
        scope, label="v2", steps=["deliver"], source_tag="authored:a", identifier="deliver",
        precondition=["new_a"], context="fresh",
    )
    assert second.id == first.id
    [skill] = await layer.query_skills(scope)
    assert (skill.label, skill.context, skill.precondition) == ("v2", "fresh", ("new_a",))
    assert await _tenant_nodes(driver, scope.tenant_id) == (1, 1)  # old preconditions are gone


async def test_same_identifier_in_other_scopes_does_not_replace(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    scopes = [scope, MemoryScope(scope.tenant_id, "u1"), MemoryScope(scope.tenant_id + "2")]
    for sc in scopes:
        await layer.seed_authored_skill(sc, label=str(sc), steps=["x"], source_tag="authored:a", identifier="same")
    assert [s.label for s in await layer.query_skills(scopes[1])] == [str(scopes[0]), str(scopes[1])]
    assert [s.label for s in await layer.query_skills(scopes[2])] == [str(scopes[2])]


async def test_concurrent_reseeds_of_one_identifier_leave_one_skill(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope
) -> None:
    layer = ProceduralLayer(store)

    async def seed(i: int) -> None:
        await layer.seed_authored_skill(
            scope, label=f"v{i}", steps=["deliver"], source_tag="authored:a", identifier="deliver",
            precondition=[f"pre_{i}", "get_status"],
        )

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(seed, i)
    [skill] = await layer.query_skills(scope)
    assert skill.precondition == (f"pre_{skill.label[1:]}", "get_status")  # one writer's content, whole
    assert await _tenant_nodes(driver, scope.tenant_id) == (1, 2)


async def test_bulk_seed_writes_many_skills_in_one_call(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    specs: list[Any] = [_spec(i) for i in range(199)] + [SkillSpec(**_spec(199))]
    ids = await layer.seed_skills(scope, specs)
    skills = await layer.query_skills(scope)
    assert len(ids) == len(set(ids)) == len(skills) == 200
    by_label = {s.label: s for s in skills}
    assert by_label["skill 7"].precondition == ("pre_7", {"state": {"path": "n", "op": "eq", "value": 7}})
    # The write returns all ids in one row; they come back in entry order, and so does the catalog.
    assert ids == [by_label[f"skill {i}"].id for i in range(200)]
    assert [s.label for s in skills] == [f"skill {i}" for i in range(200)]
    assert await layer.seed_skills(scope, []) == []


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"steps": [""]}, "skills[3].steps[0]"),
        ({"steps": "deliver"}, "skills[3].steps"),
        ({"steps": []}, "skills[3].steps"),
        ({"label": 7}, "skills[3].label"),
        ({"label": "  "}, "skills[3].label"),
        ({"source_tag": "learned:x"}, "skills[3].source_tag"),
        ({"identifier": ""}, "skills[3].identifier"),
        ({"colour": "red"}, "skills[3].colour"),
        ({"precondition": [{"state": {"path": "a", "op": "gt", "value": 1}}]}, "skills[3].precondition[0].state.op"),
        ({"precondition": [{"state": {"path": "a", "op": "eq", "value": {"x": 1}}}]},
         "skills[3].precondition[0].state.value"),
        ({"precondition": ["ok", 5]}, "skills[3].precondition[1]"),
    ],
)
async def test_bulk_validation_names_the_entry_and_field_and_writes_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope, bad: dict[str, Any], field: str
) -> None:
    specs = [_spec(i) for i in range(6)]
    specs[3] = {**specs[3], **bad}
    with pytest.raises(ValidationError) as caught:
        await ProceduralLayer(store).seed_skills(scope, specs)
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)
    assert await _tenant_nodes(driver, scope.tenant_id) == (0, 0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"label": None}, "label"),
        ({"label": ""}, "label"),
        ({"steps": ["ok", 3]}, "steps[1]"),
        ({"steps": None}, "steps"),
        ({"source_tag": "authored"}, "source_tag"),
        ({"action_tool": 42}, "action_tool"),
        ({"context": b"bytes"}, "context"),
        ({"identifier": ["x"]}, "identifier"),
        ({"precondition": {"tool": "x", "extra": 1}}, "precondition"),
        ({"precondition": [{"state": {"path": "a..b", "op": "exists"}}]}, "precondition[0].state.path"),
        ({"precondition": [{"state": {"path": "a", "op": "in", "value": "slack"}}]}, "precondition[0].state.value"),
        ({"write_id": ""}, "write_id"),
        ({"identifier": "i" * 257}, "identifier"),  # would not fit the symfonic_key index entry
        ({"identifier": "i", "write_id": "w" * 257}, "write_id"),
    ],
)
async def test_single_write_validation_names_the_field_and_writes_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope, kwargs: dict[str, Any], field: str
) -> None:
    args: dict[str, Any] = {"label": "L", "steps": ["deliver"], "source_tag": "authored:a", **kwargs}
    with pytest.raises(ValidationError) as caught:
        await ProceduralLayer(store).seed_authored_skill(scope, **args)
    assert caught.value.field == field
    assert await _tenant_nodes(driver, scope.tenant_id) == (0, 0)


async def test_longest_identifier_fits_with_longest_scope(store: GraphMemoryStore) -> None:
    """The key index caps entries at ~8 kB; the bounds keep the worst case (4-byte chars) under it."""
    scope = MemoryScope("🧠" * 480 + uuid.uuid4().hex, "🔥" * 512)
    skill = await ProceduralLayer(store).seed_authored_skill(
        scope, label="L", steps=["x"], source_tag="authored:a", identifier="👩" * 256, write_id="w" * 256
    )
    assert skill.identifier == "👩" * 256
    assert await store.publish(scope, "w" * 256) == 1
