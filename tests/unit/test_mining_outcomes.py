"""Mining that fits real logs: --outcomes all, near misses, same_args proposals (pure, no database)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from symfonic_graph import Trace, mine_rules
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.mining import NearMiss, _value_key, mine
from symfonic_graph.rules.preconditions import same_arguments


def _conv(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """One call per AI message, each answered."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for n, (name, args) in enumerate(calls):
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{n}", "type": "function",
                                         "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "ok"})
    return messages


def _login_buy(i: int, outcome: str | None) -> Trace:
    return Trace(f"t{i}", _conv(("login", {}), ("buy", {})), outcome)  # type: ignore[arg-type]


# --- outcomes ---------------------------------------------------------------------


def test_a_rule_only_failed_conversations_support_is_proposed_with_outcomes_all() -> None:
    traces = [_login_buy(i, "failure") for i in range(6)]
    assert mine_rules(traces) == []  # default: only successful traces count, and there are none
    [p] = mine_rules(traces, outcomes="all")
    assert (p.precondition, p.action, p.support, p.confidence, p.failures_without) == ("login", "buy", 6, 1.0, 0)


def test_outcomes_all_counts_every_trace_and_success_the_successful_ones() -> None:
    ok = [_login_buy(i, "success") for i in range(5)]
    careless = [Trace(f"f{i}", _conv(("buy", {})), "failure") for i in range(5)]
    [p] = mine_rules([*ok, *careless])
    assert (p.support, p.confidence, p.failures_without) == (5, 1.0, 5)
    assert mine_rules([*ok, *careless], outcomes="all") == []  # 5 of 10 without login
    report = mine([*ok, *careless], outcomes="all", min_confidence=0.5)
    assert (report.traces, report.counted, report.proposals[0].support) == (10, 10, 10)
    assert mine([*ok, *careless]).counted == 5


def test_outcomes_is_checked() -> None:
    with pytest.raises(ValidationError, match="outcomes"):
        mine_rules([], outcomes="failure")  # type: ignore[arg-type]


# --- near misses ------------------------------------------------------------------


def test_near_misses_are_listed_with_their_shortfall_never_proposed() -> None:
    four = [_login_buy(i, None) for i in range(4)]
    report = mine(four, min_support=5)
    assert report.proposals == []
    assert report.near_misses == [NearMiss("buy", "login", 4, 1.0, 1, 0.0)]
    shaky = [_login_buy(i, None) for i in range(18)] + [Trace(f"x{i}", _conv(("buy", {}))) for i in range(2)]
    report = mine(shaky)  # confidence 0.9 against 0.95
    assert report.proposals == [] and report.near_misses == [NearMiss("buy", "login", 20, 0.9, 0, 0.05)]


def test_far_misses_are_not_listed() -> None:
    assert mine([_login_buy(i, None) for i in range(2)], min_support=5).near_misses == []  # under half the support
    far = [_login_buy(i, None) for i in range(10)] + [Trace(f"x{i}", _conv(("buy", {}))) for i in range(10)]
    assert mine(far).near_misses == []  # confidence 0.5


def test_at_most_twenty_near_misses_the_closest() -> None:
    traces = []
    for k in range(50):  # action buy{k}: k + 1 traces, all with login first
        traces += [Trace(f"t{k}-{i}", _conv(("login", {}), (f"buy{k:02}", {}))) for i in range(k + 1)]
    near = mine(traces, min_support=60).near_misses  # 21 reach half the support (30 to 50 traces)
    assert len(near) == 20 and min(n.support for n in near) == 31
    assert [n.action for n in near] == sorted(n.action for n in near)


# --- same_args --------------------------------------------------------------------


def _cancel(i: int, rid: str, other: str | None = None) -> Trace:
    return Trace(f"c{i}", _conv(("get_reservation_details", {"reservation_id": rid, "user_id": "u"}),
                                ("cancel_reservation", {"reservation_id": other or rid, "reason": "x"})))


def test_same_args_is_proposed_when_the_precondition_read_the_same_object() -> None:
    [p] = mine_rules([_cancel(i, f"R{i}") for i in range(6)], actions=["cancel_reservation"])
    assert (p.precondition, p.same_args) == ("get_reservation_details", ("reservation_id",))
    assert p.to_dict()["same_args"] == ["reservation_id"]


def test_same_args_needs_min_confidence_of_the_supporting_traces() -> None:
    traces = [_cancel(i, f"R{i}") for i in range(19)] + [_cancel(99, "R1", other="R2")]
    [p] = mine_rules(traces, actions=["cancel_reservation"])  # 19 of 20 equal: 0.95
    assert p.same_args == ("reservation_id",)
    traces.append(_cancel(98, "R1", other="R3"))
    [q] = mine_rules(traces, actions=["cancel_reservation"])  # 19 of 21: a plain ordering rule
    assert q.same_args == ()


def test_every_call_of_the_action_needs_an_equal_earlier_call() -> None:
    def twice(i: int) -> Trace:  # reads R{i}, cancels R{i}, then cancels R-other it never read
        return Trace(f"d{i}", _conv(("get_reservation_details", {"reservation_id": f"R{i}"}),
                                    ("cancel_reservation", {"reservation_id": f"R{i}"}),
                                    ("cancel_reservation", {"reservation_id": "other"})))
    [p] = mine_rules([twice(i) for i in range(6)], actions=["cancel_reservation"])
    assert p.same_args == ()


def test_values_compare_as_the_gate_compares_them() -> None:
    rng = random.Random(3)
    pool: list[Any] = [1, 1.0, 2, "1", True, None, [1, 2], [1.0, 2], {"a": 1}, {"a": 1.0}, "é", 0.5, [], {}]
    for _ in range(300):
        a, b = rng.choice(pool), rng.choice(pool)
        gate = same_arguments(["x"], {"x": a}, {"x": b})
        ours = _value_key(a) is not None and _value_key(a) == _value_key(b)
        assert ours == (gate and a is not None), (a, b)
