"""A precondition kind registered in one place works through Neo4j: written by the layer, read by the turn,
applied by the gate node (the guarded tool runs or not), with no other change to the package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, TurnMemory, create_precondition_gate_node
from symfonic_graph.errors import ValidationError
from symfonic_graph.layers import ProceduralLayer
from symfonic_graph.rules.preconditions import register_precondition, unregister_precondition
from tests._fakes import ai_calls
from tests.unit.test_one_kind_one_place import ClockHour, clock_failure

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def clock_hour() -> Iterator[None]:
    register_precondition(ClockHour, clock_failure)
    yield
    unregister_precondition("clock_hour")


async def test_a_registered_kind_is_written_read_and_enforced(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    with pytest.raises(ValidationError) as exc:  # validated before any query
        await layer.seed_authored_skill(scope, label="Deploy", steps=["deploy"], source_tag="authored:ops",
                                        precondition=[{"clock_hour": {"start": 9, "end": 99}}])
    assert exc.value.field == "precondition[0].clock_hour.end"
    written = await layer.seed_authored_skill(
        scope, label="Deploy", steps=["deploy"], source_tag="authored:ops", action_tool="deploy",
        precondition=[{"clock_hour": {"start": 9, "end": 17}}, "run_tests"])
    assert written.preconditions[0] == ClockHour(start=9, end=17)

    memory = TurnMemory(store, max_age=0)
    [read] = (await memory.begin(scope)).skills
    assert read.preconditions == written.preconditions
    gate = create_precondition_gate_node(memory.get_active_skills)
    for hour, blocked in ((10, True), (20, False)):  # inside office hours the rule applies; outside it does not
        update = await gate({"memory_scope": scope, "hour": hour, "messages": [ai_calls(("deploy", "c1"))]})
        assert bool(update) == blocked, (hour, update)
        if blocked:
            assert update["messages"][0].content.startswith("Missing precondition: call run_tests before deploy")

    unregister_precondition("clock_hour")  # a node of a kind no longer known keeps its skill blocking
    update = await create_precondition_gate_node(TurnMemory(store, max_age=0).get_active_skills)(
        {"memory_scope": scope, "hour": 20, "messages": [ai_calls(("deploy", "c1"))]})
    assert update and "could not be read" in update["messages"][0].content
