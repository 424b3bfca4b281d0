"""The public import path; the implementation lives in ``symfonic_graph/memory/triggers.py``."""

from symfonic_graph.memory.triggers import (
    TRIGGERS_HEADING,
    TRIGGERS_ORDER,
    TRIGGERS_ORIGIN,
    TRIGGERS_POSITION,
    GraphPendingTriggers,
    Neo4jSelectionAuditSink,
    PendingTrigger,
    PendingTriggerSource,
    ProspectiveTriggerCapability,
    TriggerSelectionSink,
    prompt_cue,
    prospective_trigger_capabilities,
)

__all__ = [
    "TRIGGERS_HEADING",
    "TRIGGERS_ORDER",
    "TRIGGERS_ORIGIN",
    "TRIGGERS_POSITION",
    "GraphPendingTriggers",
    "Neo4jSelectionAuditSink",
    "PendingTrigger",
    "PendingTriggerSource",
    "ProspectiveTriggerCapability",
    "TriggerSelectionSink",
    "prompt_cue",
    "prospective_trigger_capabilities",
]
