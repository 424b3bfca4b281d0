"""A CEL ``Scope`` shared by many evaluations: each sees exactly its own variables, whatever came before."""

from __future__ import annotations

import pytest

from symfonic_graph.shape.expressions import ExpressionError, Scope, bindable, compile_expression, evaluate_bool


def test_each_evaluation_sees_only_its_own_arguments() -> None:
    scope = Scope({"result": bindable({"status": "paid"}), "call": bindable({"order_id": "A-1"})})
    reads_args = compile_expression("result.status == 'paid' && args.order_id == call.order_id", "where")
    first = bindable({"order_id": "A-1"})
    assert evaluate_bool(reads_args, {"args": first}, scope)
    assert evaluate_bool(reads_args, {"args": first}, scope)  # the same object: bound once, same answer
    assert not evaluate_bool(reads_args, {"args": bindable({"order_id": "B-2"})}, scope)
    # an evaluation without args never sees the previous call's
    with pytest.raises(ExpressionError):
        evaluate_bool(reads_args, {}, scope)
    assert evaluate_bool(reads_args, {"args": first}, scope)


def test_the_scopes_own_variables_are_not_replaced_by_an_evaluations() -> None:
    scope = Scope({"result": bindable({"status": "paid"})})
    paid = compile_expression("result.status == 'paid'", "where")
    assert evaluate_bool(paid, {"result": bindable({"status": "refused"})}, scope)
