"""Selections are recorded with their kind: the audit sink's node and the trace, through a real Neo4j."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory, telemetry
from symfonic_graph.rules.events import CallResult
from symfonic_graph.triggers import Neo4jSelectionAuditSink, ProspectiveTriggerCapability
from tests._otel import recording_spans

pytestmark = pytest.mark.anyio

T0 = datetime(2031, 5, 1, 9, 0, tzinfo=UTC).timestamp()


def mentions(condition: str, cue: str) -> bool:
    return condition in cue


async def test_a_selection_is_recorded_with_each_triggers_kind(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    timed = await layer.set_trigger(scope, task="Due.", due_at=T0 - 60)
    text = await layer.set_trigger(scope, condition="invoice", task="Text.")
    event = await layer.set_trigger(scope, task="Event.", on_tool="issue_refund")
    memory = TurnMemory(store, wall_clock=lambda: T0)
    calls = [CallResult("issue_refund", {}, False, 1)]

    with recording_spans() as spans:
        snapshot = await memory.begin(scope)
        capability = ProspectiveTriggerCapability(snapshot, mentions, scope, sink=Neo4jSelectionAuditSink(store),
                                                  events_from=lambda _: calls)
        with telemetry._get_tracer().start_as_current_span("agent turn"):
            [contribution] = await capability.contribute({"prompt": "my invoice"})
    assert contribution.content == "## PENDING REMINDERS\n- Due.\n- Text.\n- Event."
    [turn] = [s for s in spans.get_finished_spans() if s.name == "agent turn"]
    [selected] = [e for e in turn.events if e.name == "symfonic_graph.triggers.selected"]
    assert selected.attributes is not None
    assert list(selected.attributes["symfonic_graph.trigger.ids"]) == [timed, text, event]
    assert list(selected.attributes["symfonic_graph.trigger.kinds"]) == ["time", "text", "event"]
    records, _, _ = await store.driver.execute_query(
        "MATCH (a:SymfonicTriggerSelection {tenant_id: $tenant}) RETURN a.trigger_ids AS ids, a.kinds AS kinds",
        tenant=tenant, database_=store.database)
    assert [(r["ids"], r["kinds"]) for r in records] == [([timed, text, event], ["time", "text", "event"])]
