"""A draft proposed for an existing identifier never displaces the live skill until approved."""

from __future__ import annotations

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer

pytestmark = pytest.mark.anyio


async def _live(layer: ProceduralLayer, scope: MemoryScope) -> list[tuple[str, str, tuple[object, ...] | None]]:
    return [(s.label, s.status, s.precondition) for s in await layer.query_skills(scope)]


async def test_draft_waits_then_approve_replaces(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    live = await layer.seed_authored_skill(
        scope, label="Live", steps=["deliver"], source_tag="authored:t", action_tool="deliver",
        precondition=["get_status"], identifier="deliver")
    draft = await layer.propose_skill(
        scope, label="Proposed", steps=["deliver"], source_tag="learned:t", action_tool="deliver",
        precondition=["get_status", "authenticate"], identifier="deliver")
    assert draft.status == "draft" and draft.id != live.id
    assert await _live(layer, scope) == [("Live", "approved", ("get_status",))], "the live skill still serves"
    labels = sorted(s.label for s in await layer.query_skills(scope, include_drafts=True))
    assert labels == ["Live", "Proposed"]

    await layer.approve(scope, draft.id)
    assert await _live(layer, scope) == [("Proposed", "approved", ("get_status", "authenticate"))]
    records, _, _ = await store.driver.execute_query(
        "MATCH (p:Precondition {tenant_id: $t}) RETURN count(p) AS n", t=scope.tenant_id)
    assert records[0]["n"] == 2, "the replaced skill's preconditions are gone"

    # The identifier is the approved draft's now: a re-seed replaces it in place.
    again = await layer.seed_authored_skill(
        scope, label="Reseeded", steps=["deliver"], source_tag="authored:t", identifier="deliver")
    assert again.id == draft.id
    assert [s.label for s in await layer.query_skills(scope)] == ["Reseeded"]


async def test_rejected_draft_leaves_the_live_skill(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, label="Live", steps=["x"], source_tag="authored:t", identifier="k")
    draft = await layer.propose_skill(scope, label="Draft", steps=["x"], source_tag="learned:t", identifier="k")
    await layer.reject(scope, draft.id)
    assert [s.label for s in await layer.query_skills(scope, include_drafts=True)] == ["Live"]
