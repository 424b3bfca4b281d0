"""symfonic-graph: procedural and prospective memory for multi-tenant agents, in Neo4j.

The top level holds the contract (the memory API and the rules API), the
errors, the record types and ``TurnMemory``. Everything else lives in its
module (``symfonic_graph.gate``, ``symfonic_graph.recall``, ...); the
integrations are ``symfonic_graph.langchain`` and ``symfonic_graph.langgraph``
(optional extras). Names that moved off the top level still import from here
for one release, with a ``DeprecationWarning`` naming their module.

Example:
    >>> from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from symfonic_graph.contributions import GrantEffects, PluginContribution
from symfonic_graph.errors import (
    AuthenticationError,
    AuthorityError,
    ConfigurationError,
    MemoryContractError,
    NotFoundError,
    QueryError,
    ScopeError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.gate import create_precondition_gate_node, precondition_condition
from symfonic_graph.layers import ProceduralLayer, ProspectiveLayer
from symfonic_graph.mining import RuleProposal, mine_rules
from symfonic_graph.models import Fact, Skill, Trigger
from symfonic_graph.preconditions import filter_skills_by_state_predicates
from symfonic_graph.preflight import build_preflight_contribution
from symfonic_graph.recall import MemoryLayer, RetrievalPolicy, recall_policy_for, without_prospective_recall
from symfonic_graph.records import AnyPrecondition, StatePrecondition, TextPrecondition, ToolPrecondition
from symfonic_graph.replay import ReplayReport, RuleReplay, replay
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore
from symfonic_graph.traces import Trace, load_traces
from symfonic_graph.triggers import (
    GraphPendingTriggers,
    PendingTrigger,
    ProspectiveTriggerCapability,
    TriggerSelectionSink,
    prospective_trigger_capabilities,
)
from symfonic_graph.turn import TurnMemory, TurnSnapshot

__all__ = [
    "AnyPrecondition",
    "AuthenticationError",
    "AuthorityError",
    "ConfigurationError",
    "Fact",
    "GrantEffects",
    "GraphMemoryStore",
    "GraphPendingTriggers",
    "MemoryContractError",
    "MemoryLayer",
    "MemoryScope",
    "NotFoundError",
    "PendingTrigger",
    "PluginContribution",
    "ProceduralLayer",
    "ProspectiveLayer",
    "ProspectiveTriggerCapability",
    "QueryError",
    "ReplayReport",
    "RetrievalPolicy",
    "RuleProposal",
    "RuleReplay",
    "ScopeError",
    "Skill",
    "StatePrecondition",
    "StoreUnavailableError",
    "SymfonicGraphError",
    "TextPrecondition",
    "ToolPrecondition",
    "Trace",
    "Trigger",
    "TriggerSelectionSink",
    "TurnMemory",
    "TurnSnapshot",
    "ValidationError",
    "build_preflight_contribution",
    "create_precondition_gate_node",
    "filter_skills_by_state_predicates",
    "load_traces",
    "mine_rules",
    "precondition_condition",
    "prospective_trigger_capabilities",
    "recall_policy_for",
    "replay",
    "without_prospective_recall",
]

_MOVED = {
    "ComposedPrompt": "symfonic_graph.composition",
    "compose_prompt": "symfonic_graph.composition",
    "DroppedSkill": "symfonic_graph.preconditions",
    "GateDecision": "symfonic_graph.gate",
    "SkillCheck": "symfonic_graph.gate",
    "explain_tool_call": "symfonic_graph.gate",
    "SkillSpec": "symfonic_graph.layers",
    "SemanticLayer": "symfonic_graph.layers",
    "Neo4jSelectionAuditSink": "symfonic_graph.triggers",
    "QueryFileError": "symfonic_graph.errors",
    "SchemaError": "symfonic_graph.errors",
    "RecallHit": "symfonic_graph.recall",
    "recall": "symfonic_graph.recall",
    "StoreSkillGetter": "symfonic_graph.skill_source",
    "scope_from_state": "symfonic_graph.turn_scope",
    "scope_from_turn": "symfonic_graph.turn_scope",
    "scope_of": "symfonic_graph.turn_scope",
}
"""Names that left the top level in 0.4, and the module that holds them (kept here for one release)."""


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'symfonic_graph' has no attribute {name!r}")
    warnings.warn(f"import {name} from {module}; symfonic_graph.{name} goes in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
