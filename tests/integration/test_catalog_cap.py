"""Neighbours stay apart: a scope's catalog is capped at write, so it stays shippable."""

from __future__ import annotations

from pathlib import Path

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import apply_seed, plan_seed
from symfonic_graph.shape import _limits

pytestmark = pytest.mark.anyio


def _specs(n: int, prefix: str = "r") -> list[dict[str, object]]:
    return [{"label": f"{prefix}{i}", "steps": ["s"], "identifier": f"{prefix}{i}", "source_tag": "authored:t"}
            for i in range(n)]


async def test_a_write_past_the_cap_is_refused_and_leaves_nothing(store: GraphMemoryStore, scope: MemoryScope) -> None:
    assert _limits.MAX_SKILLS_PER_SCOPE == 2_000
    layer = ProceduralLayer(store)
    with pytest.raises(ValidationError) as raised:
        await layer.seed_skills(scope, _specs(_limits.MAX_SKILLS_PER_SCOPE + 1))
    assert raised.value.field == "skills" and "over the cap of 2000" in str(raised.value)
    assert (await TurnMemory(store).begin(scope)).skills == ()  # nothing was written


async def test_the_cap_counts_what_the_scope_already_owns(
    store: GraphMemoryStore, scope: MemoryScope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_limits, "MAX_SKILLS_PER_SCOPE", 3)
    layer = ProceduralLayer(store)
    await layer.seed_skills(scope, _specs(3))
    await layer.seed_skills(scope, _specs(3))  # re-seeding the same identifiers replaces: still 3
    with pytest.raises(ValidationError, match="would own 4 skills"):
        await layer.seed_authored_skill(scope, label="one more", steps=["s"], source_tag="authored:test")
    other = MemoryScope(scope.tenant_id, "user-1")  # each owning scope has its own cap
    await layer.seed_skills(other, _specs(3))
    assert len((await TurnMemory(store).begin(scope)).skills) == 3


async def test_a_seed_file_past_the_cap_names_the_file(
    store: GraphMemoryStore, scope: MemoryScope, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_limits, "MAX_SKILLS_PER_SCOPE", 2)
    path = tmp_path / "seed.yaml"
    lines = [f"tenant: {scope.tenant_id}", "skills:"]
    lines += [f"  - {{label: r{i}, steps: [s], identifier: r{i}, source_tag: 'authored:t'}}" for i in range(3)]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValidationError, match=r"seed\.yaml: skills: .*over the cap"):
        await apply_seed(store, plan_seed(load_seed_file(path), None))
    assert (await TurnMemory(store).begin(scope)).skills == ()


async def test_doctor_reports_hand_seeded_scopes_over_the_cap_and_oversized_skills(
    store: GraphMemoryStore, scope: MemoryScope, monkeypatch: pytest.MonkeyPatch, forget: list[str]
) -> None:
    from symfonic_graph.ops import doctor

    monkeypatch.setattr(doctor, "MAX_SKILLS_PER_SCOPE", 2)
    await store.driver.execute_query(
        "UNWIND range(1, 3) AS i CREATE (:Skill {id: $t + '-' + i, tenant_id: $t, label: 'L' + i, "
        "steps: ['s'], status: 'approved'})", t=scope.tenant_id, database_=store.database)
    await store.driver.execute_query(
        "CREATE (:Skill {id: $t + '-big', tenant_id: $t, namespace: 'ns', label: $label, steps: ['s'], "
        "status: 'approved'})", t=scope.tenant_id, label="x" * (_limits.MAX_PROPERTY_BYTES + 1),
        database_=store.database)
    found = [f for f in await doctor.diagnose(store, scope.tenant_id) if f.check == "skill_cap"]
    assert sorted((f.label, f.node) for f in found) == [
        ("Scope", f"tenant {scope.tenant_id!r} (tenant-wide)"), ("Skill", f"{scope.tenant_id}-big")]
    assert any("owns 3 skills, over the cap of 2" in f.problem for f in found)
