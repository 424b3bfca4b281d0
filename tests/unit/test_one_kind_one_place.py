"""A precondition kind is added in one place: its record class and its evaluator, registered once.

A made-up ``clock_hour`` kind ("this rule applies only between two hours of the state's clock") is
registered by this test alone, then followed through every path: write input validated (errors name
the field), node properties, the node read back, a metadata item read, the gate and the pre-flight
block. Nothing else in the package is edited. ``tests/integration/test_one_kind_one_place_graph.py``
follows it through Neo4j.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from symfonic_graph.errors import ValidationError
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.memory.layers.procedural import ProceduralLayer
from symfonic_graph.rules.preconditions import (
    MISSING,
    register_precondition,
    resolve_path,
    unregister_precondition,
)
from symfonic_graph.rules.preflight import preflight_lines
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import read_skill
from symfonic_graph.shape.readings import node_problem, precondition_from_item, precondition_from_node
from symfonic_graph.shape.records import (
    Precondition,
    UnreadablePrecondition,
    _Entry,
    precondition_from_input,
    precondition_nodes,
)
from symfonic_graph.shape.scope import MemoryScope


class ClockHour(_Entry):
    """Applies while ``start <= state.hour < end`` (the whole made-up kind: record, node, reading)."""

    kind: Literal["clock_hour"] = "clock_hour"
    start: int = Field(ge=0, le=23)
    end: int = Field(ge=1, le=24)

    def node(self) -> dict[str, Any]:
        return {"value": [self.start, self.end]}

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> Precondition:
        value = props.get("value")
        if not isinstance(value, list) or len(value) != 2:
            return UnreadablePrecondition(reason=f"value: {value!r} is not [start, end]")
        return super().from_node({"start": value[0], "end": value[1]})

    def state_paths(self) -> tuple[str, ...]:
        return ("hour",)


def clock_failure(entry: ClockHour, state: object) -> str | None:
    hour = resolve_path(state, "hour")
    if hour is MISSING or not isinstance(hour, int):
        return "the state has no hour"
    return None if entry.start <= hour < entry.end else f"hour {hour} is outside {entry.start}-{entry.end}"


@pytest.fixture(autouse=True)
def clock_hour() -> Iterator[None]:
    register_precondition(ClockHour, clock_failure)  # the one registration point
    yield
    unregister_precondition("clock_hour")


OFFICE = {"clock_hour": {"start": 9, "end": 17}}


def test_write_input_is_validated_and_errors_name_the_field() -> None:
    assert precondition_from_input(OFFICE, "precondition[0]") == ClockHour(start=9, end=17)
    assert precondition_from_input({"kind": "clock_hour", "clock_hour": {"start": 0, "end": 1}}, "p") == \
        ClockHour(start=0, end=1)
    with pytest.raises(ValidationError) as exc:
        precondition_from_input({"clock_hour": {"start": 30, "end": 17}}, "precondition[1]")
    assert exc.value.field == "precondition[1].clock_hour.start"
    layer = ProceduralLayer(None)  # type: ignore[arg-type]  # validation runs before any query
    with pytest.raises(ValidationError) as exc:
        layer.validate_skills(MemoryScope("acme"), [
            {"label": "L", "steps": ["deploy"], "source_tag": "authored:x", "precondition": ["auth"]},
            {"label": "L", "steps": ["deploy"], "source_tag": "authored:x", "precondition": [
                "auth", {"clock_hour": {"start": 9}}]}])
    assert exc.value.field == "skills[1].precondition[1].clock_hour.end"
    with pytest.raises(ValidationError, match='"clock_hour"'):  # the shorthand keys come from the registry
        precondition_from_input({"tool": "a", "clock_hour": {}}, "p")


def test_node_properties_read_back_to_the_record() -> None:
    [row] = precondition_nodes([OFFICE])
    assert (row["kind"], row["value"], row["position"]) == ("clock_hour", [9, 17], 0)
    assert precondition_from_node(row) == ClockHour(start=9, end=17)
    assert precondition_from_node({"kind": " Clock_Hour ", "value": [9, 17]}) == ClockHour(start=9, end=17)
    broken = precondition_from_node({"kind": "clock_hour", "value": "nine"})
    assert isinstance(broken, UnreadablePrecondition) and node_problem(broken) is not None
    assert precondition_from_item(OFFICE) == ClockHour(start=9, end=17)
    skill = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "status": "approved", "action_tool": "deploy"},
                        "preconditions": [{**row, "position": 0}]}).skill
    assert skill is not None and skill.preconditions == (ClockHour(start=9, end=17),)
    assert skill.metadata["precondition"] == [{"clock_hour": {"start": 9, "end": 17}}]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 23), st.integers(1, 24), st.one_of(st.none(), st.integers(-1, 30)), st.booleans())
def test_the_gate_applies_the_kind_to_typed_and_duck_typed_skills(start: int, end: int, hour: int | None,
                                                                  called: bool) -> None:
    entries = [{"clock_hour": {"start": start, "end": end}}, "run_tests"]
    [row, tool_row] = precondition_nodes(entries)
    typed = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "status": "approved", "action_tool": "deploy"},
                        "preconditions": [row, tool_row]}).skill
    duck = SimpleNamespace(id="s1", metadata={"action_tool": "deploy", "precondition": entries})
    state = {} if hour is None else {"hour": hour}
    applies = hour is not None and start <= hour < end
    expected = "blocked" if applies and not called else "allowed"
    for skill in (typed, duck):
        rules = RuleSet([skill], pack=skill is typed)
        decision = explain_tool_call(rules, "deploy", state=state, called={"run_tests"} if called else set())
        assert decision.verdict == expected
        assert bool(preflight_lines(RuleSet(r.skill for r in rules.rules if r.applies(state)))) == applies


def test_an_unknown_or_unevaluated_kind_fails_closed() -> None:
    [row] = precondition_nodes([OFFICE])
    unregister_precondition("clock_hour")
    skill = read_skill({"skill": {"id": "s1", "tenant_id": "acme", "status": "approved", "action_tool": "deploy"},
                        "preconditions": [row]}).skill
    assert skill is not None and skill.preconditions[0].kind == "unreadable"
    assert explain_tool_call(RuleSet([skill]), "deploy", state={"hour": 3}).verdict == "blocked"
    with pytest.raises(TypeError, match="evaluator"):
        register_precondition(ClockHour)  # a condition without its evaluator is refused
    register_precondition(ClockHour, clock_failure)
