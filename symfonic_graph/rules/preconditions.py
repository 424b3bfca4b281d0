"""Pure precondition rules shared by the gate and the pre-flight block.

Nothing here touches Neo4j or LangGraph. A *skill* is any object with a
``metadata`` mapping (duck typing); a plain mapping holding a ``"metadata"``
mapping is accepted too. ``metadata["precondition"]`` may be ``None``, a single
string (legacy), a single ``{"tool": ...}`` / ``{"state": ...}`` mapping, or a
list whose items are tool identifier strings, ``{"tool": "name", ...}``,
``{"any": [...]}``, ``{"state": {"path": ..., "op": ..., "value": ...}}`` or free
text. A :class:`~symfonic_graph.models.Skill` read from the graph carries its
typed ``preconditions`` instead, and those are read as they are (a ``text``
entry is never enforced, whatever its text looks like).

Every rule fails closed: a misconfigured state predicate (unknown op, no
value, a non-list ``in``, a bad path) does not decide whether its skill
applies; the skill applies and its action stays blocked until an operator
fixes the predicate. A tool entry that names no tool blocks the same way.
Tool names are read by :func:`~symfonic_graph.shape.records.bare_identifier`
(1 to 128 ASCII letters, digits, ``_``, ``-`` or ``.``, as providers accept).

Example:
    >>> from types import SimpleNamespace
    >>> skill = SimpleNamespace(metadata={
    ...     "label": "Post to Slack",
    ...     "action_tool": "post_message",
    ...     "precondition": ["get_status(channel=<x>)", "Be polite.",
    ...                      {"state": {"path": "channel", "op": "eq", "value": "slack"}}],
    ... })
    >>> action_tool_of(skill), precondition_tools(skill)
    ('post_message', ['get_status'])
    >>> evaluate_predicate(state_predicates(skill)[0], {"CHANNEL": "slack"})
    True
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from symfonic_graph.rules.events import History
from symfonic_graph.shape._entry import _Entry
from symfonic_graph.shape.expressions import arguments
from symfonic_graph.shape.models import guarded_tool, skill_of
from symfonic_graph.shape.records import (
    KINDS,
    STATE_OPS,
    Precondition,
    StatePrecondition,
    ToolPrecondition,
    bare_identifier,
    register_kind,
    unregister_kind,
)

__all__ = [
    "MISSING",
    "STATE_OPS",
    "DroppedSkill",
    "StateFilterResult",
    "action_tool_of",
    "bare_identifier",
    "evaluate_predicate",
    "filter_skills_by_state_predicates",
    "json_key",
    "entries_of",
    "log_dropped",
    "partition_skills_by_state",
    "precondition_tools",
    "condition_failure",
    "predicate_failure",
    "register_precondition",
    "required_tools",
    "resolve_path",
    "skill_id",
    "skill_label",
    "state_predicates",
    "tool_requirement_met",
]

log = logging.getLogger("symfonic_graph.preconditions")  # the logger's name is a contract (docs/observability.md)

_CONTAINERS: Final = (list, tuple, set, frozenset)


class _Missing:
    """Sentinel type for a path that does not resolve."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()


# --- skills -------------------------------------------------------------------


def skill_label(skill: object) -> str | None:
    """The skill's ``metadata["label"]`` if it is a non-blank string, else None.

    Example:
        >>> from types import SimpleNamespace
        >>> skill_label(SimpleNamespace(metadata={"label": "Deploy"}))
        'Deploy'
    """
    label = skill_of(skill).label
    return label if isinstance(label, str) and label.strip() else None


def skill_id(skill: object) -> str | None:
    """The skill's ``id`` attribute (or ``metadata["id"]``) when it is a string.

    Example:
        >>> from types import SimpleNamespace
        >>> skill_id(SimpleNamespace(id="sk-1", metadata={}))
        'sk-1'
    """
    value = skill_of(skill).id
    return value if isinstance(value, str) else None


def _describe(skill: object) -> str:
    return _named(skill_label(skill), skill_id(skill))


def _named(label: str | None, ident: str | None) -> str:
    if label and ident:
        return f"{label!r} (id={ident})"
    if label:
        return repr(label)
    return f"id={ident}" if ident else "<unnamed skill>"


# --- identifiers and tools ----------------------------------------------------


def action_tool_of(skill: object) -> str | None:
    """The tool a skill guards: ``action_tool`` if bare, else ``steps[0]`` if bare.

    Example:
        >>> from types import SimpleNamespace
        >>> action_tool_of(SimpleNamespace(metadata={"steps": ["deploy(env=prod)"]}))
        'deploy'
    """
    return guarded_tool(skill_of(skill))


def entries_of(skill: object) -> tuple[Precondition, ...]:
    """A skill's typed precondition entries: a ``Skill``'s own, else read from its metadata.

    Example:
        >>> from types import SimpleNamespace
        >>> [e.kind for e in entries_of(SimpleNamespace(metadata={"precondition": ["auth", "Be kind."]}))]
        ['tool', 'text']
    """
    return skill_of(skill).preconditions


def precondition_tools(skill: object) -> list[str]:
    """The bare tool identifiers a skill requires, in entry order, without repeats.

    Example:
        >>> from types import SimpleNamespace
        >>> precondition_tools(SimpleNamespace(metadata={"precondition": [
        ...     "auth", {"tool": "get_status(id=1)"}, "Say hello first."]}))
        ['auth', 'get_status']
    """
    tools: list[str] = []
    for entry in entries_of(skill):
        ident = entry.name if isinstance(entry, ToolPrecondition) else None
        if ident is not None and ident not in tools:
            tools.append(ident)
    return tools


def required_tools(skill: object, action_tool: str) -> list[str]:
    """The precondition tools the gate and pre-flight enforce for ``action_tool``.

    A precondition naming the action tool itself could never be satisfied, so it
    is ignored.

    Example:
        >>> from types import SimpleNamespace
        >>> required_tools(SimpleNamespace(metadata={"precondition": ["a", "x"]}), "x")
        ['a']
    """
    return [tool for tool in precondition_tools(skill) if tool != action_tool]


def state_predicates(skill: object) -> list[Any]:
    """The ``{"path", "op", "value"?}`` view of a skill's state entries, in entry order (for reports).

    A mapping with a bad path, op or value is kept (the compiled rule turns it
    into a requirement that is never met, so the skill blocks). An item
    ``{"state": X}`` whose ``X`` is not a mapping is not a predicate (it is an
    unreadable entry of :func:`entries_of`, which blocks too).

    Example:
        >>> from types import SimpleNamespace
        >>> state_predicates(SimpleNamespace(metadata={"precondition": [
        ...     "auth", {"state": {"path": "env", "op": "exists"}}, {"state": "env"}]}))
        [{'path': 'env', 'op': 'exists'}]
    """
    meta = None if hasattr(skill, "preconditions") else (
        skill.get("metadata") if isinstance(skill, Mapping) else getattr(skill, "metadata", None))
    if isinstance(meta, Mapping):  # duck-typed: the mappings as given
        raw = meta.get("precondition")
        items = [raw] if isinstance(raw, (str, Mapping)) else list(raw) if isinstance(raw, Sequence) else []
        return [item["state"] for item in items if isinstance(item, Mapping) and isinstance(item.get("state"), Mapping)]
    return [entry.predicate() for entry in entries_of(skill) if isinstance(entry, StatePrecondition)]


def shown(entry: Any) -> object:
    """How a condition is shown in reports: a state entry as its ``{"path", "op", "value"?}`` mapping."""
    return entry.predicate() if isinstance(entry, StatePrecondition) else entry


# --- predicates ---------------------------------------------------------------


def _step(current: object, segment: str) -> object:
    if type(current) is dict:  # the usual state: the same three lookups, without building the candidates
        for key in (segment.upper(), segment.lower(), segment):
            if key in current:
                return current[key]
        return MISSING
    candidates = dict.fromkeys((segment.upper(), segment.lower(), segment))
    if isinstance(current, Mapping):
        for key in candidates:
            if key in current:
                return current[key]
        return MISSING
    for name in candidates:
        if name.startswith("_"):
            continue  # private and dunder attributes are never read
        try:
            return getattr(current, name)
        except AttributeError:
            continue
    return MISSING


def resolve_path(state: object, path: object) -> object:
    """Resolve a dotted ``path`` in ``state``; returns :data:`MISSING` if it does not.

    Per segment, a mapping is tried with the segment in UPPER case, lower case,
    then as written; an object's attributes likewise (never ``_``-prefixed ones).

    Example:
        >>> resolve_path({"USER": {"tier": "gold"}}, "user.Tier")
        'gold'
        >>> resolve_path({}, "a..b") is MISSING
        True
    """
    if not isinstance(path, str) or not path:
        return MISSING
    current = state
    try:
        for segment in path.split("."):
            if not segment:
                return MISSING
            current = _step(current, segment)
            if current is MISSING:
                return MISSING
    except Exception:  # a hostile mapping or property: fail closed
        return MISSING
    return current


def _compare(op: str, actual: object, expected: object) -> str | None:
    try:
        if op == "eq":
            return None if bool(actual == expected) else f"{actual!r} != {expected!r}"
        if op == "neq":
            return None if bool(actual != expected) else f"{actual!r} == {expected!r}"
        if not isinstance(expected, _CONTAINERS):
            return f"`in` needs a list, tuple or set value, got {type(expected).__name__}"
        return None if actual in expected else f"{actual!r} not in {expected!r}"
    except Exception as exc:  # unhashable, odd __eq__, ...: fail closed
        return f"comparison failed ({type(exc).__name__})"


def state_failure(entry: StatePrecondition, state: object) -> str | None:
    """Why the state entry does not hold in ``state``, or None when it holds (the evaluator of ``kind="state"``).

    Example:
        >>> state_failure(StatePrecondition(path="env", op="eq", value="prod"), {"env": "dev"})
        "'dev' != 'prod'"
    """
    op, path = entry.op, entry.path
    if not isinstance(op, str) or op not in STATE_OPS:
        return f"unknown op {op!r}"
    if not isinstance(path, str) or not path:
        return f"path {path!r} is not a non-empty string"
    actual = resolve_path(state, path)
    if actual is MISSING and entry.if_missing == "apply":
        return None  # the rule applies when the state does not say
    if op == "exists":
        return None if actual is not MISSING else f"path {path!r} is missing"
    if not entry.has_value:
        return f"op {op!r} needs a `value`"
    if actual is MISSING:
        return f"path {path!r} is missing"
    return _compare(op, actual, entry.value)


Evaluator = Callable[[Any, object], str | None]
"""A condition kind's evaluator: ``(entry, state)`` to why the entry does not hold, or None when it holds."""

CONDITIONS: dict[str, Evaluator] = {"state": state_failure}
"""The evaluator of each ``"condition"`` kind; a condition kind without one keeps its skill blocking."""


def register_precondition(model: type[_Entry], evaluate: Evaluator | None = None) -> type[_Entry]:
    """Add a precondition kind in one place: its record class and, for a condition, its evaluator.

    The class (see ``shape.records._Entry``) brings its strict write input, its
    node properties and its lenient readings; from then on writes validate it,
    reads build it, and the gate and the pre-flight block apply it.

    Example:
        >>> from typing import Literal
        >>> class Weekday(_Entry):
        ...     kind: Literal["weekday"] = "weekday"
        ...     value: int
        >>> _ = register_precondition(Weekday, lambda e, state: None if state.get("day") == e.value else "other day")
        >>> condition_failure(Weekday(value=1), {"day": 2})
        'other day'
        >>> unregister_precondition("weekday")
    """
    if model.role == "condition" and evaluate is None:
        raise TypeError(f"{model.__name__} is a condition: register it with its evaluator")
    register_kind(model)
    kind = model.model_fields["kind"].default
    if evaluate is not None:
        CONDITIONS[kind] = evaluate
    return model


def unregister_precondition(kind: str) -> None:
    """Forget a kind added with :func:`register_precondition` (the built-in kinds stay)."""
    if kind in KINDS and kind != "state":
        CONDITIONS.pop(kind, None)
    unregister_kind(kind)


def condition_failure(entry: Any, state: object) -> str | None:
    """Why a condition entry does not hold in ``state`` (by its kind's evaluator), or None when it holds."""
    evaluate = CONDITIONS.get(entry.kind)
    if evaluate is None:
        return f"no evaluator for kind {entry.kind!r}"
    return evaluate(entry, state)


def predicate_failure(predicate: object, state: object) -> str | None:
    """Why ``predicate`` (a ``{"path", "op", "value"?}`` mapping) does not hold in ``state``, or None.

    Example:
        >>> predicate_failure({"path": "env", "op": "eq", "value": "prod"}, {"env": "dev"})
        "'dev' != 'prod'"
    """
    if not isinstance(predicate, Mapping):
        return f"predicate is not a mapping: {predicate!r}"
    entry = StatePrecondition.from_item({"state": predicate})
    return state_failure(entry, state) if isinstance(entry, StatePrecondition) else entry.blocking()


def evaluate_predicate(predicate: object, state: object) -> bool:
    """True iff the state predicate holds in ``state``; never raises.

    Example:
        >>> evaluate_predicate({"path": "plan", "op": "in", "value": ["pro", "team"]},
        ...                    {"PLAN": "pro"})
        True
        >>> evaluate_predicate({"path": "plan", "op": "in", "value": "professional"},
        ...                    {"plan": "pro"})
        False
    """
    try:
        return predicate_failure(predicate, state) is None
    except Exception:  # defensive: a predicate never breaks a turn
        return False


# --- the state filter ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DroppedSkill:
    """Why the state filter dropped a skill: the first predicate that failed.

    Attributes:
        given: the dropped skill object as given (None when a compiled rule decided: see ``skill``).
        label: its label, if any.
        skill_id: its id, if any.
        index: position of the failing predicate among the skill's predicates.
        predicate: the failing predicate as stored.
        reason: a short human-readable explanation.
        rule: the compiled rule that was dropped, when a ``RuleSet`` decided (excluded from equality).

    Example:
        >>> DroppedSkill(None, "Deploy", "sk-1", 0, {"path": "env", "op": "exists"},
        ...              "path 'env' is missing").label
        'Deploy'
    """

    given: object = field(compare=False, repr=False)
    label: str | None
    skill_id: str | None
    index: int
    predicate: object
    reason: str
    rule: object = field(default=None, compare=False, repr=False)

    @property
    def skill(self) -> object:
        """The dropped skill (a compiled rule's is rebuilt only when asked for)."""
        return self.given if self.rule is None else getattr(self.rule, "skill", None)

    def describe(self) -> str:
        """One line naming the skill and the failing predicate."""
        return (
            f"skill {_named(self.label, self.skill_id)} dropped: state predicate #{self.index} "
            f"{self.predicate!r} does not hold ({self.reason})"
        )


@dataclass(frozen=True, slots=True)
class StateFilterResult:
    """The outcome of the state filter: kept skills and dropped ones, in input order.

    Example:
        >>> partition_skills_by_state([], {}).kept
        ()
    """

    kept: tuple[Any, ...]
    dropped: tuple[DroppedSkill, ...]


def _first_failure(skill: object, state: object) -> DroppedSkill | None:
    conditions = [e for e in entries_of(skill) if type(e).role == "condition"]
    for index, entry in enumerate(conditions):
        if entry.blocking() is not None or entry.kind not in CONDITIONS:
            continue  # misconfigured: it never drops the skill, whose action it blocks instead
        try:
            reason = condition_failure(entry, state)
        except Exception as exc:  # defensive, keeps the filter total
            reason = f"evaluation failed ({type(exc).__name__})"
        if reason is not None:
            return DroppedSkill(skill, skill_label(skill), skill_id(skill), index, shown(entry), reason)
    return None


def partition_skills_by_state(skills: Iterable[Any] | None, state: object) -> StateFilterResult:
    """Split skills into those whose state predicates all hold and the rest. Logs nothing.

    A misconfigured predicate is skipped: it never drops its skill (the gate
    blocks the skill's action instead, until an operator fixes it).

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"precondition": [
        ...     {"state": {"path": "env", "op": "exists"}}]})
        >>> len(partition_skills_by_state([skill], {}).dropped)
        1
    """
    kept: list[Any] = []
    dropped: list[DroppedSkill] = []
    for skill in skills or ():
        failure = _first_failure(skill, state)
        if failure is None:
            kept.append(skill)
        else:
            dropped.append(failure)
    return StateFilterResult(tuple(kept), tuple(dropped))


def log_dropped(dropped: Iterable[DroppedSkill]) -> None:
    """Log one DEBUG line per dropped skill."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    for drop in dropped:
        log.debug("%s", drop.describe())


def filter_skills_by_state_predicates(skills: Iterable[Any] | None, state: object) -> list[Any]:
    """The skills whose state predicates all hold in ``state``, in input order.

    Skills without predicates always survive. Each dropped skill is logged once
    at DEBUG, naming the skill and the failing predicate.

    Example:
        >>> from types import SimpleNamespace
        >>> gold = SimpleNamespace(metadata={"precondition": [
        ...     {"state": {"path": "tier", "op": "eq", "value": "gold"}}]})
        >>> filter_skills_by_state_predicates([gold], {"tier": "gold"}) == [gold]
        True
        >>> filter_skills_by_state_predicates([gold], {"tier": "free"})
        []
    """
    result = partition_skills_by_state(skills, state)
    log_dropped(result.dropped)
    return list(result.kept)


# --- tool requirements ------------------------------------------------------


def json_key(value: object) -> str | None:
    """``value`` as canonical JSON, the way ``same_args`` compares arguments (``1.0`` equals ``1``,
    ``"1"`` does not); None when it is no JSON value (then it never equals anything).

    Example:
        >>> json_key({"b": 1.0, "a": [2]}), json_key(float("nan"))
        ('{"a": [2], "b": 1}', None)
    """
    def norm(v: object) -> object:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        return v

    try:
        return json.dumps(norm(value), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


_PLAIN: Final = frozenset({str, int, bool})  # two values of one of these types: equal as JSON iff equal


def same_arguments(names: Sequence[str], action: Mapping[str, Any] | None, earlier: Mapping[str, Any] | None) -> bool:
    """True iff the action call and the earlier call have equal JSON values for each of ``names``.

    An action call without one of them never matches (so it is blocked); arguments that cannot be read
    (None, or no mapping) are read as ``{}``, so they lack every name.

    Example:
        >>> same_arguments(["order_id"], {"order_id": "1003"}, {"order_id": "1003", "x": 1})
        True
        >>> same_arguments(["order_id"], {"order_id": "7777"}, {"order_id": "1003"})
        False
    """
    if not names:
        return True
    action, earlier = arguments(action), arguments(earlier)
    for name in names:
        if name not in action or name not in earlier:
            return False
        ours, theirs = action[name], earlier[name]
        if type(ours) is not type(theirs) or type(ours) not in _PLAIN:
            ours, theirs = json_key(ours), json_key(theirs)
            if ours is None:
                return False
        if ours != theirs:
            return False
    return True


def tool_requirement_met(
    entry: ToolPrecondition, args: Mapping[str, Any] | None, history: History, *, count_failed: bool = False,
    name: str | None = None,
) -> tuple[bool, bool]:
    """Whether an earlier call satisfies ``entry`` for an action called with ``args``.

    Returns ``(met, failed)``: ``failed`` is True when the only matching calls failed.
    ``name`` is ``entry.name`` when the caller already knows it (a compiled rule keeps it).

    Example:
        >>> from symfonic_graph.rules.events import CallResult
        >>> history = History((CallResult("verify", None, True, 0),), 0)
        >>> tool_requirement_met(ToolPrecondition(tool="verify"), {}, history)
        (False, True)
        >>> tool_requirement_met(ToolPrecondition(tool="verify"), {}, history, count_failed=True)
        (True, False)
    """
    failed, results, same = False, history.results, entry.same_args
    this_turn = entry.within == "user_turn"
    for position in history.positions(entry.name if name is None else name):
        result = results[position]
        if this_turn and result.user_turn < history.user_turn:
            continue
        if same and not same_arguments(same, args, result.args):
            continue
        if result.failed and not count_failed:
            failed = True
            continue
        return True, False
    return False, failed

