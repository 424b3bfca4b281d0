"""Skills compiled once into the rules the gate and the pre-flight block apply.

The gate and the pre-flight block ask the same questions of every skill on
every turn: which tool does it guard, which tools must come first, which
state predicates decide whether it applies. A ``RuleSet`` answers them once
per catalog version (``TurnMemory`` builds one when it reads the skills) and
keeps the pre-flight block of each distinct state it was asked for, so a
turn on a cached snapshot costs a dictionary lookup. Every answer comes from
the pure functions of ``preconditions`` and ``preflight``, so the output is
byte-identical to computing it afresh.

Example:
    >>> from types import SimpleNamespace
    >>> rules = RuleSet([SimpleNamespace(metadata={"label": "Deploy", "action_tool": "deploy",
    ...                                            "precondition": ["run_tests"]})])
    >>> [rule.required for rule in rules.for_tool("deploy")]
    [('run_tests',)]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from symfonic_graph.contributions import PluginContribution
from symfonic_graph.preconditions import (
    DroppedSkill,
    _metadata,
    action_tool_of,
    predicate_failure,
    required_tools,
    resolve_path,
    skill_id,
    skill_label,
    state_predicates,
)
from symfonic_graph.preflight import build_preflight_contribution

__all__ = ["Rule", "RuleSet", "rules_of"]

_MAX_BLOCKS = 256  # distinct predicate states whose block a RuleSet keeps


@dataclass(frozen=True, slots=True)
class Rule:
    """One skill as the gate sees it: the tool it guards, what must come first, when it applies."""

    skill: Any
    action_tool: str | None
    required: tuple[str, ...]
    predicates: tuple[Any, ...]
    label: str | None
    skill_id: str | None

    def failure(self, state: object) -> DroppedSkill | None:
        """Why a state predicate drops this skill in ``state``, or None when every predicate holds."""
        for index, predicate in enumerate(self.predicates):
            try:
                reason = predicate_failure(predicate, state)
            except Exception as exc:  # defensive, keeps the filter total
                reason = f"evaluation failed ({type(exc).__name__})"
            if reason is not None:
                return DroppedSkill(self.skill, self.label, self.skill_id, index, predicate, reason)
        return None


class _Read:
    """A skill's ``id`` and ``metadata`` read once (``Skill.metadata`` builds a new dict per access)."""

    __slots__ = ("id", "metadata")

    def __init__(self, skill: Any) -> None:
        self.id = skill.get("id") if isinstance(skill, Mapping) else getattr(skill, "id", None)
        self.metadata = _metadata(skill)


def _rule(skill: Any) -> Rule:
    read = _Read(skill)
    action = action_tool_of(read)
    required = tuple(required_tools(read, action)) if action is not None else ()
    return Rule(skill, action, required, tuple(state_predicates(read)), skill_label(read), skill_id(read))


class RuleSet(tuple[Any, ...]):
    """An immutable sequence of skills that also holds their compiled rules.

    It is a tuple of the skills themselves, so anything that takes skills
    takes a RuleSet; the gate and the pre-flight block use the compiled form.
    """

    rules: tuple[Rule, ...]
    _by_tool: dict[str, tuple[Rule, ...]]
    _paths: tuple[str, ...]
    _blocks: dict[tuple[bool, Hashable], PluginContribution | None]

    def __new__(cls, skills: Iterable[Any] = ()) -> RuleSet:
        self = super().__new__(cls, skills)
        self.rules = tuple(_rule(skill) for skill in self)
        by_tool: dict[str, list[Rule]] = {}
        for rule in self.rules:
            if rule.action_tool is not None:
                by_tool.setdefault(rule.action_tool, []).append(rule)
        self._by_tool = {tool: tuple(rules) for tool, rules in by_tool.items()}
        paths: set[str] = {p["path"] for rule in self.rules for p in rule.predicates
                           if isinstance(p, Mapping) and isinstance(p.get("path"), str)}
        self._paths = tuple(sorted(paths))
        self._blocks = {}
        return self

    def for_tool(self, tool: str) -> tuple[Rule, ...]:
        """The rules whose action tool is ``tool``, in catalog order."""
        return self._by_tool.get(tool, ())

    def preflight(self, state: object = None, *, include_negative: bool = False) -> PluginContribution | None:
        """The pre-flight block, as ``build_preflight_contribution(self, state)`` returns it, cached per state.

        The cache key is the values the skills' predicates read from ``state``
        (an unhashable value is not cached: the block is built afresh).
        """
        key: tuple[bool, Hashable] | None
        if state is None:
            key = (include_negative, None)
        else:
            values = tuple(resolve_path(state, path) for path in self._paths)
            key = (include_negative, ("state", values))
            try:
                hash(key)
            except TypeError:
                key = None
        if key is not None and key in self._blocks:
            return self._blocks[key]
        block = build_preflight_contribution(self, state, include_negative=include_negative)
        if key is not None and len(self._blocks) < _MAX_BLOCKS:
            self._blocks[key] = block
        return block

    def __repr__(self) -> str:
        return f"RuleSet({list(self)!r})"


def rules_of(skills: Iterable[Any] | None) -> RuleSet:
    """``skills`` as a RuleSet: itself when it already is one, else compiled now."""
    return skills if isinstance(skills, RuleSet) else RuleSet(skills or ())
