"""mine_rules, exactly: activation, violations, outcomes, pruning, determinism."""

from __future__ import annotations

import doctest
import importlib
import random
from typing import Any

import pytest

from symfonic_graph import RuleProposal, Trace, mine_rules
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.traces import Outcome


def _conversation(steps: list[str | list[str]], *, fail: set[str] = frozenset(), openai: bool = False) -> list[Any]:
    """An agent calling each step's tools (a list = one parallel batch), every call answered."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    n = 0
    for step in steps:
        batch = [step] if isinstance(step, str) else step
        calls = []
        for name in batch:
            n += 1
            if openai:
                calls.append({"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}})
            else:
                calls.append({"id": f"c{n}", "name": name, "args": {}})
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        for call in calls:
            name = call["function"]["name"] if openai else call["name"]
            result = {"role": "tool", "tool_call_id": call["id"], "content": "ok"}
            if name in fail:
                result["status"] = "error"
            messages.append(result)
    return messages


def _t(id: str, steps: list[str | list[str]], outcome: Outcome | None = None, **kw: Any) -> Trace:
    return Trace(id, _conversation(steps, **kw), outcome)


def _pairs(proposals: list[RuleProposal]) -> set[tuple[str, str]]:
    return {(p.precondition, p.action) for p in proposals}


def test_a_rule_with_its_evidence() -> None:
    traces = [_t(f"t{i}", ["login", "buy"]) for i in range(7)]
    [p] = mine_rules(traces, min_support=5)
    assert p == RuleProposal("buy", "login", 7, 1.0, None, ("t0", "t1", "t2", "t3", "t4"))


def test_b_without_a_is_a_violation_not_not_applicable() -> None:
    good = [_t(f"t{i}", ["login", "buy"]) for i in range(19)]
    assert _pairs(mine_rules(good)) == {("login", "buy")}
    # one trace buys without ever logging in: it activates buy and violates login -> buy
    [p] = mine_rules([*good, _t("bad", ["buy"])], min_confidence=0.9)
    assert (p.support, p.confidence) == (20, 19 / 20)
    assert mine_rules([*good, _t("bad", ["buy"])], min_confidence=0.96) == []


def test_a_later_call_of_b_without_a_before_it_violates() -> None:
    # the first buy came after login, the second buy came first in a later conversation: both count
    traces = [_t(f"t{i}", ["login", "buy"]) for i in range(5)] + [_t("late", ["buy", "login", "buy"])]
    assert mine_rules(traces, min_confidence=0.9) == []


def test_a_call_in_the_same_batch_is_not_earlier() -> None:
    traces = [_t(f"t{i}", [["login", "buy"]]) for i in range(6)]
    assert mine_rules(traces) == []


def test_a_result_is_what_counts_and_failed_results_are_results() -> None:
    # login requested but its result missing: not a call made
    unanswered = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "login", "args": {}}]},
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "buy", "args": {}}]},
                  {"role": "tool", "tool_call_id": "2", "content": "ok"}]
    assert mine_rules([Trace(f"u{i}", unanswered) for i in range(6)]) == []
    failed = [_t(f"f{i}", ["login", "buy"], fail={"login"}) for i in range(6)]
    assert _pairs(mine_rules(failed)) == {("login", "buy")}


def test_gate_injected_results_never_count() -> None:
    injected = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "login", "args": {}}]},
                {"role": "tool", "tool_call_id": "1", "name": "login", "status": "error",
                 "content": "Missing precondition: call sso before login. [symfonic-graph gate]"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "buy", "args": {}}]},
                {"role": "tool", "tool_call_id": "2", "content": "ok"}]
    assert mine_rules([Trace(f"g{i}", injected) for i in range(6)]) == []


def test_openai_shape_reads_like_langchain() -> None:
    traces = [_t(f"t{i}", ["login", "buy"], openai=True) for i in range(5)]
    assert _pairs(mine_rules(traces)) == {("login", "buy")}


def test_only_successful_traces_count_once_any_has_an_outcome() -> None:
    ok = [_t(f"ok{i}", ["login", "buy"], "success") for i in range(5)]
    failed = [_t(f"f{i}", ["buy"], "failure") for i in range(10)]
    unknown = [_t(f"u{i}", ["buy"]) for i in range(10)]  # no outcome while others have one: not counted
    [p] = mine_rules([*failed, *ok, *unknown])
    assert (p.support, p.confidence, p.failures_without, p.examples) == (5, 1.0, 10, tuple(f"ok{i}" for i in range(5)))
    # without any outcome, every trace counts, and failures_without is None
    [q] = mine_rules([_t(f"n{i}", ["login", "buy"]) for i in range(5)])
    assert q.failures_without is None


def test_failures_without_counts_failed_traces_where_b_ran_without_a() -> None:
    ok = [_t(f"ok{i}", ["login", "buy"], "success") for i in range(5)]
    failed = [_t("f1", ["buy"], "failure"), _t("f2", ["login", "buy"], "failure"), _t("f3", ["look"], "failure")]
    [p] = mine_rules([*ok, *failed])
    assert p.failures_without == 1


def test_support_and_confidence_thresholds() -> None:
    traces = [_t(f"t{i}", ["login", "buy"]) for i in range(4)]
    assert mine_rules(traces, min_support=5) == []
    assert _pairs(mine_rules(traces, min_support=4)) == {("login", "buy")}


def test_actions_limits_the_guarded_tools_only() -> None:
    traces = [_t(f"t{i}", ["look", "login", "buy"]) for i in range(5)]
    assert _pairs(mine_rules(traces, actions=["buy"])) == {("look", "buy"), ("login", "buy")}
    assert _pairs(mine_rules(traces, actions=["login"])) == {("look", "login")}


def test_a_tool_never_precedes_itself() -> None:
    traces = [_t(f"t{i}", ["poll", "poll", "poll"]) for i in range(6)]
    assert mine_rules(traces) == []


def test_transitive_rules_are_pruned() -> None:
    traces = [_t(f"t{i}", ["look", "login", "buy"]) for i in range(5)]
    assert _pairs(mine_rules(traces)) == {("look", "login"), ("login", "buy")}  # look -> buy goes through login


def test_sorted_by_action_then_precondition_and_deterministic() -> None:
    rng = random.Random(7)
    tools = ["a", "b", "c", "d", "e"]
    def steps() -> list[str | list[str]]:
        picked = rng.sample(tools, k=rng.randint(1, 5))
        return list(picked if rng.random() < 0.1 else sorted(picked))  # mostly in a fixed order

    traces = [_t(f"t{i}", steps(), rng.choice(["success", "failure"])) for i in range(300)]
    first = mine_rules(traces, min_support=3, min_confidence=0.3)
    assert first, "the random traces should give some rules at this bar"
    assert first == mine_rules(iter(traces), min_support=3, min_confidence=0.3)  # mining twice: the same
    assert [(p.action, p.precondition) for p in first] == sorted((p.action, p.precondition) for p in first)


def test_streams_its_input_once() -> None:
    consumed = []

    def gen() -> Any:
        for i in range(5):
            consumed.append(i)
            yield _t(f"t{i}", ["login", "buy"])

    assert _pairs(mine_rules(gen())) == {("login", "buy")}
    assert consumed == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kwargs", [{"min_support": 0}, {"min_confidence": 0}, {"min_confidence": 1.5},
                                    {"actions": "buy"}, {"min_support": True}])
def test_bad_parameters_are_typed_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        mine_rules([], **kwargs)


@pytest.mark.parametrize("name", [
    "symfonic_graph.learning.mining", "symfonic_graph.learning.replay", "symfonic_graph.learning.traces"])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
