"""symfonic-graph: procedural and prospective memory for multi-tenant agents, in Neo4j."""

from symfonic_graph.contributions import GrantEffects, PluginContribution
from symfonic_graph.errors import (
    MemoryContractError,
    NotFoundError,
    ScopeError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.layers import ProceduralLayer, ProspectiveLayer, SemanticLayer, SkillSpec
from symfonic_graph.models import Fact, Skill, Trigger
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore

__all__ = [
    "Fact",
    "GrantEffects",
    "GraphMemoryStore",
    "MemoryContractError",
    "MemoryScope",
    "NotFoundError",
    "PluginContribution",
    "ProceduralLayer",
    "ProspectiveLayer",
    "ScopeError",
    "SemanticLayer",
    "Skill",
    "SkillSpec",
    "StoreUnavailableError",
    "SymfonicGraphError",
    "Trigger",
    "ValidationError",
]
