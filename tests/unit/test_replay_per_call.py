"""Replay per call: every blocked or would-be blocked call listed, and each rule's blocks on its own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from symfonic_graph import Trace, replay
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.replay import _GATE_TAKES_NOW, ReplayDecision, first_sentence
from tests._skills import skill


def _conv(*batches: list[tuple[str, str]]) -> list[Any]:
    """Each batch one AI message of ``(call id, tool)`` calls, every call answered."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for batch in batches:
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": cid, "name": name, "args": {}} for cid, name in batch]})
        messages += [{"role": "tool", "tool_call_id": cid, "content": "ok"} for cid, _ in batch]
    return messages


LOGIN = skill("buy", ["login"], label="Login first", id="s-login")
CART = skill("buy", ["view_cart"], label="Cart first", id="s-cart", enforcement="shadow")


def test_each_blocked_call_is_listed_with_its_position_mode_rules_and_reason() -> None:
    # Recorded conversations reuse call ids: both buys are "c1"; the index tells them apart.
    trace = Trace("t1", _conv([("c1", "search")], [("c1", "buy")], [("c2", "login")], [("c1", "buy")]))
    report = replay([trace], [LOGIN, CART], decisions=True)
    assert report.decisions == [
        ReplayDecision("t1", "c1", 1, "buy", ("s-login", "s-cart"), "enforce",
                       "Missing precondition: call login before buy (skill: Login first)."),
        ReplayDecision("t1", "c1", 3, "buy", ("s-cart",), "shadow",
                       "Missing precondition: call view_cart before buy (skill: Cart first)."),
    ]
    assert report.to_dict()["decisions"][1] == {
        "trace": "t1", "call_id": "c1", "index": 3, "tool": "buy", "rules": ["s-cart"], "mode": "shadow",
        "reason": "Missing precondition: call view_cart before buy (skill: Cart first)."}


def test_the_enforced_rule_gives_the_reason_even_behind_a_shadow_rule() -> None:
    trace = Trace("t", _conv([("a", "buy")]))
    [decision] = replay([trace], [CART, LOGIN], decisions=True).decisions
    assert (decision.rules, decision.mode) == (("s-cart", "s-login"), "enforce")
    assert decision.reason.startswith("Missing precondition: call login before buy")


def test_calls_in_one_batch_count_their_positions_one_by_one() -> None:
    trace = Trace("t", _conv([("x", "login"), ("y", "buy")], [("z", "buy")]))
    assert [d.index for d in replay([trace], [LOGIN], decisions=True).decisions] == [1]


def test_blocked_alone_counts_a_rule_that_another_rule_failed_before() -> None:
    traces = [Trace("none", _conv([("1", "buy")])),                       # both fail: login credited
              Trace("login", _conv([("1", "login")], [("2", "buy")])),     # only the cart rule fails
              Trace("both", _conv([("1", "login"), ("2", "view_cart")], [("3", "buy")]))]
    report = replay(traces, [LOGIN, CART])
    by_id = {r.skill_id: r for r in report.rules}
    assert (by_id["s-login"].blocked, by_id["s-login"].blocked_alone) == (1, 1)
    assert (by_id["s-cart"].blocked, by_id["s-cart"].blocked_alone) == (1, 2)
    assert report.to_dict()["rules"][1]["blocked_alone"] == 2
    assert report.decisions == []  # listed only when asked


def test_a_mined_rule_and_a_hand_written_one_compare_call_for_call() -> None:
    mined = skill("buy", ["login"], label="mined", id="mined")
    traces = [Trace(f"t{i}", _conv([("1", "buy")])) for i in range(4)]
    report = replay(traces, [LOGIN, mined])
    assert [(r.skill_id, r.blocked, r.blocked_alone) for r in report.rules] == [("s-login", 4, 4), ("mined", 0, 4)]


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValidationError, match="now: must be a timezone-aware datetime"):
        replay([], [LOGIN], now=datetime(2026, 1, 1))  # a naive datetime: the point of the test


@pytest.mark.skipif(not _GATE_TAKES_NOW, reason="the gate does not read the time yet")
def test_now_reaches_the_gate() -> None:
    assert replay([], [LOGIN], now=datetime(2026, 1, 1, tzinfo=UTC)).traces == 0


def test_first_sentence_stops_at_a_stop_followed_by_a_space() -> None:
    assert first_sentence("Not allowed: at most 3 refunds. Ask a human. [symfonic-graph gate]") == \
        "Not allowed: at most 3 refunds."
    assert first_sentence("no stop at all [symfonic-graph gate]") == "no stop at all"
