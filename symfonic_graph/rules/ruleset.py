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

import logging
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from symfonic_graph.rules.events import History
from symfonic_graph.rules.policy import (
    Bindings,
    Outcome,
    any_outcome,
    check_outcome,
    fact_outcome,
    fact_phrase,
    limit_amount,
    limit_outcome,
    utc_now,
)
from symfonic_graph.rules.preconditions import (
    CONDITIONS,
    DroppedSkill,
    condition_failure,
    resolve_path,
    shown,
    tool_requirement_met,
)
from symfonic_graph.shape._intern import shared
from symfonic_graph.shape.contributions import PluginContribution
from symfonic_graph.shape.models import Skill, guarded_tool, skill_of
from symfonic_graph.shape.records import (
    AnyPrecondition,
    CheckPrecondition,
    FactPrecondition,
    LimitPrecondition,
    ToolPrecondition,
    UnreadablePrecondition,
    action_tool_problem,
    bare_identifier,
)

__all__ = ["PackedSkill", "Rule", "RuleSet", "SkillCheck", "requirement_phrase", "rules_of"]

log = logging.getLogger("symfonic_graph.gate")

_MAX_BLOCKS = 256  # distinct predicate states whose block a RuleSet keeps

Requirement = (ToolPrecondition | AnyPrecondition | FactPrecondition | CheckPrecondition | LimitPrecondition
               | UnreadablePrecondition)
"""An entry the gate enforces (tool names already reduced to bare identifiers)."""


def requirement_phrase(entry: Requirement, *, quote: str = "") -> str:
    """How a requirement is named in the gate's error (``quote=""``) and the pre-flight block (``"`"``).

    Example:
        >>> requirement_phrase(ToolPrecondition(tool="lookup_order", same_args=("order_id",)), quote="`")
        '`lookup_order` (same `order_id`)'
        >>> requirement_phrase(AnyPrecondition(tools=("sso", "otp")))
        'sso or otp'
    """
    q = quote
    if isinstance(entry, ToolPrecondition):
        phrase = f"{q}{entry.tool}{q}"
        if entry.same_args:
            phrase += " (same " + ", ".join(f"{q}{a}{q}" for a in entry.same_args) + ")"
        if entry.within == "user_turn":
            phrase += " (after the user's latest message)"
        return phrase
    if isinstance(entry, AnyPrecondition):
        return " or ".join([*(f"{q}{t}{q}" for t in entry.tools), *(_alternative(a, q) for a in entry.alternatives)])
    if isinstance(entry, FactPrecondition):
        phrase = fact_phrase(entry, quote=q)
        return phrase if entry.where is None else f"{phrase} shows: {entry.message or q + entry.where + q}"
    if isinstance(entry, CheckPrecondition):
        return f"check: {entry.message or q + entry.where + q}"
    if isinstance(entry, LimitPrecondition):
        return f"limit: {entry.message or _limit_words(entry, q)}"
    return "a precondition that could not be read"


def _alternative(entry: FactPrecondition | CheckPrecondition, q: str) -> str:
    return requirement_phrase(entry, quote=q)


def _limit_words(entry: LimitPrecondition, q: str) -> str:
    window = f" in {entry.window}" if entry.window else ""
    if entry.max_calls is not None:
        return f"at most {entry.max_calls} call(s) per {entry.per}{window}"
    return f"the sum of {q}{entry.sum}{q} at most {entry.max_sum:g} per {entry.per}{window}"


@dataclass(frozen=True, slots=True)
class SkillCheck:
    """One skill whose action tool matched a call, and what it still needs.

    Attributes:
        label: the skill's label, if any.
        skill_id: the skill's id, if any.
        required: every requirement, as the gate names it.
        missing: the requirements not met by an earlier call.
        failed: tools whose earlier calls all failed (so they do not count).
        unreadable: why a precondition of the skill could not be read.
        shadow: a shadow rule: reported, never blocking.
        refused: the messages of facts, checks and limits that no further call can satisfy ("not allowed").
        errors: why an expression of the skill could not be evaluated (fails closed).

    Example:
        >>> SkillCheck("Deploy", "sk-1", ("run_tests",), ("run_tests",)).satisfied
        False
    """

    label: str | None
    skill_id: str | None
    required: tuple[str, ...]
    missing: tuple[str, ...]
    failed: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    shadow: bool = False
    refused: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    counted: tuple[tuple[str, LimitPrecondition, float], ...] = ()
    """The skill's limits counted in the store (``per`` namespace or tenant): (rule key, limit, this call's
    amount). The gate decided them over the conversation; a ``TurnMemory`` wiring reserves their slots."""

    @property
    def satisfied(self) -> bool:
        """True iff every requirement was met."""
        return not self.missing and not self.refused and not self.errors


@dataclass(frozen=True, slots=True)
class Rule:
    """One skill as the gate sees it: the tool it guards, what must come first, when it applies.

    Attributes:
        source: the skill as given, or its packed form (see ``skill``).
        requirements: the enforced entries, in entry order (tool, any-of, unreadable). An entry
            that cannot be enforced as written (a tool entry naming no tool, a misconfigured state
            predicate) is an unreadable one: never met, so the skill keeps blocking its action.
        required: every tool name the requirements mention, in order, without repeats.
        predicates: the well-formed conditions deciding whether the skill applies (``StatePrecondition``
            records, and those of any condition kind registered with its evaluator), in entry order.
        shadow: reported, never blocking (``enforcement = "shadow"``).
        problems: what an operator must fix that does not block (an ``action_tool`` that is no
            tool name, so ``steps[0]`` or nothing is guarded instead); ``lint`` reports them.
    """

    source: Any
    action_tool: str | None
    required: tuple[str, ...]
    predicates: tuple[Any, ...]
    label: str | None
    skill_id: str | None
    requirements: tuple[Requirement, ...] = ()
    shadow: bool = False
    problems: tuple[str, ...] = ()
    identifier: str | None = None
    _plan: tuple[tuple[str, ...], tuple[Any, ...], SkillCheck, tuple[int, ...]] | None = field(
        default=None, init=False, repr=False, compare=False)
    """Made on first check: each requirement's phrase; what a decision needs of it that never changes (a tool
    entry's bare name; an any-of's names and its alternatives' problems); the check when every one is met; how
    each is decided (its kind, tested once)."""

    def for_node(self, source: Any, skill_id: str | None) -> Rule:
        """This rule for another node of the same content (its packed skill and id); the plan is made afresh.

        Built field by field: ``dataclasses.replace`` cost a fifth of a reused row's reading.
        """
        return Rule(source, self.action_tool, self.required, self.predicates, self.label, skill_id,
                    self.requirements, self.shadow, self.problems, self.identifier)

    @property
    def key(self) -> str:
        """The rule's name in the store's limit counters: its identifier (kept across re-seeds), else its id."""
        return self.identifier or self.skill_id or self.label or ""

    @property
    def skill(self) -> Any:
        """The skill this rule was compiled from (a packed ``Skill`` is rebuilt, equal, on each access)."""
        source = self.source
        return source.skill() if type(source) is PackedSkill else source

    def failure(self, state: object) -> DroppedSkill | None:
        """Why a state predicate drops this skill in ``state``, or None when every predicate holds."""
        if not self.predicates:
            return None
        failing = self._failing(state)
        if failing is None:
            return None
        index, reason = failing
        return DroppedSkill(None, self.label, self.skill_id, index, shown(self.predicates[index]), reason, rule=self)

    def applies(self, state: object) -> bool:
        """True when every state predicate holds in ``state`` (``failure`` without building its report)."""
        return not self.predicates or self._failing(state) is None

    def _failing(self, state: object) -> tuple[int, str] | None:
        for index, predicate in enumerate(self.predicates):
            try:
                reason = condition_failure(predicate, state)
            except Exception as exc:  # defensive, keeps the filter total
                reason = f"evaluation failed ({type(exc).__name__})"
            if reason is not None:
                return index, reason
        return None

    def check(self, args: Any, history: History, *, count_failed: bool = False, bindings: Bindings | None = None,
              in_flight: Sequence[Any] = ()) -> SkillCheck:
        """What this skill still needs before its action, called with ``args``, may run.

        ``bindings`` carry the state and clock the expressions read (default: no state, the current time);
        ``in_flight`` the arguments of this tool's calls already allowed in the same batch (limits count them).
        """
        missing: list[str] = []
        failed: list[str] = []
        unreadable: list[str] = []
        refused: list[str] = []
        errors: list[str] = []
        counted: list[tuple[str, LimitPrecondition, float]] = []
        phrases, known, passed, kinds = self._plan or self._planned()
        entries: tuple[Any, ...] = self.requirements  # each entry's kind is ``kinds[position]``
        for position, entry in enumerate(entries):
            kind = kinds[position]
            if kind == _TOOL:
                met, only_failed = tool_requirement_met(entry, args, history, count_failed=count_failed,
                                                        name=known[position])
                if only_failed:
                    failed.append(entry.tool)
            elif kind == _NAMES:
                met, failed_tools = _any_met(known[position][0], history, count_failed)
                if failed_tools:
                    failed.extend(failed_tools)
            elif kind == _UNREADABLE:
                met = False
                unreadable.append(entry.reason)
            else:
                if bindings is None:
                    bindings = Bindings(None, utc_now())
                if kind == _FACT:
                    outcome = fact_outcome(entry, args, history, bindings)
                    if outcome.status == "missing" and entry.tool == self.action_tool:  # never "call A before A"
                        outcome = Outcome("refused", entry.message or f"no earlier `{entry.tool}` call meets it")
                elif kind == _CHECK:
                    outcome = check_outcome(entry, args, bindings)
                elif kind == _LIMIT:
                    outcome = limit_outcome(entry, self.action_tool or "", args, history, bindings, in_flight)
                    if outcome.status == "met" and entry.per != "conversation":
                        amount = limit_amount(entry, args, bindings)
                        if isinstance(amount, str):
                            outcome = Outcome("error", f"`{entry.sum}` could not be evaluated ({amount})")
                        else:
                            counted.append((f"{self.key}#{position}", entry, amount))
                else:
                    outcome = any_outcome(entry, args, history, bindings, count_failed=count_failed,
                                          action=self.action_tool, known=known[position])
                status = outcome.status
                if status == "met":
                    continue
                if status == "missing":
                    missing.append(outcome.detail)
                elif status == "refused":
                    refused.append(outcome.detail)
                elif status == "error":
                    errors.append(outcome.detail)
                    log.warning("rule %r (id=%s) could not be evaluated: %s", self.label, self.skill_id,
                                outcome.detail)
                continue
            if not met:
                missing.append(phrases[position])
        if not (missing or failed or unreadable or refused or errors or counted):
            return passed  # the same (immutable) check each time
        return SkillCheck(self.label, self.skill_id, phrases, tuple(missing), tuple(failed), tuple(unreadable),
                          self.shadow, tuple(refused), tuple(errors), tuple(counted))

    def _planned(self) -> tuple[tuple[str, ...], tuple[Any, ...], SkillCheck, tuple[int, ...]]:
        phrases = tuple(requirement_phrase(e) for e in self.requirements)
        known = tuple(e.name if isinstance(e, ToolPrecondition) else (
            (e.names, tuple(a.blocking() for a in e.alternatives)) if isinstance(e, AnyPrecondition) else None)
            for e in self.requirements)
        plan = (phrases, known, SkillCheck(self.label, self.skill_id, phrases, (), shadow=self.shadow),
                tuple(_kind(e) for e in self.requirements))
        object.__setattr__(self, "_plan", plan)
        return plan


_TOOL, _NAMES, _UNREADABLE, _FACT, _CHECK, _LIMIT, _ANY = range(7)  # how ``Rule.check`` decides an entry


def _kind(entry: Requirement) -> int:
    """How ``Rule.check`` decides ``entry`` (worked out once per rule, in the order it used to test the kinds)."""
    if isinstance(entry, ToolPrecondition):
        return _TOOL
    if isinstance(entry, AnyPrecondition) and not entry.alternatives:
        return _NAMES
    if isinstance(entry, UnreadablePrecondition):
        return _UNREADABLE
    if isinstance(entry, FactPrecondition):
        return _FACT
    if isinstance(entry, CheckPrecondition):
        return _CHECK
    if isinstance(entry, LimitPrecondition):
        return _LIMIT
    return _ANY


def _any_met(names: Sequence[str], history: History, count_failed: bool) -> tuple[bool, tuple[str, ...]]:
    """Whether any of the group's tools was called; and those whose calls all failed."""
    failed: list[str] = []
    results = history.results
    for name in names:
        only_failed = False
        for position in history.positions(name):
            if results[position].failed and not count_failed:
                only_failed = True
                continue
            return True, ()
        if only_failed:
            failed.append(name)
    return False, tuple(failed)


def _compiled(entries: Iterable[Any], action: str | None) -> tuple[tuple[Requirement, ...], tuple[Any, ...]]:
    """What the gate enforces before ``action``, and the conditions deciding whether the skill applies.

    An entry that cannot be enforced as written (a tool entry naming no tool, a group without one, a
    misconfigured state predicate, a condition kind without an evaluator) is an unreadable requirement:
    never met, so the skill keeps blocking its action.
    """
    out: list[Requirement] = []
    conditions: list[Any] = []
    for entry in entries:
        role, blocking = type(entry).role, entry.blocking()
        req: Requirement | None = None
        if blocking is not None:
            req = entry if isinstance(entry, UnreadablePrecondition) else UnreadablePrecondition(reason=blocking)
        elif role == "condition":
            if entry.kind in CONDITIONS:
                conditions.append(entry.canonical())
            else:
                req = UnreadablePrecondition(reason=f"kind {entry.kind!r} has no evaluator")
        elif isinstance(entry, ToolPrecondition):
            name = entry.name
            if name != action:  # a rule naming its own action could never be met
                req = entry if name == entry.tool else entry.model_copy(update={"tool": name})
        elif isinstance(entry, AnyPrecondition):
            names = tuple(n for n in entry.names if n != action)
            if names or entry.alternatives:
                req = AnyPrecondition(tools=names, alternatives=entry.alternatives)
        elif isinstance(entry, (FactPrecondition, CheckPrecondition, LimitPrecondition)):
            req = entry
        if req is not None and action is not None and req not in out:
            out.append(req)
    return tuple(out), tuple(conditions)


def _rule(skill: Any, *, pack: bool = False) -> Rule:
    """Compile one skill, in any shape (``skill_of``); ``pack`` holds a read ``Skill`` packed, values shared."""
    typed = skill_of(skill)
    action = guarded_tool(typed)
    source: Any = skill
    entries = typed.preconditions
    if pack and type(skill) is Skill:
        source = PackedSkill.of(skill)
        entries = source[_PRECONDITIONS]  # shared records: the requirements below share them too
    requirements, conditions = _compiled(entries, action)
    label = typed.label if isinstance(typed.label, str) and typed.label.strip() else None
    ident = typed.id if isinstance(typed.id, str) else None
    problem = action_tool_problem(typed.action_tool)
    problems = () if problem is None else (problem,)
    if type(source) is not PackedSkill:
        return Rule(source, action, _names(requirements), conditions, label, ident, requirements, typed.shadow,
                    problems, _identifier(typed.identifier))
    return Rule(source, shared(action), shared(_names(requirements)), shared(conditions),
                shared(label), ident, shared(requirements), typed.shadow, problems, _identifier(typed.identifier))


def _identifier(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _names(requirements: tuple[Requirement, ...]) -> tuple[str, ...]:
    names: list[str] = []
    for req in requirements:
        tools = (req.tool,) if isinstance(req, (ToolPrecondition, FactPrecondition)) else (
            *req.tools, *(a.tool for a in req.alternatives if isinstance(a, FactPrecondition))
        ) if isinstance(req, AnyPrecondition) else ()  # by type: asking a record for a field it lacks is slow
        for name in tools:
            if name not in names:
                names.append(name)
    return tuple(names)


_SKILL_FIELDS = tuple(Skill.model_fields)
_OWN = frozenset({"id", "created_at"})  # unique per skill: nothing to share
_PRECONDITIONS = _SKILL_FIELDS.index("preconditions")


class PackedSkill(tuple[Any, ...]):
    """A read ``Skill`` held as its field values, equal strings and records shared with other catalogs.

    A cached catalog holds its skills packed (a fraction of the model's size);
    ``skill()`` rebuilds an equal ``Skill`` when a caller asks for one.

    Example:
        >>> skill = Skill(id="s1", tenant_id="acme", namespace=None, label="Deploy", identifier=None,
        ...               steps=("deploy",), action_tool="deploy", context="", status="approved",
        ...               active=True, source=None, created_at=None)
        >>> PackedSkill.of(skill).skill() == skill
        True
    """

    __slots__ = ()

    @classmethod
    def of(cls, skill: Skill) -> PackedSkill:
        """``skill`` packed."""
        values = skill.__dict__
        return cls(values[name] if name in _OWN else shared(values[name]) for name in _SKILL_FIELDS)

    def skill(self) -> Skill:
        """The ``Skill`` again (a new object, equal to the one packed)."""
        return Skill.model_construct(**dict(zip(_SKILL_FIELDS, self, strict=True)))


class RuleSet(Sequence[Any]):
    """Skills compiled once into their rules: a read-only sequence of the skills, and the compiled form.

    Anything that takes skills takes a RuleSet (iterating it yields the
    skills); the gate and the pre-flight block use ``rules``. A ``TurnMemory``
    compiles with ``pack=True``: read ``Skill`` objects are then held packed
    and rebuilt only when someone iterates the skills, and a tenant's
    catalog is one RuleSet shared by all its cached scopes.
    """

    __slots__ = ("__weakref__", "_blocks", "_by_tool", "_cacheable", "_paths", "rules")

    rules: tuple[Rule, ...]
    _by_tool: dict[str, tuple[Rule, ...]]
    _paths: tuple[str, ...]
    _cacheable: bool
    _blocks: dict[tuple[bool, Hashable], PluginContribution | None] | None

    def __init__(self, skills: Iterable[Any] = (), *, pack: bool = False) -> None:
        self._compiled(tuple(_rule(skill, pack=pack) for skill in skills))

    @classmethod
    def of_rules(cls, rules: Iterable[Rule]) -> RuleSet:
        """A RuleSet of rules compiled before (nothing is compiled again).

        Example:
            >>> base = RuleSet([{"metadata": {"action_tool": "deploy", "precondition": ["test"]}}])
            >>> RuleSet.of_rules(base.rules).rules == base.rules
            True
        """
        self = cls.__new__(cls)
        self._compiled(tuple(rules))
        return self

    def _compiled(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        by_tool: dict[str, list[Rule]] = {}
        for rule in rules:
            if rule.action_tool is not None:
                by_tool.setdefault(rule.action_tool, []).append(rule)
        self._by_tool = {tool: tuple(each) for tool, each in by_tool.items()}
        read = [p.state_paths() for rule in rules for p in rule.predicates]
        paths = {path for each in read if each is not None for path in each}
        self._paths = tuple(sorted(paths)) if paths else ()
        self._cacheable = None not in read  # a condition reading unknown state: no block is cached
        self._blocks = None

    def __len__(self) -> int:
        return len(self.rules)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(rule.skill for rule in self.rules[index])
        return self.rules[index].skill

    def __iter__(self) -> Iterator[Any]:
        return (rule.skill for rule in self.rules)

    def __eq__(self, other: object) -> bool:
        """Equal to a RuleSet or tuple of equal skills, in the same order (as the tuple it once was)."""
        if isinstance(other, RuleSet):
            return self.rules == other.rules or tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def for_tool(self, tool: str) -> tuple[Rule, ...]:
        """The rules whose action tool is ``tool``, in catalog order.

        A call name is matched as a tool reference, the way rules name their
        tools: ``issue-refund`` matches ``issue-refund``; a name with blanks or
        an argument list around it matches the tool it names.

        Example:
            >>> rules = RuleSet([{"metadata": {"action_tool": "issue-refund", "precondition": ["verify-identity"]}}])
            >>> [rule.required for rule in rules.for_tool("issue-refund")]
            [('verify-identity',)]
        """
        found = self._by_tool.get(tool)
        if found is not None:
            return found
        name = bare_identifier(tool)
        return self._by_tool.get(name, ()) if name is not None and name != tool else ()

    def block_key(self, state: object, include_negative: bool) -> tuple[bool, Hashable] | None:
        """The cache key of the pre-flight block for ``state``: the values the predicates read.

        None when a value is unhashable (the block is then built afresh).
        """
        if state is None:
            return (include_negative, None)
        if not self._cacheable:
            return None
        key = (include_negative, ("state", tuple(resolve_path(state, path) for path in self._paths)))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def cached_block(self, key: tuple[bool, Hashable] | None) -> tuple[bool, PluginContribution | None]:
        """``(found, block)`` from the block cache."""
        if key is not None and self._blocks is not None and key in self._blocks:
            return True, self._blocks[key]
        return False, None

    def keep_block(self, key: tuple[bool, Hashable] | None, block: PluginContribution | None) -> None:
        """Remember the block of ``key`` (up to a bound)."""
        if key is None:
            return
        if self._blocks is None:
            self._blocks = {}
        if len(self._blocks) < _MAX_BLOCKS:
            self._blocks[key] = block

    def __repr__(self) -> str:
        return f"RuleSet({list(self)!r})"


def rules_of(skills: Iterable[Any] | None) -> RuleSet:
    """``skills`` as a RuleSet: itself when it already is one, else compiled now."""
    return skills if isinstance(skills, RuleSet) else RuleSet(skills or ())
