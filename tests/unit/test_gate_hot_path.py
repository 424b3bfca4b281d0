"""What the gate keeps between the checks of one decision decides exactly as computing it afresh (no database).

* A history answers which calls named a tool (``positions``) as a scan does,
  and ``called`` once per history.
* A compiled rule keeps what never changes (phrases, bare names, a satisfied
  check): the same check object when every requirement is met.
* A fact met by its newest call reads no older one; compiling a rule and
  the pre-flight block never ask an entry for a field its kind lacks.
* A decision binds ``args`` once for all the checks that read it, and only the
  fields they select when that is all they do with it; whatever they read,
  each outcome (and each error text) is the one a full binding gives.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symfonic_graph.rules import policy
from symfonic_graph.rules.events import CallResult, History
from symfonic_graph.rules.policy import Bindings, check_outcome, fact_outcome
from symfonic_graph.rules.preflight import build_preflight_contribution
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.expressions import ExpressionError, bindable, compile_expression, evaluate_bool
from symfonic_graph.shape.records import ToolPrecondition
from symfonic_graph.shape.rule_kinds import CheckPrecondition, FactPrecondition

NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)
NAMES = ["a", "b", "c", "act"]


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), max_size=12), st.sampled_from([*NAMES, "zz"]))
def test_a_history_answers_positions_as_a_scan_and_called_once(calls: list[tuple[str, bool]], name: str) -> None:
    history = History(tuple(CallResult(n, None, failed, 0) for n, failed in calls), 0)
    assert history.positions(name) == tuple(i for i, (n, _) in enumerate(calls) if n == name)
    assert history.positions(None) == ()
    for count_failed in (False, True):
        called = history.called(count_failed=count_failed)
        assert called == frozenset(n for n, failed in calls if count_failed or not failed)
        assert history.called(count_failed=count_failed) is called


def test_a_satisfied_check_is_one_object_and_a_blocked_one_is_new() -> None:
    rules = RuleSet([{"metadata": {"label": "L", "action_tool": "act", "precondition": ["a", {"any": ["b", "c"]}]}}])
    [rule] = rules.rules
    done = History((CallResult("a", {}, False, 0), CallResult("c", {}, False, 0)), 0)
    first = rule.check({}, done)
    assert first.satisfied and rule.check({}, done) is first
    assert first.required == ("a", "b or c")
    blocked = rule.check({}, History((CallResult("b", {}, True, 0),), 0))
    assert blocked.missing == ("a", "b or c") and blocked.failed == ("b",)


@pytest.mark.parametrize(("text", "fields"), [
    ("args.amount <= 500", ("amount",)),
    ('args.amount <= 500 && args.currency == "args.x"', ("amount", "currency")),
    ("has(args.note) && args.items.size() < 3", ("note", "items")),
    ("size(args) > 1", None),
    ("args.size() > 1", None),
    ("args.all(k, k != 'x')", None),
    (".args.amount > 1", None),
    ("args . amount > 1", None),
    ('args.note == "\\"args\\""', None),
    ("[1].all(args, args > 0)", None),
])
def test_only_field_selections_narrow_what_is_bound(text: str, fields: tuple[str, ...] | None) -> None:
    expression = compile_expression(text, "where")
    assert policy._reads(expression)[1] == fields


ARGS = st.dictionaries(st.sampled_from(["amount", "currency", "note", "items", "args"]),
                       st.one_of(st.integers(-5, 600), st.text(max_size=3), st.none(),
                                 st.lists(st.integers(0, 3), max_size=4)), max_size=5)
WHERE = st.sampled_from(["args.amount <= 500", "has(args.amount) && args.amount < 100", 'args.currency == "args"',
                         "size(args) > 1", "args.items.size() < 3", "args.note == args.currency",
                         'state.channel == "web"', "size(state) > 1", "args.amount > 1 || state.tier == 'gold'"])


@given(WHERE, ARGS, st.sampled_from([{}, {"channel": "web", "tier": "gold"}, {"channel": 1, "other": [1]}]))
def test_a_check_decides_as_a_full_binding_does(where: str, args: dict[str, Any], state: dict[str, Any]) -> None:
    expression = compile_expression(where, "where")
    try:
        full: bool | str = evaluate_bool(expression, {"args": bindable(args), "state": bindable(state), "now": NOW})
    except ExpressionError as exc:
        full = str(exc)
    outcome = check_outcome(CheckPrecondition(where=where), args, Bindings(state, NOW))
    assert outcome.status == ("met" if full is True else "refused" if full is False else "error")
    if isinstance(full, str):
        assert outcome.detail == f"`{where}` could not be evaluated ({full})"


def test_one_decision_binds_args_once_for_every_check_that_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class Counted(policy.Scope):
        def __init__(self, variables: dict[str, Any]) -> None:
            made.append(dict(variables))
            super().__init__(variables)

    monkeypatch.setattr(policy, "Scope", Counted)
    bindings = Bindings({}, NOW)
    args = {"amount": 120, "currency": "EUR", "note": "n" * 50}
    for where in ("args.amount <= 500", "args.amount > 0", "args.amount != 7"):
        assert check_outcome(CheckPrecondition(where=where), args, bindings).status == "met"
    assert made == [{"args": {"amount": 120}}]
    assert check_outcome(CheckPrecondition(where="args.amount > 0"), dict(args), bindings).status == "met"
    assert len(made) == 2  # another call's arguments: bound again


def test_a_fact_met_by_its_newest_call_reads_no_older_one() -> None:
    read: list[str] = []

    class Watched(dict[str, Any]):
        def __contains__(self, key: object) -> bool:
            read.append(self["id"])
            return super().__contains__(key)

    fact = FactPrecondition(tool="get_order", same_args=(("order_id", "order_id"),), where='result.status == "ok"')
    history = History(tuple(CallResult("get_order", Watched(id=str(i), order_id="7"), False, 0, '{"status": "ok"}')
                            for i in range(5)), 0)
    assert fact_outcome(fact, {"order_id": "7"}, history, Bindings({}, NOW)).status == "met"
    assert read == ["4"]


def test_compiling_and_the_preflight_block_read_each_entry_by_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    def probed(self: object, name: str) -> Any:
        raise AssertionError(f"asked a {type(self).__name__} for {name!r}, a field it lacks (a slow path)")

    skills = [{"metadata": {"label": "L", "action_tool": "act", "precondition": [
        "a", {"tool": "b", "same_args": ["id"]}, {"check": {"where": "args.n < 3"}}, {"fact": {"tool": "c"}}]}}]
    for kind in (ToolPrecondition, CheckPrecondition, FactPrecondition):
        monkeypatch.setattr(kind, "__getattr__", probed, raising=False)
    rules = RuleSet(skills)
    assert rules.rules[0].required == ("a", "b", "c")
    block = build_preflight_contribution(rules)
    assert block is not None and block.content.splitlines()[1:] == [
        "- YOU MUST call `a` BEFORE calling `act` (skill: L).",
        "- YOU MUST call `b` (same `id`) BEFORE calling `act` (skill: L).",
        "- `act` ONLY IF `args.n < 3` (skill: L).",
        "- YOU MUST call `c` BEFORE calling `act` (skill: L)."]
