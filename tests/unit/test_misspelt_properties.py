"""A misspelt property that would weaken a rule keeps its skill blocking, on the one read every path shares."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from symfonic_graph.rules.gate import run_gate
from symfonic_graph.shape.models import read_skill
from symfonic_graph.shape.properties import PRECONDITION_PROPERTIES, SKILL_PROPERTIES, near_miss
from symfonic_graph.shape.records import UnreadablePrecondition

PROJECTION = Path(__file__).resolve().parents[2] / "cypher" / "queries" / "skill_projection.cypher"


def _listed(after: str) -> frozenset[str]:
    text = PROJECTION.read_text(encoding="utf-8")
    block = text[text.index(after):]
    block = block[block.index("NOT k IN"):]
    return frozenset(re.findall(r"'([a-z_]+)'", block[:block.index("]")]))


def test_the_projection_lists_the_documented_properties() -> None:
    assert _listed("unknown: [k IN keys(p)") == PRECONDITION_PROPERTIES
    assert _listed("unknown: [k IN keys(s)") == SKILL_PROPERTIES


def _row(skill_unknown: list[list[object]], precondition_unknown: list[str]) -> dict[str, object]:
    return {"skill": {"id": "s1", "tenant_id": "acme", "status": "approved", "steps": ["lookup_order"],
                      "action_tool": None, "unknown": skill_unknown},
            "preconditions": [{"kind": "tool", "tool": "lookup_order", "same_args": None, "position": 0,
                               "unknown": precondition_unknown}]}


@pytest.mark.parametrize("name", ["same_arg", "Same_Args", "withn", "wthin", "if_mising", "tool_", "tols"])
def test_a_misspelt_precondition_property_makes_the_precondition_unreadable(name: str) -> None:
    reading = read_skill(_row([], [name]))
    assert reading.skill is not None
    [entry] = reading.skill.preconditions
    assert isinstance(entry, UnreadablePrecondition) and repr(name) not in entry.reason and name in entry.reason
    assert any("misspelt" in p for p in reading.problems)


@pytest.mark.parametrize("name", ["note", "owner", "created_by", "id", "symfonic_anything"])
def test_an_unrelated_property_changes_nothing(name: str) -> None:
    reading = read_skill(_row([[name, "x"]], [name]))
    assert reading.skill is not None
    assert [e.kind for e in reading.skill.preconditions] == ["tool"] and reading.skill.action_tool is None


def test_a_misspelt_action_tool_blocks_the_tool_it_names() -> None:
    reading = read_skill(_row([["acton_tool", "issue_refund"]], []))
    assert reading.skill is not None and reading.skill.action_tool == "issue_refund"
    assert any(isinstance(e, UnreadablePrecondition) for e in reading.skill.preconditions)
    skill = reading.skill

    async def lookup(state: object) -> list[object]:
        return [skill]

    def decide(tool: str) -> str:
        messages = [{"role": "user", "content": "refund"},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "name": "lookup_order"}]},
                    {"role": "tool", "content": "found", "tool_call_id": "c0"},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": tool, "args": {}}]}]
        [decision] = asyncio.run(run_gate({"messages": messages}, lookup))
        return decision.verdict

    assert decide("issue_refund") == "blocked"  # the tool the operator meant, not steps[0]
    assert decide("lookup_order") == "allowed"


def test_near_miss_reaches_every_documented_name_and_no_unrelated_one() -> None:
    for known in (PRECONDITION_PROPERTIES, SKILL_PROPERTIES):
        for name in known:
            if len(name) >= 5 and name[:-1] not in known:
                assert near_miss(name[:-1], known) == name
            assert near_miss(name, known) is None
