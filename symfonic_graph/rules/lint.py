"""Rules checked against the agent's tools.

A rule names tools by string. A typo in its action tool (``delete_acount``)
means it never applies; a precondition tool the agent does not have
(``request_manager_approval``) means the action can never run, while the
model is told to call it. Neither shows in the graph alone: they are found by
comparing the rules with the tools one agent was given. A rule that cannot be
enforced as written (an ``action_tool`` that is no tool name, a precondition
naming no tool, a misconfigured state predicate) is an ERROR whatever the tools.

- :func:`lint_rules` returns the findings;
- :class:`ToolLinter` is what the LangChain middleware and the LangGraph
  factories use: it logs each distinct set of findings of a scope's catalog
  once (a missing action tool at DEBUG: agents sharing a tenant's catalog
  each lack the others' tools; every other finding at ERROR), and leaves out
  of the pre-flight block the rules whose action tool the agent lacks;
- ``symfonic-graph rules lint --tenant T --tools a,b,c`` prints the findings
  and exits 1 when there are any.

Example:
    >>> from types import SimpleNamespace
    >>> skill = SimpleNamespace(metadata={"label": "Refunds", "action_tool": "issue_refund",
    ...                                   "precondition": ["verify_identity"]})
    >>> [f.code for f in lint_rules([skill], ["issue_refund"])]
    ['precondition_tool_missing']
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from symfonic_graph.rules.ruleset import Rule, RuleSet, rules_of
from symfonic_graph.shape.records import UnreadablePrecondition

__all__ = ["Finding", "ToolLinter", "lint_rules", "tool_names"]

log = logging.getLogger("symfonic_graph.lint")  # the logger's name is a contract (docs/observability.md)

Level = Literal["WARNING", "ERROR"]
ACTION_MISSING: Final = "action_tool_missing"
PRECONDITION_MISSING: Final = "precondition_tool_missing"
ACTION_NOT_A_TOOL_NAME: Final = "action_tool_not_a_tool_name"
PRECONDITION_UNENFORCEABLE: Final = "precondition_unenforceable"
_REMEMBERED: Final = 1024


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that does not fit the agent's tools.

    Attributes:
        level: ``"WARNING"`` (the rule never applies) or ``"ERROR"`` (its action can never run, or
            the rule cannot guard the tool it names).
        code: ``"action_tool_missing"``, ``"precondition_tool_missing"``, ``"action_tool_not_a_tool_name"``
            or ``"precondition_unenforceable"``.
        skill_id: the skill's id, if it has one.
        label: the skill's label, if it has one.
        action_tool: the tool the rule guards (empty when it guards none).
        tool: the tool the agent lacks (empty for the last two codes).
        tenant_id: the skill's tenant, if it says.
        namespace: the skill's namespace, if any.
        detail: what is wrong with the rule itself (the last two codes).
    """

    level: Level
    code: str
    skill_id: str | None
    label: str | None
    action_tool: str
    tool: str
    tenant_id: str | None = None
    namespace: str | None = None
    detail: str | None = None

    def line(self) -> str:
        """The finding as one line, level first."""
        name = self.label or self.skill_id or "<unnamed>"
        if self.code == ACTION_NOT_A_TOOL_NAME:
            return f"ERROR {name}: {self.detail}; write a tool name the agent's tools use"
        if self.code == PRECONDITION_UNENFORCEABLE:
            return (f"ERROR {name}: a precondition cannot be enforced as written ({self.detail}): "
                    f"`{self.action_tool}` can never run until an operator fixes the rule")
        if self.code == ACTION_MISSING:
            return (f"WARNING {name}: action tool `{self.tool}` is not among the agent's tools: "
                    "the rule never applies (a typo in the tool name?)")
        return (f"ERROR {name}: precondition tool `{self.tool}` is not among the agent's tools: "
                f"`{self.action_tool}` can never run")


def tool_names(tools: Iterable[Any]) -> frozenset[str]:
    """The names of ``tools``: strings, tools with a ``name``, or provider dicts (``name`` or ``function.name``).

    Example:
        >>> sorted(tool_names(["a", {"type": "function", "function": {"name": "b"}}]))
        ['a', 'b']
    """
    names: set[str] = set()
    for tool in tools:
        if isinstance(tool, str):
            name: object = tool
        elif isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        else:
            name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
        if isinstance(name, str) and name:
            names.add(name)
    return frozenset(names)


def _owner(rule: Rule) -> tuple[str | None, str | None]:
    skill = rule.skill
    if isinstance(skill, Mapping):
        tenant, namespace = skill.get("tenant_id"), skill.get("namespace")
    else:
        tenant, namespace = getattr(skill, "tenant_id", None), getattr(skill, "namespace", None)
    return (tenant if isinstance(tenant, str) else None, namespace if isinstance(namespace, str) else None)


def lint_rules(skills: Iterable[Any] | None, tools: Iterable[Any]) -> list[Finding]:
    """The rules of ``skills`` that do not fit ``tools``, in catalog order.

    A rule whose ``action_tool`` is no tool name gives an ERROR (the rule
    cannot guard the tool it names). A rule whose action tool is not among
    ``tools`` gives one WARNING (it never applies; its preconditions are not
    checked). A rule whose action tool is there gives one ERROR per
    precondition tool that is not, and one per precondition that can never be
    met (unreadable, naming no tool, or a misconfigured state predicate).

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"label": "Refunds", "action_tool": "issue-refund",
        ...                                   "precondition": ["verify-identity"]})
        >>> lint_rules([skill], ["issue-refund", "verify-identity"])
        []
        >>> [f.line()[:60] for f in lint_rules([skill], ["issue-refund"])]
        ['ERROR Refunds: precondition tool `verify-identity` is not am']

    Args:
        skills: the skills (a ``RuleSet`` is not compiled again).
        tools: the agent's tools, or their names.
    """
    names = tool_names(tools)
    findings: list[Finding] = []
    for rule in rules_of(skills).rules:
        owner = _owner(rule) if rule.problems or rule.action_tool is not None else (None, None)
        for problem in rule.problems:
            findings.append(Finding("ERROR", ACTION_NOT_A_TOOL_NAME, rule.skill_id, rule.label,
                                    rule.action_tool or "", "", *owner, detail=problem))
        if rule.action_tool is None:
            continue
        if rule.action_tool not in names:
            findings.append(Finding("WARNING", ACTION_MISSING, rule.skill_id, rule.label, rule.action_tool,
                                    rule.action_tool, *owner))
            continue
        for tool in dict.fromkeys(rule.required):
            if tool not in names:
                findings.append(Finding("ERROR", PRECONDITION_MISSING, rule.skill_id, rule.label,
                                        rule.action_tool, tool, *owner))
        for entry in rule.requirements:
            if isinstance(entry, UnreadablePrecondition):
                findings.append(Finding("ERROR", PRECONDITION_UNENFORCEABLE, rule.skill_id, rule.label,
                                        rule.action_tool, "", *owner, detail=entry.reason))
    return findings


class ToolLinter:
    """One agent's tools, checked against the catalogs its turns read.

    ``check(skills)`` logs the findings of a catalog the first time that set
    of findings is seen (a ``TurnMemory`` hands the same ``RuleSet`` for a
    scope while its catalog version is unchanged, so the work is done once
    per scope and version): a rule whose action tool the agent lacks at
    DEBUG (agents that share a tenant's catalog each lack the others'
    tools), every other finding at ERROR. ``for_preflight(skills)`` leaves
    out the rules whose action tool the agent lacks.

    Example:
        >>> linter = ToolLinter(["deploy", "run_tests"])
        >>> linter.check([])
        []
    """

    def __init__(self, tools: Iterable[Any]) -> None:
        self.tools = tool_names(tools)
        self._findings: OrderedDict[int, tuple[Any, list[Finding]]] = OrderedDict()
        self._logged: OrderedDict[frozenset[Finding], None] = OrderedDict()
        self._kept: OrderedDict[int, tuple[Any, RuleSet]] = OrderedDict()

    def findings(self, skills: Iterable[Any] | None) -> list[Finding]:
        """The findings of ``skills``; a ``RuleSet`` seen before is not linted again."""
        if not isinstance(skills, RuleSet):
            return lint_rules(skills, self.tools)
        held = self._findings.get(id(skills))
        if held is not None and held[0] is skills:
            return held[1]
        found = lint_rules(skills, self.tools)
        _remember(self._findings, id(skills), (skills, found))
        return found

    def check(self, skills: Iterable[Any] | None) -> list[Finding]:
        """Log the findings of ``skills`` once on ``symfonic_graph.lint`` (a missing action tool at DEBUG,
        the rest at ERROR); return them.

        An agent without tools (an empty set: unknown) checks nothing.
        """
        if not self.tools:
            return []
        found = self.findings(skills)
        key = frozenset(found)
        if found and key not in self._logged:
            _remember(self._logged, key, None)
            scope = next(((f.tenant_id, f.namespace) for f in found if f.tenant_id is not None), None)
            where = f" (tenant {scope[0]!r}, namespace {scope[1]!r})" if scope else ""
            for finding in found:
                if finding.code == ACTION_MISSING:  # several agents share a catalog: often another agent's rule
                    log.debug("rule guards a tool this agent lacks%s: %s: action tool `%s` is not among this "
                              "agent's tools, the rule never applies to it (another agent's rule, or a typo)",
                              where, finding.label or finding.skill_id or "<unnamed>", finding.tool)
                else:
                    log.error("rule does not fit the agent's tools%s: %s", where, finding.line())
        return found

    def for_preflight(self, skills: Iterable[Any] | None) -> RuleSet:
        """``skills`` without the rules whose action tool the agent lacks (the same RuleSet when none)."""
        rules = rules_of(skills)
        if not self.tools:
            return rules
        held = self._kept.get(id(rules))
        if held is not None and held[0] is rules:
            return held[1]
        fits = [r.action_tool is None or r.action_tool in self.tools for r in rules.rules]
        kept = rules if all(fits) else RuleSet(r.skill for r, fit in zip(rules.rules, fits, strict=True) if fit)
        _remember(self._kept, id(rules), (rules, kept))
        return kept


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _REMEMBERED:
        cache.popitem(last=False)
