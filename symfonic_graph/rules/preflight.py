"""The pre-flight block: ordering rules for the cached system prompt.

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

from symfonic_graph.rules.preconditions import filter_skills_by_state_predicates
from symfonic_graph.rules.ruleset import RuleSet, requirement_phrase, rules_of
from symfonic_graph.shape.contributions import PluginContribution
from symfonic_graph.shape.records import AnyPrecondition, FactPrecondition

__all__ = [
    "PREFLIGHT_HEADING",
    "PREFLIGHT_ORDER",
    "PREFLIGHT_ORIGIN",
    "build_preflight_contribution",
    "preflight_block",
    "preflight_lines",
]

PREFLIGHT_HEADING: Final = "## ENFORCED PRE-FLIGHT RULES"
PREFLIGHT_ORDER: Final = 5
PREFLIGHT_ORIGIN: Final = "symfonic.procedural"
_UNNAMED: Final = "<unnamed>"


_CONDITIONAL = frozenset({"check", "limit"})


def _condition(entry: Any) -> str:
    """A fact, check, limit or any-of with facts in words: the rule's message when given, else its CEL text.

    Example:
        >>> from symfonic_graph.shape.rule_kinds import CheckPrecondition
        >>> _condition(CheckPrecondition(where="size(args.passengers) <= 5", message="At most five passengers."))
        'At most five passengers.'
    """
    if entry.kind == "check":
        return entry.message or f"`{entry.where}`"
    if entry.kind == "limit":
        return requirement_phrase(entry, quote="`").removeprefix("limit: ")
    if entry.kind == "any":
        return " OR ".join([*(f"`{t}` was called" for t in entry.tools), *map(_condition, entry.alternatives)])
    return requirement_phrase(entry, quote="`")


def preflight_lines(skills: Iterable[Any] | None, *, include_negative: bool = False) -> list[str]:
    """The rule lines for ``skills``, in skill order then precondition order.

    Shadow rules (``enforcement = "shadow"``) and preconditions that could not
    be read have no line.

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"action_tool": "x", "precondition": "a"})
        >>> for line in preflight_lines([skill], include_negative=True):
        ...     print(line)
        - YOU MUST call `a` BEFORE calling `x` (skill: <unnamed>).
        - DO NOT call `x` until `a` has returned (skill: <unnamed>).
    """
    lines: list[str] = []
    for rule in rules_of(skills).rules:
        action = rule.action_tool
        if action is None or rule.shadow:
            continue
        label = rule.label or _UNNAMED
        for entry in rule.requirements:
            if entry.kind == "unreadable":
                continue
            if entry.kind in _CONDITIONAL or (isinstance(entry, AnyPrecondition) and entry.alternatives) or (
                    isinstance(entry, FactPrecondition) and entry.where is not None):
                lines.append(f"- `{action}` ONLY IF {_condition(entry)} (skill: {label}).")
                continue
            pre = requirement_phrase(entry, quote="`")
            lines.append(f"- YOU MUST call {pre} BEFORE calling `{action}` (skill: {label}).")
            if include_negative:
                lines.append(f"- DO NOT call `{action}` until {pre} has returned (skill: {label}).")
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
    if state is not None and isinstance(skills, RuleSet):  # compiled: no skill is rebuilt to be filtered
        skills = RuleSet.of_rules(rule for rule in skills.rules if rule.applies(state))
    elif state is not None:
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


def preflight_block(
    rules: RuleSet, state: object = None, *, include_negative: bool = False
) -> PluginContribution | None:
    """``build_preflight_contribution(rules, state)``, cached on the compiled rules per distinct state.

    Example:
        >>> preflight_block(RuleSet([])) is None
        True
    """
    key = rules.block_key(state, include_negative)
    found, block = rules.cached_block(key)
    if not found:
        block = build_preflight_contribution(rules, state, include_negative=include_negative)
        rules.keep_block(key, block)
    return block
