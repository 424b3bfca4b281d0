"""The one skill read model and where a turn finds its scope, without a database."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from symfonic_graph import MemoryScope, create_precondition_gate_node
from symfonic_graph.errors import ScopeError
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.rules.preflight import preflight_block
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import field_path, read_skill
from symfonic_graph.turn_scope import scope_from_state, scope_from_turn, scope_of
from tests._fakes import ai_calls

BASE = {"id": "s1", "tenant_id": "acme", "status": "approved", "label": "Deploy", "steps": ["deploy"]}


def _row(skill: dict[str, Any], *preconditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"skill": skill, "preconditions": [{"position": i, **p} for i, p in enumerate(preconditions)], **extra}


@pytest.mark.parametrize("absent_or_null", ["absent", "null"])
def test_optional_properties_absent_or_null_take_their_defaults(absent_or_null: str) -> None:
    optional = ("namespace", "identifier", "action_tool", "context", "active", "source", "created_at", "label")
    skill = dict(BASE) if absent_or_null == "null" else {k: v for k, v in BASE.items() if k != "label"}
    if absent_or_null == "null":
        skill.update(dict.fromkeys(optional))
    got = read_skill(_row(skill, {"kind": "tool", "tool": "auth"})).skill
    assert got is not None
    assert (got.context, got.active, got.label, got.namespace, got.action_tool) == ("", True, "", None, None)
    assert got.metadata["precondition"] == ["auth"]


@pytest.mark.parametrize(
    ("skill", "path"),
    [
        ({**BASE, "steps": "deploy"}, "steps"),
        ({**BASE, "steps": ["deploy", 3]}, "steps[1]"),
        ({**BASE, "context": 5}, "context"),
        ({**BASE, "active": "yes"}, "active"),
        ({**BASE, "status": "live"}, "status"),
        ({**BASE, "id": 7}, "id"),
    ],
)
def test_wrong_types_skip_the_skill_and_name_the_field(skill: dict[str, Any], path: str) -> None:
    reading = read_skill(_row(skill))
    assert reading.skill is None
    assert any(p.startswith(f"{path}: ") for p in reading.problems), reading.problems


def test_precondition_problems_name_the_item_and_keep_the_rest() -> None:
    reading = read_skill(_row(BASE, {"kind": "tool", "tool": 5}, {"kind": "nope"}, {"kind": "tool", "tool": "auth"},
                              {"kind": "state", "path": "env", "op": "gt", "value": 1}))
    assert reading.skill is not None
    # Unreadable nodes keep their place and block (fail closed); the readable ones are kept as they are.
    assert [p.kind for p in reading.skill.preconditions] == ["unreadable", "unreadable", "tool", "state"]
    assert reading.skill.metadata["precondition"][2:] == ["auth", {"state": {"path": "env", "op": "gt", "value": 1}}]
    assert [p.split(":")[0] for p in reading.problems] == [
        "precondition[0].tool", "precondition[1].kind", "precondition[3].op"]


def test_field_path_matches_our_validation_errors() -> None:
    assert field_path(("precondition", 0, "state", "op"), "skills[3].") == "skills[3].precondition[0].state.op"


@pytest.mark.parametrize(
    ("rev", "stamps", "torn"),
    [
        (None, [None, None], False),  # seeded by hand: nothing to check
        ("r1/2", ["r1/2", "r1/2"], False),
        ("r1/2", ["r1/2"], True),  # half of the new preconditions
        ("r2/1", ["r1/2", "r1/2"], True),  # new skill, old preconditions
        ("r1/2", ["r1/2", "r1/2", "r2/2"], True),  # a mix
        ("r1/2", ["r1/2", "r1/2", None], False),  # an operator added one by hand
    ],
)
def test_torn_skills_are_detected(rev: str | None, stamps: list[str | None], torn: bool) -> None:
    pres = [{"kind": "tool", "tool": f"t{i}", "rev": r} for i, r in enumerate(stamps)]
    assert read_skill(_row({**BASE, "rev": rev}, *pres)).torn is torn


@pytest.mark.anyio
async def test_a_non_mapping_state_item_keeps_the_skill_blocking() -> None:
    skill = SimpleNamespace(metadata={"label": "Deploy", "action_tool": "deploy",
                                      "precondition": [{"state": "env eq prod"}, "auth"]})

    async def skills(state: Any) -> list[Any]:
        return [skill]

    update = await create_precondition_gate_node(skills)({"messages": [ai_calls(("deploy", "c1"))]})
    content = update["messages"][0].content
    assert content.startswith("Missing precondition: call a precondition that could not be read, auth before deploy")
    assert "a misconfigured rule blocks this tool; ask an operator" in content


@pytest.mark.parametrize(
    "value",
    [MemoryScope("acme", "u"), {"tenant_id": "acme", "namespace": "u"},
     SimpleNamespace(tenant_id="acme", namespace="u")],
)
def test_scope_of_accepts_the_documented_shapes(value: object) -> None:
    assert scope_of(value) == MemoryScope("acme", "u")


@pytest.mark.parametrize("value", ["acme", ("acme",), 42, None, {"tenant_id": 42},
                                   {"tenant_id": "acme", "namespace": ""}, {"namespace": "u"},
                                   SimpleNamespace(tenant_id=None)])
def test_scope_of_refuses_everything_else(value: object) -> None:
    with pytest.raises(ScopeError):
        scope_of(value, where="context")


def test_outside_a_graph_run_the_state_key_is_the_last_resort() -> None:
    assert scope_from_turn()({"memory_scope": {"tenant_id": "acme"}}) == MemoryScope("acme")
    with pytest.raises(ScopeError, match="context=MemoryScope"):
        scope_from_turn()({"messages": []})
    with pytest.raises(ScopeError, match="no 'memory_scope'"):
        scope_from_state()({})


def test_list_typed_op_or_path_never_crashes_a_turn() -> None:
    reading = read_skill(_row({**BASE, "action_tool": "deploy"}, {"kind": "tool", "tool": "auth"},
                              {"kind": "state", "path": ["a"], "op": ["eq"], "value": 1}))
    assert reading.skill is not None and any("misconfigured state predicate" in p for p in reading.problems)
    rules = RuleSet([reading.skill])  # a list path must not break the compiled rules either
    block = preflight_block(rules, {"a": 1})  # the skill still applies: its `auth` line is shown
    assert block is not None and "`auth` BEFORE calling `deploy`" in block.content
    assert explain_tool_call(rules, "deploy", state={"a": 1}, called=["auth"]).verdict == "blocked"  # fails closed
    assert explain_tool_call(rules, "deploy").verdict == "blocked"
