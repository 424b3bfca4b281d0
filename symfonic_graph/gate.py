"""The precondition gate (SPEC §5): block tool calls whose preconditions were not called.

The gate looks at the terminal AI message of ``state["messages"]``. For each of
its tool calls, in order, it takes the active skills (after the state filter)
whose action tool is the call's name and, for the first one with precondition
tools not called earlier in the conversation, answers the call with an error
``ToolMessage`` the model can recover from. One error per call, at most.

Decisions:
    * *Called tools* are the names of earlier tool-result messages (by ``name``,
      else by resolving ``tool_call_id`` against earlier AI tool calls). Calls in
      the terminal AI message itself never count, so a precondition requested in
      the same parallel batch as its action does not satisfy it.
    * Results the gate injected never count. They are marked with
      ``response_metadata={GATE_MARKER_KEY: GATE_MARKER_VALUE}`` (never sent to a
      provider). For messages that lost their metadata on a round trip, a
      ``status="error"`` result whose content starts with one of the gate's
      prefixes is treated as injected too.
    * A store outage (``StoreUnavailableError`` from the skill lookup): pass
      through (``{}``) with a WARNING by default; ``strict=True`` blocks every
      call with a "store unavailable" error. Any other failure of the lookup is
      a programming error and raises (``ScopeError``, ``ConfigurationError``).

The node alone answers only the calls it blocks; use
:func:`symfonic_graph.langgraph.create_guarded_tool_node` so that every call id
is answered before the model runs again.

Example:
    >>> from types import SimpleNamespace
    >>> skill = SimpleNamespace(metadata={"label": "Deploy", "action_tool": "deploy",
    ...                                   "precondition": ["run_tests"]})
    >>> explain_tool_call([skill], "deploy").content()[:54]
    'Missing precondition: call run_tests before deploy (sk'
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from langchain_core.messages import ToolMessage

from symfonic_graph import telemetry
from symfonic_graph._messages import (
    GATE_MARKER_KEY,
    GATE_MARKER_VALUE,
    MISSING_PREFIX,
    UNAVAILABLE_PREFIX,
    ToolCallRef,
    called_tools,
    messages_of,
    terminal_tool_calls,
)
from symfonic_graph.errors import ConfigurationError, ScopeError, StoreUnavailableError
from symfonic_graph.preconditions import DroppedSkill, log_dropped
from symfonic_graph.ruleset import RuleSet, rules_of

__all__ = [
    "ENFORCE_FLAG",
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "GateDecision",
    "SkillCheck",
    "SkillLookup",
    "ToolCallRef",
    "called_tools",
    "create_precondition_gate_node",
    "explain_tool_call",
    "gate_decisions",
    "gate_errors",
    "precondition_condition",
    "run_gate",
    "terminal_tool_calls",
]

log = logging.getLogger(__name__)

ENFORCE_FLAG: Final = "_procedural_enforce_preconditions"
"""State key that turns enforcement on for :func:`precondition_condition`."""

_ABSENT: Final = object()
Verdict = Literal["allowed", "blocked", "store_unavailable"]
SkillLookup = Callable[[Any], Awaitable[Iterable[Any] | None]]
"""``async (state) -> skills``: the active skills for this turn."""


# --- decisions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillCheck:
    """One skill whose action tool matched a call, and what it still needs.

    Example:
        >>> SkillCheck("Deploy", "sk-1", ("run_tests",), ("run_tests",)).satisfied
        False
    """

    label: str | None
    skill_id: str | None
    required: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def satisfied(self) -> bool:
        """True iff every required tool was called."""
        return not self.missing


def missing_precondition_content(action_tool: str, missing: Sequence[str], label: str | None) -> str:
    """The recovery text of a blocked call; its first sentence is fixed by the spec.

    Example:
        >>> missing_precondition_content("x", ["a", "b"], "L").split(" `")[0]
        'Missing precondition: call a, b before x (skill: L).'
    """
    tools = ", ".join(missing)
    skill = f" (skill: {label})" if label else ""
    return (
        f"{MISSING_PREFIX}call {tools} before {action_tool}{skill}. "
        f"`{action_tool}` was not executed. Call {tools} first and wait for the "
        f"result (calls made in the same batch as `{action_tool}` do not count), "
        f"then retry `{action_tool}`."
    )


def unavailable_content(action_tool: str) -> str:
    """The text of a call blocked in strict mode because the skill lookup failed.

    Example:
        >>> unavailable_content("deploy").startswith("Precondition check unavailable")
        True
    """
    return (
        f"{UNAVAILABLE_PREFIX}the precondition store could not be read, so "
        f"`{action_tool}` was not executed. Retry `{action_tool}` later."
    )


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's verdict on one tool call, with the trace that led to it.

    Attributes:
        tool_name: the called tool.
        call_id: the tool call id, if the call had one.
        verdict: ``"allowed"``, ``"blocked"`` or ``"store_unavailable"`` (strict mode).
        matched: skills (after the state filter) whose action tool is ``tool_name``.
        dropped: skills with that action tool dropped by a state predicate.
        blocking: the first matched skill with missing preconditions, if any.
        called: the tools counted as called before this call.

    Example:
        >>> decision = explain_tool_call([], "deploy")
        >>> decision.verdict, decision.to_tool_message()
        ('allowed', None)
    """

    tool_name: str
    call_id: str | None
    verdict: Verdict
    matched: tuple[SkillCheck, ...] = ()
    dropped: tuple[DroppedSkill, ...] = ()
    blocking: SkillCheck | None = None
    called: frozenset[str] = frozenset()

    @property
    def allowed(self) -> bool:
        """True iff the call may run."""
        return self.verdict == "allowed"

    @property
    def missing(self) -> tuple[str, ...]:
        """The precondition tools the blocking skill still needs."""
        return self.blocking.missing if self.blocking else ()

    def content(self) -> str | None:
        """The error text for a blocked call, None when allowed."""
        if self.verdict == "store_unavailable":
            return unavailable_content(self.tool_name)
        if self.blocking is not None:
            return missing_precondition_content(self.tool_name, self.missing, self.blocking.label)
        return None

    def to_tool_message(self) -> ToolMessage | None:
        """The error ``ToolMessage`` answering a blocked call, None when allowed."""
        content = self.content()
        if content is None:
            return None
        return ToolMessage(
            content=content,
            tool_call_id=self.call_id or "",
            name=self.tool_name,
            status="error",
            response_metadata={GATE_MARKER_KEY: GATE_MARKER_VALUE},
        )


def _decide(
    rules: RuleSet, tool_name: str, called: frozenset[str], call_id: str | None, state: object, *, filtered: bool
) -> GateDecision:
    matched: list[SkillCheck] = []
    dropped: list[DroppedSkill] = []
    for rule in rules.for_tool(tool_name):
        failure = rule.failure(state) if filtered else None
        if failure is not None:
            dropped.append(failure)
            continue
        missing = tuple(tool for tool in rule.required if tool not in called)
        matched.append(SkillCheck(rule.label, rule.skill_id, rule.required, missing))
    blocking = next((check for check in matched if not check.satisfied), None)
    verdict: Verdict = "allowed" if blocking is None else "blocked"
    return GateDecision(tool_name, call_id, verdict, tuple(matched), tuple(dropped), blocking, called)


def explain_tool_call(
    skills: Iterable[Any] | None,
    tool_name: str,
    *,
    state: object = None,
    called: Iterable[str] = (),
    call_id: str | None = None,
) -> GateDecision:
    """Explain what the gate decides for one call of ``tool_name``.

    Args:
        skills: the active skills.
        tool_name: the tool the model wants to call.
        state: the graph state; when given, skills are state-filtered first.
        called: tools already called earlier in the conversation.
        call_id: the tool call id, used by :meth:`GateDecision.to_tool_message`.

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"action_tool": "deploy", "precondition": "auth"})
        >>> explain_tool_call([skill], "deploy", called=["auth"]).verdict
        'allowed'
    """
    return _decide(rules_of(skills), tool_name, frozenset(called), call_id, state, filtered=state is not None)


def gate_decisions(messages: Sequence[Any], skills: Iterable[Any] | None, state: object) -> tuple[GateDecision, ...]:
    """The gate's decision for each call of the terminal AI message, in call order.

    Only the skills guarding a called tool are state-filtered (each dropped one
    is logged once at DEBUG). Skills given as a ``RuleSet`` (as ``TurnMemory``
    hands them) are not compiled again.

    Example:
        >>> gate_decisions([], [], {})
        ()
    """
    calls = terminal_tool_calls(messages)
    if not calls:
        return ()
    rules = rules_of(skills)
    called = called_tools(messages[:-1])
    decisions = tuple(_decide(rules, call.name, called, call.id, state, filtered=True) for call in calls)
    log_dropped({id(d.skill): d for decision in decisions for d in decision.dropped}.values())
    return decisions


def gate_errors(messages: Sequence[Any], skills: Iterable[Any] | None, state: object) -> list[ToolMessage]:
    """The error ``ToolMessage`` for each blocked call of the terminal AI message.

    Example:
        >>> gate_errors([{"role": "user", "content": "hi"}], [], {})
        []
    """
    return [m for d in gate_decisions(messages, skills, state) if (m := d.to_tool_message()) is not None]


# --- the node ---------------------------------------------------------------------


_NOT_SKILLS: Final = (str, bytes, bytearray, int, float, bool)  # never a skill, nor skills


async def _lookup(get_active_skills: SkillLookup, state: object) -> Iterable[Any]:
    """The lookup's skills; only ``StoreUnavailableError`` (an outage) gets out untouched.

    Raises:
        ScopeError: the turn has no usable scope.
        StoreUnavailableError: the store did not answer.
        ConfigurationError: the lookup raised anything else, or returned no iterable of skills.
    """
    try:
        result: Any = get_active_skills(state)
        if inspect.isawaitable(result):
            result = await result
    except (StoreUnavailableError, ScopeError):
        raise
    except Exception as exc:
        log.error("the skill lookup %r raised %s; this is a bug in the wiring, not a store outage",
                  get_active_skills, type(exc).__name__, exc_info=True)
        raise ConfigurationError(
            f"the skill lookup raised {type(exc).__name__}: {exc}. Only StoreUnavailableError is "
            "treated as a store outage; fix the lookup (it must return the active skills)"
        ) from exc
    if result is None or isinstance(result, RuleSet):
        return result or ()
    problem = None
    if isinstance(result, (*_NOT_SKILLS, Mapping)) or not isinstance(result, Iterable):
        problem = f"returned {type(result).__name__} {result!r:.80}"
    else:
        skills = list(result)
        bad = next((s for s in skills if s is None or isinstance(s, _NOT_SKILLS)), _ABSENT)
        if bad is _ABSENT:
            return skills
        problem = f"returned an item that is no skill: {type(bad).__name__} {bad!r:.80}"
    log.error("the skill lookup %r %s; this is a bug in the wiring, not a store outage",
              get_active_skills, problem, stack_info=True)
    raise ConfigurationError(
        f"the skill lookup {problem}; it must return an iterable of skills (or None for no skills)"
    )


def _unavailable(calls: Iterable[ToolCallRef]) -> tuple[GateDecision, ...]:
    return tuple(GateDecision(c.name, c.id, "store_unavailable") for c in calls)


@telemetry.traced_gate
async def run_gate(
    state: Any, get_active_skills: SkillLookup, *, strict: bool = False, count_failed_calls: bool = False
) -> tuple[GateDecision, ...]:
    """Look up the active skills and decide every call of the terminal AI message.

    A store outage (``StoreUnavailableError`` from the lookup) logs a WARNING
    and returns ``()`` (pass through), or, with ``strict=True``, a
    ``"store_unavailable"`` decision for every call. A ``TurnMemory`` lookup
    raises it only when it holds no recent catalog for the scope (see its
    ``outage_grace``). Every other failure is a programming error and loud:
    a missing or malformed scope raises ``ScopeError``; any other exception
    of the lookup, or a result that is no iterable of skills, raises
    ``ConfigurationError`` (logged at ERROR with the traceback).

    Raises:
        ScopeError: the lookup found no usable scope for the turn.
        ConfigurationError: the lookup raised, or returned no iterable of skills.

    ``count_failed_calls=True`` lets a failed tool result (``status="error"``)
    satisfy a precondition, as in the seeds (SPEC §13); default False.

    Example:
        >>> import asyncio
        >>> async def no_skills(state): return []
        >>> asyncio.run(run_gate({"messages": []}, no_skills))
        ()
    """
    try:
        messages = messages_of(state)
        calls = terminal_tool_calls(messages)
    except Exception:
        log.warning("precondition gate could not read the messages; passing through", exc_info=True)
        return ()
    if not calls:
        return ()
    try:
        skills = await _lookup(get_active_skills, state)
    except StoreUnavailableError as exc:  # an outage; ScopeError and ConfigurationError are loud
        if strict:
            log.warning("precondition lookup failed (%s); strict mode blocks %d call(s)", exc, len(calls))
            return _unavailable(calls)
        log.warning("precondition lookup failed (%s); passing through without enforcement", exc)
        return ()
    # TODO(lead): pass count_failed_calls=count_failed_calls to gate_decisions once it takes the keyword.
    return gate_decisions(messages, skills, state)


def create_precondition_gate_node(
    get_active_skills: SkillLookup, *, strict: bool = False
) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """Build the async LangGraph gate node ``(state) -> dict``.

    Args:
        get_active_skills: ``async (state) -> skills`` for this turn.
        strict: block every call when the lookup fails, instead of passing through.

    Returns:
        A node returning ``{"messages": [error ToolMessage, ...]}`` when a call is
        blocked, ``{}`` otherwise. It answers only the blocked calls.

    Example:
        >>> async def skills(state): return []
        >>> gate = create_precondition_gate_node(skills)
        >>> builder.add_node("gate", gate)  # doctest: +SKIP
    """

    async def precondition_gate(state: Any) -> dict[str, Any]:
        decisions = await run_gate(state, get_active_skills, strict=strict)
        errors = [m for d in decisions if (m := d.to_tool_message()) is not None]
        return {"messages": errors} if errors else {}

    return precondition_gate


def precondition_condition(state: Any) -> bool:
    """True iff enforcement is on in ``state`` and the terminal message has tool calls.

    Enforcement is on when ``state["_procedural_enforce_preconditions"]`` is truthy.

    Example:
        >>> precondition_condition({"_procedural_enforce_preconditions": True, "messages": []})
        False
    """
    try:
        flag = state.get(ENFORCE_FLAG) if isinstance(state, Mapping) else getattr(state, ENFORCE_FLAG, None)
        return bool(flag) and bool(terminal_tool_calls(messages_of(state)))
    except Exception:
        return False
