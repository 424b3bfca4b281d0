"""The pre-flight block (SPEC §6): ordering rules for the cached system prompt.

The block depends only on the skills and their order (plus ``state`` when
given), so while a tenant's catalog is unchanged it is byte-identical from
turn to turn and can live in a cached prompt prefix.

Example:
    >>> from types import SimpleNamespace
    >>> skill = SimpleNamespace(metadata={"label": "Deploy", "action_tool": "deploy",
    ...                                   "precondition": ["run_tests"]})
    >>> print(build_preflight_contribution([skill]).content)
    ## ENFORCED PRE-FLIGHT RULES
    - YOU MUST call `run_tests` BEFORE calling `deploy` (skill: Deploy).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from symfonic_graph.contributions import PluginContribution
from symfonic_graph.preconditions import (
    action_tool_of,
    filter_skills_by_state_predicates,
    required_tools,
    skill_label,
)

__all__ = [
    "PREFLIGHT_HEADING",
    "PREFLIGHT_ORDER",
    "PREFLIGHT_ORIGIN",
    "build_preflight_contribution",
    "preflight_lines",
]

PREFLIGHT_HEADING: Final = "## ENFORCED PRE-FLIGHT RULES"
PREFLIGHT_ORDER: Final = 5
PREFLIGHT_ORIGIN: Final = "symfonic.procedural"
_UNNAMED: Final = "<unnamed>"


def preflight_lines(skills: Iterable[Any] | None, *, include_negative: bool = False) -> list[str]:
    """The rule lines for ``skills``, in skill order then precondition order.

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"action_tool": "x", "precondition": "a"})
        >>> for line in preflight_lines([skill], include_negative=True):
        ...     print(line)
        - YOU MUST call `a` BEFORE calling `x` (skill: <unnamed>).
        - DO NOT call `x` until `a` has returned (skill: <unnamed>).
    """
    lines: list[str] = []
    for skill in skills or ():
        action = action_tool_of(skill)
        if action is None:
            continue
        label = skill_label(skill) or _UNNAMED
        for pre in required_tools(skill, action):
            lines.append(f"- YOU MUST call `{pre}` BEFORE calling `{action}` (skill: {label}).")
            if include_negative:
                lines.append(f"- DO NOT call `{action}` until `{pre}` has returned (skill: {label}).")
    return lines


def build_preflight_contribution(
    skills: Iterable[Any] | None,
    state: object = None,
    *,
    include_negative: bool = False,
) -> PluginContribution | None:
    """The cached pre-flight block for ``skills``, or None when no rule applies.

    Args:
        skills: the active skills, in the store's stable order.
        state: when given, skills whose state predicates fail are left out.
        include_negative: add a ``DO NOT call ... until ...`` line after each rule.

    Example:
        >>> build_preflight_contribution([]) is None
        True
    """
    if state is not None:
        skills = filter_skills_by_state_predicates(skills, state)
    lines = preflight_lines(skills, include_negative=include_negative)
    if not lines:
        return None
    return PluginContribution(
        content=PREFLIGHT_HEADING + "\n" + "\n".join(lines),
        position="cached",
        order=PREFLIGHT_ORDER,
        header="",
        origin=PREFLIGHT_ORIGIN,
    )
