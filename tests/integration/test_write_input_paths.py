"""Every write the layers offer validates through the one input model of its node type, before any query.

One bad value gives the model's error text (under each call's own prefix) through
``seed_authored_skill``, ``seed_skills``, ``propose_skill``, ``propose_mined``,
``set_trigger``, ``add_fact`` and ``add_facts``, and nothing reaches the graph.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, ProspectiveLayer
from symfonic_graph.errors import ValidationError
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.learning.mining import RuleProposal
from symfonic_graph.shape.inputs import FactInput, SkillInput, TriggerInput

pytestmark = pytest.mark.anyio

GOOD: dict[str, Any] = {"label": "Deploy", "steps": ["run_tests", "deploy"], "source_tag": "authored:ci",
                        "action_tool": "deploy", "precondition": ["run_tests"], "context": "CI.", "identifier": None}
BAD = [None, 0, "", "  ", "a b", "Apologise.", "x" * 9000, [], [""], ["a b"], {"tool": "a b"}, ["x"] * 300,
       {"state": {"path": "p", "op": "gt", "value": 1}}, "\ud800", "x" * 300]


async def _error(call: Any) -> tuple[str, str] | None:
    try:
        await call
    except ValidationError as exc:
        return exc.field, exc.problem
    return None


def _model_error(model: type[Any], data: dict[str, Any], prefix: str = "", **context: Any) -> tuple[str, str] | None:
    try:
        model.read(data, prefix, **context)
    except ValidationError as exc:
        return exc.field, exc.problem
    return None


async def test_one_bad_value_reads_the_same_through_every_layer_write(store: GraphMemoryStore,
                                                                      scope: MemoryScope) -> None:
    skills, triggers, facts = ProceduralLayer(store), ProspectiveLayer(store), SemanticLayer(store)
    rng = random.Random(11)
    cases = [(field, value) for field in GOOD for value in BAD]
    checked = 0
    for field, value in rng.sample(cases, 60):
        entry = {**GOOD, field: value}
        expected = _model_error(SkillInput, entry, authored=True)
        if expected is None:  # a value fine for this field (steps ["a b"]): it would be written
            continue
        checked += 1
        assert await _error(skills.seed_authored_skill(scope, **entry)) == expected
        field_name, problem = expected
        assert await _error(skills.seed_skills(scope, [entry])) == (f"skills[0].{field_name}", problem)
        if field != "source_tag":  # a draft's source needs no "authored:"
            assert await _error(skills.propose_skill(scope, **entry)) == expected
    for field in ("condition", "task", "identifier"):
        for value in BAD:
            entry = {"condition": "the invoice", "task": "Say it is overdue.", field: value}
            expected = _model_error(TriggerInput, entry)
            if expected is not None:
                assert await _error(triggers.set_trigger(scope, **entry)) == expected
    for value in BAD:
        expected = _model_error(FactInput, {"text": value})
        if expected is not None:
            assert await _error(facts.add_fact(scope, value)) == expected  # type: ignore[arg-type]
            assert await _error(facts.add_facts(scope, ["fine", value])) == ("texts[1]", expected[1])  # type: ignore[list-item]
    assert checked >= 30
    assert await skills.query_skills(scope, include_drafts=True) == []
    assert await triggers.get_pending(scope) == [] and await facts.list_facts(scope) == []


async def test_a_mined_rule_is_checked_by_the_skill_input(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    bad = RuleProposal(action="issue refund", precondition="lookup_order", support=3, confidence=1.0,
                       failures_without=None, examples=["t1"])
    expected = _model_error(SkillInput, {**GOOD, "action_tool": "issue refund"})
    assert expected is not None and expected[0] == "action_tool"
    assert await _error(layer.propose_mined(scope, [bad])) == (f"proposals[0].{expected[0]}", expected[1])
    assert await layer.query_skills(scope, include_drafts=True) == []
