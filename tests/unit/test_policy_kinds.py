"""The rules over results, arguments and counts, decided in pure Python (no Neo4j): one case per behaviour."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from symfonic_graph.errors import ValidationError
from symfonic_graph.gate import gate_decisions
from symfonic_graph.shape.records import precondition_from_input

NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)


def _skill(*precondition: Any, action: str = "act") -> dict[str, Any]:
    return {"metadata": {"label": "L", "action_tool": action, "precondition": list(precondition)}}


def _turn(*earlier: tuple[str, dict[str, Any], Any, bool], calls: list[tuple[str, dict[str, Any]]],
          user_after: int | None = None) -> list[Any]:
    """A user message, earlier calls with their results (name, args, result, failed), then one AI message."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i, (name, args, result, failed) in enumerate(earlier):
        if user_after == i:
            messages.append({"role": "user", "content": "and now"})
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"e{i}", "name": name,
                                                                              "args": args}]})
        messages.append({"role": "tool", "tool_call_id": f"e{i}", "content": json.dumps(result),
                         **({"status": "error"} if failed else {})})
    messages.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "name": name, "args": args} for i, (name, args) in enumerate(calls)]})
    return messages


def _verdicts(skill: dict[str, Any], messages: list[Any]) -> list[str]:
    return [d.content() or "allowed" for d in gate_decisions(messages, [skill], {}, now=NOW)]


ORDER = ("get_order", {"order_id": "7"})


def test_a_fact_reads_the_result_of_the_same_order_and_says_not_allowed_when_it_is_false() -> None:
    skill = _skill({"fact": {"tool": "get_order", "same_args": ["order_id"], "where": 'result.status == "pending"',
                             "message": "Only pending orders can be cancelled."}})
    pending = ("get_order", {"order_id": "7"}, {"status": "pending"}, False)
    delivered = ("get_order", {"order_id": "7"}, {"status": "delivered"}, False)
    other = ("get_order", {"order_id": "8"}, {"status": "pending"}, False)
    assert _verdicts(skill, _turn(pending, calls=[("act", {"order_id": "7"})])) == ["allowed"]
    [refused] = _verdicts(skill, _turn(delivered, calls=[("act", {"order_id": "7"})]))
    assert refused.startswith("Not allowed: Only pending orders can be cancelled. (skill: L)")
    [missing] = _verdicts(skill, _turn(other, calls=[("act", {"order_id": "7"})]))
    assert missing.startswith("Missing precondition: call get_order (same order_id) before act")
    failed = ("get_order", {"order_id": "7"}, {"status": "pending"}, True)
    assert _verdicts(skill, _turn(failed, calls=[("act", {"order_id": "7"})]))[0].startswith("Missing")


def test_latest_voided_by_within_and_mapped_same_args() -> None:
    pending = ("get_order", {"id": "7"}, {"status": "pending"}, False)
    delivered = ("get_order", {"id": "7"}, {"status": "delivered"}, False)
    latest = _skill({"fact": {"tool": "get_order", "same_args": {"order_id": "id"}, "latest": True,
                              "where": 'result.status == "pending"'}})
    assert _verdicts(latest, _turn(delivered, pending, calls=[("act", {"order_id": "7"})])) == ["allowed"]
    assert _verdicts(latest, _turn(pending, delivered, calls=[("act", {"order_id": "7"})]))[0].startswith("Not")
    anyone = _skill({"fact": {"tool": "get_order", "same_args": {"order_id": "id"},
                              "where": 'result.status == "pending"'}})
    assert _verdicts(anyone, _turn(pending, delivered, calls=[("act", {"order_id": "7"})])) == ["allowed"]

    login = ("login", {"user": "u"}, {"ok": True}, False)
    logout = ("logout", {"user": "u"}, {}, False)
    voided = _skill({"fact": {"tool": "login", "voided_by": ["logout"]}})
    assert _verdicts(voided, _turn(login, calls=[("act", {})])) == ["allowed"]
    assert _verdicts(voided, _turn(login, logout, calls=[("act", {})]))[0].startswith("Missing")
    assert _verdicts(voided, _turn(login, logout, login, calls=[("act", {})])) == ["allowed"]

    this_turn = _skill({"fact": {"tool": "login", "within": "user_turn"}})
    assert _verdicts(this_turn, _turn(login, logout, calls=[("act", {})], user_after=1))[0].startswith("Missing")
    assert _verdicts(this_turn, _turn(logout, login, calls=[("act", {})], user_after=1)) == ["allowed"]


def test_checks_read_args_state_and_a_zone_less_time_as_utc() -> None:
    skill = _skill({"check": {"where": "size(args.passengers) <= 5", "message": "At most five passengers."}},
                   {"check": {"where": 'timestamp(args.date) > now'}})
    ok = {"passengers": [1, 2], "date": "2024-05-16T09:00:00"}
    assert _verdicts(skill, _turn(calls=[("act", ok)])) == ["allowed"]
    assert _verdicts(skill, _turn(calls=[("act", {**ok, "passengers": [1] * 6})]))[0].startswith(
        "Not allowed: At most five passengers.")
    past = {**ok, "date": "2024-05-15T14:00:00"}
    assert "is false for this call" in _verdicts(skill, _turn(calls=[("act", past)]))[0]


def test_an_expression_that_cannot_be_evaluated_blocks_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    skill = _skill({"check": {"where": "args.amount <= 100"}})
    for args in ({}, {"amount": "lots"}):
        [text] = _verdicts(skill, _turn(calls=[("act", args)]))
        assert text.startswith("Not allowed: a rule could not be evaluated, so `act` was not executed")
    assert "could not be evaluated" in caplog.text and "'L'" in caplog.text
    guarded = _skill({"check": {"where": "has(args.amount) && args.amount <= 100"}})
    assert _verdicts(guarded, _turn(calls=[("act", {})]))[0].startswith("Not allowed: `has(args.amount)")


def test_any_of_facts_names_the_call_that_can_still_help_and_why_the_others_do_not() -> None:
    skill = _skill({"any": [
        {"fact": {"tool": "find_by_email", "where": "result == args.user_id", "message": "Not the same user."}},
        {"fact": {"tool": "find_by_zip", "where": "result == args.user_id", "message": "Not the same user."}},
        {"check": {"where": 'args.channel == "staff"', "message": "Staff may act for anyone."}}]})
    other = ("find_by_email", {"email": "x"}, "u2", False)
    mine = ("find_by_email", {"email": "x"}, "u1", False)
    [text] = _verdicts(skill, _turn(other, calls=[("act", {"user_id": "u1", "channel": "web"})]))
    assert text.startswith("Missing precondition: call find_by_zip (the others do not hold: Not the same user. "
                           "Staff may act for anyone.) before act")
    assert _verdicts(skill, _turn(mine, calls=[("act", {"user_id": "u1", "channel": "web"})])) == ["allowed"]
    assert _verdicts(skill, _turn(calls=[("act", {"user_id": "u1", "channel": "staff"})])) == ["allowed"]


def test_a_fact_over_the_action_itself_is_never_asked_for() -> None:
    skill = _skill({"fact": {"tool": "act", "where": "true", "message": "Only after an earlier change."}})
    [text] = _verdicts(skill, _turn(calls=[("act", {})]))
    assert text.startswith("Not allowed: Only after an earlier change.")
    grouped = _skill({"any": [{"fact": {"tool": "act", "message": "Only after an earlier change."}}]})
    assert _verdicts(grouped, _turn(calls=[("act", {})]))[0].startswith("Not allowed: Only after an earlier change.")


def test_limits_count_the_conversation_and_the_calls_already_allowed_in_the_batch() -> None:
    once = _skill({"limit": {"max_calls": 2, "message": "Twice at most."}})
    done = ("act", {}, {}, False)
    failed = ("act", {}, {}, True)
    assert _verdicts(once, _turn(done, failed, calls=[("act", {}), ("act", {})]))[1].startswith(
        "Not allowed: Twice at most.")
    assert _verdicts(once, _turn(failed, failed, calls=[("act", {}), ("act", {})])) == ["allowed", "allowed"]
    total = _skill({"limit": {"max_sum": 100, "sum": "args.amount", "message": "100 a conversation."}})
    paid = ("act", {"amount": 60}, {}, False)
    assert _verdicts(total, _turn(paid, calls=[("act", {"amount": 40}), ("act", {"amount": 1})])) == [
        "allowed", _verdicts(total, _turn(paid, calls=[("act", {"amount": 41})]))[0]]
    assert _verdicts(total, _turn(paid, calls=[("act", {"amount": 41})]))[0].startswith("Not allowed: 100 a conv")


@pytest.mark.parametrize("item, field", [
    ({"check": {"where": "args.x >"}}, "p.check.where"),
    ({"check": {"where": 7}}, "p.check.where"),
    ({"fact": {"tool": "t", "where": "result.("}}, "p.fact.where"),
    ({"fact": {"tool": "t", "same_args": {"a": "not a name"}}}, "p.fact.same_args"),
    ({"limit": {"max_calls": 0}}, "p.limit.max_calls"),
    ({"limit": {"max_sum": 5}}, "p.limit.sum"),
    ({"limit": {"max_calls": 1, "window": "24h"}}, "p.limit.window"),
    ({"limit": {"max_calls": 1, "per": "namespace", "window": "soon"}}, "p.limit.window"),
    ({"any": [{"fact": {"tool": "t"}}, {"nope": 1}]}, "p.any[1]"),
])
def test_bad_rules_are_refused_naming_the_field(item: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        precondition_from_input(item, "p")
    assert str(error.value).startswith(field), str(error.value)


def test_a_not_allowed_answer_that_lost_its_metadata_is_still_the_gates_and_meets_nothing() -> None:
    skill = _skill("lookup", action="act")
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "x1", "name": "lookup", "args": {}}]},
        {"role": "tool", "tool_call_id": "x1", "content": "Not allowed: no. `lookup` was not executed"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "x2", "name": "act", "args": {}}]},
    ]
    assert _verdicts(skill, messages)[0].startswith("Missing precondition: call lookup before act")
