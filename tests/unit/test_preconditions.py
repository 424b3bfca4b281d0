"""The pure precondition rules, table-driven."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from symfonic_graph.preconditions import (
    MISSING,
    action_tool_of,
    bare_identifier,
    evaluate_predicate,
    filter_skills_by_state_predicates,
    partition_skills_by_state,
    precondition_tools,
    resolve_path,
    skill_label,
    state_predicates,
)
from tests._skills import FakeSkill, skill, state_pred

# --- bare identifiers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("get_status", "get_status"),
        ("  get_status  ", "get_status"),
        ("get_status(brand_id=<x>)", "get_status"),
        ("get_status (brand_id=<x>)  ", "get_status"),
        ("_private2", "_private2"),
        ("f()", "f"),
        ("Check the status first.", None),
        ("call get_status", None),
        ("2fast", "2fast"),  # providers accept a leading digit, hyphens and (MCP) dots
        ("get-status", "get-status"),
        ("mcp.orders.lookup(id=1)", "mcp.orders.lookup"),
        ("a" * 128, "a" * 128),
        ("a" * 129, None),  # over the 128 characters MCP allows
        ("get status", None),
        ("get_status!", None),
        ("get\u2010status", None),  # a unicode hyphen look-alike
        ("get_status(", None),
        ("get_status(a)(b) x", None),
        ("", None),
        ("   ", None),
        ("get_status(a=\n1)", None),
        ("ünïcode", None),
    ],
)
def test_bare_identifier(text: str, expected: str | None) -> None:
    assert bare_identifier(text) == expected


@pytest.mark.parametrize("value", [None, 3, ["get_status"], {"tool": "x"}, b"get_status"])
def test_bare_identifier_of_non_strings(value: Any) -> None:
    assert bare_identifier(value) is None


# --- action tool -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"action_tool": "deploy"}, "deploy"),
        ({"action_tool": "deploy(env=prod)", "steps": ["other"]}, "deploy"),
        ({"action_tool": "Deploy to prod.", "steps": ["deploy_now"]}, "deploy_now"),
        ({"action_tool": None, "steps": ["deploy_now(x=1)", "b"]}, "deploy_now"),
        ({"action_tool": "", "steps": ["First, think."]}, None),
        ({"steps": []}, None),
        ({"steps": "deploy"}, None),
        ({"steps": [3]}, None),
        ({}, None),
    ],
)
def test_action_tool_of(metadata: dict[str, Any], expected: str | None) -> None:
    assert action_tool_of(FakeSkill(metadata)) == expected


@pytest.mark.parametrize("thing", [object(), SimpleNamespace(metadata=None), SimpleNamespace(metadata=["x"]), None])
def test_objects_without_metadata_mapping_have_nothing(thing: Any) -> None:
    assert action_tool_of(thing) is None
    assert precondition_tools(thing) == []
    assert state_predicates(thing) == []
    assert skill_label(thing) is None


def test_mapping_skill_with_metadata_key_is_accepted() -> None:
    assert action_tool_of({"metadata": {"action_tool": "x"}}) == "x"


@pytest.mark.parametrize(
    ("label", "expected"), [("Deploy", "Deploy"), ("", None), ("  ", None), (None, None), (3, None)]
)
def test_skill_label(label: Any, expected: str | None) -> None:
    assert skill_label(FakeSkill({"label": label})) == expected


# --- precondition tools --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precondition", "expected"),
    [
        (None, []),
        ("get_status", ["get_status"]),  # legacy single string
        ("get_status(brand_id=<x>)", ["get_status"]),
        ("Make sure the brand exists.", []),
        (["a", "b(x=1)", "Free text here."], ["a", "b"]),
        ([{"tool": "a"}, {"tool": "b(id=2)"}], ["a", "b"]),  # legacy {"tool": ...}
        ([{"tool": "not bare at all"}, {"tool": 3}, {"tool": None}], []),
        ({"tool": "a"}, ["a"]),  # a single mapping is one item
        ([state_pred("x", "exists"), "a"], ["a"]),
        (["a", "a", {"tool": "a(x=1)"}], ["a"]),  # repeats collapse, first position kept
        ([3, None, ["a"], b"a"], []),
        (42, []),
    ],
)
def test_precondition_tools(precondition: Any, expected: list[str]) -> None:
    assert precondition_tools(skill("x", precondition)) == expected


@pytest.mark.parametrize(
    ("precondition", "expected"),
    [
        (None, []),
        ("a", []),
        (
            [state_pred("a.b", "eq", 1), "tool", state_pred("c", "exists")],
            [{"path": "a.b", "op": "eq", "value": 1}, {"path": "c", "op": "exists"}],
        ),
        ({"state": {"path": "c", "op": "exists"}}, [{"path": "c", "op": "exists"}]),
        ([{"state": "garbage"}], []),  # not a mapping: not a predicate, contributes nothing
        ([{"state": {"op": "garbage"}}], [{"op": "garbage"}]),  # a malformed mapping is kept: it fails closed
        ([{"tool": "a"}], []),
    ],
)
def test_state_predicates(precondition: Any, expected: list[Any]) -> None:
    assert state_predicates(skill("x", precondition)) == expected


# --- path resolution -------------------------------------------------------------------------


@dataclass
class Obj:
    tier: str = "gold"
    Mixed: str = "m"
    user: Any = None
    nothing: Any = None
    _secret: str = "hidden"


@pytest.mark.parametrize(
    ("state", "path", "expected"),
    [
        ({"PLAN": "pro"}, "plan", "pro"),
        ({"plan": "pro"}, "PLAN", "pro"),
        ({"Plan": "pro"}, "Plan", "pro"),
        ({"PLAN": "upper", "plan": "lower", "Plan": "as-written"}, "Plan", "upper"),
        ({"plan": "lower", "Plan": "as-written"}, "Plan", "lower"),
        ({"a": {"B": {"c": 1}}}, "a.b.c", 1),
        ({"a": None}, "a", None),
        ({"a": None}, "a.b", MISSING),
        ({}, "a", MISSING),
        ({"a": 1}, "", MISSING),
        ({"a": {"b": 1}}, "a..b", MISSING),
        ({"a": 1}, ".a", MISSING),
        ({"a": 1}, "a.", MISSING),
        ({"a": 1}, None, MISSING),
        ({"a": 1}, 3, MISSING),
        ({"a": [1, 2]}, "a.0", MISSING),
        (Obj(), "Tier", "gold"),
        (Obj(), "TIER", "gold"),
        (Obj(), "Mixed", "m"),
        (Obj(), "mixed", MISSING),
        (Obj(user={"NAME": "ann"}), "user.name", "ann"),
        ({"cfg": Obj()}, "cfg.nothing", None),
        (Obj(), "_secret", MISSING),
        (Obj(), "__class__", MISSING),
        (Obj(), "missing", MISSING),
        (None, "a", MISSING),
    ],
)
def test_resolve_path(state: Any, path: Any, expected: Any) -> None:
    resolved = resolve_path(state, path)
    if expected is MISSING:
        assert resolved is MISSING
    else:
        assert resolved == expected


# --- operators ----------------------------------------------------------------------------------


class Weird:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no")

    def __ne__(self, other: object) -> bool:
        raise RuntimeError("no")

    __hash__ = None  # type: ignore[assignment]


class HostileMapping(dict[str, Any]):
    def __contains__(self, key: object) -> bool:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("predicate", "state", "expected"),
    [
        # exists
        ({"path": "a", "op": "exists"}, {"a": 1}, True),
        ({"path": "a", "op": "exists"}, {"a": None}, True),
        ({"path": "a", "op": "exists"}, {"A": False}, True),
        ({"path": "a", "op": "exists"}, {}, False),
        ({"path": "a.b", "op": "exists"}, {"a": {"b": 0}}, True),
        ({"path": "", "op": "exists"}, {"": 1}, False),
        # eq
        ({"path": "a", "op": "eq", "value": "x"}, {"a": "x"}, True),
        ({"path": "a", "op": "eq", "value": "x"}, {"a": "y"}, False),
        ({"path": "a", "op": "eq", "value": None}, {"a": None}, True),
        ({"path": "a", "op": "eq", "value": None}, {}, False),
        ({"path": "a", "op": "eq"}, {"a": "x"}, False),  # needs a value key
        ({"path": "a", "op": "eq", "value": 1}, {"a": 1.0}, True),
        ({"path": "a", "op": "eq", "value": [1, 2]}, {"a": [1, 2]}, True),
        ({"path": "a", "op": "eq", "value": 1}, {"a": Weird()}, False),
        # neq
        ({"path": "a", "op": "neq", "value": "x"}, {"a": "y"}, True),
        ({"path": "a", "op": "neq", "value": "x"}, {"a": "x"}, False),
        ({"path": "a", "op": "neq", "value": "x"}, {}, False),  # needs a present value
        ({"path": "a", "op": "neq"}, {"a": "y"}, False),
        ({"path": "a", "op": "neq", "value": 1}, {"a": Weird()}, False),
        # in
        ({"path": "a", "op": "in", "value": ["x", "y"]}, {"a": "x"}, True),
        ({"path": "a", "op": "in", "value": ("x", "y")}, {"a": "y"}, True),
        ({"path": "a", "op": "in", "value": {"x", "y"}}, {"a": "x"}, True),
        ({"path": "a", "op": "in", "value": frozenset({"x"})}, {"a": "x"}, True),
        ({"path": "a", "op": "in", "value": ["x", "y"]}, {"a": "z"}, False),
        ({"path": "a", "op": "in", "value": "xyz"}, {"a": "x"}, False),  # never substring
        ({"path": "a", "op": "in", "value": {"x": 1}}, {"a": "x"}, False),  # dict is not a container here
        ({"path": "a", "op": "in", "value": ["x"]}, {}, False),
        ({"path": "a", "op": "in"}, {"a": "x"}, False),
        ({"path": "a", "op": "in", "value": {"x"}}, {"a": ["unhashable"]}, False),
        ({"path": "a", "op": "in", "value": [1]}, {"a": Weird()}, False),
        ({"path": "a", "op": "in", "value": None}, {"a": None}, False),
        # malformed: fail closed
        ({"path": "a", "op": "EQ", "value": 1}, {"a": 1}, False),
        ({"path": "a", "op": "gt", "value": 0}, {"a": 1}, False),
        ({"path": "a", "op": None}, {"a": 1}, False),
        ({"path": "a"}, {"a": 1}, False),
        ({"op": "exists"}, {"a": 1}, False),
        ({"path": 3, "op": "exists"}, {3: 1}, False),
        ({"path": ["a"], "op": "exists"}, {"a": 1}, False),
        ("a exists", {"a": 1}, False),
        (None, {"a": 1}, False),
        ([("path", "a")], {"a": 1}, False),
        ({"path": "a", "op": "exists"}, HostileMapping(a=1), False),
        ({"path": "a", "op": "exists"}, None, False),
    ],
)
def test_evaluate_predicate(predicate: Any, state: Any, expected: bool) -> None:
    assert evaluate_predicate(predicate, state) is expected


# --- the filter ----------------------------------------------------------------------------------


def test_filter_is_conjunctive_and_keeps_order() -> None:
    plain = skill("a", "t", label="Plain")
    both = skill("b", [state_pred("x", "eq", 1), state_pred("y", "exists")], label="Both")
    one = skill("c", [state_pred("x", "eq", 1), state_pred("z", "exists")], label="One")
    assert filter_skills_by_state_predicates([plain, both, one], {"x": 1, "y": None}) == [plain, both]


@pytest.mark.parametrize("skills", [None, []])
def test_filter_of_nothing(skills: Any) -> None:
    assert filter_skills_by_state_predicates(skills, {}) == []


def test_filter_logs_one_debug_line_per_dropped_skill(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="symfonic_graph.preconditions")
    keep = skill("a", [state_pred("x", "exists")], label="Keep")
    twice = skill("b", [state_pred("y", "exists"), state_pred("z", "eq", 1)], label="Twice wrong", id="sk-2")
    malformed = skill("c", [{"state": {"path": "p", "op": "garbage"}}], label=None, id="sk-3")
    # a misconfigured predicate never drops its skill: the gate blocks the skill's action instead
    assert filter_skills_by_state_predicates([keep, twice, malformed], {"x": 0}) == [keep, malformed]
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(lines) == 1
    assert "'Twice wrong'" in lines[0] and "sk-2" in lines[0] and "'y'" in lines[0] and "missing" in lines[0]


def test_partition_explains_the_first_failing_predicate() -> None:
    s = skill("b", [state_pred("y", "exists"), state_pred("z", "eq", 1)], label="B", id="sk-9")
    result = partition_skills_by_state([s], {"y": 1, "z": 2})
    assert result.kept == ()
    [drop] = result.dropped
    assert (drop.label, drop.skill_id, drop.index) == ("B", "sk-9", 1)
    assert drop.predicate == {"path": "z", "op": "eq", "value": 1}
    assert drop.reason == "2 != 1"
    assert drop.skill is s


def test_partition_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    partition_skills_by_state([skill("b", [state_pred("y", "exists")])], {})
    assert caplog.records == []
