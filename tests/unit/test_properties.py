"""Property tests: predicate evaluation and the gate's guarantees."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage

from symfonic_graph.gate import gate_decisions, gate_errors
from symfonic_graph.preconditions import action_tool_of, entries_of, evaluate_predicate, required_tools
from symfonic_graph.shape.readings import predicate_problem
from symfonic_graph.shape.records import AnyPrecondition, StatePrecondition, ToolPrecondition
from tests._skills import ai, result, skill

KEYS = ["a", "A", "b", "B", "Ab", "c"]
TOOLS = ["t0", "t1", "t2", "t3"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["x", "y", "xy", ""]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=6)
states = st.recursive(
    st.dictionaries(st.sampled_from(KEYS), values, max_size=4),
    lambda inner: st.dictionaries(st.sampled_from(KEYS), inner | values, max_size=4),
    max_leaves=10,
)
paths = st.one_of(
    st.lists(st.sampled_from([*KEYS, ""]), min_size=1, max_size=3).map(".".join),
    st.none(),
    st.integers(),
)
predicates = st.one_of(
    st.fixed_dictionaries(
        {"path": paths, "op": st.sampled_from(["eq", "neq", "in", "exists", "EQ", "gt", None])},
        optional={"value": values | st.sets(st.sampled_from(["x", "y"])) | st.text(max_size=3)},
    ),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(), max_size=2),
)

_MISSING = object()


def reference_resolve(state: Any, path: Any) -> Any:
    """Plain-dict reference model of path resolution."""
    if not isinstance(path, str) or not path:
        return _MISSING
    current = state
    for segment in path.split("."):
        if not segment or not isinstance(current, dict):
            return _MISSING
        for key in (segment.upper(), segment.lower(), segment):
            if key in current:
                current = current[key]
                break
        else:
            return _MISSING
    return current


def reference_eval(pred: Any, state: Any) -> bool:
    """Reference model of predicate evaluation over plain dicts."""
    if not isinstance(pred, dict) or pred.get("op") not in ("eq", "neq", "in", "exists"):
        return False
    actual = reference_resolve(state, pred.get("path"))
    if pred["op"] == "exists":
        return actual is not _MISSING
    if "value" not in pred or actual is _MISSING:
        return False
    expected = pred["value"]
    if pred["op"] == "eq":
        return bool(actual == expected)
    if pred["op"] == "neq":
        return bool(actual != expected)
    if not isinstance(expected, (list, tuple, set, frozenset)):
        return False
    try:
        return actual in expected
    except TypeError:
        return False


@given(predicates, states)
@settings(max_examples=200)
def test_predicate_evaluation_never_raises_and_matches_the_reference(pred: Any, state: Any) -> None:
    assert evaluate_predicate(pred, state) is reference_eval(pred, state)


@given(predicates, st.one_of(states, st.none(), st.integers(), st.text(max_size=3), st.lists(values, max_size=2)))
def test_predicate_evaluation_on_any_state_is_a_bool(pred: Any, state: Any) -> None:
    assert isinstance(evaluate_predicate(pred, state), bool)


tool_refs = st.sampled_from(TOOLS) | st.sampled_from([f"{t}(x=1)" for t in TOOLS]) | st.just("Free text.")
precondition_shapes = st.one_of(
    st.none(),
    tool_refs,
    st.lists(tool_refs | tool_refs.map(lambda t: {"tool": t}), max_size=3),
)
skills = st.lists(
    st.builds(
        lambda a, p, label: skill(a, p, label=label),
        st.sampled_from([*TOOLS, None]),
        precondition_shapes,
        st.sampled_from(["L", None]),
    ),
    max_size=5,
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Any]:
    messages: list[Any] = []
    for turn, name in enumerate(draw(st.lists(st.sampled_from(TOOLS), max_size=4))):
        call_id = f"h{turn}"
        messages.append(ai((call_id, name)))
        messages.append(result(call_id, name if draw(st.booleans()) else None))
    batch = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=4))
    messages.append(ai(*[(f"c{i}", n) for i, n in enumerate(batch)]))
    return messages


def _called(messages: list[Any]) -> set[str]:
    names = {c["id"]: c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return {m.name or names[m.tool_call_id] for m in messages if isinstance(m, ToolMessage)}


def _unmeetable(skill: Any) -> bool:
    """The oracle: an entry that cannot be enforced as written (so the skill's action never runs)."""
    for entry in entries_of(skill):
        if isinstance(entry, ToolPrecondition):
            bad = entry.name is None
        elif isinstance(entry, AnyPrecondition):
            bad = not entry.names
        elif isinstance(entry, StatePrecondition):
            bad = predicate_problem(entry.predicate()) is not None
        else:
            bad = entry.kind == "unreadable"
        if bad:
            return True
    return False


@given(conversations(), skills)
def test_gate_errors_at_most_once_per_call_and_never_when_satisfied(messages: list[Any], active: list[Any]) -> None:
    errors = gate_errors(messages, active, {})
    counts = Counter(e.tool_call_id for e in errors)
    assert all(n == 1 for n in counts.values())
    assert set(counts) <= {c["id"] for c in messages[-1].tool_calls}
    called = _called(messages[:-1])
    for decision in gate_decisions(messages, active, {}):
        needs = {
            t for s in active if action_tool_of(s) == decision.tool_name for t in required_tools(s, decision.tool_name)
        }
        if any(_unmeetable(s) for s in active if action_tool_of(s) == decision.tool_name):
            assert not decision.allowed and counts[decision.call_id or ""] == 1
        elif needs <= called:
            assert decision.allowed and decision.call_id not in counts
        else:
            assert not decision.allowed and counts[decision.call_id or ""] == 1
