"""OpenTelemetry records of the gate, and no cost without OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from symfonic_graph import telemetry
from symfonic_graph.errors import ScopeError, StoreUnavailableError
from symfonic_graph.gate import create_precondition_gate_node, run_gate
from tests._otel import recording_spans

pytestmark = pytest.mark.anyio

DEPLOY = SimpleNamespace(id="sk-deploy", metadata={"label": "Deploy", "action_tool": "deploy",
                                                   "precondition": ["run_tests", "auth"]})
NOTIFY = SimpleNamespace(metadata={"label": "Notify", "action_tool": "notify", "precondition": ["auth"]})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recording_spans() as exporter:
        yield exporter


def lookup(*skills: Any) -> Any:
    async def get_active_skills(state: Any) -> list[Any]:
        return list(skills)

    return get_active_skills


async def broken_lookup(state: Any) -> list[Any]:
    raise StoreUnavailableError("neo4j is down")


async def scopeless_lookup(state: Any) -> list[Any]:
    raise ScopeError("the turn has no memory scope")


def asking(*calls: tuple[str, str]) -> dict[str, Any]:
    message = AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id} for name, call_id in calls])
    return {"messages": [message]}


def only_gate_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = exporter.get_finished_spans()
    assert span.name == "apply_guardrail symfonic_graph.precondition_gate"
    return span


def results(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == "gen_ai.guardrail.result"]


async def test_a_blocked_call_is_one_guardrail_result_with_the_missing_tools_and_the_skill(
    spans: InMemorySpanExporter,
) -> None:
    [decision] = await run_gate(asking(("deploy", "call-1")), lookup(DEPLOY))
    assert decision.verdict == "blocked"

    span = only_gate_span(spans)
    assert span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET  # blocking a call is the gate working, not an error
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "apply_guardrail"
    assert attributes["gen_ai.guardrail.component.name"] == "symfonic_graph.precondition_gate"
    assert attributes["symfonic_graph.gate.decision_count"] == 1
    assert attributes["symfonic_graph.gate.blocked_count"] == 1
    assert attributes["symfonic_graph.gate.blocked_tools"] == ("deploy",)
    assert attributes["symfonic_graph.gate.strict"] is False
    assert attributes["symfonic_graph.gate.strict_mode"] == "off"

    assert results(span) == [{
        "gen_ai.guardrail.component.name": "symfonic_graph.precondition_gate",
        "gen_ai.guardrail.result.type": "verdict",
        "gen_ai.guardrail.result.value": "blocked",
        "gen_ai.guardrail.result.reason": "missing precondition",
        "gen_ai.guardrail.policy.id": "sk-deploy",
        "gen_ai.tool.name": "deploy",
        "gen_ai.tool.call.id": "call-1",
        "symfonic_graph.skill.label": "Deploy",
        "symfonic_graph.precondition.missing": ("run_tests", "auth"),
        "symfonic_graph.precondition.matched_count": 1,
    }]


async def test_each_call_of_a_parallel_batch_is_one_result_in_call_order(spans: InMemorySpanExporter) -> None:
    state = asking(("notify", "call-1"), ("read_docs", "call-2"), ("deploy", "call-3"))
    state["messages"].insert(0, ToolMessage("ok", tool_call_id="call-0", name="auth"))
    state["messages"].insert(0, AIMessage("", tool_calls=[{"name": "auth", "args": {}, "id": "call-0"}]))

    decisions = await run_gate(state, lookup(DEPLOY, NOTIFY))
    assert [d.verdict for d in decisions] == ["allowed", "allowed", "blocked"]

    span = only_gate_span(spans)
    events = results(span)
    assert [(e["gen_ai.tool.name"], e["gen_ai.tool.call.id"], e["gen_ai.guardrail.result.value"]) for e in events] == [
        ("notify", "call-1", "allowed"), ("read_docs", "call-2", "allowed"), ("deploy", "call-3", "blocked"),
    ]
    notify, read_docs, deploy = events
    assert notify["symfonic_graph.precondition.matched_count"] == 1  # a rule applied and was satisfied
    assert read_docs["symfonic_graph.precondition.matched_count"] == 0
    for allowed in (notify, read_docs):
        assert "gen_ai.guardrail.result.reason" not in allowed
        assert "symfonic_graph.precondition.missing" not in allowed
    assert deploy["symfonic_graph.precondition.missing"] == ("run_tests",)  # auth was called earlier
    assert span.attributes is not None
    assert span.attributes["symfonic_graph.gate.decision_count"] == 3
    assert span.attributes["symfonic_graph.gate.blocked_tools"] == ("deploy",)


async def test_a_skill_without_id_or_label_leaves_those_attributes_out(spans: InMemorySpanExporter) -> None:
    anonymous = SimpleNamespace(metadata={"action_tool": "deploy", "precondition": "auth"})
    await run_gate(asking(("deploy", "call-1")), lookup(anonymous))
    [event] = results(only_gate_span(spans))
    assert event["gen_ai.guardrail.result.value"] == "blocked"
    assert "gen_ai.guardrail.policy.id" not in event
    assert "symfonic_graph.skill.label" not in event


async def test_strict_mode_records_store_unavailable_for_every_call(spans: InMemorySpanExporter) -> None:
    decisions = await run_gate(asking(("deploy", "c1"), ("notify", "c2")), broken_lookup, strict=True)
    assert [d.verdict for d in decisions] == ["store_unavailable", "store_unavailable"]

    span = only_gate_span(spans)
    assert span.attributes is not None and span.attributes["symfonic_graph.gate.strict"] is True
    assert span.attributes["symfonic_graph.gate.strict_mode"] == "all"
    events = results(span)
    assert [e["gen_ai.guardrail.result.value"] for e in events] == ["store_unavailable"] * 2
    assert {e["gen_ai.guardrail.result.reason"] for e in events} == {"precondition store unavailable"}
    assert span.status.status_code is StatusCode.UNSET


async def test_a_pass_through_outage_is_a_span_without_results(spans: InMemorySpanExporter) -> None:
    assert await run_gate(asking(("deploy", "c1")), broken_lookup) == ()
    span = only_gate_span(spans)
    assert results(span) == []
    assert span.attributes is not None and span.attributes["symfonic_graph.gate.decision_count"] == 0


async def test_a_scope_error_is_recorded_on_the_span_and_raised(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ScopeError):
        await run_gate(asking(("deploy", "c1")), scopeless_lookup)
    span = only_gate_span(spans)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ScopeError: the turn has no memory scope"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "symfonic_graph.errors.ScopeError"
    [exception] = [e for e in span.events if e.name == "exception"]
    assert exception.attributes is not None and exception.attributes["exception.type"].endswith("ScopeError")
    assert results(span) == []


async def test_the_gate_node_is_traced_through_run_gate(spans: InMemorySpanExporter) -> None:
    gate = create_precondition_gate_node(lookup(DEPLOY))
    update = await gate(asking(("deploy", "call-9")))
    assert [m.tool_call_id for m in update["messages"]] == ["call-9"]
    [event] = results(only_gate_span(spans))
    assert event["gen_ai.tool.call.id"] == "call-9"


async def test_the_gate_span_is_a_child_of_the_callers_span(spans: InMemorySpanExporter) -> None:
    assert telemetry._provider is not None
    tracer = telemetry._provider.get_tracer("test")
    with tracer.start_as_current_span("agent turn") as parent:
        await run_gate(asking(("deploy", "c1")), lookup(DEPLOY))
    gate_span = next(s for s in spans.get_finished_spans() if s.name.startswith("apply_guardrail"))
    assert gate_span.parent is not None
    assert gate_span.parent.span_id == parent.get_span_context().span_id


async def test_without_a_configured_provider_the_gate_works_and_records_nothing() -> None:
    # No provider given and (in this test process) none set globally: the API's no-op tracer.
    telemetry.set_tracer_provider(None)
    [decision] = await run_gate(asking(("deploy", "c1")), lookup(DEPLOY))
    assert decision.verdict == "blocked"


async def test_with_the_availability_flag_off_the_hooks_do_nothing(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry, "AVAILABLE", False)
    [decision] = await run_gate(asking(("deploy", "c1")), lookup(DEPLOY))
    assert decision.verdict == "blocked"
    telemetry.note_turn_read("turn_snapshot", skills_cached=True)  # outside a turn span: nothing
    assert spans.get_finished_spans() == ()


def test_without_opentelemetry_installed_nothing_is_wrapped_and_the_gate_decides() -> None:
    """A fresh interpreter where ``import opentelemetry`` fails, as in an install without the extra."""
    script = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # every `import opentelemetry...` now raises ImportError
        from types import SimpleNamespace
        from langchain_core.messages import AIMessage
        import symfonic_graph
        from symfonic_graph import TurnMemory, telemetry
        from symfonic_graph.gate import run_gate

        assert telemetry.AVAILABLE is False
        assert not hasattr(run_gate, "__wrapped__"), "run_gate must be the undecorated function"
        assert not hasattr(TurnMemory.begin, "__wrapped__"), "begin must be the undecorated method"
        telemetry.note_turn_read("turn_snapshot", skills_cached=False)
        telemetry.set_tracer_provider(None)

        skill = SimpleNamespace(metadata={"label": "Deploy", "action_tool": "deploy", "precondition": ["tests"]})
        async def skills(state):
            return [skill]
        state = {"messages": [AIMessage("", tool_calls=[{"name": "deploy", "args": {}, "id": "c1"}])]}
        [decision] = asyncio.run(run_gate(state, skills))
        assert decision.verdict == "blocked" and decision.missing == ("tests",), decision
        assert not any(name.startswith("opentelemetry") and mod is not None for name, mod in sys.modules.items())
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_a_sampled_out_gate_run_records_nothing_and_still_decides() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    with recording_spans(ALWAYS_OFF) as exporter:
        [decision] = await run_gate(asking(("deploy", "c1")), lookup(DEPLOY))
    assert decision.verdict == "blocked"
    assert exporter.get_finished_spans() == ()


async def test_a_shadow_rule_is_a_would_block_result_and_the_call_is_allowed(spans: InMemorySpanExporter) -> None:
    shadow = SimpleNamespace(id="sk-shadow", metadata={"label": "Deploy", "action_tool": "deploy",
                                                       "precondition": ["run_tests"], "enforcement": "shadow"})
    [decision] = await run_gate(asking(("deploy", "call-1")), lookup(shadow))
    assert decision.verdict == "allowed"
    verdict, would_block = results(only_gate_span(spans))
    assert verdict["gen_ai.guardrail.result.value"] == "allowed"
    assert would_block == {
        "gen_ai.guardrail.component.name": "symfonic_graph.precondition_gate",
        "gen_ai.guardrail.result.type": "shadow",
        "gen_ai.guardrail.result.value": "would_block",
        "gen_ai.guardrail.result.reason": "a shadow rule's precondition is missing; the call was not blocked",
        "gen_ai.guardrail.policy.id": "sk-shadow",
        "gen_ai.tool.name": "deploy",
        "gen_ai.tool.call.id": "call-1",
        "symfonic_graph.skill.label": "Deploy",
        "symfonic_graph.precondition.missing": ("run_tests",),
    }


async def test_guarded_strict_mode_is_named_on_the_span(spans: InMemorySpanExporter) -> None:
    """``strict="guarded"`` is told apart from ``strict=True`` (both are a true ``strict`` flag)."""
    await run_gate(asking(("deploy", "c1")), broken_lookup, strict="guarded")
    span = only_gate_span(spans)
    assert span.attributes is not None and span.attributes["symfonic_graph.gate.strict"] is True
    assert span.attributes["symfonic_graph.gate.strict_mode"] == "guarded"
