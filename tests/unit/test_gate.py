"""The gate node, its condition and its decision trace."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict

from symfonic_graph.errors import ConfigurationError, StoreUnavailableError
from symfonic_graph.gate import (
    GATE_MARKER_KEY,
    GATE_MARKER_VALUE,
    called_tools,
    create_precondition_gate_node,
    explain_tool_call,
    gate_decisions,
    gate_errors,
    precondition_condition,
    terminal_tool_calls,
)
from tests._skills import ai, result, skill, state_pred


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


POST = skill("post_message", ["get_status", "auth"], label="Post update", id="sk-1")


def lookup_of(*skills: Any) -> Any:
    async def get_active_skills(state: Any) -> list[Any]:
        return list(skills)

    return get_active_skills


async def failing_lookup(state: Any) -> list[Any]:
    raise StoreUnavailableError("neo4j timed out")  # an outage; any other exception is a ConfigurationError


# --- content ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skills", "prefix"),
    [
        ([POST], "Missing precondition: call get_status, auth before post_message (skill: Post update)."),
        (
            [skill("post_message", "get_status", label=None)],
            "Missing precondition: call get_status before post_message.",
        ),
        (
            [skill("post_message", "get_status", label="  ")],
            "Missing precondition: call get_status before post_message.",
        ),
    ],
)
def test_error_content_prefix_is_exact(skills: list[Any], prefix: str) -> None:
    [error] = gate_errors([HumanMessage("x"), ai(("c1", "post_message"))], skills, {})
    assert isinstance(error, ToolMessage)
    assert str(error.content).startswith(prefix)
    rest = str(error.content)[len(prefix) :]
    assert "first" in rest and "retry" in rest
    assert (error.tool_call_id, error.name, error.status) == ("c1", "post_message", "error")
    assert error.response_metadata == {GATE_MARKER_KEY: GATE_MARKER_VALUE}


def test_only_missing_tools_are_named() -> None:
    messages = [ai(("a1", "auth")), result("a1", "auth"), ai(("c1", "post_message"))]
    [error] = gate_errors(messages, [POST], {})
    assert str(error.content).startswith(
        "Missing precondition: call get_status before post_message (skill: Post update)."
    )


def test_all_preconditions_called_allows() -> None:
    messages = [ai(("a1", "auth"), ("g1", "get_status")), result("a1"), result("g1"), ai(("c1", "post_message"))]
    assert gate_errors(messages, [POST], {}) == []


def test_one_error_per_call_first_failing_skill_wins() -> None:
    first = skill("post_message", "auth", label="First")
    second = skill("post_message", "get_status", label="Second")
    errors = gate_errors([ai(("c1", "post_message"), ("c2", "post_message"))], [first, second], {})
    assert [e.tool_call_id for e in errors] == ["c1", "c2"]
    assert all("(skill: First)" in str(e.content) for e in errors)


def test_satisfied_skill_does_not_mask_a_later_unsatisfied_one() -> None:
    ok = skill("post_message", "auth", label="Ok")
    bad = skill("post_message", "get_status", label="Bad")
    messages = [ai(("a1", "auth")), result("a1", "auth"), ai(("c1", "post_message"))]
    [error] = gate_errors(messages, [ok, bad], {})
    assert "(skill: Bad)" in str(error.content)


def test_unrelated_calls_and_skills_without_action_tool_are_ignored() -> None:
    no_action = skill(None, "auth", steps=["Think about it first."])
    assert gate_errors([ai(("c1", "lookup"), ("c2", "post_message"))], [no_action], {}) == []
    assert gate_errors([ai(("c1", "lookup"))], [POST], {}) == []


def test_action_tool_from_first_step() -> None:
    via_steps = skill(None, "auth", steps=["post_message(text=<t>)", "then relax"])
    assert len(gate_errors([ai(("c1", "post_message"))], [via_steps], {})) == 1


def test_state_filter_applies_before_matching() -> None:
    only_slack = skill("post_message", ["auth", state_pred("channel", "eq", "slack")])
    messages = [ai(("c1", "post_message"))]
    assert gate_errors(messages, [only_slack], {"channel": "email", "messages": messages}) == []
    assert len(gate_errors(messages, [only_slack], {"CHANNEL": "slack", "messages": messages})) == 1


# --- messages: objects, dicts, ids ---------------------------------------------------------


def test_dict_messages_and_tool_call_id_resolution() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a1", "name": "auth", "args": {}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "a1"},
        {"type": "ai", "content": "", "tool_calls": [{"id": "g1", "function": {"name": "get_status"}}]},
        message_to_dict(ToolMessage("ok", tool_call_id="g1")),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "post_message", "args": {}}]},
    ]
    assert called_tools(messages[:-1]) == {"auth", "get_status"}
    assert gate_errors(messages, [POST], {}) == []
    [error] = gate_errors(messages[:3] + messages[-1:], [POST], {})
    assert str(error.content).startswith("Missing precondition: call get_status before post_message")
    assert error.tool_call_id == "c1"


def test_a_result_named_otherwise_than_the_call_it_answers_counts_as_nothing() -> None:
    # a result answering a call of `lookup` under the name `auth` is neither: which one ran is unknown
    messages = [ai(("x1", "lookup")), result("x1", name="auth"), ai(("c1", "post_message"))]
    assert called_tools(messages[:-1]) == frozenset()
    assert called_tools([ai(("x1", "auth")), result("x1", name="auth")]) == {"auth"}


def test_unresolvable_result_counts_nothing() -> None:
    assert called_tools([ToolMessage("ok", tool_call_id="nowhere")]) == frozenset()


def test_injected_results_never_count() -> None:
    blocked = ai(("g1", "get_status"))
    injected = ToolMessage(
        "whatever",
        tool_call_id="g1",
        name="get_status",
        status="error",
        response_metadata={GATE_MARKER_KEY: GATE_MARKER_VALUE},
    )
    assert called_tools([blocked, injected]) == frozenset()


def test_gate_error_round_tripped_without_metadata_still_does_not_count() -> None:
    [error] = gate_errors([ai(("c1", "post_message"))], [skill("post_message", "get_status")], {})
    stripped = {
        "role": "tool",
        "content": error.content,
        "tool_call_id": "c1",
        "name": "post_message",
        "status": "error",
    }
    assert called_tools([ai(("c1", "post_message")), stripped]) == frozenset()


def test_calls_in_the_terminal_batch_do_not_count() -> None:
    errors = gate_errors([ai(("g1", "get_status"), ("a1", "auth"), ("c1", "post_message"))], [POST], {})
    assert [e.tool_call_id for e in errors] == ["c1"]


def test_terminal_tool_calls_only_from_terminal_ai_message() -> None:
    assert terminal_tool_calls([ai(("c1", "x")), result("c1")]) == []
    assert terminal_tool_calls([AIMessage("no calls")]) == []
    assert [c.id for c in terminal_tool_calls([ai(("c1", "x"))])] == ["c1"]


# --- the node --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_node_returns_messages_when_enforcement_fires() -> None:
    node = create_precondition_gate_node(lookup_of(POST))
    out = await node({"messages": [HumanMessage("x"), ai(("c1", "post_message"), ("c2", "lookup"))]})
    assert list(out) == ["messages"]
    assert [m.tool_call_id for m in out["messages"]] == ["c1"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "messages",
    [
        [],
        [HumanMessage("x")],
        [AIMessage("just text")],
        [ai(("c1", "post_message")), result("c1", "post_message")],
        [ai(("c1", "post_message")), HumanMessage("x")],
    ],
)
async def test_node_is_a_no_op_without_terminal_tool_calls(messages: list[Any]) -> None:
    async def must_not_run(state: Any) -> list[Any]:
        raise AssertionError("lookup should not run")

    assert await create_precondition_gate_node(must_not_run)({"messages": messages}) == {}


@pytest.mark.anyio
async def test_node_returns_empty_when_all_allowed() -> None:
    node = create_precondition_gate_node(lookup_of(POST))
    assert await node({"messages": [ai(("c1", "lookup"))]}) == {}


@pytest.mark.anyio
async def test_lookup_failure_passes_through_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="symfonic_graph.gate")
    node = create_precondition_gate_node(failing_lookup)
    assert await node({"messages": [ai(("c1", "post_message"))]}) == {}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "passing through" in warnings[0].getMessage()


@pytest.mark.anyio
async def test_lookup_failure_in_strict_mode_blocks_every_call(caplog: pytest.LogCaptureFixture) -> None:
    node = create_precondition_gate_node(failing_lookup, strict=True)
    out = await node({"messages": [ai(("c1", "post_message"), ("c2", "lookup"))]})
    assert [(m.tool_call_id, m.name, m.status) for m in out["messages"]] == [
        ("c1", "post_message", "error"),
        ("c2", "lookup", "error"),
    ]
    assert all("precondition store could not be read" in str(m.content) for m in out["messages"])
    assert called_tools([ai(("c1", "post_message")), *out["messages"]]) == frozenset()


@pytest.mark.anyio
async def test_garbage_from_the_lookup_is_a_configuration_error() -> None:
    async def garbage(state: Any) -> Any:
        return 42  # no iterable of skills is a programming error, never a pass-through

    with pytest.raises(ConfigurationError, match="returned int 42"):
        await create_precondition_gate_node(garbage)({"messages": [ai(("c1", "post_message"))]})


@pytest.mark.anyio
async def test_sync_lookup_and_none_are_tolerated() -> None:
    out = await create_precondition_gate_node(lambda state: [POST])({"messages": [ai(("c1", "post_message"))]})  # type: ignore[arg-type, return-value]
    assert len(out["messages"]) == 1
    assert await create_precondition_gate_node(lambda state: None)({"messages": [ai(("c1", "x"))]}) == {}  # type: ignore[arg-type, return-value]


@pytest.mark.anyio
async def test_node_with_bad_state_never_raises() -> None:
    node = create_precondition_gate_node(lookup_of(POST))
    assert await node({}) == {}
    assert await node({"messages": "not a list"}) == {}
    assert await node(None) == {}


# --- precondition_condition --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"_procedural_enforce_preconditions": True, "messages": [ai(("c1", "x"))]}, True),
        ({"_procedural_enforce_preconditions": 1, "messages": [ai(("c1", "x"))]}, True),
        ({"_procedural_enforce_preconditions": False, "messages": [ai(("c1", "x"))]}, False),
        ({"messages": [ai(("c1", "x"))]}, False),
        ({"_procedural_enforce_preconditions": True, "messages": [AIMessage("text")]}, False),
        ({"_procedural_enforce_preconditions": True, "messages": [ai(("c1", "x")), result("c1")]}, False),
        ({"_procedural_enforce_preconditions": True, "messages": []}, False),
        ({"_procedural_enforce_preconditions": True}, False),
        (None, False),
    ],
)
def test_precondition_condition(state: Any, expected: bool) -> None:
    assert precondition_condition(state) is expected


# --- the decision trace ---------------------------------------------------------------------


def test_explain_blocked_call() -> None:
    decision = explain_tool_call([POST], "post_message", called={"auth"}, call_id="c9")
    assert decision.verdict == "blocked" and not decision.allowed
    assert decision.missing == ("get_status",)
    assert decision.blocking is not None and decision.blocking.label == "Post update"
    assert decision.blocking.skill_id == "sk-1" and decision.blocking.required == ("get_status", "auth")
    message = decision.to_tool_message()
    assert message is not None and message.tool_call_id == "c9"


def test_explain_records_dropped_skills_and_their_predicate() -> None:
    pred = state_pred("tier", "eq", "gold")
    gold = skill("post_message", ["auth", pred], label="Gold")
    decision = explain_tool_call([gold, POST], "post_message", state={"tier": "free"}, called={"auth", "get_status"})
    assert decision.verdict == "allowed"
    [drop] = decision.dropped
    assert drop.label == "Gold" and drop.predicate == pred["state"] and drop.index == 0
    assert [m.label for m in decision.matched] == ["Post update"]


def test_explain_and_gate_never_disagree() -> None:
    skills = [POST, skill("lookup", "auth", label="Lookup")]
    messages = [ai(("a1", "auth")), result("a1"), ai(("c1", "post_message"), ("c2", "lookup"), ("c3", "other"))]
    decisions = gate_decisions(messages, skills, {})
    for decision in decisions:
        assert decision == explain_tool_call(
            skills, decision.tool_name, state={}, called={"auth"}, call_id=decision.call_id
        )
    assert [d.verdict for d in decisions] == ["blocked", "allowed", "allowed"]


def test_self_precondition_is_ignored() -> None:
    assert explain_tool_call([skill("x", ["x"])], "x").allowed
