"""The Dogwood differential's harness on a few conversations: our gate and Dogwood decide alike where they should."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

pytest.importorskip("dogwood", reason="dogwood-py is not installed")

from bench.dogwood_diff import (
    cedar_schema,
    compare,
    conversation,
    dogwood_decisions,
    our_decisions,
    scenarios,
    validate,
)


def _call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "args": args}]}


def _result(call_id: str, name: str, **content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": json.dumps(content)}


def _by_name(name: str) -> Any:
    return next(s for s in scenarios() if s.name == name)


def test_same_arguments_decided_alike_by_hand() -> None:
    scenario = _by_name("same arguments")
    messages = [
        {"role": "user", "content": "change my bags"},
        _call("a", "update_baggages", reservation_id="R1", total_baggages=2),  # nothing read yet
        _result("a", "update_baggages", reservation_id="R1", total_baggages=2),
        _call("b", "get_reservation", reservation_id="R1"),
        _result("b", "get_reservation", reservation_id="R1", cabin="economy", status="active"),
        _call("c", "update_baggages", reservation_id="R1", total_baggages=3),  # R1 was read
        _result("c", "update_baggages", reservation_id="R1", total_baggages=3),
        _call("d", "update_baggages", reservation_id="R2", total_baggages=1),  # R2 was not
        {"role": "tool", "tool_call_id": "d", "name": "update_baggages", "content": "Error", "status": "error"},
    ]
    ours = our_decisions(scenario.skills, messages)
    theirs = dogwood_decisions(scenario.policy, cedar_schema(), messages)
    assert {k: ours[k] for k in "acd"} == {"a": False, "c": True, "d": False}
    assert {k: theirs[k] for k in "acd"} == {k: ours[k] for k in "acd"}


def test_a_failed_read_counts_for_neither() -> None:
    scenario = _by_name("same arguments")
    messages = [
        _call("b", "get_reservation", reservation_id="R1"),
        {"role": "tool", "tool_call_id": "b", "name": "get_reservation", "content": "Error", "status": "error"},
        _call("c", "cancel_reservation", reservation_id="R1"),
        _result("c", "cancel_reservation", reservation_id="R1", status="cancelled"),
    ]
    assert our_decisions(scenario.skills, messages)["c"] is False
    assert dogwood_decisions(scenario.policy, cedar_schema(), messages)["c"] is False


def test_latest_reads_only_the_most_recent_read() -> None:
    scenario = _by_name("fact: latest")
    messages = [
        _call("a", "get_reservation", reservation_id="R1"),
        _result("a", "get_reservation", reservation_id="R1", cabin="economy", status="active", total_baggages=1),
        _call("b", "update_baggages", reservation_id="R1", total_baggages=2),  # the latest read says active
        _result("b", "update_baggages", reservation_id="R1", total_baggages=2),
        _call("c", "get_reservation", reservation_id="R1"),
        _result("c", "get_reservation", reservation_id="R1", cabin="economy", status="flown", total_baggages=2),
        _call("d", "update_baggages", reservation_id="R1", total_baggages=3),  # now it says flown
    ]
    ours = our_decisions(scenario.skills, messages)
    theirs = dogwood_decisions(scenario.policy, cedar_schema(), messages)
    assert (ours["b"], ours["d"]) == (True, False)
    assert (theirs["b"], theirs["d"]) == (True, False)


@pytest.mark.parametrize("scenario", scenarios(), ids=lambda s: s.name)
def test_random_conversations_agree_or_differ_only_as_named(scenario: Any) -> None:
    schema = cedar_schema()
    assert validate(scenario, schema) == []
    rng = random.Random(7)
    tally = compare(scenario, (conversation(rng, n) for n in range(25)), schema)
    assert 0 < tally.allowed < tally.decisions  # both verdicts occur
    if scenario.expected is None:
        assert tally.agree == tally.decisions, tally.disagreements
    assert "OTHER" not in tally.labels
