"""Compiled rules (``RuleSet``) give exactly what the pure functions give, and cache the block."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from symfonic_graph.gate import decide_call, explain_tool_call
from symfonic_graph.preconditions import action_tool_of, entries_of, partition_skills_by_state
from symfonic_graph.rules._messages import History, ToolCallRef
from symfonic_graph.rules.preflight import build_preflight_contribution, preflight_block
from symfonic_graph.rules.ruleset import RuleSet, rules_of
from symfonic_graph.shape.readings import predicate_problem
from symfonic_graph.shape.records import StatePrecondition, TextPrecondition, ToolPrecondition
from tests._skills import skill
from tests.unit.test_properties import predicates, states

TOOLS = ["t0", "t1", "t2"]
items = st.one_of(st.sampled_from(["p0", "p1", "t0", "Say hi.", "p2(x=1)"]),
                  st.builds(lambda p: {"state": p}, predicates),
                  st.builds(lambda t: {"tool": t}, st.sampled_from(["p0", "p3"])))
skills = st.lists(
    st.builds(
        lambda i, action, steps, pre, label: skill(action, pre, label=label, steps=steps, id=f"s{i}"),
        st.integers(0, 99),
        st.one_of(st.none(), st.sampled_from([*TOOLS, "t1(x=2)", "free text"])),
        st.lists(st.sampled_from([*TOOLS, "do it"]), max_size=2),
        st.one_of(st.none(), st.lists(items, max_size=4), st.sampled_from(["p0", "sentence here"])),
        st.one_of(st.none(), st.sampled_from(["L", "", "Deploy"])),
    ),
    max_size=6,
)


def _required(skill: Any, tool: str) -> tuple[str, ...]:
    """The oracle: the tool names a skill requires, and one unmeetable entry per distinct misconfiguration."""
    out: dict[object, str] = {}
    for entry in entries_of(skill):
        if isinstance(entry, TextPrecondition):
            continue
        if isinstance(entry, ToolPrecondition) and entry.name is not None:
            if entry.name != tool:
                out.setdefault(entry.name, entry.name)
            continue
        if isinstance(entry, StatePrecondition):
            problem = predicate_problem(entry.predicate())
            if problem is None:
                continue
            out.setdefault(("state", problem), "a precondition that could not be read")
            continue
        out.setdefault(("unreadable", getattr(entry, "reason", None)), "a precondition that could not be read")
    return tuple(out.values())


def _content(block: Any) -> str | None:
    return None if block is None else block.content


@settings(max_examples=150, deadline=None)
@given(skills, st.one_of(st.none(), states), st.booleans())
def test_the_cached_block_is_byte_identical_to_building_it(skills: list[Any], state: Any, negative: bool) -> None:
    rules = RuleSet(skills)
    expected = build_preflight_contribution(skills, state, include_negative=negative)
    assert preflight_block(rules, state, include_negative=negative) == expected
    assert preflight_block(rules, state, include_negative=negative) == expected  # the cached answer too


@settings(max_examples=150, deadline=None)
@given(skills, states, st.sampled_from(TOOLS), st.sets(st.sampled_from(["p0", "p1", "p2", "p3"])))
def test_compiled_decisions_match_the_pure_rules(skills: list[Any], state: Any, tool: str, called: set[str]) -> None:
    decision = explain_tool_call(RuleSet(skills), tool, state=state, called=called)
    kept = partition_skills_by_state(skills, state).kept
    expected = [s for s in kept if action_tool_of(s) == tool]
    assert [c.skill_id for c in decision.matched] == [s.id for s in expected]
    assert [c.required for c in decision.matched] == [_required(s, tool) for s in expected]
    first_missing = next((s for s in expected if set(_required(s, tool)) - called), None)
    assert decision.verdict == ("allowed" if first_missing is None else "blocked")
    assert decision == decide_call(rules_of(list(skills)), ToolCallRef(None, tool), History.of_names(called), state,
                               filtered=True, count_failed=False)


def test_a_state_with_unhashable_values_is_answered_but_not_cached() -> None:
    skill = SimpleNamespace(metadata={"action_tool": "x", "precondition": [
        "a", {"state": {"path": "tags", "op": "exists"}}]})
    rules = RuleSet([skill])
    assert preflight_block(rules, {"tags": ["eu"]}) is not None
    assert preflight_block(rules, {"tags": ["eu"]}) == build_preflight_contribution([skill], {"tags": ["eu"]})
    assert not rules._blocks
    assert preflight_block(rules, {"tags": "eu"}) is not None and len(rules._blocks) == 1


def test_rules_of_keeps_a_ruleset_and_compiles_anything_else() -> None:
    rules = RuleSet([])
    assert rules_of(rules) is rules
    assert isinstance(rules_of(None), RuleSet) and rules_of([]) == ()


@settings(max_examples=150, deadline=None)
@given(skills, st.sampled_from([None, "enforce", "shadow"]))
def test_a_typed_skill_compiles_to_the_rule_its_metadata_view_compiles_to(raw: list[Any], enforcement: Any) -> None:
    """The typed fast path (a read ``Skill``) and the duck-typed path agree field for field, packed or not."""
    from symfonic_graph.models import Skill
    from symfonic_graph.shape.readings import precondition_from_item

    for s in raw:
        meta = s.metadata
        pre = meta["precondition"]
        entries = [] if pre is None else [pre] if isinstance(pre, str) else pre
        typed = Skill(id=s.id, tenant_id="acme", namespace=None, label=meta["label"] or "", identifier=None,
                      steps=tuple(meta["steps"]), action_tool=meta["action_tool"], context="", status="approved",
                      active=True, source=None, created_at=None, enforcement=enforcement,
                      preconditions=tuple(e for e in map(precondition_from_item, entries) if e is not None))
        view = SimpleNamespace(id=typed.id, metadata=typed.metadata)
        [generic] = RuleSet([view]).rules
        for pack in (False, True):
            [fast] = RuleSet([typed], pack=pack).rules
            assert (fast.action_tool, fast.required, fast.predicates, fast.label, fast.skill_id,
                    fast.requirements, fast.shadow) == (
                generic.action_tool, generic.required, generic.predicates, generic.label, generic.skill_id,
                generic.requirements, generic.shadow)
            assert fast.skill == typed
