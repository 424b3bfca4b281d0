"""Pure precondition rules shared by the gate and the pre-flight block (SPEC §4).

Nothing here touches Neo4j or LangGraph. A *skill* is any object with a
``metadata`` mapping (duck typing); a plain mapping holding a ``"metadata"``
mapping is accepted too. ``metadata["precondition"]`` may be ``None``, a single
string (legacy), a single ``{"tool": ...}`` / ``{"state": ...}`` mapping, or a
list whose items are tool identifier strings, ``{"tool": "name"}`` (legacy),
``{"state": {"path": ..., "op": ..., "value": ...}}`` or free text.

Every rule fails closed: a malformed state predicate never holds, so the skill
that carries it is dropped by the state filter.

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

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "MISSING",
    "STATE_OPS",
    "DroppedSkill",
    "StateFilterResult",
    "action_tool_of",
    "bare_identifier",
    "evaluate_predicate",
    "filter_skills_by_state_predicates",
    "log_dropped",
    "partition_skills_by_state",
    "precondition_tools",
    "predicate_failure",
    "required_tools",
    "resolve_path",
    "skill_id",
    "skill_label",
    "state_predicates",
]

log = logging.getLogger(__name__)

STATE_OPS: Final = frozenset({"eq", "neq", "in", "exists"})
"""The state-predicate operators; any other ``op`` never holds."""

_BARE_IDENTIFIER: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\(.*\))?\s*$")
_CONTAINERS: Final = (list, tuple, set, frozenset)


class _Missing:
    """Sentinel type for a path that does not resolve."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()


# --- skills -------------------------------------------------------------------


def _metadata(skill: object) -> Mapping[str, Any]:
    meta = skill.get("metadata") if isinstance(skill, Mapping) else getattr(skill, "metadata", None)
    return meta if isinstance(meta, Mapping) else {}


def skill_label(skill: object) -> str | None:
    """The skill's ``metadata["label"]`` if it is a non-blank string, else None.

    Example:
        >>> from types import SimpleNamespace
        >>> skill_label(SimpleNamespace(metadata={"label": "Deploy"}))
        'Deploy'
    """
    label = _metadata(skill).get("label")
    return label if isinstance(label, str) and label.strip() else None


def skill_id(skill: object) -> str | None:
    """The skill's ``id`` attribute (or ``metadata["id"]``) when it is a string.

    Example:
        >>> from types import SimpleNamespace
        >>> skill_id(SimpleNamespace(id="sk-1", metadata={}))
        'sk-1'
    """
    value = skill.get("id") if isinstance(skill, Mapping) else getattr(skill, "id", None)
    if not isinstance(value, str):
        value = _metadata(skill).get("id")
    return value if isinstance(value, str) else None


def _describe(skill: object) -> str:
    label, ident = skill_label(skill), skill_id(skill)
    if label and ident:
        return f"{label!r} (id={ident})"
    if label:
        return repr(label)
    return f"id={ident}" if ident else "<unnamed skill>"


# --- identifiers and tools ----------------------------------------------------


def bare_identifier(value: object) -> str | None:
    """The identifier of a bare tool reference, or None for anything else.

    A bare reference is a name, optionally followed by an argument list.

    Example:
        >>> bare_identifier("  get_status(brand_id=<x>) ")
        'get_status'
        >>> bare_identifier("Check the status first.") is None
        True
    """
    if not isinstance(value, str):
        return None
    match = _BARE_IDENTIFIER.match(value.strip())
    return match.group(1) if match else None


def action_tool_of(skill: object) -> str | None:
    """The tool a skill guards: ``action_tool`` if bare, else ``steps[0]`` if bare.

    Example:
        >>> from types import SimpleNamespace
        >>> action_tool_of(SimpleNamespace(metadata={"steps": ["deploy(env=prod)"]}))
        'deploy'
    """
    meta = _metadata(skill)
    action = bare_identifier(meta.get("action_tool"))
    if action is not None:
        return action
    steps = meta.get("steps")
    if isinstance(steps, Sequence) and not isinstance(steps, str) and steps:
        return bare_identifier(steps[0])
    return None


def _precondition_items(skill: object) -> list[object]:
    raw = _metadata(skill).get("precondition")
    if isinstance(raw, (str, Mapping)):
        return [raw]
    if isinstance(raw, Sequence):
        return list(raw)
    return []


def precondition_tools(skill: object) -> list[str]:
    """The bare tool identifiers a skill requires, in entry order, without repeats.

    Example:
        >>> from types import SimpleNamespace
        >>> precondition_tools(SimpleNamespace(metadata={"precondition": [
        ...     "auth", {"tool": "get_status(id=1)"}, "Say hello first."]}))
        ['auth', 'get_status']
    """
    tools: list[str] = []
    for item in _precondition_items(skill):
        ref = item.get("tool") if isinstance(item, Mapping) else item
        ident = bare_identifier(ref)
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
    """The inner mappings of a skill's ``{"state": {...}}`` items, in entry order.

    A mapping with a bad path, op or value is kept so that it fails closed in
    :func:`evaluate_predicate`. An item ``{"state": X}`` whose ``X`` is not a
    mapping is not a predicate: it contributes nothing (SPEC §4).

    Example:
        >>> from types import SimpleNamespace
        >>> state_predicates(SimpleNamespace(metadata={"precondition": [
        ...     "auth", {"state": {"path": "env", "op": "exists"}}, {"state": "env"}]}))
        [{'path': 'env', 'op': 'exists'}]
    """
    return [
        item["state"]
        for item in _precondition_items(skill)
        if isinstance(item, Mapping) and isinstance(item.get("state"), Mapping)
    ]


# --- predicates ---------------------------------------------------------------


def _step(current: object, segment: str) -> object:
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


def predicate_failure(predicate: object, state: object) -> str | None:
    """Why ``predicate`` does not hold in ``state``, or None when it holds.

    Example:
        >>> predicate_failure({"path": "env", "op": "eq", "value": "prod"}, {"env": "dev"})
        "'dev' != 'prod'"
    """
    if not isinstance(predicate, Mapping):
        return f"predicate is not a mapping: {predicate!r}"
    op, path = predicate.get("op"), predicate.get("path")
    if not isinstance(op, str) or op not in STATE_OPS:
        return f"unknown op {op!r}"
    if not isinstance(path, str) or not path:
        return f"path {path!r} is not a non-empty string"
    actual = resolve_path(state, path)
    if op == "exists":
        return None if actual is not MISSING else f"path {path!r} is missing"
    if "value" not in predicate:
        return f"op {op!r} needs a `value`"
    if actual is MISSING:
        return f"path {path!r} is missing"
    return _compare(op, actual, predicate["value"])


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
        skill: the dropped skill object (excluded from equality).
        label: its label, if any.
        skill_id: its id, if any.
        index: position of the failing predicate among the skill's predicates.
        predicate: the failing predicate as stored.
        reason: a short human-readable explanation.

    Example:
        >>> DroppedSkill(None, "Deploy", "sk-1", 0, {"path": "env", "op": "exists"},
        ...              "path 'env' is missing").label
        'Deploy'
    """

    skill: object = field(compare=False, repr=False)
    label: str | None
    skill_id: str | None
    index: int
    predicate: object
    reason: str

    def describe(self) -> str:
        """One line naming the skill and the failing predicate."""
        return (
            f"skill {_describe(self.skill)} dropped: state predicate #{self.index} "
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
    for index, predicate in enumerate(state_predicates(skill)):
        try:
            reason = predicate_failure(predicate, state)
        except Exception as exc:  # defensive, keeps the filter total
            reason = f"evaluation failed ({type(exc).__name__})"
        if reason is not None:
            return DroppedSkill(skill, skill_label(skill), skill_id(skill), index, predicate, reason)
    return None


def partition_skills_by_state(skills: Iterable[Any] | None, state: object) -> StateFilterResult:
    """Split skills into those whose state predicates all hold and the rest. Logs nothing.

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
