"""Replay per call: every blocked or would-be blocked call listed, and each rule's blocks on its own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from symfonic_graph import Trace, replay
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.replay import ReplayDecision, first_sentence
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


SEASON = skill("buy", [{"check": {"where": 'now < timestamp("2026-06-01T00:00:00Z")',
                                   "message": "Sales close at the end of May. Tell the customer."}}],
               label="Season", id="s-season")


def test_now_is_the_time_the_rules_see() -> None:
    trace = Trace("t", _conv([("a", "buy")]))
    assert replay([trace], [SEASON], now=datetime(2026, 5, 31, 23, 59, tzinfo=UTC), decisions=True).decisions == []
    [late] = replay([trace], [SEASON], now=datetime(2026, 6, 1, tzinfo=UTC), decisions=True).decisions
    assert (late.rules, late.mode, late.reason) == (("s-season",), "enforce",
                                                    "Not allowed: Sales close at the end of May.")
    # a zone-less datetime is UTC, as in the gate
    assert replay([trace], [SEASON], now=datetime(2026, 6, 1), decisions=True).decisions == [late]
    with pytest.raises(ValidationError, match="now: must be a datetime"):
        replay([trace], [SEASON], now="2026-06-01")  # type: ignore[arg-type]


def test_a_limit_counts_the_calls_allowed_earlier_in_the_same_batch_as_the_gate_does() -> None:
    once = skill("buy", [{"limit": {"max_calls": 1, "per": "conversation", "message": "One buy per conversation."}}],
                 label="Once", id="s-once")
    batch = Trace("batch", _conv([("a", "buy"), ("b", "buy")]))
    turns = Trace("turns", _conv([("a", "buy")], [("b", "buy")]))
    report = replay([batch, turns], [once], decisions=True)
    assert [(d.trace, d.index, d.reason) for d in report.decisions] == [
        ("batch", 1, "Not allowed: One buy per conversation."), ("turns", 1, "Not allowed: One buy per conversation.")]


def test_first_sentence_stops_at_a_stop_followed_by_a_space() -> None:
    assert first_sentence("Not allowed: at most 3 refunds. Ask a human. [symfonic-graph gate]") == \
        "Not allowed: at most 3 refunds."
    assert first_sentence("no stop at all [symfonic-graph gate]") == "no stop at all"
