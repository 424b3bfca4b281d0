"""Large seed files: staged in batches under one write id, published in one flip, all or nothing.

The batch size is a parameter, so a file of 500 skills written 50 at a time
stands in for a file of 100,000 written 5,000 at a time (bench/seed_scale_bench.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph._store import Statement, Step, Written
from symfonic_graph.errors import AuthorityError, ValidationError
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import apply_seed, count_changes, plan_seed

pytestmark = pytest.mark.anyio
SKILLS, BATCH = 500, 50


def _skills(version: str, count: int = SKILLS) -> list[dict[str, Any]]:
    return [{"label": f"{version} skill {n}", "identifier": f"s{n}", "steps": [f"act_{n}"],
             "source_tag": "authored:bulk", "action_tool": f"act_{n}", "precondition": [f"check_{n}"]}
            for n in range(count)]


def _plan(tmp_path: Path, data: dict[str, Any], write_id: str | None = None) -> Any:
    path = tmp_path / f"seed-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return plan_seed(load_seed_file(path), None, write_id=write_id)


async def _seed_version(
    store: GraphMemoryStore, tmp_path: Path, tenant: str, version: str, write_id: str | None = None
) -> None:
    """The tenant's ``SKILLS`` skills labelled ``version``, seeded in batches of ``BATCH``."""
    plan = _plan(tmp_path, {"tenant": tenant, "skills": _skills(version)}, write_id=write_id)
    await apply_seed(store, plan, batch_size=BATCH)


async def _labels(store: GraphMemoryStore, scope: MemoryScope) -> list[str]:
    return [s.label for s in await ProceduralLayer(store).query_skills(scope, top_k=5000)]


async def _nodes(store: GraphMemoryStore, tenant: str) -> dict[str, int]:
    """Every node of the tenant by kind, and the staging leftovers (unlisted staged nodes, replaced marks)."""
    records, _, _ = await store.driver.execute_query(
        """
        OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $t})
        WITH coalesce(c.published_writes, []) AS published
        MATCH (n) WHERE n.tenant_id = $t AND NOT n:SymfonicCatalog
        RETURN count(CASE WHEN n:Skill THEN 1 END) AS skills,
               count(CASE WHEN n:Precondition THEN 1 END) AS preconditions,
               count(CASE WHEN n:Trigger THEN 1 END) AS triggers,
               count(CASE WHEN n:SymfonicUnpublished
                          AND NOT (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published
                          THEN 1 END) AS unlisted,
               count(n.symfonic_replaced_by) AS replaced
        """, t=tenant, database_=store.database)
    return dict(records[0])


class Watching(GraphMemoryStore):
    """The store, calling ``between`` after each committed write (readers running while a seed is written)."""

    def __init__(self, store: GraphMemoryStore, between: Any) -> None:
        super().__init__(store.driver, database=store.database)
        self.between, self.writes, self.most_prepared = between, 0, 0

    async def write(self, steps: Sequence[Step | Statement]) -> Written:
        written = await super().write(steps)
        self.writes += 1
        prepared = [written.one(s.name)["prepared"] for s in steps
                    if isinstance(s, Step) and s.query == "write_prepare_batch"]
        prepared += [written.one(s[0])["prepared"] for s in steps
                     if isinstance(s, tuple) and s[0] == "write_prepare_batch"]
        self.most_prepared = max(self.most_prepared, sum(prepared))
        await self.between(self.writes)
        return written


async def test_a_large_file_is_staged_in_batches_and_appears_at_once(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    scope = MemoryScope(tenant)
    seen: list[int] = []

    async def reader(_: int) -> None:
        seen.append(len(await _labels(store, scope)))

    watching = Watching(store, reader)
    result = await apply_seed(watching, _plan(tmp_path, {"tenant": tenant, "skills": _skills("v1")}),
                              batch_size=BATCH)
    assert watching.writes > SKILLS // BATCH  # one transaction per batch, then the publish
    assert len(result.scopes[0][1]) == SKILLS
    assert set(seen[:-1]) == {0}, seen  # nothing visible while the batches are staged
    assert seen[-1] == SKILLS  # then everything, after the one flip
    assert await _labels(store, scope) == [f"v1 skill {n}" for n in range(SKILLS)]  # in file order
    assert await _nodes(store, tenant) == {"skills": SKILLS, "preconditions": SKILLS, "triggers": 0,
                                           "unlisted": 0, "replaced": 0}


async def test_a_failure_in_a_middle_batch_leaves_nothing_and_the_old_version_intact(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    scope, other = MemoryScope(tenant), f"o-{uuid.uuid4().hex}"
    forget.append(other)
    await _seed_version(store, tmp_path, tenant, "v1")
    before = await _nodes(store, tenant)
    # Entry 260 (batch 6 of 11) collides with a node of another tenant holding its key: refused in the write.
    key = json.dumps(["skill", tenant, None, "taken"])
    await store.driver.execute_query(
        "CREATE (:Skill {id: $id, tenant_id: $other, symfonic_key: $key, label: 'x', steps: ['x']})",
        id=f"{other}-1", other=other, key=key, database_=store.database)
    seen: list[list[str]] = []

    async def reader(_: int) -> None:
        seen.append(await _labels(store, scope))

    with pytest.raises(AuthorityError, match=other):
        v2 = _skills("v2")
        v2.insert(260, {"label": "taken", "identifier": "taken", "steps": ["x"], "source_tag": "authored:t"})
        await apply_seed(Watching(store, reader), _plan(tmp_path, {"tenant": tenant, "skills": v2}),
                         batch_size=BATCH)
    assert len(seen) >= 5  # batches 1..5 were committed before the failure
    assert all(labels == [f"v1 skill {n}" for n in range(SKILLS)] for labels in seen)  # readers saw v1 only
    assert await _nodes(store, tenant) == before  # nothing of v2 is left behind
    assert await _labels(store, scope) == [f"v1 skill {n}" for n in range(SKILLS)]


async def test_a_large_reseed_replaces_the_old_version_in_one_flip(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    scope = MemoryScope(tenant)
    await _seed_version(store, tmp_path, tenant, "v1")
    v2 = _skills("v2")
    plan = _plan(tmp_path, {"tenant": tenant, "skills": v2})
    assert await count_changes(store, plan) == [{"skills": {"created": 0, "updated": SKILLS, "unchanged": 0},
                                                 "triggers": {"created": 0, "updated": 0, "unchanged": 0}}]
    seen: list[set[str]] = []

    async def reader(_: int) -> None:
        seen.append({label.split()[0] for label in await _labels(store, scope)})

    await apply_seed(Watching(store, reader), plan, batch_size=BATCH)
    assert {"v1", "v2"} not in [s for s in seen] and all(s in ({"v1"}, {"v2"}) for s in seen), seen
    assert seen[-1] == {"v2"}
    assert await _labels(store, scope) == [f"v2 skill {n}" for n in range(SKILLS)]
    # Folding later (in batches) deletes the replaced version; readers still see v2 alone.
    assert await store.fold_published(scope, settle_seconds=0, batch_size=BATCH) >= SKILLS
    assert await _nodes(store, tenant) == {"skills": SKILLS, "preconditions": SKILLS, "triggers": 0,
                                           "unlisted": 0, "replaced": 0}
    assert await _labels(store, scope) == [f"v2 skill {n}" for n in range(SKILLS)]
    again = await count_changes(store, plan)
    assert again[0]["skills"] == {"created": 0, "updated": 0, "unchanged": SKILLS}


async def test_a_full_scope_can_be_reseeded_in_batches(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    """The cap counts a live skill and the staged one replacing it once: a re-seed of a full scope fits."""
    from symfonic_graph.shape._limits import MAX_SKILLS_PER_SCOPE

    data = {"tenant": tenant, "skills": [{"label": f"L{n}", "identifier": f"i{n}", "steps": ["x"],
                                          "source_tag": "authored:t"} for n in range(MAX_SKILLS_PER_SCOPE)]}
    await apply_seed(store, _plan(tmp_path, data), batch_size=500)
    for skill in data["skills"]:
        skill["label"] += " v2"
    await apply_seed(store, _plan(tmp_path, data), batch_size=500)
    assert len(await _labels(store, MemoryScope(tenant))) == MAX_SKILLS_PER_SCOPE
    data["skills"].append({"label": "one too many", "steps": ["x"], "source_tag": "authored:t"})
    with pytest.raises(ValidationError, match="over the cap"):
        await apply_seed(store, _plan(tmp_path, data), batch_size=500)
    assert (await _nodes(store, tenant))["unlisted"] == 0


async def test_several_scopes_with_triggers_publish_together(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    b = f"b-{uuid.uuid4().hex}"
    forget.append(b)
    triggers = [{"identifier": f"r{n}", "condition": f"when {n}", "task": f"do {n}"} for n in range(120)]
    data = {"tenant": tenant, "skills": _skills("v1", 200), "triggers": triggers,
            "scopes": [{"tenant": b, "namespace": "u-1", "skills": _skills("v1", 150)}]}
    flips: list[tuple[int, int]] = []

    async def reader(_: int) -> None:
        flips.append((len(await _labels(store, MemoryScope(tenant))),
                      len(await _labels(store, MemoryScope(b, "u-1")))))

    result = await apply_seed(Watching(store, reader), _plan(tmp_path, data), batch_size=BATCH)
    assert set(flips[:-1]) == {(0, 0)} and flips[-1] == (200, 150)  # both scopes appear in the same flip
    assert [(len(s), len(t)) for _, s, t in result.scopes] == [(200, 120), (150, 0)]
    pending = await ProspectiveLayer(store).get_pending(MemoryScope(tenant))
    assert [t.condition for t in pending] == [f"when {n}" for n in range(120)]


async def test_a_large_file_under_a_write_id_stays_staged_until_publish(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    scope = MemoryScope(tenant)
    await _seed_version(store, tmp_path, tenant, "v1")
    plan = _plan(tmp_path, {"tenant": tenant, "skills": _skills("v2")}, write_id="release-2")
    await apply_seed(store, plan, batch_size=BATCH)
    assert {label.split()[0] for label in await _labels(store, scope)} == {"v1"}
    with pytest.raises(ValidationError, match="already holds 500 staged node"):
        await apply_seed(store, plan, batch_size=BATCH)
    assert await store.publish(scope, "release-2", batch_size=BATCH) == SKILLS  # prepared in batches, one flip
    assert await _labels(store, scope) == [f"v2 skill {n}" for n in range(SKILLS)]


async def test_a_publish_cut_short_before_its_flip_is_discarded_whole(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    scope = MemoryScope(tenant)
    await _seed_version(store, tmp_path, tenant, "v1")
    await _seed_version(store, tmp_path, tenant, "v2", write_id="w")
    # Two batches of a publish's preparation commit, then the publish dies before its flip.
    for _ in range(2):
        await store.write([("write_prepare_batch", {**scope.params(), "write_id": "w", "limit": BATCH})])
    assert (await _nodes(store, tenant))["replaced"] == 2 * BATCH
    assert {label.split()[0] for label in await _labels(store, scope)} == {"v1"}  # readers: still v1
    assert await store.discard(scope, "w", batch_size=BATCH) == SKILLS
    assert await _nodes(store, tenant) == {"skills": SKILLS, "preconditions": SKILLS, "triggers": 0,
                                           "unlisted": 0, "replaced": 0}
    # The live v1 skills hold their keys again: a re-seed replaces them, never duplicates them.
    await _seed_version(store, tmp_path, tenant, "v3")
    assert await _labels(store, scope) == [f"v3 skill {n}" for n in range(SKILLS)]


async def test_many_small_scopes_are_published_without_a_large_transaction(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, forget: list[str]
) -> None:
    """Each scope holds fewer entries than a batch, the file many more: no transaction prepares over a batch."""
    scopes = [{"tenant": tenant, "namespace": f"ns-{k}", "skills": _skills("v1", 30)} for k in range(12)]
    seen: list[int] = []

    async def reader(_: int) -> None:
        seen.append(len(await _labels(store, MemoryScope(tenant, "ns-11"))))

    watching = Watching(store, reader)
    await apply_seed(watching, _plan(tmp_path, {"tenant": tenant, "scopes": scopes}), batch_size=BATCH)
    assert 0 < watching.most_prepared <= BATCH
    assert set(seen[:-1]) == {0} and seen[-1] == 30
    assert (await _nodes(store, tenant))["skills"] == 12 * 30
