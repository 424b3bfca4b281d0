"""The public import path; the implementation lives in ``symfonic_graph/memory/layers``."""

from symfonic_graph.memory.layers import (
    ProceduralLayer,
    ProspectiveLayer,
    SemanticLayer,
    SkillSpec,
)

__all__ = [
    "ProceduralLayer",
    "ProspectiveLayer",
    "SemanticLayer",
    "SkillSpec",
]
