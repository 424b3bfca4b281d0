"""A call whose arguments cannot be read (None, or no mapping) is decided as if they were ``{}``, always.

Every precondition kind that reads arguments (``same_args`` of a tool or a fact, a fact's ``where``, a check,
a limit's ``sum`` per conversation and per namespace, any-of alternatives), over unreadable arguments in
several shapes, on a fresh decision and on a decision that converted other calls' arguments first: the same
decision as for ``{}`` in every order, never an exception out of the gate.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest

from symfonic_graph.gate import gate_decisions
from symfonic_graph.rules._messages import parse_turn
from symfonic_graph.rules.events import ToolCallRef
from symfonic_graph.rules.gate import GateDecision, decide_call
from symfonic_graph.rules.policy import Bindings, check_outcome, fact_outcome
from symfonic_graph.rules.preconditions import same_arguments
from symfonic_graph.rules.ruleset import rules_of
from symfonic_graph.shape.rule_kinds import CheckPrecondition, FactPrecondition

NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)
STATE = {"tier": "bronze"}

RULES: dict[str, Any] = {
    "tool same_args": {"tool": "get_order", "same_args": ["order_id"]},
    "fact same_args": {"fact": {"tool": "get_order", "same_args": ["order_id"]}},
    "fact mapped same_args": {"fact": {"tool": "get_order", "same_args": {"order_id": "order_id"}}},
    "fact where args": {"fact": {"tool": "find_user", "where": "result == args.user_id"}},
    "fact where call": {"fact": {"tool": "get_order", "where": "call.order_id == args.order_id"}},
    "fact where has": {"fact": {"tool": "get_order", "where": "!has(args.order_id) || result.status == 'x'"}},
    "fact voided": {"fact": {"tool": "login", "same_args": ["user"], "voided_by": ["logout"]}},
    "check field": {"check": {"where": "args.amount <= 5", "message": "At most 5."}},
    "check null": {"check": {"where": "args == null"}},
    "check size": {"check": {"where": "size(args) == 0"}},
    "check has": {"check": {"where": "has(args.amount)"}},
    "check macro": {"check": {"where": "args.all(k, k != 'amount')"}},
    "check state or": {"check": {"where": 'state.tier == "gold" || args.amount < 50'}},
    "check two fields": {"check": {"where": "args.amount <= 500 && args.currency == 'EUR'"}},
    "limit sum": {"limit": {"max_sum": 10, "sum": "args.amount"}},
    "limit sum size": {"limit": {"max_sum": 10, "sum": "size(args)"}},
    "limit sum namespace": {"limit": {"max_sum": 10, "sum": "args.amount", "per": "namespace"}},
    "limit calls": {"limit": {"max_calls": 2}},
    "any fact or check": {"any": [{"fact": {"tool": "find_user", "where": "result == args.user_id"}},
                                  {"check": {"where": "args.amount <= 5"}}]},
    "any tool or check": {"any": ["never_called", {"check": {"where": "size(args) == 0"}}]},
}

READABLE = {"amount": 3, "order_id": "7", "user_id": "u1", "user": "u", "currency": "EUR"}
# Shapes the adapters read as unreadable (None) and shapes a direct caller may hand over; each reads as {}.
UNREADABLE: list[Any] = [None, [], ["amount"], "amount", "", 7, ("order_id",), b"amount", MappingProxyType({})]
# Other calls decided first in the same decision (their arguments are converted into its bindings).
BEFORE: list[list[Any]] = [[], [READABLE], [{"amount": 99}, None], [READABLE, {}], [None]]


def _result(i: int, name: str, args: Any, content: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"id": f"e{i}", "type": "function",
                            "function": {"name": name, "arguments": "{oops" if args is None else json.dumps(args)}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"e{i}", "content": json.dumps(content)}]


HISTORIES: dict[str, list[tuple[str, Any, Any]]] = {
    "clean": [("get_order", {"order_id": "7"}, {"status": "x"}), ("find_user", {}, "u1"),
              ("login", {"user": "u"}, {}), ("act", {"amount": 2}, "ok")],
    "unreadable earlier calls": [("get_order", None, {"status": "x"}), ("login", None, {}), ("logout", None, {}),
                                 ("act", None, "ok"), ("find_user", None, "u1")],
}


def _history(name: str) -> Any:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i, (tool, args, content) in enumerate(HISTORIES[name]):
        messages += _result(i, tool, args, content)
    messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": "x", "name": "noop", "args": {}}]})
    return parse_turn(messages)[0]


def _skill(entry: Any) -> dict[str, Any]:
    return {"metadata": {"label": "L", "action_tool": "act", "precondition": [entry]}}


def _seen(decision: GateDecision) -> tuple[Any, ...]:
    b = decision.blocking
    checks = tuple((c.missing, c.failed, c.refused, c.errors, tuple((k, a) for k, _, a in c.counted))
                   for c in decision.matched)
    return decision.verdict, decision.content(), None if b is None else (b.missing, b.refused, b.errors), checks


def _decide(rule: str, history: str, args: Any, before: list[Any]) -> tuple[Any, ...]:
    rules, turn = rules_of([_skill(RULES[rule])]), _history(history)
    bindings = Bindings(STATE, NOW)
    for i, other in enumerate(before):
        decide_call(rules, ToolCallRef(f"b{i}", "act", other), turn, STATE, filtered=True, count_failed=False,
                    bindings=bindings)
    return _seen(decide_call(rules, ToolCallRef("c", "act", args), turn, STATE, filtered=True, count_failed=False,
                             bindings=bindings))


CASES = list(itertools.product(RULES, HISTORIES))


@pytest.mark.parametrize(("rule", "history"), CASES, ids=[f"{r}|{h}" for r, h in CASES])
def test_unreadable_arguments_decide_as_an_empty_map_whatever_came_before(rule: str, history: str) -> None:
    expected = _decide(rule, history, {}, [])
    for before in BEFORE:
        assert _decide(rule, history, {}, before) == expected, before
        for args in UNREADABLE:
            assert _decide(rule, history, args, before) == expected, (args, before)


GATE_CASES = list(itertools.product(RULES, HISTORIES, ["{oops", "[1, 2]", '"amount"', None, "null", "{}"]))


def _gate_turn(history: str, arguments: str | None, first: bool | None) -> list[Any]:
    """The history, then one AI message calling ``act`` with ``arguments`` (None: no arguments at all), after or
    before another guarded call whose arguments are readable."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i, (tool, args, content) in enumerate(HISTORIES[history]):
        messages += _result(i, tool, args, content)
    function = {"name": "act"} if arguments is None else {"name": "act", "arguments": arguments}
    ours = {"id": "c", "type": "function", "function": function}
    other = {"id": "o", "name": "other", "args": READABLE}
    messages.append({"role": "assistant", "content": "", "tool_calls": [ours] if first is None else
                     [ours, other] if first else [other, ours]})
    return messages


@pytest.mark.parametrize(("rule", "history", "arguments"), GATE_CASES, ids=[f"{r}|{h}|{a}" for r, h, a in GATE_CASES])
def test_through_the_gate_the_unreadable_call_gets_one_decision_in_every_order(
        rule: str, history: str, arguments: str | None) -> None:
    other = {"metadata": {"label": "O", "action_tool": "other", "precondition": [
        {"check": {"where": "args.amount <= 5 && args.user_id == 'u1' && size(args) > 1"}}]}}
    skills = [_skill(RULES[rule]), other]

    def ours(messages: list[Any]) -> tuple[Any, ...]:
        [decision] = [d for d in gate_decisions(messages, skills, STATE, now=NOW) if d.call_id == "c"]
        return _seen(decision)

    alone = ours(_gate_turn(history, arguments, None))
    assert ours(_gate_turn(history, arguments, True)) == alone
    assert ours(_gate_turn(history, arguments, False)) == alone
    empty = ours(_gate_turn(history, "{}", None))
    assert alone == empty


def test_the_reviewers_case_blocks_with_the_rules_error_fresh_and_after_other_arguments() -> None:
    check = CheckPrecondition(where="args.amount <= 5", message="At most 5.")
    null = CheckPrecondition(where="args == null")
    fresh, warm = Bindings({}, NOW), Bindings({}, NOW)
    assert check_outcome(check, {"amount": 3}, warm).status == "met"
    for bindings in (fresh, warm):
        outcome = check_outcome(check, None, bindings)
        assert outcome.status == "error" and "no field 'amount'" in outcome.detail
        assert check_outcome(null, None, bindings).status == "refused"


@pytest.mark.parametrize("odd", [None, "order_id", ["order_id"], 7])
@pytest.mark.parametrize("side", ["action", "earlier"])
def test_same_args_reads_unreadable_arguments_as_lacking_every_name(odd: Any, side: str) -> None:
    call: Callable[[Any, Any], bool] = lambda a, e: same_arguments(["order_id"], a, e)  # noqa: E731
    readable = {"order_id": "order_id"}
    assert call(odd, readable) is False if side == "action" else call(readable, odd) is False
    fact = FactPrecondition(tool="get_order", same_args=(("order_id", "order_id"),))
    turn = _history("clean")
    assert fact_outcome(fact, odd, turn, Bindings({}, NOW)) == fact_outcome(fact, {}, turn, Bindings({}, NOW))
