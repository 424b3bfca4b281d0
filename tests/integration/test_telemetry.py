"""The `search_memory` span of a real turn read, on the real graph."""

from __future__ import annotations

from collections.abc import Iterator

import neo4j
import pytest
from langchain_core.messages import AIMessage
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    StoreUnavailableError,
    TurnMemory,
    create_precondition_gate_node,
)
from tests._otel import recording_spans

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recording_spans() as exporter:
        yield exporter


async def _seed(store: GraphMemoryStore, scope: MemoryScope) -> str:
    skill = await ProceduralLayer(store).seed_authored_skill(
        MemoryScope(scope.tenant_id), label="Deliver the weekly report", steps=["deliver"], source_tag="authored:test",
        action_tool="deliver", precondition=["get_status"], identifier="deliver-weekly",
    )
    await ProspectiveLayer(store).set_trigger(scope, condition="invoice", task="Say invoice 4711 is overdue.")
    return skill.id


def _search_memory(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "search_memory"]


async def test_a_turn_read_is_one_search_memory_span_with_counts_cache_and_version(
    store: GraphMemoryStore, tenant: str, spans: InMemorySpanExporter
) -> None:
    scope = MemoryScope(tenant, namespace="user-7")
    await _seed(store, scope)
    memory = TurnMemory(store)

    first = await memory.begin(scope)
    second = await memory.begin(scope)

    fresh, cached = _search_memory(spans)
    for span, snapshot in ((fresh, first), (cached, second)):
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes is not None
        assert dict(span.attributes) | {"symfonic_graph.skills.cached": None} == {
            "gen_ai.operation.name": "search_memory",
            "gen_ai.memory.store.id": f"{tenant}/user-7",
            "gen_ai.memory.record.count": 2,
            "symfonic_graph.tenant_id": tenant,
            "symfonic_graph.namespace": "user-7",
            "symfonic_graph.skill.count": 1,
            "symfonic_graph.trigger.count": 1,
            "symfonic_graph.catalog.version": snapshot.version,
            "symfonic_graph.cypher.query": "turn_snapshot" if snapshot is first else "turn_snapshot_warm",
            "symfonic_graph.skills.cached": None,
        }
        assert isinstance(snapshot.version, int)
    assert fresh.attributes is not None and fresh.attributes["symfonic_graph.skills.cached"] is False
    assert cached.attributes is not None and cached.attributes["symfonic_graph.skills.cached"] is True


async def test_a_tenant_wide_scope_has_the_tenant_as_store_id_and_no_namespace(
    store: GraphMemoryStore, scope: MemoryScope, spans: InMemorySpanExporter
) -> None:
    await TurnMemory(store).begin(scope)
    [span] = _search_memory(spans)
    assert span.attributes is not None
    assert span.attributes["gen_ai.memory.store.id"] == scope.tenant_id
    assert "symfonic_graph.namespace" not in span.attributes
    assert span.attributes["gen_ai.memory.record.count"] == 0
    assert span.attributes["symfonic_graph.skills.cached"] is False


async def test_an_unreachable_store_records_the_error_on_the_span_and_raises(spans: InMemorySpanExporter) -> None:
    # A real driver to a port nothing listens on: the outage is real, not mocked.
    driver = neo4j.AsyncGraphDatabase.driver("bolt://127.0.0.1:9", auth=("neo4j", "x"), max_transaction_retry_time=0)
    try:
        memory = TurnMemory(GraphMemoryStore(driver, query_timeout=5.0))
        with pytest.raises(StoreUnavailableError):
            await memory.begin(MemoryScope("t-unreachable"))
    finally:
        await driver.close()
    [span] = _search_memory(spans)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "symfonic_graph.errors.StoreUnavailableError"
    assert span.attributes["gen_ai.memory.store.id"] == "t-unreachable"
    assert "symfonic_graph.skill.count" not in span.attributes
    assert [e.name for e in span.events] == ["exception"]


async def test_a_gate_read_is_a_search_memory_child_of_the_apply_guardrail_span(
    store: GraphMemoryStore, tenant: str, spans: InMemorySpanExporter
) -> None:
    scope = MemoryScope(tenant, namespace="user-7")
    skill_id = await _seed(store, scope)
    memory = TurnMemory(store, max_age=0)  # the gate's lookup reads again
    gate = create_precondition_gate_node(memory.get_active_skills)
    asked = AIMessage("", tool_calls=[{"name": "deliver", "args": {}, "id": "call-1"}])

    update = await gate({"memory_scope": scope, "messages": [asked]})

    assert [m.name for m in update["messages"]] == ["deliver"]
    [read] = _search_memory(spans)
    [guard] = [s for s in spans.get_finished_spans() if s.name.startswith("apply_guardrail")]
    assert read.parent is not None and guard.context is not None
    assert read.parent.span_id == guard.context.span_id
    [event] = [e for e in guard.events if e.name == "gen_ai.guardrail.result"]
    assert event.attributes is not None
    assert dict(event.attributes) == {
        "gen_ai.guardrail.component.name": "symfonic_graph.precondition_gate",
        "gen_ai.guardrail.result.type": "verdict",
        "gen_ai.guardrail.result.value": "blocked",
        "gen_ai.guardrail.result.reason": "missing precondition",
        "gen_ai.guardrail.policy.id": skill_id,
        "gen_ai.tool.name": "deliver",
        "gen_ai.tool.call.id": "call-1",
        "symfonic_graph.skill.label": "Deliver the weekly report",
        "symfonic_graph.precondition.missing": ("get_status",),
        "symfonic_graph.precondition.matched_count": 1,
    }
