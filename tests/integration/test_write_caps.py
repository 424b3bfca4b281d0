"""Every write path enforces the same caps and the scope budget: a write over them is refused, naming
the field, the cap and the remedy, and nothing is written (the tenant's nodes are exactly as before).

The table below is every write path (seed, seed_skills, propose, propose_mined, approve, restore,
publish, set_trigger, write_triggers, facts, seed files) crossed with the over-cap inputs that reach
it: a string over the property cap, a list over the list cap, a count over the skill cap, a scope
over its budget. Caps are lowered with monkeypatch where reaching the real one would only cost time;
one test reaches the real budget through the API.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import neo4j
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.mining import RuleProposal
from symfonic_graph.memory.layers.semantic import SemanticLayer
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import apply_seed, plan_seed
from symfonic_graph.shape import _limits

pytestmark = pytest.mark.anyio

BIG = "x" * (_limits.MAX_PROPERTY_BYTES + 1)
Setup = Callable[[GraphMemoryStore, MemoryScope, Path], Awaitable[Any]]
Call = Callable[[GraphMemoryStore, MemoryScope, Path, Any], Awaitable[Any]]


def _skill(n: int, **extra: Any) -> dict[str, Any]:
    return {"label": f"r{n}", "steps": ["deploy"], "identifier": f"r{n}", "source_tag": "authored:t", **extra}


def _proposal(n: int) -> RuleProposal:
    return RuleProposal(action="deploy", precondition=f"check_{n}", support=3, confidence=1.0,
                        failures_without=None, examples=("t1",))


async def _seed_file(store: GraphMemoryStore, scope: MemoryScope, tmp: Path, body: dict[str, Any],
                     batch_size: int = 1000) -> Any:
    path = tmp / "seed.json"
    path.write_text(json.dumps(body))
    return await apply_seed(store, plan_seed(load_seed_file(path), scope), batch_size=batch_size)


async def _full(store: GraphMemoryStore, scope: MemoryScope, _: Path) -> None:
    """Fill the scope to the (lowered) skill cap of 3."""
    await ProceduralLayer(store).seed_skills(scope, [_skill(n) for n in range(3)])


async def _retracted_and_full(store: GraphMemoryStore, scope: MemoryScope, tmp: Path) -> str:
    extra = await ProceduralLayer(store).seed_authored_skill(scope, **_skill(9))
    await store.retract(scope, extra.id)
    await _full(store, scope, tmp)
    return extra.id


async def _three_drafts(store: GraphMemoryStore, scope: MemoryScope, _: Path) -> list[str]:
    layer = ProceduralLayer(store)
    return [(await layer.propose_skill(scope, **_skill(n, source_tag="mined"))).id for n in range(3)]


async def _approve_over(store: GraphMemoryStore, scope: MemoryScope, _: Path, drafts: list[str]) -> None:
    _limits.MAX_SKILLS_PER_SCOPE = 2  # type: ignore[misc]  # restored by monkeypatch
    await ProceduralLayer(store).approve(scope, drafts[0])


async def _two_staged_writes(store: GraphMemoryStore, scope: MemoryScope, _: Path) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_authored_skill(scope, **_skill(0))
    for n in (1, 2):
        await layer.seed_authored_skill(scope, **_skill(n), write_id="w1")
    for n in (3, 4):
        await layer.seed_authored_skill(scope, **_skill(n), write_id="w2")
    await store.publish(scope, "w1")  # 3 skills: at the cap


async def _three_reminders(store: GraphMemoryStore, scope: MemoryScope, _: Path) -> None:
    for n in range(3):  # each reminder weighs NODE_WEIGHT + its text: the lowered budget holds three
        await ProspectiveLayer(store).set_trigger(scope, condition=f"c{n}", task="t" * 100, identifier=f"r{n}")


async def _two_skills(store: GraphMemoryStore, scope: MemoryScope, _: Path) -> None:
    await ProceduralLayer(store).seed_skills(scope, [_skill(n, context="c" * 1000) for n in range(2)])


BUDGET_OF_3_REMINDERS = 3 * (_limits.NODE_WEIGHT + 150)

# (name, lowered caps, setup (succeeds), the refused write, expected field, expected words)
CASES: list[tuple[str, dict[str, int], Setup | None, Call, str, str]] = [
    ("seed: a 1,000,000-character action_tool", {}, None,
     lambda s, sc, _, __: ProceduralLayer(s).seed_authored_skill(sc, **_skill(0, action_tool="a" * 1_000_000)),
     "action_tool", ""),
    ("seed: an any of 64 names of 8 KB", {}, None,
     lambda s, sc, _, __: ProceduralLayer(s).seed_authored_skill(
         sc, **_skill(0, action_tool="deploy", precondition=[{"any": ["t" * 8190 + f"{i:02d}" for i in range(64)]}])),
     "precondition", ""),
    ("seed: a state in-list of 200,000 values", {}, None,
     lambda s, sc, _, __: ProceduralLayer(s).seed_authored_skill(
         sc, **_skill(0, action_tool="deploy",
                      precondition=[{"state": "plan", "op": "in", "value": [f"v{i}" for i in range(200_000)]}])),
     "precondition[0]", ""),
    ("seed: a label over 8 KB", {}, None,
     lambda s, sc, _, __: ProceduralLayer(s).seed_authored_skill(sc, label=BIG, steps=["s"], source_tag="authored:t"),
     "label", "bytes; at most 8192"),
    ("seed_skills: past the skill cap", {"MAX_SKILLS_PER_SCOPE": 3}, _full,
     lambda s, sc, _, __: ProceduralLayer(s).seed_skills(sc, [_skill(9)]), "skills", "over the cap of 3"),
    ("seed_skills: one write over the budget", {"MAX_SCOPE_WEIGHT": 5000}, None,
     lambda s, sc, _, __: ProceduralLayer(s).seed_skills(sc, [_skill(n, context="c" * 1000) for n in range(4)]),
     "skills", "over the budget of 5,000"),
    ("seed_skills: the scope over the budget", {"MAX_SCOPE_WEIGHT": 5000}, _two_skills,
     lambda s, sc, _, __: ProceduralLayer(s).seed_skills(sc, [_skill(n, context="c" * 1000) for n in range(2, 4)]),
     "weight", "over the budget of 5,000"),
    ("seed: staged, the scope over the budget", {"MAX_SCOPE_WEIGHT": 5000}, _two_skills,
     lambda s, sc, _, __: ProceduralLayer(s).seed_skills(
         sc, [_skill(n, context="c" * 1000) for n in range(2, 4)], write_id="w"),
     "weight", "over the budget of 5,000"),
    ("propose: a draft past the skill cap", {"MAX_SKILLS_PER_SCOPE": 3}, _full,
     lambda s, sc, _, __: ProceduralLayer(s).propose_skill(sc, **_skill(9, source_tag="mined")), "skills",
     "over the cap of 3"),
    ("propose_mined: drafts past the skill cap", {"MAX_SKILLS_PER_SCOPE": 3}, None,
     lambda s, sc, _, __: ProceduralLayer(s).propose_mined(sc, [_proposal(n) for n in range(4)]), "skills",
     "would own 4 skills"),
    ("propose_mined: drafts over the budget", {"MAX_SCOPE_WEIGHT": 3 * _limits.NODE_WEIGHT},
     lambda s, sc, _: ProceduralLayer(s).propose_mined(sc, [_proposal(0)]),
     lambda s, sc, _, __: ProceduralLayer(s).propose_mined(sc, [_proposal(1)]), "weight", "over the budget"),
    ("propose_mined: a 1,000,000-character action", {}, None,
     lambda s, sc, _, __: ProceduralLayer(s).propose_mined(sc, [RuleProposal(
         action="a" * 1_000_000, precondition="check", support=1, confidence=1.0, failures_without=None,
         examples=())]), "proposals[0]", ""),
    ("approve: a draft of an over-cap scope", {"MAX_SKILLS_PER_SCOPE": 3}, _three_drafts, _approve_over, "skills",
     "over the cap of 2"),
    ("restore: a fourth skill", {"MAX_SKILLS_PER_SCOPE": 3}, _retracted_and_full,
     lambda s, sc, _, skill_id: s.restore(sc, skill_id), "skills", "over the cap of 3"),
    ("publish: a second staged write past the cap", {"MAX_SKILLS_PER_SCOPE": 3}, _two_staged_writes,
     lambda s, sc, _, __: s.publish(sc, "w2"), "skills", "would own 5 skills"),
    ("set_trigger: a 5,000,000-character task", {}, None,
     lambda s, sc, _, __: ProspectiveLayer(s).set_trigger(sc, condition="c", task="t" * 5_000_000), "task",
     "bytes; at most 8192"),
    ("set_trigger: a 5,000,000-character condition", {}, None,
     lambda s, sc, _, __: ProspectiveLayer(s).set_trigger(sc, condition="c" * 5_000_000, task="t"), "condition",
     "bytes; at most 8192"),
    ("set_trigger: reminders over the budget", {"MAX_SCOPE_WEIGHT": BUDGET_OF_3_REMINDERS}, _three_reminders,
     lambda s, sc, _, __: ProspectiveLayer(s).set_trigger(sc, condition="c9", task="t" * 100), "weight",
     "over the budget"),
    ("set_trigger: staged reminders over the budget", {"MAX_SCOPE_WEIGHT": BUDGET_OF_3_REMINDERS}, _three_reminders,
     lambda s, sc, _, __: ProspectiveLayer(s).set_trigger(sc, condition="c9", task="t" * 100, write_id="w"),
     "weight", "over the budget"),
    ("set_trigger: skills and reminders over the budget together", {"MAX_SCOPE_WEIGHT": 5000}, _two_skills,
     lambda s, sc, _, __: ProspectiveLayer(s).set_trigger(sc, condition="c", task="t" * 1000), "weight",
     "over the budget"),
    ("add_fact: a 5 MB fact", {}, None,
     lambda s, sc, _, __: SemanticLayer(s).add_fact(sc, "f" * 5_000_000), "text", "bytes; at most 8192"),
    ("add_facts: one fact over 8 KB", {}, None,
     lambda s, sc, _, __: SemanticLayer(s).add_facts(sc, ["ok", BIG]), "texts[1]", "bytes; at most 8192"),
    ("seed file: a trigger over 8 KB", {}, None,
     lambda s, sc, tmp, _: _seed_file(s, sc, tmp, {"triggers": [{"condition": "c", "task": BIG}]}), "task",
     "bytes; at most 8192"),
    ("seed file: reminders over the budget", {"MAX_SCOPE_WEIGHT": BUDGET_OF_3_REMINDERS}, None,
     lambda s, sc, tmp, _: _seed_file(s, sc, tmp, {"triggers": [
         {"condition": f"c{n}", "task": "t" * 100} for n in range(4)]}), "weight", "over the budget"),
    ("seed file in batches: reminders over the budget", {"MAX_SCOPE_WEIGHT": BUDGET_OF_3_REMINDERS}, None,
     lambda s, sc, tmp, _: _seed_file(s, sc, tmp, {"triggers": [
         {"condition": f"c{n}", "task": "t" * 100} for n in range(4)]}, batch_size=2), "weight", "over the budget"),
    ("seed file in batches: past the skill cap", {"MAX_SKILLS_PER_SCOPE": 3}, None,
     lambda s, sc, tmp, _: _seed_file(s, sc, tmp, {"skills": [_skill(n) for n in range(4)]}, batch_size=2),
     "skills", "over the cap of 3"),
]


async def _nodes(driver: neo4j.AsyncDriver, tenant: str) -> list[tuple[Any, ...]]:
    """Every node of the tenant with its labels and properties: what a refused write must leave as it was.

    Of the catalog node, only what readers see (version, published writes): a refused write may have taken
    its lock (which stamps it, or creates it at version 0) before it was refused.
    """
    records, _, _ = await driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $t AND NOT n:SymfonicCatalog "
        "RETURN labels(n) AS labels, properties(n) AS props "
        "UNION ALL OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $t}) "
        "RETURN ['SymfonicCatalog'] AS labels, {version: coalesce(c.version, 0), "
        "published: coalesce(c.published_writes, [])} AS props", {"t": tenant})
    return sorted((sorted(r["labels"]), repr(sorted(r["props"].items()))) for r in records)


@pytest.mark.parametrize(("name", "caps", "setup", "call", "field", "words"), CASES, ids=[c[0] for c in CASES])
async def test_every_write_path_refuses_over_cap_input_and_writes_nothing(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, name: str, caps: dict[str, int], setup: Setup | None, call: Call,
    field: str, words: str,
) -> None:
    monkeypatch.setattr(_limits, "MAX_SKILLS_PER_SCOPE", _limits.MAX_SKILLS_PER_SCOPE)  # restored after the test
    for cap, value in caps.items():
        monkeypatch.setattr(_limits, cap, value)
    scope = MemoryScope(tenant, "user-1") if "trigger" in name or "reminder" in name else MemoryScope(tenant)
    prepared = await setup(store, scope, tmp_path) if setup is not None else None
    before = await _nodes(driver, tenant)
    with pytest.raises(ValidationError) as raised:
        await call(store, scope, tmp_path, prepared)
    error = raised.value
    assert field in error.field, (name, error.field, error.problem[:200])
    assert words in error.problem, (name, error.problem[:300])
    if error.field in ("skills", "weight"):  # a scope-level refusal names the remedy
        assert "Nothing was written" in error.problem
        assert any(remedy in error.problem for remedy in ("retract", "fewer", "split")), error.problem
    after = await _nodes(driver, tenant)
    assert after == before, (name, [n for n in after if n not in before], [n for n in before if n not in after])


@pytest.mark.parametrize("generated", range(40))
async def test_generated_over_cap_strings_anywhere_in_a_skill_are_refused(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str, generated: int
) -> None:
    """A seeded generator puts one over-cap string (or list) in one place of an otherwise valid skill."""
    import random

    rnd = random.Random(generated)
    over = "é" * (_limits.MAX_PROPERTY_BYTES // 2 + rnd.randint(1, 50))  # 2 bytes each: over the byte cap
    many = [f"v{i}" for i in range(_limits.MAX_LIST_ITEMS + rnd.randint(1, 500))]
    places: list[tuple[str, dict[str, Any]]] = [
        ("label", {"label": over}),
        ("context", {"context": over}),
        ("steps", {"steps": ["ok", over]}),
        ("action_tool", {"action_tool": over}),
        ("precondition", {"action_tool": "deploy", "precondition": [{"text": over}]}),
        ("precondition", {"action_tool": "deploy", "precondition": [{"state": "plan", "op": "in", "value": many}]}),
        ("precondition", {"action_tool": "deploy", "precondition": [{"state": "plan", "op": "eq", "value": over}]}),
        ("precondition", {"action_tool": "deploy", "precondition": ["ok", {"any": ["a", over]}]}),
    ]
    field, spec = rnd.choice(places)
    layer = ProceduralLayer(store)
    scope = MemoryScope(tenant)
    write = rnd.choice(["seed", "propose", "seed_skills"])
    with pytest.raises(ValidationError) as raised:
        if write == "seed":
            await layer.seed_authored_skill(scope, **{**_skill(0), **spec})
        elif write == "propose":
            await layer.propose_skill(scope, **{**_skill(0, source_tag="mined"), **spec})
        else:
            await layer.seed_skills(scope, [_skill(1), {**_skill(0), **spec}])
    assert field in raised.value.field
    assert [n for n in await _nodes(driver, tenant) if n[0] != ["SymfonicCatalog"]] == []


async def test_the_real_budget_is_reached_through_the_api_and_then_refuses(
    store: GraphMemoryStore, tenant: str
) -> None:
    """Skills of 4 KB of text each: the budget (8 MiB) holds under 2,000 of them; the write past it is refused."""
    layer = ProceduralLayer(store)
    scope = MemoryScope(tenant)
    per_skill = [{**_skill(n), "context": "c" * 4000, "steps": ["s" * 100] * 10} for n in range(2000)]
    written = 0
    with pytest.raises(ValidationError) as raised:
        for start in range(0, 2000, 250):
            await layer.seed_skills(scope, per_skill[start:start + 250])
            written += 250
    assert raised.value.field == "weight" and f"{_limits.MAX_SCOPE_WEIGHT:,}" in raised.value.problem
    [row] = await store.read("skills_owned_count", **scope.params())
    assert row["skills"] == written and row["weight"] <= _limits.MAX_SCOPE_WEIGHT


async def test_a_file_that_fits_can_be_seeded_again_and_again_in_batches(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The versions a batched seed replaced (published, not yet folded) never count against the cap."""
    from symfonic_graph.ops import doctor

    monkeypatch.setattr(_limits, "MAX_SKILLS_PER_SCOPE", 4)
    monkeypatch.setattr(doctor, "MAX_SKILLS_PER_SCOPE", 4)
    scope = MemoryScope(tenant)
    for run in range(4):  # a file at the cap, staged in batches of 2 then published: each run replaces the last
        body = {"skills": [_skill(n, context=f"run {run}") for n in range(4)],
                "triggers": [{"condition": "c", "task": f"t{n}", "identifier": f"t{n}"} for n in range(3)]}
        await _seed_file(store, scope, tmp_path, body, batch_size=2)
        [row] = await store.read("skills_owned_count", **scope.params())
        assert row["skills"] == 4, (run, row)
    skills = await ProceduralLayer(store).query_skills(scope)
    assert sorted(s.metadata["context"] for s in skills) == ["run 3"] * 4
    assert not [f for f in await doctor.diagnose(store, tenant) if f.check == "skill_cap"]
