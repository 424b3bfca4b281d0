"""symfonic-graph: procedural and prospective memory for multi-tenant agents, in Neo4j.

Example:
    >>> from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
"""

from symfonic_graph.composition import ComposedPrompt, compose_prompt
from symfonic_graph.contributions import GrantEffects, PluginContribution
from symfonic_graph.errors import (
    AuthenticationError,
    AuthorityError,
    MemoryContractError,
    NotFoundError,
    QueryError,
    QueryFileError,
    SchemaError,
    ScopeError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.gate import (
    GateDecision,
    SkillCheck,
    create_precondition_gate_node,
    explain_tool_call,
    precondition_condition,
)
from symfonic_graph.layers import ProceduralLayer, ProspectiveLayer, SemanticLayer, SkillSpec
from symfonic_graph.mining import RuleProposal, mine_rules
from symfonic_graph.models import Fact, Skill, Trigger
from symfonic_graph.preconditions import DroppedSkill, filter_skills_by_state_predicates
from symfonic_graph.preflight import build_preflight_contribution
from symfonic_graph.recall import (
    MemoryLayer,
    RecallHit,
    RetrievalPolicy,
    recall,
    recall_policy_for,
    without_prospective_recall,
)
from symfonic_graph.replay import ReplayReport, RuleReplay, replay
from symfonic_graph.scope import MemoryScope
from symfonic_graph.skill_source import StoreSkillGetter
from symfonic_graph.store import GraphMemoryStore
from symfonic_graph.traces import Trace, load_traces
from symfonic_graph.triggers import (
    GraphPendingTriggers,
    Neo4jSelectionAuditSink,
    PendingTrigger,
    ProspectiveTriggerCapability,
    TriggerSelectionSink,
    prospective_trigger_capabilities,
)
from symfonic_graph.turn import TurnMemory, TurnSnapshot
from symfonic_graph.turn_scope import scope_from_state, scope_from_turn, scope_of

__all__ = [
    "AuthenticationError",
    "AuthorityError",
    "ComposedPrompt",
    "DroppedSkill",
    "Fact",
    "GateDecision",
    "GrantEffects",
    "GraphMemoryStore",
    "GraphPendingTriggers",
    "MemoryContractError",
    "MemoryLayer",
    "MemoryScope",
    "Neo4jSelectionAuditSink",
    "NotFoundError",
    "PendingTrigger",
    "PluginContribution",
    "ProceduralLayer",
    "ProspectiveLayer",
    "ProspectiveTriggerCapability",
    "QueryError",
    "QueryFileError",
    "RecallHit",
    "ReplayReport",
    "RetrievalPolicy",
    "RuleProposal",
    "RuleReplay",
    "SchemaError",
    "ScopeError",
    "SemanticLayer",
    "Skill",
    "SkillCheck",
    "SkillSpec",
    "StoreSkillGetter",
    "StoreUnavailableError",
    "SymfonicGraphError",
    "Trace",
    "Trigger",
    "TriggerSelectionSink",
    "TurnMemory",
    "TurnSnapshot",
    "ValidationError",
    "build_preflight_contribution",
    "compose_prompt",
    "create_precondition_gate_node",
    "explain_tool_call",
    "filter_skills_by_state_predicates",
    "load_traces",
    "mine_rules",
    "precondition_condition",
    "prospective_trigger_capabilities",
    "recall",
    "recall_policy_for",
    "replay",
    "scope_from_state",
    "scope_from_turn",
    "scope_of",
    "without_prospective_recall",
]
