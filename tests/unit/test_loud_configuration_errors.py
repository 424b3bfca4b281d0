"""Programming errors are loud: only a store outage takes the pass-through / strict path.

A lookup that raises anything else, or returns something that is no iterable
of skills, raises ``ConfigurationError`` out of the gate (logged at ERROR with
its traceback) instead of letting the guarded tool run.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage

import symfonic_graph
from symfonic_graph.errors import ConfigurationError, StoreUnavailableError, SymfonicGraphError
from symfonic_graph.gate import create_precondition_gate_node, run_gate
from symfonic_graph.langgraph import build_agent_graph
from tests._fakes import Scripted, ai_calls, recording_tools

pytestmark = pytest.mark.anyio

STATE = {"messages": [AIMessage("", tool_calls=[{"name": "deliver", "args": {}, "id": "c1"}])]}
RULE = {"metadata": {"label": "Deliver", "action_tool": "deliver", "precondition": ["get_status"]}}


def test_configuration_error_is_exported_under_the_root() -> None:
    assert symfonic_graph.ConfigurationError is ConfigurationError
    assert issubclass(ConfigurationError, SymfonicGraphError)


@pytest.mark.parametrize("exc", [KeyError("tenant"), TypeError("bad"), RuntimeError("bug"), TimeoutError("t")])
async def test_a_lookup_raising_anything_but_an_outage_raises_a_configuration_error(
    exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(state: Any) -> Any:
        raise exc

    with caplog.at_level(logging.ERROR, logger="symfonic_graph"), pytest.raises(ConfigurationError) as raised:
        await run_gate(STATE, broken, strict=True)
    assert raised.value.__cause__ is exc
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info is not None and record.exc_info[1] is exc  # logged with its traceback


@pytest.mark.parametrize("result", [5, "deliver", b"x", {"a": 1}, [5], [None], ["deliver"], 2.5, True])
async def test_a_lookup_returning_no_iterable_of_skills_raises_a_configuration_error(result: Any) -> None:
    async def wrong(state: Any) -> Any:
        return result

    with pytest.raises(ConfigurationError, match="iterable of skills"):
        await create_precondition_gate_node(wrong)(STATE)


async def test_an_outage_still_takes_the_pass_through_or_strict_path() -> None:
    async def down(state: Any) -> Any:
        raise StoreUnavailableError("Neo4j did not answer")

    assert await create_precondition_gate_node(down)(STATE) == {}
    strict = await create_precondition_gate_node(down, strict=True)(STATE)
    assert strict["messages"][0].content.startswith("Precondition check unavailable")


async def test_skills_in_every_supported_shape_still_enforce() -> None:
    from types import SimpleNamespace

    for skills in ([RULE], (SimpleNamespace(**RULE),), iter([RULE]), None):
        async def lookup(state: Any, skills: Any = skills) -> Any:
            return skills

        out = await create_precondition_gate_node(lookup)(STATE)
        assert bool(out) is (skills is not None)


async def test_an_agent_whose_lookup_returns_garbage_fails_loud_and_the_tool_never_runs() -> None:
    async def five(state: Any) -> Any:
        return 5

    tools, executed = recording_tools("get_status", "deliver")
    graph = build_agent_graph(Scripted(responses=[ai_calls(("deliver", "c1"))]), tools, five, preflight=False)
    with pytest.raises(ConfigurationError):
        await graph.ainvoke({"messages": [("user", "deliver")]})
    assert executed == []
