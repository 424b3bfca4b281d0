"""The pre-flight block: exact bytes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from symfonic_graph.rules.preflight import build_preflight_contribution
from symfonic_graph.shape.contributions import PluginContribution
from tests._skills import skill, state_pred

POST = skill("post_message", ["get_status", "Be nice.", {"tool": "auth(scope=<s>)"}], label="Post update")
DEPLOY = skill(None, "run_tests", steps=["deploy(env=prod)"], label=None)


def test_exact_bytes() -> None:
    block = build_preflight_contribution([POST, DEPLOY])
    assert block == PluginContribution(
        content=(
            "## ENFORCED PRE-FLIGHT RULES\n"
            "- YOU MUST call `get_status` BEFORE calling `post_message` (skill: Post update).\n"
            "- YOU MUST call `auth` BEFORE calling `post_message` (skill: Post update).\n"
            "- YOU MUST call `run_tests` BEFORE calling `deploy` (skill: <unnamed>)."
        ),
        position="cached",
        order=5,
        header="",
        origin="symfonic.procedural",
    )


def test_negative_lines_follow_each_positive_line() -> None:
    block = build_preflight_contribution([POST], include_negative=True)
    assert block is not None
    assert block.content.split("\n") == [
        "## ENFORCED PRE-FLIGHT RULES",
        "- YOU MUST call `get_status` BEFORE calling `post_message` (skill: Post update).",
        "- DO NOT call `post_message` until `get_status` has returned (skill: Post update).",
        "- YOU MUST call `auth` BEFORE calling `post_message` (skill: Post update).",
        "- DO NOT call `post_message` until `auth` has returned (skill: Post update).",
    ]


def test_order_follows_input_order_and_is_stable() -> None:
    first = build_preflight_contribution([DEPLOY, POST])
    again = build_preflight_contribution([DEPLOY, POST])
    assert first is not None and again is not None
    assert first.content.encode() == again.content.encode()
    assert first.content.split("\n")[1].endswith("`deploy` (skill: <unnamed>).")


@pytest.mark.parametrize(
    "skills",
    [
        None,
        [],
        [skill("x", None)],
        [skill("x", "Check the weather first.")],
        [skill(None, "auth", steps=["Think first."])],
        [skill("x", [state_pred("a", "exists")])],
        [skill("x", ["x"])],  # a self-precondition is never enforced
    ],
)
def test_none_when_no_lines(skills: Any) -> None:
    assert build_preflight_contribution(skills) is None


def test_state_filters_skills_first() -> None:
    gold = skill("upgrade", ["get_plan", state_pred("tier", "eq", "gold")], label="Gold")
    assert build_preflight_contribution([gold], {"tier": "free"}) is None
    kept = build_preflight_contribution([gold], {"TIER": "gold"})
    assert kept is not None and "`get_plan` BEFORE calling `upgrade` (skill: Gold)" in kept.content


def test_without_state_predicates_are_not_evaluated() -> None:
    gold = skill("upgrade", ["get_plan", state_pred("tier", "eq", "gold")], label="Gold")
    assert build_preflight_contribution([gold]) is not None
    assert build_preflight_contribution([gold], {}) is None  # an empty state is still a state


def test_contribution_is_frozen() -> None:
    block = build_preflight_contribution([POST])
    assert block is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        block.content = "x"  # type: ignore[misc]
