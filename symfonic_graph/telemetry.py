"""OpenTelemetry traces of the turn read and the gate.

With the ``otel`` extra (``pip install 'symfonic-graph[otel]'``) and a tracer
provider configured by the application:

- each :meth:`TurnMemory.begin <symfonic_graph.memory.turn.TurnMemory.begin>` is one
  ``search_memory`` span (GenAI semantic conventions, ``gen_ai.memory.client``
  span: kind ``CLIENT``, ``gen_ai.operation.name = "search_memory"``);
- each :func:`run_gate <symfonic_graph.gate.run_gate>` is one
  ``apply_guardrail symfonic_graph.precondition_gate`` span (kind
  ``INTERNAL``), and each of its decisions one ``gen_ai.guardrail.result``
  event on that span with ``gen_ai.guardrail.*`` attributes.

A read the gate makes (``TurnMemory.get_active_skills`` reading again after
``max_age``) is a ``search_memory`` child of the ``apply_guardrail`` span.
See ``docs/observability.md`` for every attribute and an example trace.

Cost: whether ``opentelemetry`` imports is found out once, when this module is
imported. When it does not, :func:`traced_turn` and :func:`traced_gate` return
the function they decorate unchanged and :func:`note_turn_read` returns at
once: nothing is added to a turn. When it imports but no SDK provider is set,
the API's no-op tracer is used (normal OpenTelemetry behaviour).

Which provider: the one given to :func:`set_tracer_provider`, else the global
one (``opentelemetry.trace.set_tracer_provider``), looked up on first use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable, Sequence, Sized
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from symfonic_graph.shape.scope import MemoryScope

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    # The providers of an application that set up no tracing: the API's proxy (until one is set) or no-op.
    _NO_PROVIDER = (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider)
except ImportError:  # the `otel` extra is not installed: every hook is a no-op
    AVAILABLE = False
else:
    AVAILABLE = True
# AVAILABLE: True iff the OpenTelemetry API imports. Decided once, here; the hooks
# only read it (tests switch it off to check they then do nothing).

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = [
    "AVAILABLE",
    "GATE_COMPONENT",
    "GUARDRAIL_RESULT_EVENT",
    "SEARCH_MEMORY",
    "APPLY_GUARDRAIL",
    "count_decision",
    "note_stale_rules",
    "note_trigger_selection",
    "note_turn_read",
    "set_tracer_provider",
    "traced_gate",
    "traced_turn",
]

# --- names (GenAI semantic conventions, development status) ---------------------

SEARCH_MEMORY: Final = "search_memory"
"""``gen_ai.operation.name`` and span name of a turn read."""
APPLY_GUARDRAIL: Final = "apply_guardrail"
"""``gen_ai.operation.name`` of a gate run."""
GATE_COMPONENT: Final = "symfonic_graph.precondition_gate"
"""``gen_ai.guardrail.component.name`` of the precondition gate."""
GATE_SPAN: Final = f"{APPLY_GUARDRAIL} {GATE_COMPONENT}"
"""Span name of a gate run: ``apply_guardrail {gen_ai.guardrail.component.name}``."""
GUARDRAIL_RESULT_EVENT: Final = "gen_ai.guardrail.result"
"""Event name of one gate decision."""

OPERATION_NAME: Final = "gen_ai.operation.name"
ERROR_TYPE: Final = "error.type"
MEMORY_STORE_ID: Final = "gen_ai.memory.store.id"
MEMORY_RECORD_COUNT: Final = "gen_ai.memory.record.count"
GUARDRAIL_COMPONENT_NAME: Final = "gen_ai.guardrail.component.name"
GUARDRAIL_POLICY_ID: Final = "gen_ai.guardrail.policy.id"
GUARDRAIL_RESULT_TYPE: Final = "gen_ai.guardrail.result.type"
GUARDRAIL_RESULT_VALUE: Final = "gen_ai.guardrail.result.value"
GUARDRAIL_RESULT_REASON: Final = "gen_ai.guardrail.result.reason"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"

# --- names the conventions do not have ------------------------------------------

TENANT_ID: Final = "symfonic_graph.tenant_id"
NAMESPACE: Final = "symfonic_graph.namespace"
SKILL_COUNT: Final = "symfonic_graph.skill.count"
TRIGGER_COUNT: Final = "symfonic_graph.trigger.count"
TRIGGER_KINDS: Final = "symfonic_graph.trigger.kinds"
TRIGGER_IDS: Final = "symfonic_graph.trigger.ids"
TRIGGERS_SELECTED_EVENT: Final = "symfonic_graph.triggers.selected"
"""The event a turn's reminder selection adds to the current span: the selected triggers' ids and kinds."""
SKILLS_CACHED: Final = "symfonic_graph.skills.cached"
CATALOG_VERSION: Final = "symfonic_graph.catalog.version"
CYPHER_QUERY: Final = "symfonic_graph.cypher.query"
GATE_STRICT: Final = "symfonic_graph.gate.strict"
GATE_STRICT_MODE: Final = "symfonic_graph.gate.strict_mode"
GATE_DECISIONS: Final = "symfonic_graph.gate.decision_count"
GATE_BLOCKED: Final = "symfonic_graph.gate.blocked_count"
GATE_BLOCKED_TOOLS: Final = "symfonic_graph.gate.blocked_tools"
MATCHED_SKILLS: Final = "symfonic_graph.precondition.matched_count"
MISSING_TOOLS: Final = "symfonic_graph.precondition.missing"
SKILL_LABEL: Final = "symfonic_graph.skill.label"
RULES_STALE: Final = "symfonic_graph.rules.stale"
RULES_AGE: Final = "symfonic_graph.rules.age_seconds"
STALE_RESULT_TYPE: Final = "rules"
"""``gen_ai.guardrail.result.type`` of the record saying an outage left the gate with its last rules."""
SHADOW_RESULT_TYPE: Final = "shadow"
"""``gen_ai.guardrail.result.type`` of a call a shadow rule would have blocked (value ``would_block``)."""

VERDICT: Final = "verdict"
"""``gen_ai.guardrail.result.type``: the result field the gate reports (``GateDecision.verdict``)."""
_REASONS: Final = {"blocked": "missing precondition", "store_unavailable": "precondition store unavailable"}

_TRACER_NAME: Final = "symfonic_graph"


# --- the shapes the hooks read (no import of turn.py / gate.py: they import us) --


class _Snapshot(Protocol):
    @property
    def scope(self) -> MemoryScope: ...
    @property
    def version(self) -> int | None: ...
    @property
    def skills(self) -> Sized: ...
    @property
    def triggers(self) -> Sized: ...


class _Check(Protocol):
    @property
    def label(self) -> str | None: ...
    @property
    def skill_id(self) -> str | None: ...


class _Decision(Protocol):
    @property
    def tool_name(self) -> str: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def verdict(self) -> str: ...
    @property
    def matched(self) -> Sized: ...
    @property
    def blocking(self) -> _Check | None: ...
    @property
    def missing(self) -> tuple[str, ...]: ...
    @property
    def shadowed(self) -> Sequence[Any]: ...


Owner = TypeVar("Owner")
Snap = TypeVar("Snap", bound=_Snapshot)
Decisions = TypeVar("Decisions", bound=Iterable[_Decision])
P = ParamSpec("P")


# --- the decisions counter ---------------------------------------------------------

DECISIONS_COUNTER: Final = "symfonic_graph.gate.decisions"
"""The counter of kept gate decisions, with a ``decision`` attribute (``block``, ``would_block``, ...)."""
_meter_provider: Any = None
_counter: Any = None


def set_meter_provider(provider: Any) -> None:
    """Count with ``provider`` instead of the global meter provider; ``None`` goes back to the global one."""
    global _meter_provider, _counter
    _meter_provider = provider
    _counter = None


def count_decision(decision: str) -> None:
    """Add one to ``symfonic_graph.gate.decisions`` with ``decision``; does nothing without OpenTelemetry."""
    global _counter
    if not AVAILABLE:
        return
    if _counter is None:
        from opentelemetry import metrics

        source = _meter_provider if _meter_provider is not None else metrics.get_meter_provider()
        _counter = source.get_meter(_TRACER_NAME, _library_version()).create_counter(
            DECISIONS_COUNTER, unit="{decision}", description="gate decisions kept: blocks, would-blocks, "
            "refusals, outage pass-throughs and stale-rules decisions")
    _counter.add(1, {"decision": decision})


# --- the tracer -------------------------------------------------------------------

_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_turn_span: ContextVar[Span | None] = ContextVar("symfonic_graph_turn_span", default=None)


def set_tracer_provider(provider: TracerProvider | None) -> None:
    """Trace with ``provider`` instead of the global provider; ``None`` goes back to the global one.

    For tests and for applications that keep a provider of their own; most
    applications set the global provider and never call this.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
        >>> set_tracer_provider(TracerProvider())  # doctest: +SKIP
    """
    global _provider, _tracer
    _provider = provider
    _tracer = None


def _get_tracer() -> Tracer:
    global _tracer
    if _tracer is None:
        # Before a global provider is set this is the API's proxy tracer: a
        # no-op that starts tracing once the application sets one.
        source = _provider if _provider is not None else _trace.get_tracer_provider()
        _tracer = source.get_tracer(_TRACER_NAME, _library_version())
    return _tracer


def _library_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("symfonic-graph")
    except PackageNotFoundError:
        return None


def _start(name: str, kind: SpanKind, attributes: dict[str, AttributeValue]) -> Span | None:
    """Start a span; None when the tracer is a no-op (nothing to record, nothing to parent).

    The API's no-op tracer hands back the current span context (or the invalid
    one): making that current changes nothing, so the context switch is
    skipped. A span an SDK sampler dropped has a context of its own and is
    still made current, so that its children stay in its (dropped) trace.
    """
    if _provider is None and isinstance(_trace.get_tracer_provider(), _NO_PROVIDER):
        return None  # no tracing set up: skip even the no-op span (3.7 to 5.5 us of a gate decision)
    span = _get_tracer().start_span(name, kind=kind, attributes=attributes)
    if span.is_recording() or span.get_span_context() != _trace.get_current_span().get_span_context():
        return span
    return None


def _fail(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_attribute(ERROR_TYPE, f"{type(exc).__module__}.{type(exc).__qualname__}")
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


# --- the turn read ----------------------------------------------------------------


def _scope_attributes(scope: MemoryScope) -> dict[str, AttributeValue]:
    store_id = scope.tenant_id if scope.namespace is None else f"{scope.tenant_id}/{scope.namespace}"
    attributes: dict[str, AttributeValue] = {MEMORY_STORE_ID: store_id, TENANT_ID: scope.tenant_id}
    if scope.namespace is not None:
        attributes[NAMESPACE] = scope.namespace
    return attributes


def traced_turn(
    begin: Callable[Concatenate[Owner, MemoryScope, P], Coroutine[Any, Any, Snap]],
) -> Callable[Concatenate[Owner, MemoryScope, P], Coroutine[Any, Any, Snap]]:
    """Decorate ``TurnMemory.begin``: one ``search_memory`` span per call.

    Returns ``begin`` itself when OpenTelemetry is not installed. An exception
    is recorded on the span (status ERROR, ``error.type``) and re-raised.
    """
    if not AVAILABLE:
        return begin

    @functools.wraps(begin)
    async def traced(self: Owner, scope: MemoryScope, *args: P.args, **kwargs: P.kwargs) -> Snap:
        if not AVAILABLE:
            return await begin(self, scope, *args, **kwargs)
        attributes: dict[str, AttributeValue] = {OPERATION_NAME: SEARCH_MEMORY}
        if isinstance(scope, MemoryScope):  # else begin() raises ScopeError, recorded below
            attributes.update(_scope_attributes(scope))
        span = _start(SEARCH_MEMORY, SpanKind.CLIENT, attributes)
        if span is None:
            return await begin(self, scope, *args, **kwargs)
        with _trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            if not span.is_recording():
                return await begin(self, scope, *args, **kwargs)
            token = _turn_span.set(span)
            try:
                snapshot = await begin(self, scope, *args, **kwargs)
            except Exception as exc:
                _fail(span, exc)
                raise
            finally:
                _turn_span.reset(token)
            skills, triggers = len(snapshot.skills), len(snapshot.triggers)
            result = _scope_attributes(snapshot.scope)
            result[MEMORY_RECORD_COUNT] = skills + triggers
            result[SKILL_COUNT] = skills
            result[TRIGGER_COUNT] = triggers
            if snapshot.version is not None:
                result[CATALOG_VERSION] = snapshot.version
            span.set_attributes(result)
            return snapshot

    return traced  # type: ignore[return-value]  # functools.wraps loses the ParamSpec for mypy


def note_turn_read(query: str, *, skills_cached: bool) -> None:
    """Inside ``TurnMemory.begin``: name the Cypher query and say where the skills came from.

    Sets ``symfonic_graph.cypher.query`` and ``symfonic_graph.skills.cached`` on
    the ``search_memory`` span of this call; does nothing outside one.
    """
    if not AVAILABLE:
        return
    span = _turn_span.get()
    if span is not None:
        span.set_attributes({CYPHER_QUERY: query, SKILLS_CACHED: skills_cached})


def note_stale_rules(age: float, reason: str) -> None:
    """Inside ``TurnMemory.begin``: the store is down and the scope's last rules are enforced.

    Adds a ``gen_ai.guardrail.result`` event (result type ``rules``, value
    ``stale``, the outage as reason, the rules' age in seconds) to the
    ``search_memory`` span of this call and marks the span
    ``symfonic_graph.rules.stale``; does nothing outside one.
    """
    if not AVAILABLE:
        return
    span = _turn_span.get()
    if span is None:
        return
    span.set_attributes({RULES_STALE: True, RULES_AGE: float(age)})
    span.add_event(GUARDRAIL_RESULT_EVENT, {
        GUARDRAIL_COMPONENT_NAME: GATE_COMPONENT, GUARDRAIL_RESULT_TYPE: STALE_RESULT_TYPE,
        GUARDRAIL_RESULT_VALUE: "stale", RULES_AGE: float(age),
        GUARDRAIL_RESULT_REASON: f"store unavailable, enforcing the last rules read: {reason}",
    })


def note_trigger_selection(triggers: Sequence[Any]) -> None:
    """A turn selected ``triggers``: one ``symfonic_graph.triggers.selected`` event on the current span.

    The event holds the selected triggers' ids and kinds, in selection
    order (``symfonic_graph.trigger.ids``, ``symfonic_graph.trigger.kinds``);
    nothing happens outside a recording span.
    """
    if not AVAILABLE or not triggers:
        return
    span = _turn_span.get() or _trace.get_current_span()
    if not span.is_recording():
        return
    span.add_event(TRIGGERS_SELECTED_EVENT, {
        TRIGGER_IDS: [str(getattr(t, "trigger_id", "")) for t in triggers],
        TRIGGER_KINDS: [str(getattr(t, "kind", "text")) for t in triggers],
    })


# --- the gate ---------------------------------------------------------------------


def _result_attributes(
    decision: _Decision, kind: str, value: str, reason: str | None, check: Any
) -> dict[str, AttributeValue]:
    """The attributes of one guardrail result: the call, and the rule ``check`` behind it (if any)."""
    attributes: dict[str, AttributeValue] = {
        GUARDRAIL_COMPONENT_NAME: GATE_COMPONENT,
        GUARDRAIL_RESULT_TYPE: kind,
        GUARDRAIL_RESULT_VALUE: value,
        TOOL_NAME: decision.tool_name,
    }
    if decision.call_id is not None:
        attributes[TOOL_CALL_ID] = decision.call_id
    if reason is not None:
        attributes[GUARDRAIL_RESULT_REASON] = reason
    if check is not None:
        attributes[MISSING_TOOLS] = list(check.missing)
        if check.skill_id is not None:
            attributes[GUARDRAIL_POLICY_ID] = check.skill_id
        if check.label is not None:
            attributes[SKILL_LABEL] = check.label
    return attributes


def _decision_attributes(decision: _Decision) -> dict[str, AttributeValue]:
    attributes = _result_attributes(decision, VERDICT, decision.verdict, _REASONS.get(decision.verdict),
                                    decision.blocking)
    attributes[MATCHED_SKILLS] = len(decision.matched)
    return attributes


def _shadow_attributes(decision: _Decision, check: Any) -> dict[str, AttributeValue]:
    return _result_attributes(decision, SHADOW_RESULT_TYPE, "would_block",
                              "a shadow rule's precondition is missing; the call was not blocked", check)


_GATE_ATTRIBUTES: Final[dict[str, AttributeValue]] = {
    OPERATION_NAME: APPLY_GUARDRAIL, GUARDRAIL_COMPONENT_NAME: GATE_COMPONENT,
}


def traced_gate(run_gate: Callable[P, Coroutine[Any, Any, Decisions]]) -> Callable[P, Coroutine[Any, Any, Decisions]]:
    """Decorate ``run_gate``: one ``apply_guardrail`` span, one ``gen_ai.guardrail.result`` event per decision.

    Returns ``run_gate`` itself when OpenTelemetry is not installed. An
    exception (a ``ScopeError``) is recorded on the span and re-raised.
    """
    if not AVAILABLE:
        return run_gate

    @functools.wraps(run_gate)
    async def traced(*args: P.args, **kwargs: P.kwargs) -> Decisions:
        if not AVAILABLE:
            return await run_gate(*args, **kwargs)
        span = _start(GATE_SPAN, SpanKind.INTERNAL, {**_GATE_ATTRIBUTES})
        if span is None:
            return await run_gate(*args, **kwargs)
        with _trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            if not span.is_recording():
                return await run_gate(*args, **kwargs)
            try:
                decisions = await run_gate(*args, **kwargs)
            except Exception as exc:
                _fail(span, exc)
                raise
            blocked: list[str] = []
            count = 0
            for decision in decisions:
                count += 1
                if decision.verdict != "allowed":
                    blocked.append(decision.tool_name)
                span.add_event(GUARDRAIL_RESULT_EVENT, _decision_attributes(decision))
                for check in decision.shadowed:  # a shadow rule: reported, never enforced
                    span.add_event(GUARDRAIL_RESULT_EVENT, _shadow_attributes(decision, check))
            summary: dict[str, AttributeValue] = {
                GATE_STRICT: bool(kwargs.get("strict", False)), GATE_DECISIONS: count, GATE_BLOCKED: len(blocked),
                GATE_STRICT_MODE: _strict_mode(kwargs.get("strict", False)),
            }
            if blocked:
                summary[GATE_BLOCKED_TOOLS] = blocked
            span.set_attributes(summary)
            return decisions

    return traced


def _strict_mode(strict: object) -> str:
    """``off``, ``all`` or ``guarded``: what the gate refuses when the store is out (``strict`` says only on or off)."""
    if strict == "guarded":
        return "guarded"
    return "all" if strict is True else "off"
