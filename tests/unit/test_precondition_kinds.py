"""The precondition kinds, decided by the pure gate (no database)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages

from symfonic_graph.errors import ValidationError
from symfonic_graph.gate import explain_tool_call, gate_decisions
from symfonic_graph.rules.preflight import preflight_lines
from symfonic_graph.shape.readings import precondition_from_node
from symfonic_graph.shape.records import (
    AnyPrecondition,
    StatePrecondition,
    TextPrecondition,
    ToolPrecondition,
    precondition_from_input,
)
from tests._skills import skill


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def result(name: str, call_id: str, *, failed: bool = False) -> ToolMessage:
    return ToolMessage("error: denied" if failed else "ok", tool_call_id=call_id, name=name,
                       status="error" if failed else "success")


def verdicts(messages: list[Any], skills: list[Any], **kw: Any) -> list[str]:
    return [d.verdict for d in gate_decisions(messages, skills, {}, **kw)]


REFUND = skill("issue_refund", ["verify_identity"], label="Refunds", id="s-issue_refund")


def test_a_failed_check_meets_no_precondition_and_the_error_says_so() -> None:
    history = [call("verify_identity", "c1"), result("verify_identity", "c1", failed=True), call("issue_refund", "c2")]
    decision = gate_decisions(history, [REFUND], {})[0]
    assert decision.verdict == "blocked"
    assert "The earlier call of `verify_identity` failed" in (decision.content() or "")
    assert verdicts(history, [REFUND], count_failed_calls=True) == ["allowed"]  # the seeds' behaviour, opt-in
    ok = [call("verify_identity", "c1"), result("verify_identity", "c1"), call("issue_refund", "c2")]
    assert verdicts(ok, [REFUND]) == ["allowed"]


def test_dict_results_marked_failed_do_not_count_either() -> None:
    history = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "verify_identity", "args": {}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "boom", "status": "error"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "issue_refund", "args": {}}]},
    ]
    assert verdicts(history, [REFUND]) == ["blocked"]


SAME_ORDER = skill("issue_refund", [{"tool": "lookup_order", "same_args": ["order_id"]}], label="Refunds",
                   id="s-issue_refund")


def test_same_args_binds_the_check_to_the_data() -> None:
    looked_up = [call("lookup_order", "c1", order_id="1003"), result("lookup_order", "c1")]
    assert verdicts([*looked_up, call("issue_refund", "c2", order_id="7777")], [SAME_ORDER]) == ["blocked"]
    assert verdicts([*looked_up, call("issue_refund", "c2", order_id="1003")], [SAME_ORDER]) == ["allowed"]
    assert verdicts([*looked_up, call("issue_refund", "c2")], [SAME_ORDER]) == ["blocked"]  # lacks the argument
    # JSON values: 1003 and "1003" differ, 1003 and 1003.0 do not
    numeric = [call("lookup_order", "c1", order_id=1003), result("lookup_order", "c1")]
    assert verdicts([*numeric, call("issue_refund", "c2", order_id="1003")], [SAME_ORDER]) == ["blocked"]
    assert verdicts([*numeric, call("issue_refund", "c2", order_id=1003.0)], [SAME_ORDER]) == ["allowed"]


def test_same_args_reads_openai_function_arguments() -> None:
    history = [{"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "lookup_order",
                                                                 "arguments": '{"order_id": "1003"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "found"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c2", "type": "function", "function": {"name": "issue_refund",
                                                                 "arguments": '{"order_id": "1003"}'}}]}]
    assert verdicts(history, [SAME_ORDER]) == ["allowed"]
    history[-1]["tool_calls"][0]["function"]["arguments"] = '{"order_id": "7777"}'
    assert verdicts(history, [SAME_ORDER]) == ["blocked"]


def test_within_user_turn_only_counts_calls_after_the_latest_user_message() -> None:
    rule = skill("issue_refund", [{"tool": "verify_identity", "within": "user_turn"}], id="s-issue_refund")
    before = [HumanMessage("hi"), call("verify_identity", "c1"), result("verify_identity", "c1")]
    assert verdicts([*before, call("issue_refund", "c2")], [rule]) == ["allowed"]
    assert verdicts([*before, HumanMessage("refund 7777 too"), call("issue_refund", "c2")], [rule]) == ["blocked"]
    assert verdicts([*before, HumanMessage("refund"), call("issue_refund", "c2")], [REFUND]) == ["allowed"]


def test_any_of_groups_are_met_by_one_member() -> None:
    rule = skill("close_account", [{"any": ["sso_login", "verify_identity"]}], label="Close", id="s-close_account")
    assert verdicts([call("close_account", "c1")], [rule]) == ["blocked"]
    decision = gate_decisions([call("close_account", "c1")], [rule], {})[0]
    assert (decision.content() or "").startswith(
        "Missing precondition: call sso_login or verify_identity before close_account (skill: Close).")
    done = [call("sso_login", "c0"), result("sso_login", "c0"), call("close_account", "c1")]
    assert verdicts(done, [rule]) == ["allowed"]


def test_if_missing_apply_makes_a_rule_hold_when_the_state_does_not_say() -> None:
    rule = skill("close_account", ["verify_identity", {"state": {"path": "channel", "op": "eq", "value": "web",
                                                                "if_missing": "apply"}}], id="s-close_account")
    plain = skill("close_account", ["verify_identity", {"state": {"path": "channel", "op": "eq", "value": "web"}}],
                  id="s-close_account")
    turn = [call("close_account", "c1")]
    assert [d.verdict for d in gate_decisions(turn, [rule], {})] == ["blocked"]
    assert [d.verdict for d in gate_decisions(turn, [plain], {})] == ["allowed"]  # if_missing "skip" by default
    assert [d.verdict for d in gate_decisions(turn, [rule], {"channel": "phone"})] == ["allowed"]


def test_the_gates_own_error_survives_an_openai_round_trip() -> None:
    deploy = skill("deploy", ["run_tests"], label="Deploy", id="s-deploy")
    announce = skill("announce", ["deploy"], label="Announce", id="s-announce")
    first = [HumanMessage("ship it"), call("deploy", "c1")]
    error = gate_decisions(first, [deploy, announce], {})[0].to_tool_message()
    assert error is not None
    history = convert_to_openai_messages([*first, error, call("announce", "c2")])
    assert "status" not in history[2] and "response_metadata" not in history[2]  # what the round trip loses
    assert verdicts(history, [deploy, announce]) == ["blocked"]  # deploy never ran


def test_shadow_rules_never_block_but_are_reported() -> None:
    shadow = skill("issue_refund", ["verify_identity"], enforcement="shadow", id="s-issue_refund")
    decision = gate_decisions([call("issue_refund", "c1")], [shadow], {})[0]
    assert decision.verdict == "allowed" and [c.skill_id for c in decision.shadowed] == ["s-issue_refund"]
    assert verdicts([call("issue_refund", "c1")], [shadow], enforce_shadow=True) == ["blocked"]
    assert preflight_lines([shadow]) == []


def test_preflight_lines_name_the_extra_conditions() -> None:
    rule = skill("issue_refund", [{"tool": "lookup_order", "same_args": ["order_id"]},
                                  {"tool": "verify_identity", "within": "user_turn"}, {"any": ["a", "b"]}, "Apologise"],
                 label="Refunds", id="s-issue_refund")
    assert preflight_lines([rule]) == [
        "- YOU MUST call `lookup_order` (same `order_id`) BEFORE calling `issue_refund` (skill: Refunds).",
        "- YOU MUST call `verify_identity` (after the user's latest message) BEFORE calling `issue_refund`"
        " (skill: Refunds).",
        "- YOU MUST call `a` or `b` BEFORE calling `issue_refund` (skill: Refunds).",
        "- YOU MUST call `Apologise` BEFORE calling `issue_refund` (skill: Refunds).",  # a bare word in metadata
    ]


def test_graph_nodes_are_read_by_their_kind() -> None:
    assert precondition_from_node({"kind": "text", "text": "review"}) == TextPrecondition(text="review")
    assert precondition_from_node({"kind": " Tool ", "tool": "verify"}) == ToolPrecondition(tool="verify")
    sentence = precondition_from_node({"kind": "tool", "tool": "Verify identity now"})
    assert sentence.kind == "unreadable"  # no tool name: the skill keeps blocking its action
    assert precondition_from_node({"kind": "tool", "tool": "verify-identity"}) == ToolPrecondition(
        tool="verify-identity")
    assert precondition_from_node({"kind": "ANY", "tools": ["a", "b"]}) == AnyPrecondition(tools=("a", "b"))
    assert precondition_from_node({"kind": "tool", "tool": "v", "within": "week"}).kind == "unreadable"
    assert precondition_from_node({}).kind == "unreadable"


def test_typed_skills_never_guess_a_text_entry_is_a_tool() -> None:
    typed = SimpleNamespace(id="s1", metadata={"label": "L", "action_tool": "x"},
                            preconditions=(TextPrecondition(text="review"),))
    assert explain_tool_call([typed], "x").verdict == "allowed"
    no_name = SimpleNamespace(id="s3", metadata={"label": "L", "action_tool": "x"},
                              preconditions=(ToolPrecondition(tool="Check it now"),))
    assert explain_tool_call([no_name], "x").verdict == "blocked"  # a tool entry naming no tool blocks
    unreadable = SimpleNamespace(id="s2", metadata={"label": "L", "action_tool": "x"},
                                 preconditions=(precondition_from_node({"kind": "tol", "tool": "a"}),))
    decision = explain_tool_call([unreadable], "x")
    assert decision.verdict == "blocked" and "could not be read" in (decision.content() or "")


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"tool": "lookup order"}, "p.tool"),
        ({"tool": "lookup", "same_args": "order_id"}, "p.same_args"),
        ({"tool": "lookup", "same_args": ["order id"]}, "p.same_args[0]"),
        ({"tool": "lookup", "within": "week"}, "p.within"),
        ({"tool": "lookup", "extra": 1}, "p"),
        ({"any": []}, "p.any"),
        ({"any": ["a", "b c"]}, "p.any[1]"),
        ({"state": {"path": "x", "op": "eq", "value": math.nan}}, "p.state.value"),
        ({"state": {"path": "x", "op": "in", "value": [1.0, math.inf]}}, "p.state.value[1]"),
        ({"state": {"path": "x", "op": "exists", "if_missing": "skip"}}, "p.state.if_missing"),
        ({"kind": "tol", "tool": "a"}, "p.kind"),
        ({"tool": "a", "any": ["b"]}, "p"),
        (5, "p"),
    ],
)
def test_bad_write_input_names_the_field(item: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        precondition_from_input(item, "p")
    assert info.value.field == field


def test_write_input_in_every_accepted_shape() -> None:
    assert precondition_from_input("verify_identity", "p") == ToolPrecondition(tool="verify_identity")
    assert precondition_from_input("Apologise first.", "p") == TextPrecondition(text="Apologise first.")
    assert precondition_from_input({"text": "review"}, "p") == TextPrecondition(text="review")
    assert precondition_from_input({"kind": "state", "path": "a", "op": "exists"}, "p") == StatePrecondition(
        path="a", op="exists", has_value=False)
    typed = ToolPrecondition(tool="lookup", same_args=("id",), within="user_turn")
    assert precondition_from_input(typed, "p") == typed


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"label": "x" * 9000}, "label"),
        ({"context": "y" * 9000}, "context"),
        ({"steps": ["deliver"] * 201}, "steps"),
        ({"steps": ["z" * 9000]}, "steps[0]"),
        ({"precondition": ["t" * 9000]}, "precondition[0]"),
    ],
)
def test_a_catalog_stays_small_enough_to_ship(spec: dict[str, Any], field: str) -> None:
    from symfonic_graph.memory.layers.procedural import skill_row
    from symfonic_graph.shape.scope import MemoryScope

    base = {"label": "L", "steps": ["deliver"], "source_tag": "authored:x"}
    with pytest.raises(ValidationError) as info:
        skill_row(MemoryScope("acme"), {**base, **spec})
    assert info.value.field == field
