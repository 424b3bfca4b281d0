"""A skill's write input takes `enforcement` (enforce or shadow): checked like every field, kept out of its content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers.procedural import skill_row
from symfonic_graph.ops.seedfile import load_seed_file
from symfonic_graph.ops.seeding import plan_seed
from symfonic_graph.shape.inputs import SkillInput
from symfonic_graph.shape.scope import MemoryScope

SCOPE = MemoryScope("acme")
GOOD = {"label": "Deploy", "steps": ["deploy"], "source_tag": "authored:ci", "precondition": ["run_tests"]}
NAMES = st.text("abcdefghij_", min_size=1, max_size=12)
SKILLS = st.fixed_dictionaries(
    {"label": NAMES, "steps": st.lists(NAMES, min_size=1, max_size=3), "source_tag": NAMES.map("authored:".__add__)},
    optional={"precondition": st.lists(NAMES, max_size=3), "context": NAMES, "action_tool": NAMES,
              "identifier": NAMES})


@pytest.mark.parametrize("mode", ["shadow", "enforce", None])
def test_a_skill_takes_shadow_or_enforce_and_its_row_carries_it(mode: str | None) -> None:
    assert SkillInput.read({**GOOD, "enforcement": mode}).enforcement == mode
    assert skill_row(SCOPE, {**GOOD, "enforcement": mode})["enforcement"] == mode
    assert skill_row(SCOPE, GOOD)["enforcement"] is None  # absent: a new skill is enforced, a re-seed keeps its mode


@pytest.mark.parametrize("bad", ["Shadow", "off", "", "shadow ", 1, True, ["shadow"], {"mode": "shadow"}])
def test_any_other_enforcement_is_refused_naming_the_field_on_every_path(bad: Any, tmp_path: Path) -> None:
    expected = 'skills[0].enforcement: must be "enforce" or "shadow" (or absent: enforced)'
    with pytest.raises(ValidationError) as raised:
        SkillInput.read({**GOOD, "enforcement": bad}, "skills[0].", authored=True)
    assert str(raised.value) == expected
    with pytest.raises(ValidationError) as raised:
        skill_row(SCOPE, {**GOOD, "enforcement": bad}, field_prefix="skills[0].")
    assert str(raised.value) == expected
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"skills": [{**GOOD, "enforcement": bad}]}), encoding="utf-8")
    with pytest.raises(ValidationError) as raised:
        plan_seed(load_seed_file(path), SCOPE)
    assert str(raised.value) == f"{path}: {expected}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(skill=SKILLS, mode=st.sampled_from(["shadow", "enforce"]))
def test_enforcement_is_no_part_of_a_skills_content_key_or_revision(skill: dict[str, Any], mode: str) -> None:
    """A seed file that gains `enforcement: shadow` shadows the same skill, never writes a second one."""
    plain = skill_row(SCOPE, skill, keyed_by_content=True)
    moded = skill_row(SCOPE, {**skill, "enforcement": mode}, keyed_by_content=True)
    assert plain["key"] == moded["key"]
    assert plain["rev"].split(":")[1] == moded["rev"].split(":")[1]  # the content digest
    assert SkillInput.read(SkillInput.read({**skill, "enforcement": mode}).model_dump()).enforcement == mode
