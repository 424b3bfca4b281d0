"""What the gate keeps across decisions decides as working it out afresh does (no database).

* An expression reading only an earlier call (``result``, ``call``) is
  evaluated once per result; every later decision reads the kept answer,
  error texts included.
* A decision converts only the fields of ``args`` and of the state that its
  expressions select, and they are the fields converting the whole value gives.
* One decision hands the same values to every evaluation reading the same
  things, and another call's arguments get their own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symfonic_graph.rules import policy
from symfonic_graph.rules.events import CallResult, History
from symfonic_graph.rules.policy import Bindings, fact_outcome
from symfonic_graph.shape.expressions import Scope, bindable, bindable_fields, compile_expression
from symfonic_graph.shape.rule_kinds import FactPrecondition

NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)

leaves = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3), st.just(object()))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                       st.dictionaries(st.text(max_size=2), inner, max_size=3)),
                      max_leaves=8)
keys = st.one_of(st.sampled_from(["amount", "note", "a", "1"]), st.integers(0, 2))


@given(st.one_of(st.dictionaries(keys, values, max_size=4), values), st.lists(st.sampled_from(["amount", "a", "1"]),
                                                                               max_size=3, unique=True))
def test_converting_the_fields_read_gives_what_converting_the_whole_value_does(value: Any, fields: list[str]) -> None:
    part = bindable_fields(value, tuple(fields))
    whole = bindable(value)
    if type(value) is dict and all(type(k) is str for k in value):
        assert isinstance(whole, dict)
        assert part == {f: whole[f] for f in fields if f in whole}
        assert list(part) == [f for f in fields if f in whole]
    else:
        assert part is None


@pytest.mark.parametrize(("where", "expected"), [
    ('result.status == "delivered"', "met"),
    ('result.status == "pending"', "refused"),
    ("result.nope == 1", "error"),
    ("result.status", "error"),
])
def test_an_expression_over_an_earlier_call_is_evaluated_once_per_result(
        monkeypatch: pytest.MonkeyPatch, where: str, expected: str) -> None:
    runs: list[str] = []
    evaluate = Scope.evaluate

    def counted(self: Scope, expression: Any, variables: Any) -> Any:
        runs.append(expression.text)
        return evaluate(self, expression, variables)

    monkeypatch.setattr(Scope, "evaluate", counted)
    fact = FactPrecondition(tool="get_order", where=where)
    history = History((CallResult("get_order", {"order_id": "7"}, False, 0, '{"status": "delivered"}'),), 0)
    first = fact_outcome(fact, {}, history, Bindings({}, NOW))
    again = [fact_outcome(fact, {"x": i}, history, Bindings({"s": i}, NOW)) for i in range(3)]
    assert first.status == expected and again == [first] * 3
    assert runs == [where]
    same_text = History((CallResult("get_order", {"order_id": "7"}, False, 0, '{"status": "delivered"}'),), 0)
    assert fact_outcome(fact, {}, same_text, Bindings({}, NOW)) == first
    assert runs == [where, where]  # another result: evaluated for itself


def test_an_expression_reading_args_too_is_evaluated_every_time() -> None:
    fact = FactPrecondition(tool="get_order", where="result.amount == args.amount")
    history = History((CallResult("get_order", {}, False, 0, '{"amount": 5}'),), 0)
    assert [fact_outcome(fact, {"amount": a}, history, Bindings({}, NOW)).status for a in (5, 6, 5)] == [
        "met", "refused", "met"]


def test_one_decision_hands_the_same_values_to_every_evaluation_of_the_same_reads() -> None:
    bindings = Bindings({"channel": "web", "messages": [object()] * 3}, NOW)
    args = {"amount": 120, "note": "n" * 100}
    reads = policy._reads(compile_expression('args.amount < 5 && state.channel == "web"', "where"))
    first = bindings.values(reads, args)
    assert first == {"args": {"amount": 120}, "state": {"channel": "web"}}
    assert bindings.values(reads, args) is first
    other = bindings.values(reads, dict(args, amount=7))
    assert other == {"args": {"amount": 7}, "state": {"channel": "web"}} and other is not first
