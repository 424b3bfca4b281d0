"""The precondition gate: block tool calls whose preconditions were not called.

The gate looks at the terminal AI message of ``state["messages"]``. For each of
its tool calls, in order, it takes the active skills (after the state filter)
whose action tool is the call's name and, for the first one with precondition
tools not called earlier in the conversation, answers the call with an error
``ToolMessage`` the model can recover from. One error per call, at most.

Decisions:
    * *Called tools* are the earlier calls whose result answers them: a result
      counts only when its ``tool_call_id`` answers exactly one earlier call not
      answered yet, under that call's name (or none); it counts with that call's
      name and arguments, in the user turn the call was requested in. Calls in
      the terminal AI message itself never count, so a precondition requested in
      the same parallel batch as its action does not satisfy it.
    * Results the gate injected never count. They are marked with
      ``response_metadata={GATE_MARKER_KEY: GATE_MARKER_VALUE}`` (never sent to a
      provider). For messages that lost their metadata on a round trip, a
      result with a text (string content or any content block) starting with one
      of the gate's prefixes, or cut short inside one, is treated as injected too.
    * The conversation is read by ``_messages.parse_turn``, which never raises:
      what it cannot read meets no precondition (strict or not).
    * A store outage (``StoreUnavailableError`` from the skill lookup): pass
      through (``{}``) with a WARNING by default; ``strict=True`` blocks every
      call with a "store unavailable" error; ``strict="guarded"`` blocks only
      the calls of guarded tools (those the scope's rules guarded when last
      seen, as the error's ``guarded`` names them, and ``guarded_tools``) and
      lets every other call run. Any other failure of the lookup is a
      programming error and raises (``ScopeError``, ``ConfigurationError``).

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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:  # the core imports no framework; LangChain is loaded only to build a ToolMessage
    from langchain_core.messages import ToolMessage

from symfonic_graph import telemetry
from symfonic_graph.errors import ConfigurationError, ScopeError, StoreUnavailableError, ValidationError
from symfonic_graph.rules._messages import (
    GATE_MARKER_KEY,
    GATE_MARKER_VALUE,
    called_tools,
    messages_of,
    parse_turn,
    read_history,
    terminal_tool_calls,
)
from symfonic_graph.rules.events import History, ToolCallRef
from symfonic_graph.rules.gate_text import missing_precondition_content, not_allowed_content, unavailable_content
from symfonic_graph.rules.policy import Bindings, utc_now
from symfonic_graph.rules.preconditions import DroppedSkill, log_dropped
from symfonic_graph.rules.ruleset import RuleSet, SkillCheck, rules_of
from symfonic_graph.shape.names import TOOL_NAME_RULE, bare_identifier, is_tool_name

__all__ = [
    "ENFORCE_FLAG",
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "GateDecision",
    "SkillCheck",
    "SkillLookup",
    "Strict",
    "ToolCallRef",
    "called_tools",
    "create_precondition_gate_node",
    "decide_call",
    "explain_tool_call",
    "gate_decisions",
    "gate_errors",
    "precondition_condition",
    "run_gate",
    "strict_policy",
    "terminal_tool_calls",
]

log = logging.getLogger("symfonic_graph.gate")  # the logger's name is a contract (docs/observability.md)

ENFORCE_FLAG: Final = "_procedural_enforce_preconditions"
"""State key that turns enforcement on for :func:`precondition_condition`."""

_ABSENT: Final = object()
Verdict = Literal["allowed", "blocked", "store_unavailable"]
SkillLookup = Callable[[Any], Awaitable[Iterable[Any] | None]]
"""``async (state) -> skills``: the active skills for this turn."""
Strict = bool | Literal["guarded"]
"""The outage policy: ``False`` pass through, ``True`` refuse every call, ``"guarded"`` refuse guarded tools only."""


def strict_policy(strict: object, guarded_tools: Iterable[str] = ()) -> tuple[Strict, frozenset[str]]:
    """``strict`` and ``guarded_tools`` checked: the outage policy every gate path takes.

    Raises:
        ValidationError: ``strict`` is not True, False or ``"guarded"``; ``guarded_tools``
            is no iterable of tool names, or is given without ``strict="guarded"``.

    Example:
        >>> strict_policy("guarded", ["cancel_reservation"])
        ('guarded', frozenset({'cancel_reservation'}))
        >>> strict_policy("yes")
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ValidationError: strict: must be True, False or "guarded", got 'yes'
    """
    if strict is not True and strict is not False and not (isinstance(strict, str) and strict == "guarded"):
        raise ValidationError("strict", f'must be True, False or "guarded", got {strict!r}')
    if isinstance(guarded_tools, (str, bytes, Mapping)) or not isinstance(guarded_tools, Iterable):
        raise ValidationError("guarded_tools", f"must be an iterable of tool names, got {guarded_tools!r:.80}")
    tools = tuple(guarded_tools)
    for index, tool in enumerate(tools):
        if not is_tool_name(tool):
            raise ValidationError(f"guarded_tools[{index}]", f"{tool!r:.80} is not a tool name ({TOOL_NAME_RULE})")
    if tools and strict != "guarded":
        raise ValidationError("guarded_tools", f'applies only with strict="guarded" (strict is {strict!r})')
    return strict, frozenset(tools)  # type: ignore[return-value]  # narrowed by the check above


# --- decisions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's verdict on one tool call, with the trace that led to it.

    Attributes:
        tool_name: the called tool.
        call_id: the tool call id, if the call had one.
        verdict: ``"allowed"``, ``"blocked"`` or ``"store_unavailable"`` (strict mode).
        matched: skills (after the state filter) whose action tool is ``tool_name``.
        dropped: skills with that action tool dropped by a state predicate.
        blocking: the first matched enforced skill with missing preconditions, if any.
        called: the tools counted as called before this call.
        shadowed: shadow skills that would have blocked this call (reported, never enforced).

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
    shadowed: tuple[SkillCheck, ...] = ()

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
            b = self.blocking
            if b.refused or b.errors:
                return not_allowed_content(self.tool_name, b.refused, b.errors, b.label)
            return missing_precondition_content(self.tool_name, b.missing, b.label, failed=b.failed,
                                                unreadable=b.unreadable)
        return None

    def error_result(self) -> dict[str, Any] | None:
        """The fields of the error result answering a blocked call (any framework's tool message), None when allowed.

        Example:
            >>> sorted(GateDecision("deploy", "c1", "store_unavailable").error_result())
            ['content', 'name', 'response_metadata', 'status', 'tool_call_id']
        """
        content = self.content()
        if content is None:
            return None
        return {"content": content, "tool_call_id": self.call_id or "", "name": self.tool_name,
                "status": "error", "response_metadata": {GATE_MARKER_KEY: GATE_MARKER_VALUE}}

    def to_tool_message(self) -> ToolMessage | None:
        """The error ``ToolMessage`` answering a blocked call, None when allowed (needs ``langchain_core``)."""
        fields = self.error_result()
        if fields is None:
            return None
        from langchain_core.messages import ToolMessage  # only here: the core imports without LangChain

        return ToolMessage(**fields)


def decide_call(
    rules: RuleSet,
    call: ToolCallRef,
    history: History,
    state: object,
    *,
    filtered: bool,
    count_failed: bool,
    enforce_shadow: bool = False,
    now: datetime | None = None,
    bindings: Bindings | None = None,
    in_flight: Sequence[Any] = (),
) -> GateDecision:
    """The gate's decision on one call, given the calls made before it: the one decision the gate and replay share.

    ``filtered`` applies the skills' state predicates; ``enforce_shadow`` lets
    shadow rules block (replay counts what they would block). ``now`` is the
    clock the rules' expressions read (default: the current UTC time);
    ``in_flight`` the arguments of calls of this tool already allowed in the
    same batch (limits count them).
    """
    matched: list[SkillCheck] = []
    dropped: list[DroppedSkill] = []
    for rule in rules.for_tool(call.name):
        failure = rule.failure(state) if filtered else None
        if failure is not None:
            dropped.append(failure)
            continue
        if bindings is None:
            bindings = Bindings(state, _clock(now))
        matched.append(rule.check(call.args, history, count_failed=count_failed, bindings=bindings,
                                  in_flight=in_flight))
    blocking: SkillCheck | None = None
    shadow = False  # a matched shadow rule: only then can one be reported
    for check in matched:
        shadow = shadow or check.shadow
        if blocking is None and not check.satisfied and (enforce_shadow or not check.shadow):
            blocking = check
    shadowed = tuple(c for c in matched if c.shadow and not c.satisfied and c is not blocking) if shadow else ()
    verdict: Verdict = "allowed" if blocking is None else "blocked"
    return GateDecision(call.name, call.id, verdict, tuple(matched), tuple(dropped), blocking,
                        history.called(count_failed=count_failed), shadowed)


def explain_tool_call(
    skills: Iterable[Any] | None,
    tool_name: str,
    *,
    state: object = None,
    called: Iterable[str] = (),
    call_id: str | None = None,
    args: Mapping[str, Any] | None = None,
    messages: Sequence[Any] | None = None,
    count_failed_calls: bool = False,
    now: datetime | None = None,
) -> GateDecision:
    """Explain what the gate decides for one call of ``tool_name``.

    Args:
        skills: the active skills.
        tool_name: the tool the model wants to call.
        state: the graph state; when given, skills are state-filtered first.
        called: tools already called (successfully, in this user turn) earlier in the conversation.
        call_id: the tool call id, used by :meth:`GateDecision.to_tool_message`.
        args: the call's arguments (for ``same_args`` preconditions).
        messages: the conversation so far (instead of ``called``), read as the gate reads it.
        count_failed_calls: count failed results as calls (the seeds' behaviour).
        now: the time the rules' expressions read (default: the current UTC time).

    Example:
        >>> from types import SimpleNamespace
        >>> skill = SimpleNamespace(metadata={"action_tool": "deploy", "precondition": "auth"})
        >>> explain_tool_call([skill], "deploy", called=["auth"]).verdict
        'allowed'
    """
    history = read_history(messages) if messages is not None else History.of_names(called)
    call = ToolCallRef(call_id, tool_name, args)
    return decide_call(rules_of(skills), call, history, state, filtered=state is not None,
                       count_failed=count_failed_calls, now=now)


def gate_decisions(
    messages: Sequence[Any],
    skills: Iterable[Any] | None,
    state: object,
    *,
    count_failed_calls: bool = False,
    enforce_shadow: bool = False,
    now: datetime | None = None,
) -> tuple[GateDecision, ...]:
    """The gate's decision for each call of the terminal AI message, in call order.

    Only the skills guarding a called tool are state-filtered (each dropped one
    is logged once at DEBUG). Skills given as a ``RuleSet`` (as ``TurnMemory``
    hands them) are not compiled again. ``enforce_shadow`` lets shadow rules
    block (replay uses it to count what they would have blocked).

    Example:
        >>> gate_decisions([], [], {})
        ()
    """
    history, calls = parse_turn(messages)
    return _decide_turn(history, calls, skills, state, count_failed_calls=count_failed_calls,
                        enforce_shadow=enforce_shadow, now=now)


def _decide_turn(
    history: History,
    calls: Sequence[ToolCallRef],
    skills: Iterable[Any] | None,
    state: object,
    *,
    count_failed_calls: bool,
    enforce_shadow: bool = False,
    now: datetime | None = None,
    in_flight: Sequence[ToolCallRef] = (),
) -> tuple[GateDecision, ...]:
    if not calls:
        return ()
    rules = rules_of(skills)
    bindings = Bindings(state, _clock(now))
    allowed: dict[str, list[Any]] = {}  # the calls of each tool allowed earlier in this batch: limits count them
    for ref in in_flight:
        allowed.setdefault(ref.name, []).append(ref.args)
    out: list[GateDecision] = []
    for call in calls:
        earlier = allowed.setdefault(call.name, [])
        decision = decide_call(rules, call, history, state, filtered=True, count_failed=count_failed_calls,
                               enforce_shadow=enforce_shadow, bindings=bindings, in_flight=tuple(earlier))
        if decision.allowed:
            earlier.append(call.args)
        out.append(decision)
    decisions = tuple(out)
    log_dropped({id(d.rule): d for decision in decisions for d in decision.dropped}.values())
    for decision in decisions:
        for check in decision.shadowed:
            log.info("shadow rule %r (id=%s) would have blocked %s: missing %s",
                     check.label, check.skill_id, decision.tool_name, ", ".join(check.missing))
    return decisions


def gate_errors(
    messages: Sequence[Any], skills: Iterable[Any] | None, state: object, *, count_failed_calls: bool = False
) -> list[ToolMessage]:
    """The error ``ToolMessage`` for each blocked call of the terminal AI message.

    Example:
        >>> gate_errors([{"role": "user", "content": "hi"}], [], {})
        []
    """
    decisions = gate_decisions(messages, skills, state, count_failed_calls=count_failed_calls)
    return [m for d in decisions if (m := d.to_tool_message()) is not None]


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


def _unavailable(calls: Iterable[ToolCallRef], refused: frozenset[str] | None = None) -> tuple[GateDecision, ...]:
    """Refuse every call (``refused`` None), or only those of the ``refused`` tools; allow the others."""
    return tuple(
        GateDecision(c.name, c.id, "store_unavailable" if refused is None or _named(c.name, refused) else "allowed")
        for c in calls
    )


def _named(call_name: str, tools: frozenset[str]) -> bool:
    """Whether a call names one of ``tools``, matched as the rules match a call (a tool reference)."""
    return call_name in tools or bare_identifier(call_name) in tools


def _outage(
    exc: StoreUnavailableError, calls: Sequence[ToolCallRef], strict: Strict, guarded_tools: Iterable[str]
) -> tuple[GateDecision, ...]:
    """The decisions of an outage: pass through, refuse all (``True``), or refuse the guarded tools."""
    if strict is True:
        log.warning("precondition lookup failed (%s); strict mode blocks %d call(s)", exc, len(calls))
        return _unavailable(calls)
    if strict != "guarded":
        log.warning("precondition lookup failed (%s); passing through without enforcement", exc)
        return ()
    last = getattr(exc, "guarded", None)  # TurnMemory's: the tools the scope's rules guarded when last seen
    known = last if isinstance(last, frozenset) else frozenset()
    refused = known | frozenset(guarded_tools)
    decisions = _unavailable(calls, refused)
    blocked = sum(d.verdict != "allowed" for d in decisions)
    seen = "the scope's rules were never seen, so only guarded_tools are refused" if last is None else (
        f"the scope's rules guarded {sorted(known)} when last seen")
    log.warning("precondition lookup failed (%s); strict=\"guarded\" blocks %d of %d call(s) (%s)",
                exc, blocked, len(calls), seen)
    return decisions


@telemetry.traced_gate
async def run_gate(
    state: Any, get_active_skills: SkillLookup, *, strict: Strict = False, count_failed_calls: bool = False,
    turn: tuple[History, Sequence[ToolCallRef]] | None = None, guarded_tools: Iterable[str] = (),
    now: datetime | None = None, in_flight: Sequence[ToolCallRef] = (),
) -> tuple[GateDecision, ...]:
    """Look up the active skills and decide every call of the terminal AI message.

    A store outage (``StoreUnavailableError`` from the lookup) logs a WARNING
    and returns ``()`` (pass through), or, with ``strict=True``, a
    ``"store_unavailable"`` decision for every call. With ``strict="guarded"``
    only the calls of guarded tools get that decision, every other call is
    allowed: a tool is guarded when the outage error's ``guarded`` names it
    (a ``TurnMemory``'s: the tools the scope's rules guarded when last seen, in
    memory or in its ``snapshot_dir``) or ``guarded_tools`` does. A scope
    never seen, with no ``guarded_tools``, lets every call run (with the
    WARNING saying so). A ``TurnMemory`` lookup raises the outage only when
    it holds no recent catalog for the scope (see its ``outage_grace``).
    Every other failure is a programming error and loud:
    a missing or malformed scope raises ``ScopeError``; any other exception
    of the lookup, or a result that is no iterable of skills, raises
    ``ConfigurationError`` (logged at ERROR with the traceback).

    Raises:
        ScopeError: the lookup found no usable scope for the turn.
        ConfigurationError: the lookup raised, or returned no iterable of skills.
        ValidationError: ``strict`` or ``guarded_tools`` is malformed (see :func:`strict_policy`).

    ``count_failed_calls=True`` lets a failed tool result (``status="error"``)
    satisfy a precondition, as in the seeds; default False.

    ``turn``, the history and the calls to decide, already read from the
    conversation's events (an integration that read the conversation once for
    several calls passes it), spares reading ``state["messages"]`` again.
    ``now`` is the clock the rules' expressions read (default: the current UTC
    time); ``in_flight``, calls of the same batch decided elsewhere that limit
    rules count as running (the middleware passes a call's earlier siblings).

    Example:
        >>> import asyncio
        >>> async def no_skills(state): return []
        >>> asyncio.run(run_gate({"messages": []}, no_skills))
        ()
    """
    if (strict is not True and strict is not False) or guarded_tools:
        strict, guarded_tools = strict_policy(strict, guarded_tools)
    # Read once per gate run. The reader never raises: a message it cannot read meets nothing, so a
    # hostile history can only block calls, never let one through.
    history, calls = turn if turn is not None else parse_turn(messages_of(state))
    if not calls:
        return ()
    try:
        skills = await _lookup(get_active_skills, state)
    except StoreUnavailableError as exc:  # an outage; ScopeError and ConfigurationError are loud
        return _outage(exc, calls, strict, guarded_tools)
    return _decide_turn(history, calls, skills, state, count_failed_calls=count_failed_calls, now=now,
                        in_flight=in_flight)


def _clock(now: datetime | None) -> datetime:
    """``now`` (zone-less read as UTC), or the current UTC time."""
    if now is None:
        return utc_now()
    if not isinstance(now, datetime):
        raise ValidationError("now", f"must be a datetime, got {type(now).__name__}")
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def create_precondition_gate_node(
    get_active_skills: SkillLookup, *, strict: Strict = False, count_failed_calls: bool = False,
    guarded_tools: Iterable[str] = (),
) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """Build the async LangGraph gate node ``(state) -> dict``.

    Args:
        get_active_skills: ``async (state) -> skills`` for this turn.
        strict: on a store outage, ``True`` blocks every call, ``"guarded"`` only
            the calls of guarded tools (see :func:`run_gate`), ``False`` passes through.
        guarded_tools: tools ``strict="guarded"`` blocks during an outage even
            when the scope's rules were never seen.
        count_failed_calls: count a failed earlier result as a call (the seeds' behaviour);
            by default a failed call meets no precondition.

    Returns:
        A node returning ``{"messages": [error ToolMessage, ...]}`` when a call is
        blocked, ``{}`` otherwise. It answers only the blocked calls.

    Example:
        >>> async def skills(state): return []
        >>> gate = create_precondition_gate_node(skills)
        >>> builder.add_node("gate", gate)  # doctest: +SKIP
    """

    strict, tools = strict_policy(strict, guarded_tools)

    async def precondition_gate(state: Any) -> dict[str, Any]:
        decisions = await run_gate(state, get_active_skills, strict=strict, count_failed_calls=count_failed_calls,
                                   guarded_tools=tools)
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
