"""The memory layers: procedural skills, prospective triggers, semantic facts."""

from symfonic_graph.memory.layers.procedural import ProceduralLayer, SkillSpec
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.memory.layers.semantic import SemanticLayer

__all__ = ["ProceduralLayer", "ProspectiveLayer", "SemanticLayer", "SkillSpec"]
